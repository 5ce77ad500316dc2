"""One poller per cluster, shared by every trigger of a triggerer process that watches it.

A retraining platform defers hundreds of Slurm tasks at once. Polling once per task per interval
spends N calls of the project's API quota every interval, and N sessions and tokens. Here every
:class:`~airflow_provider_slurmapi.triggers.slurm.SlurmJobTrigger` of one event loop that watches the
same cluster (the same :class:`~airflow_provider_slurmapi.slurm.api.cluster.ClusterRef`: connection,
cluster, endpoint, API version, impersonation chain) subscribes to one :class:`ClusterPoller`, which

- asks ``/slurm/{v}/jobs/state/?job_id=..&job_id=..`` once per interval for all their jobs (through the
  hook, which chunks it far below the 1 MB request limit, and lists ``/slurm/{v}/jobs/`` instead if the
  envelope refuses query strings or the cluster predates ``jobs/state``);
- fetches a job's details (``/job/{id}``, a bounded batch at a time) only when its state changed, and
  ``/slurmdb`` only for jobs missing from the live answer;
- follows a job array from the same ``jobs/state`` answer (one entry per task, ``"<job id>_<task id>"``),
  whatever its number of tasks: its details are read only once its tasks in the answer are all over
  (for their reasons and exit codes), or when a task appears that several watched arrays could own;
- re-reads pending jobs whose trigger asked for it, each at most every ``PENDING_REREAD_SECONDS`` and at
  most ``MAX_PENDING_READS`` a round, the least recently read first (so a round in which nothing changed
  still costs one call): ``jobs/state`` has no reason, and a reason that changes while the state stays
  PENDING (``Dependency`` to ``DependencyNeverSatisfied``) decides whether the job can ever start;
- reads the jobs that nobody in this process has seen yet (a triggerer restart with hundreds of
  deferred tasks) with one ``GET /slurm/{v}/jobs/`` when there are more than ``MAX_FIRST_READS_ONE_BY_ONE``
  of them, instead of one ``job/{id}`` call each;
- reads the progress messages (the ``extra`` field) only of running jobs whose trigger asked for them,
  at most ``MAX_PROGRESS_READS`` of them a round, the least recently read first, so a round never
  costs more than that many extra calls however many jobs report progress;
- holds one :class:`~airflow_provider_slurmapi.hooks.slurm.SlurmApiAsyncHook`: one HTTP session, one
  credential refreshed once before it expires;
- cancels jobs of killed tasks through that same session and token, concurrently, in tasks it owns,
  so a cancel survives the repeated cancellation of the trigger that asked for it;
- stops, closing its session, when its last subscriber leaves and its last cancel is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
from airflow_provider_slurmapi.slurm.api.errors import SlurmApiError
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob
from airflow_provider_slurmapi.slurm.jobs.states import JobState, JobStateInfo

if TYPE_CHECKING:
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook
    from airflow_provider_slurmapi.slurm.jobs.readers import CancelOutcome

log = logging.getLogger(__name__)

# Per-job calls (details of a few changed jobs, history of jobs gone from the queue) run this many at once.
MAX_CONCURRENT_CALLS = 8
# Progress reads a round at the most, whatever the number of jobs reporting progress: with more jobs,
# each one's progress is read every few rounds, the least recently read first.
MAX_PROGRESS_READS = 8
# Pending jobs re-read a round at the most (for a change of their reason), the least recently read first,
# each at most once in this many seconds.
MAX_PENDING_READS = 8
PENDING_REREAD_SECONDS = 120.0
# Above this many jobs seen for the first time in one round (a triggerer restart), their details come
# from one jobs/ list instead of one job/{id} call each.
MAX_FIRST_READS_ONE_BY_ONE = MAX_CONCURRENT_CALLS
# After a round that took longer than the interval, the next waits at least this fraction of it.
MIN_REST_FRACTION = 0.1
# A round hands its answers to this many jobs' triggers, then lets the event loop run (lag stays low).
DISPATCH_SLICE = 1000
# Cancels of killed tasks run this many at once (a hundred tasks marked failed together).
MAX_CONCURRENT_CANCELS = 32
# How long a cancel may take, retries included, before it is logged as not confirmed.
CANCEL_CONFIRM_SECONDS = 60.0


class Subscription:
    """One trigger's view of the poller: the latest observation of its job.

    ``seen`` is the job as the trigger's operator last saw it: the poller reads the job's details
    only once its state differs from that, so N new triggers cost no call beyond the state poll.
    ``progress``: the trigger logs the job's progress messages, so its details are read while it runs.
    """

    def __init__(
        self,
        job_id: int,
        poll_interval: float,
        seen: SlurmJob | None = None,
        *,
        progress: bool = False,
        pending: bool = False,
    ) -> None:
        self.job_id = job_id
        self.poll_interval = poll_interval
        self.seen = seen
        self.progress = progress
        self.pending = pending
        self._event = asyncio.Event()
        self._job: SlurmJob | None = None
        self._error: BaseException | None = None

    def publish(self, job: SlurmJob | None) -> None:
        if job is not None and job is self._job and self._error is None:
            return  # nothing new: do not wake the trigger
        self._job, self._error = job, None
        self._event.set()

    def fail(self, error: BaseException) -> None:
        self._error = error
        self._event.set()

    async def next(self) -> SlurmJob | None:
        """Wait for the next poll's answer about this job (``None``: in neither queue nor history)."""
        await self._event.wait()
        self._event.clear()
        if self._error is not None:
            raise self._error
        return self._job


class ClusterPoller:
    """Polls one cluster for the jobs of all its subscribers."""

    def __init__(self, key: ClusterRef, hook: SlurmApiAsyncHook) -> None:
        self.key = key
        self.hook = hook
        self._subscriptions: dict[int, set[Subscription]] = {}
        self._known: dict[int, SlurmJob] = {}
        self._task: asyncio.Task[None] | None = None
        self._cancels: set[asyncio.Task[CancelOutcome | None]] = set()
        self._cancel_limit = asyncio.Semaphore(MAX_CONCURRENT_CANCELS)
        self.polls = 0
        self.progress_reads = 0
        self._progress_read_in: dict[int, int] = {}  # job id -> the round its progress was last read in
        self._pending_read_at: dict[int, float] = {}  # job id -> when (loop time) its record was last read
        # No entry of _pending_read_at is older than this (they are only ever set to "now"): while it is not
        # PENDING_REREAD_SECONDS old, no pending job is due and the round skips looking for one.
        self._pending_floor: float | None = None
        self.first_reads_batched = 0  # rounds whose first reads came from one jobs/ list
        self.pending_reads_batched = 0  # rounds whose pending re-reads came from one jobs/ list
        self._task_entries: list[tuple[int, int, JobStateInfo]] = []  # array tasks of this round's answer
        self._task_owner: dict[int, int] = {}  # a started array task's own job id -> its array's id

    @property
    def job_ids(self) -> list[int]:
        return list(self._subscriptions)

    def add(self, subscription: Subscription) -> None:
        self._subscriptions.setdefault(subscription.job_id, set()).add(subscription)
        if subscription.seen is not None:
            self._known.setdefault(subscription.job_id, subscription.seen)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"slurm-poller-{self.key.cluster_id}")

    def remove(self, subscription: Subscription) -> bool:
        """Drop a subscription; True when the poller is idle (it then stops)."""
        subs = self._subscriptions.get(subscription.job_id)
        if subs is not None:
            subs.discard(subscription)
            if not subs:
                del self._subscriptions[subscription.job_id]
                self._known.pop(subscription.job_id, None)
                self._progress_read_in.pop(subscription.job_id, None)
                self._pending_read_at.pop(subscription.job_id, None)
        return self.idle

    @property
    def idle(self) -> bool:
        """No subscriber and no cancel in flight: the session may close."""
        return not self._subscriptions and not self._cancels

    def cancel(self, job_id: int, logger: Any = log) -> asyncio.Task[CancelOutcome | None]:
        """Cancel ``job_id`` in a task this poller owns; its outcome (or failure) goes to ``logger``.

        Concurrent cancels share the poller's session and token (the connection is read and the token
        fetched once for all of them) and run ``MAX_CONCURRENT_CANCELS`` at once. The task is created in
        the caller's context, so its log lines land in the caller's task log. Cancelling the caller
        does not cancel it: await it through :func:`asyncio.shield`. The poller stays alive until
        every cancel is answered.
        """
        task = asyncio.get_running_loop().create_task(self._cancel(job_id, logger), name=f"slurm-cancel-{job_id}")
        self._cancels.add(task)
        task.add_done_callback(self._cancel_finished)
        return task

    async def _cancel(self, job_id: int, logger: Any) -> CancelOutcome | None:
        try:
            async with asyncio.timeout(CANCEL_CONFIRM_SECONDS), self._cancel_limit:
                outcome = await self.hook.cancel_job(job_id)
        except Exception as exc:
            message = "Could not confirm the cancel of Slurm job %s: %s"
            reason = f"no answer within {CANCEL_CONFIRM_SECONDS:.0f}s" if isinstance(exc, TimeoutError) else exc
            logger.error(message, job_id, reason)
            if logger is not log:  # the caller's log may be gone: the triggerer's own log says it too
                log.error(message, job_id, reason)
            return None
        logger.info("Slurm job %s: cancel answered %s.", job_id, outcome.value)
        return outcome

    def _cancel_finished(self, task: asyncio.Task[CancelOutcome | None]) -> None:
        self._cancels.discard(task)
        if self.idle:
            _release(self)

    async def stop(self) -> None:
        task, self._task = self._task, None
        try:
            if task is not None and not task.done():
                task.cancel()
                # wait() does not raise the task's CancelledError, so a cancellation of the caller
                # itself still propagates.
                await asyncio.wait([task])
        finally:
            await self.hook.close()

    def _interval(self) -> float:
        return min((s.poll_interval for subs in self._subscriptions.values() for s in subs), default=30.0)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._subscriptions:
            started = loop.time()
            try:
                await self.poll_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # to every trigger: its watch waits out an outage, fails on anything else
                for subs in list(self._subscriptions.values()):
                    for sub in subs:
                        sub.fail(exc)
            # One round per interval, counted from the round's start: a round of thousands of jobs takes a
            # good part of a second, and sleeping a whole interval after it would fall behind (0.75 rounds
            # per interval at 5,000 jobs). A round longer than the interval is followed by a short rest,
            # never by back-to-back calls. A new subscriber does not shorten the wait: its operator has
            # just looked at its job.
            interval = self._interval()
            await asyncio.sleep(max(interval * MIN_REST_FRACTION, started + interval - loop.time()))

    async def poll_once(self) -> None:
        """One round: the states of all jobs in as few calls as possible, details only where they changed."""
        ids = self.job_ids
        if not ids:
            return
        self.polls += 1
        self._task_entries = []
        # jobs/state for all of them; the hook falls back to the jobs/ list (and remembers) where it must.
        live = await self.hook.get_live_states(ids, tasks=self._task_entries)
        await asyncio.sleep(0)  # the answer is read: let the loop run before the round goes on
        arrays = self._follow_arrays(ids, live)
        known = self._known
        # Details on a change of state from what is known (the subscriber's ``seen`` at first), and at
        # first sight of a job nobody has seen: the first line names reason and node.
        changed = [
            j
            for j, state in live.items()
            if type(state) is JobStateInfo
            and ((seen := known.get(j)) is None or (seen.state_info is not state and seen.state_info != state))
        ]
        details = await self._details(list(dict.fromkeys([*changed, *arrays])))
        details.update(await self._progress(live, details))
        details.update(await self._pending(live, details))
        missing = [j for j in ids if j not in live]
        history = await self._gather(self.hook.get_history_job, missing)
        await asyncio.sleep(0)
        subscriptions = self._subscriptions
        for count, job_id in enumerate(ids, 1):
            if not count % DISPATCH_SLICE:
                await asyncio.sleep(0)  # thousands of jobs a round: the event loop is never held for long
            subscribers = subscriptions.get(job_id)
            if subscribers is None:  # the trigger left while this poll was in flight
                continue
            state = live.get(job_id)
            job: SlurmJob | SlurmApiError | None
            if job_id in details:
                job = details[job_id]
            elif type(state) is JobStateInfo:
                # Unchanged since the last round; or its details could not be read this round.
                job = known.get(job_id) or SlurmJob(job_id=job_id, state_info=state, source="live")
            elif isinstance(state, SlurmJob):
                job = state
            else:
                job = history.get(job_id)
            if isinstance(job, SlurmApiError):  # this job's own answer failed: only its watchers hear of it
                for sub in list(subscribers):
                    sub.fail(job)
                continue
            if job is not None:
                known[job_id] = job
                if job.array is not None:
                    self._task_owner.update((t.job_id, job_id) for t in job.array.tasks.values() if t.job_id)
            for sub in subscribers:  # publish never awaits: the set cannot change under it
                sub.publish(job)

    def _follow_arrays(self, ids: Sequence[int], live: dict[int, JobStateInfo | SlurmJob]) -> list[int]:
        """Put each watched array's view, updated from this round's task entries, into ``live``; return
        the arrays whose details to read (their tasks in the answer are all over, or an entry's owner is unclear).

        An array's pending tasks answer under its id, a started task under its own job id: those are
        known from the array's details, or, with a single array watched, need not be known.
        """
        arrays = {j: job for j in ids if (job := self._known.get(j)) is not None and job.array is not None}
        watched = set(ids)
        entries: dict[int, dict[int, tuple[int, JobStateInfo]]] = {a: {} for a in arrays}
        unclear: list[int] = []
        wanted: list[int] = []
        for job_id, task_id, state in self._task_entries:
            if job_id in watched and job_id not in arrays:
                if self._known.get(job_id) is None:  # not seen yet: an array's id, or a task's
                    if job_id not in wanted:
                        wanted.append(job_id)
                else:  # one task watched by its own job id: a plain job
                    live.setdefault(job_id, state)
                continue
            owner = job_id if job_id in arrays else self._task_owner.get(job_id)
            if owner is None and len(arrays) == 1:
                owner = next(iter(arrays))
            if owner in entries:
                entries[owner][task_id] = (job_id, state)
            else:
                unclear.append(job_id)
        for array_id, known in arrays.items():
            found = entries[array_id]
            if not found:
                continue  # none of its tasks is in the live queue: read from the history as a missing job
            assert known.array is not None
            live[array_id] = known.with_array(known.array.with_states(found))
            visible_over = all(state.is_finished for _, state in found.values())
            if (visible_over and not known.is_finished) or unclear:
                wanted.append(array_id)
        return wanted

    async def _progress(
        self, live: dict[int, JobStateInfo | SlurmJob], fetched: Mapping[int, object]
    ) -> dict[int, SlurmJob]:
        """Fresh records (with ``extra``) of running jobs whose triggers log progress: at most
        ``MAX_PROGRESS_READS`` a round, those read least recently first."""
        wanted = [
            job_id
            for job_id, state in live.items()
            if isinstance(state, JobStateInfo)
            and state.state is JobState.RUNNING
            and job_id not in fetched
            and any(sub.progress for sub in self._subscriptions.get(job_id, ()))
        ]
        if not wanted:
            return {}
        wanted = sorted(wanted, key=lambda job_id: self._progress_read_in.get(job_id, -1))[:MAX_PROGRESS_READS]
        for job_id in wanted:
            self._progress_read_in[job_id] = self.polls
        self.progress_reads += 1
        # Progress is only for the log: a job that left the queue between the two calls, or whose read
        # failed, is read again next round; it is neither reported missing nor failed for it.
        return {job_id: job for job_id, job in (await self._details(wanted)).items() if isinstance(job, SlurmJob)}

    async def _pending(
        self, live: dict[int, JobStateInfo | SlurmJob], fetched: Mapping[int, object]
    ) -> dict[int, SlurmJob]:
        """Fresh records of pending jobs whose triggers follow the pending reason: each at most every
        ``PENDING_REREAD_SECONDS``, at most ``MAX_PENDING_READS`` a round, those read least recently first."""
        now = asyncio.get_running_loop().time()
        read_at = self._pending_read_at
        for job_id in fetched:
            read_at[job_id] = now
        if self._pending_floor is not None and now - self._pending_floor < PENDING_REREAD_SECONDS:
            # None is due: only the pending jobs seen for the first time are noted (from now on).
            for job_id in live.keys() - read_at.keys():
                if _pending(live[job_id]) and job_id not in fetched:
                    read_at[job_id] = now
            return {}
        wanted = [
            job_id
            for job_id, state in live.items()
            if _pending(state)
            and job_id not in fetched
            and now - read_at.setdefault(job_id, now) >= PENDING_REREAD_SECONDS
            and any(sub.pending for sub in self._subscriptions.get(job_id, ()))
        ]
        if not wanted:
            self._pending_floor = min(read_at.values(), default=now)
            return {}
        if len(wanted) > MAX_PENDING_READS:
            # Many due at once (thousands of jobs deferred together come due together): one jobs/ list
            # reads them all, instead of MAX_PENDING_READS job/{id} calls a round for minutes on end.
            try:
                listed = await self.hook.get_live_jobs(wanted)
            except SlurmApiError as exc:  # read them a few at a time, as a smaller round would
                log.warning("Re-reading %d pending jobs in one jobs/ call failed (%s).", len(wanted), exc)
            else:
                for job_id in wanted:
                    self._pending_read_at[job_id] = now
                self.pending_reads_batched += 1
                return dict(listed)
        wanted = sorted(wanted, key=lambda job_id: self._pending_read_at[job_id])[:MAX_PENDING_READS]
        for job_id in wanted:
            self._pending_read_at[job_id] = now
        # Like progress: a failed read or a job gone between the two calls is read again next round.
        return {job_id: job for job_id, job in (await self._details(wanted)).items() if isinstance(job, SlurmJob)}

    async def _details(self, job_ids: Sequence[int]) -> dict[int, SlurmJob | SlurmApiError | None]:
        """Full records of the jobs whose state changed: one ``job/{id}`` call each, a bounded batch at a time.

        Not the whole queue for changes: a ``jobs/`` answer grows with every job of the cluster (most of
        them other users'), these with the changes only. Except for the jobs nobody in this process has
        seen yet, when there are more than ``MAX_FIRST_READS_ONE_BY_ONE`` of them (a triggerer restarted
        with many deferred tasks whose operators left no view of their job): one ``jobs/`` call reads
        them all, instead of a call each.
        """
        first = [job_id for job_id in job_ids if job_id not in self._known]
        batched: dict[int, SlurmJob | SlurmApiError | None] = {}
        if len(first) > MAX_FIRST_READS_ONE_BY_ONE:
            try:
                batched = dict(await self.hook.get_live_jobs(first))
                self.first_reads_batched += 1
            except SlurmApiError as exc:  # read them one by one, as any other round would
                log.warning("Reading %d jobs in one jobs/ call failed (%s); reading them one by one.", len(first), exc)
        rest = [job_id for job_id in job_ids if job_id not in batched]
        return {**batched, **(await self._gather(self.hook.get_job, rest))}

    async def _gather(
        self, fetch: Callable[[int], Awaitable[SlurmJob | None]], job_ids: Sequence[int]
    ) -> dict[int, SlurmJob | SlurmApiError | None]:
        """``fetch`` for each job, at most ``MAX_CONCURRENT_CALLS`` at once.

        The error of one job's call (its record unreadable, say) is that job's result: it reaches
        only that job's watchers, never the others' of the round.
        """
        if not job_ids:
            return {}
        limit = asyncio.Semaphore(MAX_CONCURRENT_CALLS)

        async def one(job_id: int) -> SlurmJob | SlurmApiError | None:
            async with limit:
                try:
                    return await fetch(job_id)
                except SlurmApiError as exc:
                    return exc

        results = await asyncio.gather(*(one(j) for j in job_ids))
        return dict(zip(job_ids, results, strict=True))


def _pending(state: JobStateInfo | SlurmJob) -> bool:
    """A ``jobs/state`` entry of a pending job (a full record from the ``jobs/`` fallback is read already)."""
    return isinstance(state, JobStateInfo) and state.state is JobState.PENDING


# One registry per event loop: pollers, their sessions and locks belong to the loop that made them.
_registry: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[ClusterRef, ClusterPoller]] = (
    weakref.WeakKeyDictionary()
)


def pollers_of_this_loop() -> dict[ClusterRef, ClusterPoller]:
    """The live pollers of the running event loop (for tests and benchmarks)."""
    return _registry.setdefault(asyncio.get_running_loop(), {})


def _poller_for(key: ClusterRef, version_hint: str | None = None) -> ClusterPoller:
    """The running loop's poller of ``key``, made on first use (``version_hint``: the API version the
    deferring task spoke with the cluster, so that the poller speaks it without negotiating)."""
    pollers = pollers_of_this_loop()
    poller = pollers.get(key)
    if poller is None:
        from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook

        poller = ClusterPoller(key, SlurmApiAsyncHook(cluster=key, api_version_hint=version_hint))
        pollers[key] = poller
    return poller


# Stops of idle pollers in flight (a task needs a strong reference until it is done).
_stopping: set[asyncio.Task[None]] = set()


def _release(poller: ClusterPoller) -> None:
    """Forget an idle poller and close its session (after its last cancel was answered)."""
    pollers = pollers_of_this_loop()
    if pollers.get(poller.key) is poller:
        del pollers[poller.key]
        task = asyncio.get_running_loop().create_task(poller.stop())
        _stopping.add(task)
        task.add_done_callback(_stopping.discard)


async def cancel_job(key: ClusterRef, job_id: int, logger: Any = log) -> CancelOutcome | None:
    """Cancel ``job_id`` through the shared poller of ``key``; ``None`` if the cancel was not confirmed.

    If the caller is cancelled while waiting (Airflow 3.3's triggerer cancels a killed trigger again
    about every second), the cancel goes on in the poller and still logs its outcome.
    """
    return await asyncio.shield(_poller_for(key).cancel(job_id, logger))


async def cancel_later_copies(key: ClusterRef, tag: str, keep_job_id: int, logger: Any = log) -> list[int]:
    """Through the shared poller of ``key``: cancel the caller's jobs with ``tag`` newer than ``keep_job_id``.

    A failure is logged, never raised: the watch of the job itself goes on.
    """
    hook = _poller_for(key).hook
    try:
        return await hook.cancel_later_copies(tag, keep_job_id)
    except SlurmApiError as exc:
        logger.warning("Could not look for late copies of Slurm job %s: %s", keep_job_id, exc)
        return []


@contextlib.asynccontextmanager
async def subscribe(
    key: ClusterRef,
    job_id: int,
    poll_interval: float,
    seen: SlurmJob | None = None,
    *,
    progress: bool = False,
    pending: bool = False,
    version_hint: str | None = None,
) -> AsyncIterator[Subscription]:
    """Watch ``job_id`` through the shared poller of ``key``; leaving the block unsubscribes.

    ``progress``: also read the job's progress messages while it runs (bounded detail reads a round).
    ``pending``: also re-read the job while it pends, for a change of its reason (bounded likewise).
    ``version_hint``: see :func:`_poller_for` (used only if this subscription makes the poller).
    """
    pollers = pollers_of_this_loop()
    poller = _poller_for(key, version_hint)
    subscription = Subscription(job_id, poll_interval, seen, progress=progress, pending=pending)
    poller.add(subscription)
    try:
        yield subscription
    finally:
        if poller.remove(subscription) and pollers.get(key) is poller:
            del pollers[key]
            await poller.stop()


__all__ = ["ClusterPoller", "Subscription", "cancel_job", "cancel_later_copies", "pollers_of_this_loop", "subscribe"]
