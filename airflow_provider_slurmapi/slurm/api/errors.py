"""Exceptions raised by the Slurm Job API client.

Every error says what was asked, what came back and what to do about it, so a task log is enough
to fix the problem. None of them ever carries a token, a key or a credential.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar


class SlurmApiError(Exception):
    """Base class of every error of this provider's client layer.

    ``permanent``: no retry can fix it (a bad spec, a refused partition, permission denied...), so a
    task fails at once instead of spending its retries; see :func:`is_permanent`.
    """

    permanent: ClassVar[bool] = False


def is_permanent(exc: BaseException) -> bool:
    """Whether ``exc`` is an error that no retry can fix (the task should fail without its retries)."""
    return isinstance(exc, SlurmApiError) and exc.permanent


class ConfigurationError(SlurmApiError, ValueError):
    """A bad argument or job field, found before anything was sent."""

    permanent = True


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

    permanent = True


class ClusterNotFoundError(EnvelopeError):
    """The project, region or cluster id is wrong."""

    permanent = True


class InvalidArgumentError(EnvelopeError):
    """The envelope refused the request: bad path, bad method or too large."""

    permanent = True


class TransientApiError(EnvelopeError):
    """UNAVAILABLE, 429 or 5xx from the envelope: the call may be tried again after a wait."""


class ApiConnectionError(SlurmApiError):
    """No answer at all: the connection was reset or timed out once the request may have been written.

    For a request that changes state (submit) the action may or may not have happened. A request that
    never left (the host did not resolve, refused the connection, failed TLS) is a
    :class:`RequestNotSentError` instead.
    """


# Why a request was not sent (``RequestNotSentError.reason``): the host's name does not exist, the
# resolver did not answer for now, the connection was refused, the TLS handshake failed, or the connection
# could not be made for another reason (unreachable network, a connect timeout).
NOT_SENT_REASONS = ("name", "resolver", "refused", "tls", "connect")
# The reasons that, when the endpoint never answered this client before, are a wrong endpoint (a typo in the
# region or api_endpoint, http against https) and not an outage: no wait can fix them.
WRONG_ENDPOINT_REASONS = frozenset({"name", "tls"})


class RequestNotSentError(SlurmApiError):
    """The request never left: the endpoint's host did not resolve, refused the connection, or failed the
    TLS handshake, before a byte of the request was written.

    Nothing reached the API, so nothing can have happened: a submit needs no look-up for a lost answer and
    may be sent again. Retried within the call's budget like an outage (a watch rides it out), it is never
    counted as a possibly lost answer. ``host`` is the host (and port) that was not reached, ``reason`` one
    of :data:`NOT_SENT_REASONS`.
    """

    def __init__(self, message: str, *, host: str, reason: str) -> None:
        super().__init__(message)
        self.host = host
        self.reason = reason


class WrongEndpointError(RequestNotSentError):
    """A host that does not resolve, or fails TLS, at a client's first contact: a configuration mistake
    (the region, the ``api_endpoint``), not an outage. Nothing was sent; the task fails at once."""

    permanent = True


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


class SubmitRejectedError(SlurmError):
    """Slurm refused a submit for a reason no retry can fix: the job asks for something the cluster
    does not have or the user may not use (partition, account, QoS, TRES/GRES, nodes...), or the
    job description itself is invalid. ``kind`` names what was refused (``partition``, ``account``...).
    """

    permanent = True

    def __init__(self, message: str, *, kind: str, error: SlurmError, fix: str = "") -> None:
        super().__init__(message, http_status=error.http_status, path=error.path, errors=error.errors, text=error.text)
        self.kind = kind
        self.fix = fix
        self.answer = str(error.args[0]) if error.args else ""

    def name_partitions(self, names: Iterable[str]) -> None:
        """Add the cluster's partitions to the message, right after the fix (for an invalid partition)."""
        listed = sorted({name for name in names if name})
        if listed and self.fix:
            self.args = (_refusal_message(f"{self.fix} The cluster's partitions: {', '.join(listed)}.", self.answer),)


# Slurm's error numbers (slurm/slurm_errno.h) that refuse a submit for good: what was refused, and
# the fix. Checked on Slurm 24.11: an unknown partition 2000, gres/gpu on a node without GPUs 2072,
# a malformed TRES 2115, licenses 2048, a reservation 2053, a feature 2029, too big 2014.
_REFUSED_SUBMIT: dict[int, tuple[str, str]] = {
    2000: (
        "partition",
        "Set job['partition'] to one of the cluster's partitions (or leave it unset for the default one): "
        "the one given is not a partition of this cluster.",
    ),
    2001: ("partition", "Set job['partition']: the cluster has no default partition."),
    2002: ("permission", "your user may not use what the job asks for (partition, reservation, QoS)."),
    2003: ("permission", "your user is not in a group this partition allows: pick another partition."),
    2004: ("nodes", "the requested nodes are not in this partition: fix required_nodes or the partition."),
    2005: ("resources", "more CPUs than the partition allows: ask for fewer."),
    2006: ("nodes", "the node count is not possible on this partition: fix minimum_nodes/maximum_nodes."),
    2009: ("spec", "the job has no script."),
    2014: (
        "resources",
        "the cluster has no node that fits the request (nodes, GPUs via tres_per_node, CPUs, memory): "
        "lower it or pick another partition. Slurm may list the refused job as FAILED (BadConstraints); "
        "it will not run.",
    ),
    2015: ("partition", "the partition cannot satisfy the request (time, nodes or limits): change it or the job."),
    2018: ("nodes", "a node named in the job does not exist."),
    2029: ("constraints", "job['constraints'] names a feature no node has."),
    2044: ("memory", "the memory request is invalid for this partition."),
    2045: ("account", "job['account'] is not an account of your user on this cluster (see sacctmgr show assoc)."),
    2048: ("licenses", "job['licenses'] names licenses the cluster does not have."),
    2051: ("time_limit", "job['time_limit'] is over the partition's limit."),
    2052: ("permission", "your user may not use this reservation."),
    2053: ("reservation", "job['reservation'] is not a reservation of this cluster."),
    2057: ("account", "job['wckey'] is not valid for your user."),
    2063: ("spec", "the job has no working directory: set current_working_directory."),
    2066: ("qos", "job['qos'] is not a QoS your user or account may use."),
    2069: ("resources", "the CPU count is invalid: fix cpus_per_task/minimum_cpus."),
    2072: ("tres", "the GRES request (tres_per_node, tres_per_job, gres/gpu...) is not one this cluster has."),
    2081: ("spec", "job['array'] is not a valid array specification."),
    2102: ("tres", "the same GRES is requested twice."),
    2111: ("resources", "the core count is invalid."),
    2115: ("tres", "the TRES request is malformed or names a TRES the cluster does not track."),
    2119: ("tres", "the GRES type (e.g. gres/gpu:h100:8) is not one this cluster has."),
    2122: ("tres", "this GRES cannot be requested this way on this cluster."),
    2124: ("time_limit", "job['time_minimum'] is invalid."),
    2127: ("spec", "the job has no environment: set job['environment']."),
    2130: ("account", "your account may not use this partition: pick another partition or account."),
    2134: ("tres", "the GRES request is more than a node of this partition has."),
    2167: ("account", "your user has no association (account) on this cluster: ask its admins for one."),
    2170: ("qos", "job['qos'] is not a valid QoS."),
    9000: ("spec", "the job description is incomplete or not what Slurm expects."),
    9001: ("spec", "Slurm could not parse the job description."),
    9002: ("spec", "the job description is invalid."),
    9202: ("spec", "a job field has the wrong type (e.g. a string where Slurm wants a number)."),
}


def _refusal_message(fix: str, answer: str) -> str:
    """The fix first, then what Slurm answered (``Slurm answered HTTP 500 ...`` reads like a server fault)."""
    return f"{fix} Slurm refused the job ({answer})."


def refused_submit(error: SlurmError) -> SlurmError:
    """``error`` as a :class:`SubmitRejectedError` when Slurm refused the submit for good, else unchanged.

    A transient refusal (slurmctld busy, an I/O error writing the script) stays a plain
    :class:`SlurmError`: the task's retries may fix it.
    """
    for number in error.error_numbers:
        if number in _REFUSED_SUBMIT:
            kind, fix = _REFUSED_SUBMIT[number]
            fix = fix if fix.startswith("job[") else fix[:1].upper() + fix[1:]
            return SubmitRejectedError(_refusal_message(fix, str(error.args[0])), kind=kind, error=error, fix=fix)
    if error.http_status == 404 and error.text and "Unable find requested URL" in error.text:
        return SubmitRejectedError(str(error.args[0]), kind="api_version", error=error)
    return error


class JobNotFoundError(SlurmApiError):
    """A job that neither the live queue nor the history knows."""

    def __init__(self, job_id: int, message: str | None = None) -> None:
        super().__init__(
            message
            or f"Slurm job {job_id} is in neither the live queue nor the accounting history: check the "
            "job id and the cluster (project, region, cluster_id)."
        )
        self.job_id = job_id


class SubmitOutcomeUnknownError(SlurmApiError):
    """A submit whose answer was lost, and no job carrying its tag could be found.

    Resending blindly could start a second copy of a GPU job, so the client stops and says so.
    """


class SignalOutcomeUnknownError(SlurmApiError):
    """A signal whose answer was lost: it may have been delivered, so it is not sent again."""

    permanent = True  # a task retry would deliver the signal again
