"""Exceptions raised by the Slurm Job API client.

Every error says what was asked, what came back and what to do about it, so a task log is enough
to fix the problem. None of them ever carries a token, a key or a credential.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class SlurmApiError(Exception):
    """Base class of every error of this provider's client layer."""


class ConfigurationError(SlurmApiError, ValueError):
    """A bad argument or job field, found before anything was sent."""


class RequestTooLargeError(ConfigurationError):
    """The request would be 1 MB or more, which the Slurm Job API refuses."""


class UnsupportedApiVersionError(ConfigurationError):
    """An API version this provider does not speak."""


class EnvelopeError(SlurmApiError):
    """The ``callSlurmRestApi`` endpoint itself refused the call (Google-style ``error`` object).

    ``http_status`` is the HTTP status of the envelope call, ``status`` the Google status name
    (``PERMISSION_DENIED``, ``NOT_FOUND``...), ``message`` Google's message.
    """

    def __init__(self, message: str, *, http_status: int, status: str = "", api_message: str = "") -> None:
        super().__init__(message)
        self.http_status = http_status
        self.status = status
        self.api_message = api_message


class UnauthenticatedError(EnvelopeError):
    """The credentials were refused (401): expired or wrong token."""


class PermissionDeniedError(EnvelopeError):
    """The caller lacks ``aiplatform.googleapis.com/modelDevelopmentClusters.run``."""


class ClusterNotFoundError(EnvelopeError):
    """The project, region or cluster id is wrong."""


class InvalidArgumentError(EnvelopeError):
    """The envelope refused the request: bad path, bad method or too large."""


class TransientApiError(EnvelopeError):
    """UNAVAILABLE, 429 or 5xx from the envelope: the call may be tried again after a wait."""


class ApiConnectionError(SlurmApiError):
    """No answer at all: connection refused or reset, or a timeout.

    For a request that changes state (submit) the action may or may not have happened.
    """


class MalformedResponseError(SlurmApiError):
    """The envelope answered something that is not an envelope, or Slurm's body has the wrong shape.

    Most often a proxy or a cut connection: the call is worth trying again.
    """


class MalformedRecordError(MalformedResponseError):
    """One job record of Slurm's answer has a field of the wrong shape (``job_state: 5``, no ``job_id``).

    ``job_id`` is the record's job id when it could be read, ``field`` the path of the bad field
    (``time.end``), ``value`` a short preview of what was there. A list answer skips such a record;
    an answer about one job raises it.
    """

    def __init__(self, message: str, *, job_id: int | None, field: str, value: str = "") -> None:
        super().__init__(message)
        self.job_id = job_id
        self.field = field
        self.value = value


class SlurmError(SlurmApiError):
    """Slurm itself answered with ``errors[]``.

    The message carries Slurm's error number, error text and description, e.g.
    ``2000 Invalid partition name specified (Batch job submission failed)``.
    """

    def __init__(
        self,
        message: str,
        *,
        http_status: int,
        path: str,
        errors: Sequence[Mapping[str, Any]] = (),
        text: str | None = None,
    ) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.path = path
        self.errors = list(errors)
        self.text = text

    @property
    def error_numbers(self) -> list[int]:
        numbers = []
        for error in self.errors:
            number = error.get("error_number") if isinstance(error, Mapping) else None
            numbers.append(number if isinstance(number, int) and not isinstance(number, bool) else 0)
        return numbers


class JobNotFoundError(SlurmApiError):
    """A job that neither the live queue nor the history knows."""

    def __init__(self, job_id: int, message: str | None = None) -> None:
        super().__init__(
            message
            or f"Slurm job {job_id} is in neither the live queue nor the accounting history: check the "
            "job id and the cluster (project, region, cluster_id)."
        )
        self.job_id = job_id


class JobFailedError(SlurmApiError):
    """A job reached a finished state other than COMPLETED."""

    def __init__(self, message: str, job: Any) -> None:
        super().__init__(message)
        self.job = job


class SubmitOutcomeUnknownError(SlurmApiError):
    """A submit whose answer was lost, and no job carrying its tag could be found.

    Resending blindly could start a second copy of a GPU job, so the client stops and says so.
    """


class SignalOutcomeUnknownError(SlurmApiError):
    """A signal whose answer was lost: it may have been delivered, so it is not sent again."""
