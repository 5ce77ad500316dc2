"""One poller per cluster, shared by every trigger of a triggerer process that watches it.

A retraining platform defers hundreds of Slurm tasks at once. Polling once per task per interval
spends N calls of the project's API quota every interval, and N sessions and tokens. Here every
:class:`~airflow_provider_slurmapi.triggers.slurm.SlurmJobTrigger` of one event loop that watches the
same cluster through the same connection subscribes to one :class:`ClusterPoller`, which

- asks ``/slurm/{v}/jobs/state/?job_id=..&job_id=..`` once per interval for all their jobs (chunked to
  stay far below the 1 MB request limit), or ``/slurm/{v}/jobs/`` if the envelope refuses query strings
  or the cluster predates ``jobs/state``;
- fetches a job's details (``/job/{id}``) only when its state changed, and ``/slurmdb`` only for jobs
  missing from the live answer;
- reads the progress messages (the ``extra`` field) only of running jobs whose trigger asked for them,
  batched like changed jobs: one call each for a few, one ``jobs/`` call for more than
  ``BURST_THRESHOLD``, so a round never costs more than ``BURST_THRESHOLD`` extra calls;
- holds one :class:`~airflow_provider_slurmapi.hooks.slurm.SlurmApiAsyncHook`: one HTTP session, one
  credential refreshed once before it expires;
- stops, closing its session, when its last subscriber leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_slurmapi.slurm.errors import InvalidArgumentError, SlurmApiError, SlurmError
from airflow_provider_slurmapi.slurm.job import SlurmJob
from airflow_provider_slurmapi.slurm.states import JobState, JobStateInfo

if TYPE_CHECKING:
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook

log = logging.getLogger(__name__)

# Job ids per jobs/state call: ~16 bytes each, so a chunk is ~160 kB, far below the 1 MB limit.
MAX_IDS_PER_CALL = 10_000
# More changed jobs than this in one round: read them all from one jobs/ call instead of one call each.
BURST_THRESHOLD = 8
# Per-job calls (details of a few changed jobs, history of jobs gone from the queue) run this many at once.
MAX_CONCURRENT_CALLS = 8


@dataclass(frozen=True, slots=True)
class PollerKey:
    """Which pollers may be shared: same connection, cluster, endpoint and API version."""

    gcp_conn_id: str
    project_id: str | None
    region: str
    cluster_id: str
    api_version: str
    impersonation_chain: tuple[str, ...] | str | None
    api_endpoint: str | None

    def hook_kwargs(self) -> dict[str, Any]:
        chain = self.impersonation_chain
        return {
            "gcp_conn_id": self.gcp_conn_id,
            "project_id": self.project_id,
            "region": self.region,
            "cluster_id": self.cluster_id,
            "api_version": self.api_version,
            "impersonation_chain": list(chain) if isinstance(chain, tuple) else chain,
            "api_endpoint": self.api_endpoint,
        }


class Subscription:
    """One trigger's view of the poller: the latest observation of its job."""

    def __init__(self, job_id: int, poll_interval: float, *, progress: bool = False) -> None:
        self.job_id = job_id
        self.poll_interval = poll_interval
        self.progress = progress
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

    def __init__(self, key: PollerKey, hook: SlurmApiAsyncHook) -> None:
        self.key = key
        self.hook = hook
        self._subscriptions: dict[int, set[Subscription]] = {}
        self._known: dict[int, SlurmJob] = {}
        self._use_state_endpoint = True
        self._task: asyncio.Task[None] | None = None
        self.polls = 0
        self.progress_reads = 0

    @property
    def job_ids(self) -> list[int]:
        return list(self._subscriptions)

    def add(self, subscription: Subscription) -> None:
        self._subscriptions.setdefault(subscription.job_id, set()).add(subscription)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"slurm-poller-{self.key.cluster_id}")

    def remove(self, subscription: Subscription) -> bool:
        """Drop a subscription; True when none is left (the poller then stops)."""
        subs = self._subscriptions.get(subscription.job_id)
        if subs is not None:
            subs.discard(subscription)
            if not subs:
                del self._subscriptions[subscription.job_id]
                self._known.pop(subscription.job_id, None)
        return not self._subscriptions

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
        while self._subscriptions:
            try:
                await self.poll_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # delivered to every trigger, which reports it as its event
                for subs in list(self._subscriptions.values()):
                    for sub in subs:
                        sub.fail(exc)
            # A new subscriber does not shorten the wait: its operator has just looked at its job.
            await asyncio.sleep(self._interval())

    async def poll_once(self) -> None:
        """One round: the states of all jobs in as few calls as possible, details only where they changed."""
        ids = self.job_ids
        if not ids:
            return
        self.polls += 1
        live = await self._live_states(ids)
        changed = [j for j, state in live.items() if isinstance(state, JobStateInfo) and self._needs_details(j, state)]
        details = await self._details(changed)
        details.update(await self._progress(live, details))
        missing = [j for j in ids if j not in live]
        history = await self._gather(self.hook.get_history_job, missing)
        for job_id in ids:
            state = live.get(job_id)
            job: SlurmJob | SlurmApiError | None
            if isinstance(state, SlurmJob):
                job = state
            elif state is None:
                job = history.get(job_id)
            elif job_id in details:
                job = details[job_id]
            else:
                known = self._known.get(job_id)
                # First sight of an unfinished job: the state alone, no extra call (N new triggers
                # would otherwise cost N calls in one interval). Details come with its first change.
                job = known or SlurmJob(job_id=job_id, state_info=state, source="live")
            subscribers = self._subscriptions.get(job_id)
            if subscribers is None:  # the trigger left while this poll was in flight
                continue
            if isinstance(job, SlurmApiError):  # this job's own answer failed: only its watchers hear of it
                for sub in list(subscribers):
                    sub.fail(job)
                continue
            if job is not None:
                self._known[job_id] = job
            for sub in list(subscribers):
                sub.publish(job)

    async def _progress(
        self, live: dict[int, JobStateInfo | SlurmJob], fetched: Mapping[int, object]
    ) -> dict[int, SlurmJob]:
        """Fresh records (with ``extra``) of the running jobs whose triggers log progress, batched."""
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
        self.progress_reads += 1
        # Progress is only for the log: a job that left the queue between the two calls, or whose read
        # failed, is read again next round; it is neither reported missing nor failed for it.
        return {job_id: job for job_id, job in (await self._details(wanted)).items() if isinstance(job, SlurmJob)}

    def _needs_details(self, job_id: int, state: JobStateInfo) -> bool:
        known = self._known.get(job_id)
        if known is None:
            return state.is_finished
        return known.state_info != state

    async def _details(self, job_ids: Sequence[int]) -> dict[int, SlurmJob | SlurmApiError | None]:
        """Full records of the jobs whose state changed: one ``jobs/`` call for a burst, else one each."""
        if len(job_ids) > BURST_THRESHOLD:
            found: dict[int, SlurmJob | SlurmApiError | None] = dict(await self.hook.get_live_jobs(job_ids))
            gone = [j for j in job_ids if j not in found]
            found.update(await self._gather(self.hook.get_history_job, gone))
            return found
        return await self._gather(self.hook.get_job, job_ids)

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

    async def _live_states(self, ids: Sequence[int]) -> dict[int, JobStateInfo | SlurmJob]:
        if self._use_state_endpoint:
            try:
                states: dict[int, JobStateInfo | SlurmJob] = {}
                for start in range(0, len(ids), MAX_IDS_PER_CALL):
                    states.update(await self.hook.get_job_states(ids[start : start + MAX_IDS_PER_CALL]))
                return states
            except InvalidArgumentError as exc:
                log.warning("The envelope refused jobs/state with a query string (%s); listing jobs/ instead.", exc)
            except SlurmError as exc:
                if exc.http_status != 404:
                    raise
                log.warning("This cluster has no jobs/state endpoint (Slurm < 23.11.7); listing jobs/ instead.")
            self._use_state_endpoint = False
        return dict(await self.hook.get_live_jobs(ids))


# One registry per event loop: pollers, their sessions and locks belong to the loop that made them.
_registry: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, ClusterPoller]] = (
    weakref.WeakKeyDictionary()
)


def pollers_of_this_loop() -> dict[Hashable, ClusterPoller]:
    """The live pollers of the running event loop (for tests and benchmarks)."""
    return _registry.setdefault(asyncio.get_running_loop(), {})


@contextlib.asynccontextmanager
async def subscribe(
    key: PollerKey, job_id: int, poll_interval: float, *, progress: bool = False
) -> AsyncIterator[Subscription]:
    """Watch ``job_id`` through the shared poller of ``key``; leaving the block unsubscribes.

    ``progress``: also read the job's progress messages while it runs (costs detail reads, batched).
    """
    pollers = pollers_of_this_loop()
    poller = pollers.get(key)
    if poller is None:
        from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook

        poller = ClusterPoller(key, SlurmApiAsyncHook(**key.hook_kwargs()))
        pollers[key] = poller
    subscription = Subscription(job_id, poll_interval, progress=progress)
    poller.add(subscription)
    try:
        yield subscription
    finally:
        if poller.remove(subscription) and pollers.get(key) is poller:
            del pollers[key]
            await poller.stop()


__all__ = ["ClusterPoller", "PollerKey", "Subscription", "pollers_of_this_loop", "subscribe"]
