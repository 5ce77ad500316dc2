"""When and how long to retry a call (tenacity), shared by the sync and async hooks.

Only calls that are safe to repeat are retried here: GET and DELETE. A submit whose answer was lost
is never resent blindly; the hook looks for the job's tag first (see ``SlurmApiHook.submit_job``).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import tenacity

from airflow_provider_slurmapi.slurm.errors import (
    ApiConnectionError,
    MalformedResponseError,
    TransientApiError,
)

log = logging.getLogger(__name__)

DEFAULT_RETRY_SECONDS = 300.0


class WarningLogger(Protocol):
    """Anything with ``warning(msg, *args)``: a stdlib logger or Airflow's structlog one."""

    def warning(self, msg: Any, /, *args: Any, **kwargs: Any) -> Any: ...


def is_transient(exc: BaseException) -> bool:
    """UNAVAILABLE, 429, 5xx from the envelope, no answer at all, or an answer that was garbled.

    A garbled answer (not an envelope, or a body that is not JSON where Slurm sends JSON) is most
    often a proxy or a cut connection; a wrong ``api_endpoint`` shows up in the retry warnings and
    ends in the error once the retry time is over.
    """
    return isinstance(exc, TransientApiError | ApiConnectionError | MalformedResponseError)


def retry_kwargs(
    max_seconds: float = DEFAULT_RETRY_SECONDS, *, initial: float = 1.0, logger: WarningLogger | None = None
) -> dict[str, Any]:
    """Arguments for ``tenacity.Retrying``/``AsyncRetrying``: exponential backoff with jitter, bounded."""
    target: WarningLogger = logger or log

    def log_retry(state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0
        target.warning("Slurm Job API call failed (%s); retry %d in %.1fs", exc, state.attempt_number, wait)

    return {
        "retry": tenacity.retry_if_exception(is_transient),
        "wait": tenacity.wait_exponential_jitter(initial=initial, max=60, jitter=initial),
        "stop": tenacity.stop_after_delay(max_seconds),
        "reraise": True,
        "before_sleep": log_retry,
    }


__all__ = ["DEFAULT_RETRY_SECONDS", "is_transient", "retry_kwargs"]
