"""When and how long to retry a call: the one retry layer, applied per request by the client core.

Only calls that are safe to repeat are retried: GET and DELETE, and any request that was never sent
(:class:`~airflow_provider_slurmapi.slurm.api.errors.RequestNotSentError`: nothing reached the API). A
submit whose answer was lost is never resent blindly; the submit-once plan looks for the job's tag first
(``SlurmClient._submit_once_plan``).
A record Slurm garbled is asked for again within the same budget (``SlurmClient._exchange``).
"""

from __future__ import annotations

import random

from airflow_provider_slurmapi.slurm.api.errors import (
    ApiConnectionError,
    MalformedResponseError,
    RequestNotSentError,
    TransientApiError,
)

DEFAULT_RETRY_SECONDS = 300.0
# The longest pause between two attempts of one call.
MAX_BACKOFF_SECONDS = 60.0


def is_transient(exc: BaseException) -> bool:
    """UNAVAILABLE, 429, 5xx from the envelope, no answer at all, an answer that was garbled, or a
    request not sent for a reason that may pass (a refused connection, a resolver that did not answer).

    A garbled answer (not an envelope, or a body that is not JSON where Slurm sends JSON) is most
    often a proxy or a cut connection; a wrong ``api_endpoint`` shows up in the retry warnings and
    ends in the error once the retry time is over. A host that does not exist at the first contact is
    no outage (:class:`~airflow_provider_slurmapi.slurm.api.errors.WrongEndpointError`, permanent).
    Whether a failure may have lost an answer is another question: see ``answer_lost`` in the client.
    """
    if isinstance(exc, RequestNotSentError):
        return not exc.permanent
    return isinstance(exc, TransientApiError | ApiConnectionError | MalformedResponseError)


def backoff_seconds(attempt: int, initial: float = 1.0) -> float:
    """The pause after failed attempt number ``attempt`` (1-based): exponential, with jitter, bounded."""
    pause: float = initial * 2 ** (attempt - 1) + random.uniform(0, initial)
    return min(pause, MAX_BACKOFF_SECONDS)


__all__ = ["DEFAULT_RETRY_SECONDS", "MAX_BACKOFF_SECONDS", "backoff_seconds", "is_transient"]
