"""Following one job across polls, the same way for the sync loop, the sensor and the trigger.

It logs each change of state or pending reason once, follows a job that Slurm requeues (an admin's
``scontrol requeue``, a preemption with ``PreemptMode=REQUEUE``, a ``NODE_FAIL`` with requeue on) to
the end of its last run under the same id, counting and logging each requeue once, gives up on a job
pending for a reason no wait can clear (:data:`~airflow_provider_slurmapi.slurm.states.FINAL_PENDING_REASONS`)
or pending longer than ``pending_timeout``, treats a job found in neither the live queue nor the history as
"not yet recorded" for a grace period (accounting records reach slurmdbd a little after the job
leaves the queue), rides out an outage of the API (the job runs on while nobody can see it) for a
budget much longer than one call's retries, and says when the job is over.

Its state can be saved as JSON and restored (:meth:`JobWatch.snapshot`, :meth:`JobWatch.restore`),
so a sensor in reschedule mode, a new process at every poke, keeps one watch across its pokes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from airflow_provider_slurmapi.slurm.errors import JobNotFoundError, SlurmApiError
from airflow_provider_slurmapi.slurm.job import SlurmJob, describe_transition
from airflow_provider_slurmapi.slurm.retry import is_transient
from airflow_provider_slurmapi.slurm.states import JobState, final_pending_fix

# Flags with which Slurm sends a job back to PENDING to run again under the same id.
_REQUEUE_FLAGS = frozenset({"REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SPECIAL_EXIT"})

DEFAULT_MISSING_GRACE_SECONDS = 120.0
# How long a watch waits through an API outage (only transient errors) before it fails.
DEFAULT_OUTAGE_TOLERANCE_SECONDS = 3600.0
# How often a watch says, during an outage, that it is still waiting.
OUTAGE_WARNING_INTERVAL_SECONDS = 300.0


class StepLogger(Protocol):
    """Anything with ``info`` and ``warning``: a stdlib logger or Airflow's structlog one."""

    def info(self, msg: Any, /, *args: Any, **kwargs: Any) -> Any: ...

    def warning(self, msg: Any, /, *args: Any, **kwargs: Any) -> Any: ...


class WatchOutageError(SlurmApiError):
    """The API stayed unreachable for longer than the watch's outage tolerance."""

    def __init__(self, job_id: int, message: str) -> None:
        super().__init__(message)
        self.job_id = job_id


class JobNeverStartsError(SlurmApiError):
    """The job is pending for a reason only an administrator or the user can clear: no retry helps."""

    permanent = True

    def __init__(self, job_id: int, reason: str, fix: str) -> None:
        super().__init__(
            f"Slurm job {job_id} can never start: it is PENDING ({reason}), which only an administrator or a "
            f"change of the job can clear: {fix}. A retry cannot help; the job would wait in the queue for ever."
        )
        self.job_id = job_id
        self.reason = reason


class PendingTimeoutError(SlurmApiError):
    """The job stayed pending longer than ``pending_timeout``: a retry (a new submission) may fare better."""

    def __init__(self, job_id: int, waited: float, timeout: float, reason: str | None) -> None:
        super().__init__(
            f"Slurm job {job_id} was still PENDING ({reason or 'no reason given'}) after {waited:.0f}s "
            f"(pending_timeout={timeout:.0f}s). Raise pending_timeout, or ask for fewer resources or "
            "another partition; a retry submits the job again."
        )
        self.job_id = job_id
        self.reason = reason


@dataclass(frozen=True, slots=True)
class WatchStep:
    """The outcome of one observation: what to log (if anything) and whether the job is over."""

    job: SlurmJob | None
    message: str | None
    finished: bool
    warning: bool = False
    progress: str | None = None  # a new progress message of the job, already worded for the log
    # With ``array_fail_fast``: a task of the array failed, cancel the rest (said once per watch).
    cancel_array: bool = False
    # The wait is over without the job's end: cancel the job, then raise this (a job that can never
    # start, or pending beyond ``pending_timeout``).
    give_up: SlurmApiError | None = None

    def log_to(self, logger: StepLogger, redact: Callable[[str], str] = str) -> None:
        """Log the step's message, if any, at its level, then the job's new progress message.

        ``redact`` masks secrets in what the job itself wrote (its progress message).
        """
        if self.message:
            (logger.warning if self.warning else logger.info)("%s", self.message)
        if self.progress:
            logger.info("%s", redact(self.progress))


class JobWatch:
    """State kept between polls of one job."""

    def __init__(
        self,
        job_id: int,
        *,
        missing_grace_seconds: float = DEFAULT_MISSING_GRACE_SECONDS,
        outage_tolerance_seconds: float = DEFAULT_OUTAGE_TOLERANCE_SECONDS,
        outage_warning_interval: float = OUTAGE_WARNING_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        log_progress: bool = True,
        array_fail_fast: bool = False,
        pending_timeout: float | None = None,
        pending_since: float | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.job_id = job_id
        self.pending_timeout = pending_timeout
        self._wall_clock = wall_clock
        # When the current pending spell began (wall clock: it crosses processes), if the job pends.
        self._pending_since: float | None = pending_since
        self._requeues = 0  # requeues seen by this watch
        self._restarts: int | None = None  # Slurm's restart count, as last seen in the live queue
        self.array_fail_fast = array_fail_fast
        self._array_cancelled = False
        self.missing_grace_seconds = missing_grace_seconds
        self.outage_tolerance_seconds = outage_tolerance_seconds
        self.outage_warning_interval = outage_warning_interval
        self._clock = clock
        self._last: SlurmJob | None = None
        self._missing_since: float | None = None
        self._logged_paths = False
        # When the API last answered (or the watch began): an outage is counted from there.
        self._answered_at: float = clock()
        self._outage_warned_at: float | None = None
        self.log_progress = log_progress
        self._last_progress: str | None = None

    @property
    def last(self) -> SlurmJob | None:
        return self._last

    @property
    def pending_deadline(self) -> float | None:
        """When (wall clock) the current pending spell passes ``pending_timeout``; ``None`` if it cannot."""
        pending = self._last is not None and self._last.state is JobState.PENDING
        if self.pending_timeout is None or self._pending_since is None or not pending:
            return None
        return self._pending_since + self.pending_timeout

    @property
    def requeues(self) -> int:
        """How many times the job was requeued: Slurm's restart count, or the requeues seen if more."""
        return max(self._requeues, self._restarts or 0)

    def observe(self, job: SlurmJob | None) -> WatchStep:
        """Record one poll's answer; raise :class:`JobNotFoundError` once the grace period is over."""
        now = self._clock()
        recovered = self._recovered_message(now)
        self._answered_at, self._outage_warned_at = now, None
        if job is None:
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
            message = recovered
            if waited == 0:
                message = _join(
                    recovered,
                    f"Slurm job {self.job_id} is in neither the live queue nor the history yet; "
                    f"looking again for up to {self.missing_grace_seconds:.0f}s.",
                )
            return WatchStep(job=None, message=message, finished=False)
        if self._earlier_run(job):
            # The history's newest record may still be of an earlier run: the last one is not recorded yet.
            return self.observe(None)
        self._missing_since = None
        if job.array is not None and self._last is not None and self._last.array is not None:
            # Finished tasks leave the live queue one by one: the watch remembers how they ended.
            job = job.with_array(job.array.merged(self._last.array))
        message = describe_transition(self._last, job)
        if message and not self._logged_paths and (job.stdout or job.stderr):
            self._logged_paths = True
            message += f"; stdout: {job.stdout or '-'}, stderr: {job.stderr or job.stdout or '-'}"
        requeued = self._requeued(self._last, job)
        if job.is_finished and self.requeues > (job.restart_count or 0):
            job = replace(job, restart_count=self.requeues)  # the requeues this watch saw, for the XCom
        self._last = job
        cancel = self._fail_fast(job)
        if cancel:
            message = _join(message, cancel)
        give_up = self._give_up(job, requeued)
        return WatchStep(
            job=job,
            message=_join(_join(recovered, requeued), message),
            finished=job.is_finished,
            progress=self._new_progress(job),
            cancel_array=cancel is not None,
            give_up=give_up,
            warning=give_up is not None,
        )

    def _earlier_run(self, job: SlurmJob) -> bool:
        """A history record of a run before the one the live queue last showed (fewer restarts)."""
        return (
            job.source == "history"
            and self._restarts is not None
            and job.restart_count is not None
            and job.restart_count < self._restarts
        )

    def _requeued(self, previous: SlurmJob | None, job: SlurmJob) -> str | None:
        """The log line of a requeue, once per requeue.

        Slurm's restart count decides when the live queue gives it (it grows by one a requeue, even
        when the pending spell fell between two polls); else the job going back to PENDING does (a
        requeue flag appearing, or RUNNING straight to PENDING).
        """
        restarts = job.restart_count if job.source == "live" else None
        known = self._restarts
        if restarts is not None:
            self._restarts = max(restarts, known or 0)
        if previous is None:
            if restarts and known is None:  # requeued before this watch first saw it (e.g. right after submit)
                return (
                    f"Slurm job {job.job_id} has been requeued {restarts} time(s) (restart count {restarts}); "
                    "waiting for its run under the same id."
                )
            return None
        if restarts is not None and known is not None:
            new = restarts > known
        else:
            was_requeued = bool(_REQUEUE_FLAGS & set(previous.state_info.flags))
            now_requeued = bool(_REQUEUE_FLAGS & set(job.state_info.flags))
            back_to_pending = previous.state is JobState.RUNNING and job.state is JobState.PENDING
            new = not was_requeued and (now_requeued or back_to_pending)
        if not new:
            return None
        self._requeues += 1
        reason = job.reason or "no reason given"
        return (
            f"Slurm job {job.job_id} was requeued: {job.state_info} ({reason}), restart count "
            f"{restarts if restarts is not None else '?'}, requeue {self.requeues} seen by this task; "
            "waiting for its next run under the same id."
        )

    def _give_up(self, job: SlurmJob, requeued: str | None) -> SlurmApiError | None:
        """A job that can never start, or pending beyond ``pending_timeout``: the error to raise (once cancelled)."""
        if job.state is not JobState.PENDING or job.array is not None:
            self._pending_since = None
            return None
        fix = final_pending_fix(job.state_info, job.reason)
        if fix is not None:
            return JobNeverStartsError(job.job_id, job.reason or "", fix)
        now = self._wall_clock()
        if self._pending_since is None or requeued:
            self._pending_since = now  # a new pending spell: the first seen, or after a requeue
        waited = now - self._pending_since
        if self.pending_timeout is not None and waited > self.pending_timeout:
            return PendingTimeoutError(job.job_id, waited, self.pending_timeout, job.reason)
        return None

    def _fail_fast(self, job: SlurmJob) -> str | None:
        """With ``array_fail_fast``, at the first failed task of a running array: why its rest is cancelled."""
        if not self.array_fail_fast or self._array_cancelled or job.array is None or job.is_finished:
            return None
        failed = job.array.failed
        if not failed:
            return None
        self._array_cancelled = True
        return f"array_fail_fast: {failed[0].describe()}; cancelling the remaining tasks of array {job.job_id}."

    def _new_progress(self, job: SlurmJob) -> str | None:
        """Each new progress message once: ``Slurm job 4242: epoch 3/10 loss=0.12``."""
        progress = job.progress if self.log_progress else None
        if not progress or progress == self._last_progress:
            return None
        self._last_progress = progress
        return f"Slurm job {job.job_id}: {progress}"

    def observe_error(self, error: BaseException) -> WatchStep:
        """Record a poll that got no usable answer.

        A permanent error (permission denied, unknown cluster, a bad argument) is raised again at
        once. A transient one (UNAVAILABLE, 5xx, no connection) is an outage: the job runs on, so the
        watch keeps waiting, with a warning now and then, until ``outage_tolerance_seconds`` have
        passed since the API last answered; then it raises :class:`WatchOutageError`.
        """
        if not is_transient(error):
            raise error
        now = self._clock()
        down = now - self._answered_at
        if down > self.outage_tolerance_seconds:
            raise WatchOutageError(
                self.job_id,
                f"The Slurm Job API has not answered for {down:.0f}s (outage_tolerance_seconds="
                f"{self.outage_tolerance_seconds:.0f}) while watching Slurm job {self.job_id}; last error: {error}. "
                f"The job was not cancelled and may still be running: a retry of this task reattaches to "
                f"Slurm job {self.job_id}.",
            ) from error
        message = None
        if self._outage_warned_at is None or now - self._outage_warned_at >= self.outage_warning_interval:
            self._outage_warned_at = now
            message = (
                f"The Slurm Job API has not answered for {down:.0f}s while watching Slurm job {self.job_id} "
                f"({error}); the job runs on, still waiting for up to {self.outage_tolerance_seconds:.0f}s "
                "of outage."
            )
        return WatchStep(job=None, message=message, finished=False, warning=True)

    def _recovered_message(self, now: float) -> str | None:
        if self._outage_warned_at is None:
            return None
        return f"The Slurm Job API answers again, after {now - self._answered_at:.0f}s without an answer."

    # -- saving the watch between processes ---------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The watch as JSON-ready data. Instants are saved as ages at a wall-clock time, so a
        process with another monotonic clock can restore them."""
        now = self._clock()
        return {
            "job_id": self.job_id,
            "saved_at": time.time(),
            "last": self._last.to_dict() if self._last is not None else None,
            "missing_for": None if self._missing_since is None else now - self._missing_since,
            "unanswered_for": now - self._answered_at,
            "outage_warned_for": None if self._outage_warned_at is None else now - self._outage_warned_at,
            "logged_paths": self._logged_paths,
            "last_progress": self._last_progress,
            "array_cancelled": self._array_cancelled,
            "pending_since": self._pending_since,
            "requeues": self._requeues,
            "restarts": self._restarts,
        }

    @classmethod
    def restore(
        cls,
        saved: object,
        job_id: int,
        *,
        missing_grace_seconds: float = DEFAULT_MISSING_GRACE_SECONDS,
        outage_tolerance_seconds: float = DEFAULT_OUTAGE_TOLERANCE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        log_progress: bool = True,
        array_fail_fast: bool = False,
        pending_timeout: float | None = None,
    ) -> JobWatch:
        """A watch that goes on from ``saved``; a fresh one if ``saved`` is missing, of another job or unreadable."""

        def fresh() -> JobWatch:
            return cls(
                job_id,
                missing_grace_seconds=missing_grace_seconds,
                outage_tolerance_seconds=outage_tolerance_seconds,
                clock=clock,
                log_progress=log_progress,
                array_fail_fast=array_fail_fast,
                pending_timeout=pending_timeout,
            )

        watch = fresh()
        if not isinstance(saved, Mapping) or saved.get("job_id") != job_id:
            return watch
        try:
            now = clock()
            since_saved = max(0.0, time.time() - float(saved["saved_at"]))

            def instant(age_key: str) -> float | None:
                age = saved.get(age_key)
                return None if age is None else now - float(age) - since_saved

            last = saved.get("last")
            watch._last = SlurmJob.from_dict(last) if isinstance(last, Mapping) else None
            watch._missing_since = instant("missing_for")
            answered_at = instant("unanswered_for")
            watch._answered_at = now if answered_at is None else answered_at
            watch._outage_warned_at = instant("outage_warned_for")
            watch._logged_paths = bool(saved.get("logged_paths"))
            last_progress = saved.get("last_progress")
            watch._last_progress = last_progress if isinstance(last_progress, str) else None
            watch._array_cancelled = saved.get("array_cancelled") is True
            pending_since = saved.get("pending_since")
            watch._pending_since = None if pending_since is None else float(pending_since)
            watch._requeues = int(saved.get("requeues") or 0)
            restarts = saved.get("restarts")
            watch._restarts = None if restarts is None else int(restarts)
        except (KeyError, TypeError, ValueError, SlurmApiError):
            return fresh()
        return watch


@dataclass(frozen=True, slots=True)
class WatchSettings:
    """How a task watches its job, the same in the worker, in each poke of a sensor and in the trigger.

    The field names are the documented arguments of the operators, the sensor and the trigger (and the
    keys the trigger serializes), so one value carries them from the task to the trigger unchanged.
    """

    missing_grace_seconds: float = DEFAULT_MISSING_GRACE_SECONDS
    outage_tolerance_seconds: float = DEFAULT_OUTAGE_TOLERANCE_SECONDS
    log_progress: bool = True
    array_fail_fast: bool = False
    pending_timeout: float | None = None

    def as_kwargs(self) -> dict[str, Any]:
        """The settings under their argument names."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def new_watch(self, job_id: int, *, pending_since: float | None = None, saved: object = None) -> JobWatch:
        """A watch of ``job_id`` with these settings; going on from ``saved`` (a :meth:`JobWatch.snapshot`
        of an earlier process) when given, else fresh, its first pending spell begun at ``pending_since``."""
        if saved is not None:
            return JobWatch.restore(saved, job_id, **self.as_kwargs())
        return JobWatch(job_id, pending_since=pending_since, **self.as_kwargs())


def _join(first: str | None, second: str | None) -> str | None:
    return "; ".join(part for part in (first, second) if part) or None


__all__ = [
    "DEFAULT_MISSING_GRACE_SECONDS",
    "DEFAULT_OUTAGE_TOLERANCE_SECONDS",
    "JobNeverStartsError",
    "JobWatch",
    "PendingTimeoutError",
    "WatchOutageError",
    "WatchSettings",
    "WatchStep",
]
