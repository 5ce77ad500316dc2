"""The deferred wait's timeout: the trigger's own deadline, Airflow's backstop, and the cancel of a job
whose task Airflow resumes only to fail it for a timeout.

Kept free of heavy imports: the operators and the sensor import it at DAG parse time.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook

# Airflow's own deferral timeout fires this long after the trigger's deadline: the trigger cancels the
# job and reports the timeout itself; Airflow's timeout is the backstop if the trigger cannot.
DEADLINE_BACKSTOP_SECONDS = 60.0


def deferral_deadline(timeout: timedelta | None) -> tuple[float | None, timedelta | None]:
    """The trigger's deadline (epoch seconds) and Airflow's backstop timeout for a wait of ``timeout``."""
    if timeout is None:
        return None, None
    return time.time() + timeout.total_seconds(), timeout + timedelta(seconds=DEADLINE_BACKSTOP_SECONDS)


class _CancellingTask(Protocol):
    """A task that can cancel its job: a hook to the job's cluster, and a log."""

    @property
    def hook(self) -> SlurmApiHook: ...

    @property
    def log(self) -> Any: ...  # a logging.Logger on Airflow 2, structlog's on Airflow 3


def cancel_after_deferral_timeout(task: _CancellingTask, job_id: int | None) -> None:
    """Cancel ``job_id`` when Airflow resumes ``task`` only to fail it for a deferral timeout
    (:func:`~airflow_provider_slurmapi._compat.is_deferral_timeout` told it so).

    The triggerer does not call ``on_kill`` on a timeout; without this the job would run on,
    holding its GPUs, after the task has failed.
    """
    log = task.log
    if job_id is None:
        log.warning("The wait for the Slurm job timed out, but its job id is not known here: nothing cancelled.")
        return
    log.warning("The wait for Slurm job %s timed out; cancelling the job.", job_id)
    from airflow_provider_slurmapi.slurm.api.errors import SlurmApiError

    try:
        outcome = task.hook.cancel_job(job_id)
        log.info("Cancel of Slurm job %s after the timeout: %s.", job_id, outcome.value)
    except SlurmApiError as exc:
        log.error("Cancelling Slurm job %s after the timeout failed: %s", job_id, exc)
