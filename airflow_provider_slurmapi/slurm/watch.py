"""Following one job across polls, the same way for the sync loop, the sensor and the trigger.

It logs each change of state once, treats a job found in neither the live queue nor the history as
"not yet recorded" for a grace period (accounting records reach slurmdbd a little after the job
leaves the queue), and says when the job is over.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from airflow_provider_slurmapi.slurm.errors import JobNotFoundError
from airflow_provider_slurmapi.slurm.job import SlurmJob, describe_transition

DEFAULT_MISSING_GRACE_SECONDS = 120.0


@dataclass(frozen=True, slots=True)
class WatchStep:
    """The outcome of one observation: what to log (if anything) and whether the job is over."""

    job: SlurmJob | None
    message: str | None
    finished: bool
    progress: str | None = None  # a new progress message of the job, already worded for the log

    @property
    def lines(self) -> list[str]:
        """What to log for this observation, in order."""
        return [line for line in (self.message, self.progress) if line]


class JobWatch:
    """State kept between polls of one job."""

    def __init__(
        self,
        job_id: int,
        *,
        missing_grace_seconds: float = DEFAULT_MISSING_GRACE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        log_progress: bool = True,
    ) -> None:
        self.job_id = job_id
        self.missing_grace_seconds = missing_grace_seconds
        self._clock = clock
        self._last: SlurmJob | None = None
        self._missing_since: float | None = None
        self._logged_paths = False
        self.log_progress = log_progress
        self._last_progress: str | None = None

    @property
    def last(self) -> SlurmJob | None:
        return self._last

    def observe(self, job: SlurmJob | None) -> WatchStep:
        """Record one poll's answer; raise :class:`JobNotFoundError` once the grace period is over."""
        if job is None:
            now = self._clock()
            if self._missing_since is None:
                self._missing_since = now
            waited = now - self._missing_since
            if waited > self.missing_grace_seconds:
                raise JobNotFoundError(
                    self.job_id,
                    f"Slurm job {self.job_id} has been in neither the live queue nor the accounting history "
                    f"for {waited:.0f}s (grace {self.missing_grace_seconds:.0f}s). Check the job id and the "
                    "cluster, and that slurmdbd records jobs (AccountingStorageType=accounting_storage/slurmdbd).",
                )
            message = None
            if waited == 0:
                message = (
                    f"Slurm job {self.job_id} is in neither the live queue nor the history yet; "
                    f"looking again for up to {self.missing_grace_seconds:.0f}s."
                )
            return WatchStep(job=None, message=message, finished=False)
        self._missing_since = None
        message = describe_transition(self._last, job)
        if message and not self._logged_paths and (job.stdout or job.stderr):
            self._logged_paths = True
            message += f"; stdout: {job.stdout or '-'}, stderr: {job.stderr or job.stdout or '-'}"
        self._last = job
        return WatchStep(job=job, message=message, finished=job.is_finished, progress=self._new_progress(job))

    def _new_progress(self, job: SlurmJob) -> str | None:
        """Each new progress message once: ``Slurm job 4242: epoch 3/10 loss=0.12``."""
        progress = job.progress if self.log_progress else None
        if not progress or progress == self._last_progress:
            return None
        self._last_progress = progress
        return f"Slurm job {job.job_id}: {progress}"
