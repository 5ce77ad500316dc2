"""Following one job across polls, the same way for the sync loop, the sensor and the trigger.

It logs each change of state or pending reason once, follows a job that Slurm requeues (an admin's
``scontrol requeue``, a preemption with ``PreemptMode=REQUEUE``, a ``NODE_FAIL`` with requeue on) to
the end of its last run under the same id, counting and logging each requeue once, gives up on a job
pending for a reason no wait can clear (:data:`~airflow_provider_slurmapi.slurm.jobs.states.FINAL_PENDING_REASONS`)
or pending longer than ``pending_timeout``, treats a job found in neither the live queue nor the history as
"not yet recorded" for a grace period (accounting records reach slurmdbd a little after the job
leaves the queue), rides out an outage of the API (the job runs on while nobody can see it) for a
budget much longer than one call's retries, and says when the job is over.

Its state can be saved as JSON and restored (:meth:`JobWatch.snapshot`, :meth:`JobWatch.restore`),
so a sensor in reschedule mode, a new process at every poke, keeps one watch across its pokes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Protocol

from airflow_provider_slurmapi.slurm.api.errors import JobNotFoundError, RequestNotSentError, SlurmApiError
from airflow_provider_slurmapi.slurm.api.plans import AsyncClock, Clock, Sleep
from airflow_provider_slurmapi.slurm.api.retry import is_transient
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob, describe_transition
from airflow_provider_slurmapi.slurm.jobs.states import JobState, final_pending_fix

# Flags with which Slurm sends a job back to PENDING to run again under the same id.
_REQUEUE_FLAGS = frozenset({"REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SPECIAL_EXIT"})

DEFAULT_MISSING_GRACE_SECONDS = 120.0
# How long a watch waits through an API outage (only transient errors) before it fails.
DEFAULT_OUTAGE_TOLERANCE_SECONDS = 3600.0
# How often a watch says, during an outage, that it is still waiting.
OUTAGE_WARNING_INTERVAL_SECONDS = 300.0


class StepLogger(Protocol):
    """Anything with ``debug``, ``info``, ``warning`` and ``error``: a stdlib logger or Airflow's structlog one."""

    def debug(self, msg: Any, /, *args: Any, **kwargs: Any) -> Any: ...

    def error(self, msg: Any, /, *args: Any, **kwargs: Any) -> Any: ...

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


@dataclass(frozen=True, slots=True)
class WatchSettings:
    """How a task watches its job, the same in the worker, in each poke of a sensor and in the trigger.

    Declared once, here: the field names are the documented arguments of the operators, the sensor and
    the trigger (and the keys the trigger serializes), so one value carries them from the task to the
    trigger unchanged, and a new field reaches all of them without another edit.
    """

    missing_grace_seconds: float = DEFAULT_MISSING_GRACE_SECONDS
    outage_tolerance_seconds: float = DEFAULT_OUTAGE_TOLERANCE_SECONDS
    log_progress: bool = False
    array_fail_fast: bool = False
    pending_timeout: float | None = None

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The fields, i.e. the argument names under which operators and triggers take them."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> WatchSettings:
        """The settings found in ``kwargs`` (a trigger's serialized arguments, an operator's attributes),
        the defaults for the others."""
        return cls(**{name: kwargs[name] for name in cls.names() if name in kwargs})

    def as_kwargs(self) -> dict[str, Any]:
        """The settings under their argument names."""
        return {name: getattr(self, name) for name in self.names()}

    def new_watch(
        self,
        job_id: int,
        *,
        clock: WallClock | None = None,
        pending_since: float | None = None,
        saved: object = None,
    ) -> JobWatch:
        """A watch of ``job_id`` with these settings, its time read from ``clock`` (the driver's, a
        :class:`~airflow_provider_slurmapi.slurm.api.plans.Clock`; real time if ``None``); going on from
        ``saved`` (a :meth:`JobWatch.snapshot` of an earlier process) when given, else fresh, its first
        pending spell begun at ``pending_since``."""
        times: dict[str, Any] = {} if clock is None else {"clock": clock.now, "wall_clock": clock.wall}
        if saved is not None:
            return JobWatch.restore(saved, job_id, self, **times)
        return JobWatch(job_id, self, pending_since=pending_since, **times)


class WallClock(Protocol):
    """What a watch reads time from: a :class:`~airflow_provider_slurmapi.slurm.api.plans.Clock` (sync or async)."""

    def now(self) -> float: ...

    def wall(self) -> float: ...


class JobWatch:
    """State kept between polls of one job."""

    def __init__(
        self,
        job_id: int,
        settings: WatchSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        outage_warning_interval: float = OUTAGE_WARNING_INTERVAL_SECONDS,
        pending_since: float | None = None,
        **overrides: Any,
    ) -> None:
        """``settings``, with ``overrides`` (any of its fields by name) replacing some of them."""
        settings = settings if settings is not None else WatchSettings()
        self.settings = replace(settings, **overrides) if overrides else settings
        self.job_id = job_id
        self._wall_clock = wall_clock
        # When the current pending spell began (wall clock: it crosses processes), if the job pends.
        self._pending_since: float | None = pending_since
        self._requeues = 0  # requeues seen by this watch
        self._restarts: int | None = None  # Slurm's restart count, as last seen in the live queue
        self._array_cancelled = False
        self.outage_warning_interval = outage_warning_interval
        self._clock = clock
        self._last: SlurmJob | None = None
        self._missing_since: float | None = None
        self._logged_paths = False
        # When the API last answered (or the watch began): an outage is counted from there.
        self._answered_at: float = clock()
        self._outage_warned_at: float | None = None
        self._last_progress: str | None = None

    @property
    def last(self) -> SlurmJob | None:
        return self._last

    def wall(self) -> float:
        """The watch's wall clock (seconds since the epoch): what crosses processes."""
        return self._wall_clock()

    @property
    def pending_deadline(self) -> float | None:
        """When (wall clock) the current pending spell passes ``pending_timeout``; ``None`` if it cannot."""
        pending = self._last is not None and self._last.state is JobState.PENDING
        if self.settings.pending_timeout is None or self._pending_since is None or not pending:
            return None
        return self._pending_since + self.settings.pending_timeout

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
            if waited > self.settings.missing_grace_seconds:
                raise JobNotFoundError(
                    self.job_id,
                    f"Slurm job {self.job_id} has been in neither the live queue nor the accounting history "
                    f"for {waited:.0f}s (grace {self.settings.missing_grace_seconds:.0f}s). Check the job id and the "
                    "cluster, and that slurmdbd records jobs (AccountingStorageType=accounting_storage/slurmdbd).",
                )
            message = recovered
            if waited == 0:
                message = _join(
                    recovered,
                    f"Slurm job {self.job_id} is in neither the live queue nor the history yet; "
                    f"looking again for up to {self.settings.missing_grace_seconds:.0f}s.",
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
        if self.settings.pending_timeout is not None and waited >= self.settings.pending_timeout:
            return PendingTimeoutError(job.job_id, waited, self.settings.pending_timeout, job.reason)
        return None

    def _fail_fast(self, job: SlurmJob) -> str | None:
        """With ``array_fail_fast``, at the first failed task of a running array: why its rest is cancelled."""
        if not self.settings.array_fail_fast or self._array_cancelled or job.array is None or job.is_finished:
            return None
        failed = job.array.failed
        if not failed:
            return None
        self._array_cancelled = True
        return f"array_fail_fast: {failed[0].describe()}; cancelling the remaining tasks of array {job.job_id}."

    def _new_progress(self, job: SlurmJob) -> str | None:
        """Each new progress message once: ``Slurm job 4242: epoch 3/10 loss=0.12``."""
        progress = job.progress if self.settings.log_progress else None
        if not progress or progress == self._last_progress:
            return None
        self._last_progress = progress
        return f"Slurm job {job.job_id}: {progress}"

    def observe_error(self, error: BaseException) -> WatchStep:
        """Record a poll that got no usable answer.

        A permanent error (permission denied, unknown cluster, a bad argument) is raised again at
        once. A transient one (UNAVAILABLE, 5xx, no connection) is an outage: the job runs on, so the
        watch keeps waiting, with a warning now and then, until ``outage_tolerance_seconds`` have
        passed since the API last answered; then it raises :class:`WatchOutageError`. A request not sent
        (:class:`RequestNotSentError`) is an outage too once the watch has seen its job, even a host that no
        longer resolves: the endpoint was right, its DNS or TLS is down.
        """
        seen_before = self._last is not None and isinstance(error, RequestNotSentError)
        if not (is_transient(error) or seen_before):
            raise error
        now = self._clock()
        down = now - self._answered_at
        if down > self.settings.outage_tolerance_seconds:
            raise WatchOutageError(
                self.job_id,
                f"The Slurm Job API has not answered for {down:.0f}s (outage_tolerance_seconds="
                f"{self.settings.outage_tolerance_seconds:.0f}) while watching Slurm job {self.job_id}; "
                f"last error: {error}. "
                f"The job was not cancelled and may still be running: a retry of this task reattaches to "
                f"Slurm job {self.job_id}.",
            ) from error
        message = None
        if self._outage_warned_at is None or now - self._outage_warned_at >= self.outage_warning_interval:
            self._outage_warned_at = now
            message = (
                f"The Slurm Job API has not answered for {down:.0f}s while watching Slurm job {self.job_id} "
                f"({error}); the job runs on, still waiting for up to {self.settings.outage_tolerance_seconds:.0f}s "
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
            "saved_at": self._wall_clock(),
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
        settings: WatchSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        **overrides: Any,
    ) -> JobWatch:
        """A watch that goes on from ``saved``; a fresh one if ``saved`` is missing, of another job or unreadable."""

        def fresh() -> JobWatch:
            return cls(job_id, settings, clock=clock, wall_clock=wall_clock, **overrides)

        watch = fresh()
        if not isinstance(saved, Mapping) or saved.get("job_id") != job_id:
            return watch
        try:
            now = clock()
            since_saved = max(0.0, wall_clock() - float(saved["saved_at"]))

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


# -- the watch as a plan: what to do between looks, carried out by a sync or an async driver ---------


@dataclass(frozen=True, slots=True)
class Poll:
    """Look at the job: sent the job (``None``: in neither queue nor history), or thrown the
    :class:`SlurmApiError` of a look that got no answer.

    A sync driver looks now (the plan has slept before). A driver whose looks come from a shared poller
    (the trigger) waits for the poller's next answer, for at most ``within`` seconds (``None``: no
    limit), then sends :data:`NO_ANSWER` instead.
    """

    job_id: int
    within: float | None = None


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel the job; sent the cancel's outcome to log, or ``None`` when the driver logged it itself."""

    job_id: int


@dataclass(frozen=True, slots=True)
class SweepCopies:
    """Cancel the late copies of a resent submit (jobs carrying ``marker`` newer than ``keep_job_id``)."""

    marker: str
    keep_job_id: int


@dataclass(frozen=True, slots=True)
class Say:
    """One log line at ``level`` (``debug``, ``info``, ``warning``, ``error``); ``redact``: it quotes
    what the job wrote, so the driver masks secrets in it."""

    text: str
    level: str = "info"
    redact: bool = False


class NoAnswer:
    """The type of :data:`NO_ANSWER`."""

    def __repr__(self) -> str:
        return "NO_ANSWER"


NO_ANSWER = NoAnswer()
"""Sent for a :class:`Poll` whose ``within`` passed before the poller answered."""

WatchEffect = Poll | Cancel | SweepCopies | Say | Sleep
WatchPlan = Generator[WatchEffect, Any, "WatchEnd"]


@dataclass(frozen=True, slots=True)
class WatchEnd:
    """Where a watch plan stopped: the job is over, the wait was given up, the deadline passed, or the
    driver asked for a pause (to defer, or at the end of a poke)."""

    step: WatchStep | None
    # The job can never start or pended too long: it was cancelled (with cancel_on_kill); raise this.
    gave_up: SlurmApiError | None = None
    # The deadline passed: what happened to the job (cancelled or left running), already logged.
    timed_out: str | None = None
    # The last look got no answer (an outage the watch still rides out).
    outage: SlurmApiError | None = None

    @property
    def job(self) -> SlurmJob | None:
        return self.step.job if self.step is not None else None

    @property
    def finished(self) -> bool:
        return self.step is not None and self.step.finished and self.step.job is not None


def watch_plan(
    watch: JobWatch,
    *,
    interval: float,
    cancel_on_kill: bool,
    paced_by_poller: bool = False,
    copies_of: str | None = None,
    deadline: float | None = None,
    pause: Callable[[WatchStep, SlurmApiError | None], bool] | None = None,
    quiet_first: bool = False,
    log_outage: bool = True,
) -> WatchPlan:
    """Watch ``watch.job_id`` until it is over: the one loop of the worker, the sensor and the trigger.

    Each look is judged by ``watch`` and logged; a failed task of an array with ``array_fail_fast``
    cancels the array (once); after a resent submit (``copies_of``) its late copies are swept each
    interval; a job that can never start, or pends beyond ``pending_timeout``, is cancelled (with
    ``cancel_on_kill``) and the wait given up; at ``deadline`` (wall clock, the task's timeout) the job
    is cancelled (with ``cancel_on_kill``) and the wait ends.

    ``interval``: the plan sleeps this long between looks, unless ``paced_by_poller``: then the driver's
    :class:`Poll` waits for the next answer itself (the trigger's shared poller paces it), and the plan
    only bounds that wait by its deadlines and, after a resent submit, by ``interval`` (the sweeps).
    ``pause(step, outage)``: hand back
    to the driver after this look (to defer, or at the end of a sensor's poke). ``quiet_first``: the first
    look's unchanged, unfinished state goes to debug. ``log_outage``: log a look without an answer (a
    poke that keeps no watch says it its own way).
    """
    job_id = watch.job_id
    first = True
    while True:
        if not first and not paced_by_poller:
            yield Sleep(_until_next(watch, interval, deadline))
        quiet, first = first and quiet_first, False
        outage: SlurmApiError | None = None
        try:
            within = _within(watch, deadline, copies_of, interval) if paced_by_poller else None
            answer = yield Poll(job_id, within)
        except SlurmApiError as exc:
            step = watch.observe_error(exc)  # raises on a permanent error, or beyond the outage tolerance
            outage = exc
        else:
            if answer is NO_ANSWER:
                if deadline is not None and watch.wall() >= deadline:
                    return (yield from _deadline_passed(watch, cancel_on_kill))
                if not _pending_deadline_passed(watch):
                    if copies_of:
                        yield from _sweep(copies_of, job_id)
                    continue
                answer = watch.last  # the pending timeout: judge the last view again
            step = watch.observe(answer)
        if outage is not None and not log_outage:
            pass
        elif quiet and not step.finished and not step.warning:
            if step.message:
                yield Say(step.message, "debug")
            if step.progress:
                yield Say(step.progress, redact=True)
        else:
            yield from _said(step)
        if step.cancel_array:
            yield from _cancel(job_id, "array_fail_fast: a task of the array failed")
        if copies_of and not step.finished:
            yield from _sweep(copies_of, job_id)
        if step.give_up is not None:
            if cancel_on_kill:
                yield from _cancel(job_id, f"{type(step.give_up).__name__}")
            return WatchEnd(step, gave_up=step.give_up)
        if step.finished and step.job is not None:
            return WatchEnd(step)
        if deadline is not None and watch.wall() >= deadline:  # answers kept coming up to the deadline
            return (yield from _deadline_passed(watch, cancel_on_kill))
        if pause is not None and pause(step, outage):
            return WatchEnd(step, outage=outage)


def _said(step: WatchStep) -> Generator[WatchEffect, Any, None]:
    if step.message:
        yield Say(step.message, "warning" if step.warning else "info")
    if step.progress:
        yield Say(step.progress, redact=True)


def _cancel(job_id: int, why: str) -> Generator[WatchEffect, Any, None]:
    yield Say(f"Cancelling Slurm job {job_id}: {why}.")
    outcome = yield Cancel(job_id)
    if outcome is not None:
        yield Say(f"Slurm job {job_id}: cancel answered {getattr(outcome, 'value', outcome)}.")


def _sweep(marker: str, job_id: int) -> Generator[WatchEffect, Any, None]:
    try:
        yield SweepCopies(marker, job_id)
    except SlurmApiError as exc:
        yield Say(f"Could not look for late copies of Slurm job {job_id}: {exc}", "warning")


def _deadline_passed(watch: JobWatch, cancel_on_kill: bool) -> Generator[WatchEffect, Any, WatchEnd]:
    """The task's timeout passed: cancel the job here (with ``cancel_on_kill``) and say so."""
    job_id = watch.job_id
    if cancel_on_kill:
        yield from _cancel(job_id, "the task's timeout has passed")
        message = f"Slurm job {job_id}: the task's timeout passed; the job was cancelled."
    else:
        message = f"Slurm job {job_id}: the task's timeout passed; the job was left running (cancel_on_kill=False)."
    yield Say(message, "error")
    last = watch.last
    return WatchEnd(None if last is None else WatchStep(job=last, message=None, finished=False), timed_out=message)


def _pending_deadline_passed(watch: JobWatch) -> bool:
    pending = watch.pending_deadline
    return pending is not None and watch.wall() >= pending


def _within(watch: JobWatch, deadline: float | None, copies_of: str | None, interval: float | None) -> float | None:
    """Seconds until the plan must act without an answer: a deadline, the pending timeout, or a sweep."""
    now = watch.wall()
    waits = [d - now for d in (deadline, watch.pending_deadline) if d is not None]
    if copies_of and interval is not None:
        waits.append(interval)
    return max(0.0, min(waits)) if waits else None


def _until_next(watch: JobWatch, interval: float, deadline: float | None) -> float:
    """The sleep before the next look: the interval, or less when a deadline comes first."""
    within = _within(watch, deadline, None, None)
    return interval if within is None or within <= 0 else min(interval, within)


class WatchPort(Protocol):
    """What a sync driver looks and cancels through: the sync hook."""

    def get_job(self, job_id: int) -> SlurmJob | None: ...

    def cancel_job(self, job_id: int) -> Any: ...

    def cancel_later_copies(self, marker: str, keep_job_id: int) -> Any: ...


class AsyncWatchPort(Protocol):
    """What an async driver looks and cancels through: the trigger's subscription to its cluster's poller."""

    async def poll(self, job_id: int, within: float | None) -> SlurmJob | NoAnswer | None: ...

    async def cancel_job(self, job_id: int) -> Any: ...

    async def cancel_later_copies(self, marker: str, keep_job_id: int) -> Any: ...


class _Stepping:
    """The stepping both drivers share: the next effect, fed its reply or the error it ended in."""

    def __init__(self, plan: WatchPlan) -> None:
        self._plan = plan
        self.effect: WatchEffect | None = None
        self.end: WatchEnd | None = None
        self.feed(None)

    def feed(self, reply: Any) -> None:
        """The reply to :attr:`effect` (a :class:`SlurmApiError`: thrown in); :attr:`effect` ``None``: done."""
        try:
            self.effect = self._plan.throw(reply) if isinstance(reply, SlurmApiError) else self._plan.send(reply)
        except StopIteration as stop:
            self.effect, self.end = None, stop.value


def run_watch(
    plan: WatchPlan, port: WatchPort, clock: Clock, logger: StepLogger, redact: Callable[[str], str] = str
) -> WatchEnd:
    """Carry out a watch plan with the sync hook and a blocking clock (the worker, the sensor)."""
    run = _Stepping(plan)
    while (effect := run.effect) is not None:
        reply: Any = None
        try:
            if isinstance(effect, Poll):
                reply = port.get_job(effect.job_id)
            elif isinstance(effect, Sleep):
                clock.sleep(effect.seconds)
            elif isinstance(effect, Say):
                _log(logger, effect, redact)
            elif isinstance(effect, Cancel):
                reply = port.cancel_job(effect.job_id)
            else:
                port.cancel_later_copies(effect.marker, effect.keep_job_id)
        except SlurmApiError as exc:
            reply = exc
        run.feed(reply)
    assert run.end is not None
    return run.end


async def arun_watch(
    plan: WatchPlan, port: AsyncWatchPort, clock: AsyncClock, logger: StepLogger, redact: Callable[[str], str] = str
) -> WatchEnd:
    """:func:`run_watch` with an awaitable port and clock (the trigger)."""
    run = _Stepping(plan)
    while (effect := run.effect) is not None:
        reply: Any = None
        try:
            if isinstance(effect, Poll):
                reply = await port.poll(effect.job_id, effect.within)
            elif isinstance(effect, Sleep):
                await clock.sleep(effect.seconds)
            elif isinstance(effect, Say):
                _log(logger, effect, redact)
            elif isinstance(effect, Cancel):
                reply = await port.cancel_job(effect.job_id)
            else:
                await port.cancel_later_copies(effect.marker, effect.keep_job_id)
        except SlurmApiError as exc:
            reply = exc
        run.feed(reply)
    assert run.end is not None
    return run.end


def _log(logger: StepLogger, say: Say, redact: Callable[[str], str]) -> None:
    getattr(logger, say.level)("%s", redact(say.text) if say.redact else say.text)


def _join(first: str | None, second: str | None) -> str | None:
    return "; ".join(part for part in (first, second) if part) or None


__all__ = [
    "DEFAULT_MISSING_GRACE_SECONDS",
    "DEFAULT_OUTAGE_TOLERANCE_SECONDS",
    "NO_ANSWER",
    "AsyncWatchPort",
    "Cancel",
    "JobNeverStartsError",
    "JobWatch",
    "NoAnswer",
    "PendingTimeoutError",
    "Poll",
    "Say",
    "StepLogger",
    "SweepCopies",
    "WallClock",
    "WatchEnd",
    "WatchOutageError",
    "WatchPlan",
    "WatchPort",
    "WatchSettings",
    "WatchStep",
    "arun_watch",
    "run_watch",
    "watch_plan",
]
