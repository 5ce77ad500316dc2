"""``SlurmJobTrigger``: waits in the triggerer for a Slurm job to finish, without a worker slot.

The trigger is described completely by :meth:`SlurmJobTrigger.serialize`, so a triggerer restart
rebuilds it and it goes on watching. It shares one poller per cluster with the other triggers of its
process (:mod:`airflow_provider_slurmapi.triggers.poller`).

When does it cancel the job? Only when a user kills the task: on Airflow 3.3+ the triggerer calls
:meth:`on_kill` (mark failed/success, clear); before 3.3 the trigger sees ``CancelledError`` and cancels
only if the task instance is no longer DEFERRED (``safe_to_cancel``). A triggerer shutdown, restart or
reassignment never cancels: the task is still DEFERRED then, and ``cleanup()`` cancels nothing.
At its ``deadline`` (the task's timeout, passed at defer time) the trigger cancels the job itself and
reports the timeout, so a timed-out job stops even when no worker slot is free to resume the task.
Cancels go through the cluster's shared poller (one session, one token, concurrent).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS, AIRFLOW_V_3_3_PLUS, redact_text
from airflow_provider_slurmapi.slurm.api.api_versions import SUPPORTED_API_VERSIONS
from airflow_provider_slurmapi.slurm.api.cluster import CLUSTER_ARG_NAMES, ClusterRef, cluster_ref
from airflow_provider_slurmapi.slurm.api.errors import SlurmApiError, is_permanent
from airflow_provider_slurmapi.slurm.api.plans import LoopClock
from airflow_provider_slurmapi.slurm.api.validation import check_job_id
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob
from airflow_provider_slurmapi.slurm.jobs.watch import NO_ANSWER, NoAnswer, WatchSettings, arun_watch, watch_plan
from airflow_provider_slurmapi.triggers.event import JobErrorEvent, JobFinishedEvent, JobTimeoutEvent
from airflow_provider_slurmapi.triggers.poller import Subscription, cancel_job, cancel_later_copies, subscribe

# Kill checks in flight before Airflow 3.3 (a task needs a strong reference until it is done).
_pending_checks: set[asyncio.Task[None]] = set()


class SlurmJobTrigger(BaseTrigger):
    """Fires once the Slurm job ``job_id`` is over.

    The event's payload (:data:`~airflow_provider_slurmapi.triggers.event.SlurmJobEvent`): ``status``
    (``success`` for COMPLETED, ``failed`` for any other finished state, ``error`` when the job could
    not be watched, ``timeout`` when the deadline passed), ``job_id``, ``message``, and ``job`` (the job
    as a dict, see ``SlurmJob.to_dict``) or, for ``error``, ``permanent``.

    :param job_id: the Slurm job id.
    :param poll_interval: seconds between polls (the cluster's poller uses the smallest of its triggers).
    :param cancel_on_kill: cancel the job when a user kills the deferred task.
    :param missing_grace_seconds: how long a job may be in neither the live queue nor the history.
    :param outage_tolerance_seconds: how long an API outage (transient errors only) is waited out.
    :param deadline: when the wait times out (seconds since the epoch): the trigger then cancels the job
        (with ``cancel_on_kill``) and fires a ``timeout`` event. ``None``: no deadline.
    :param last_seen: the job as the operator last saw it (``SlurmJob.to_dict``): the trigger's first
        line is the change from there, not a bare state.
    :param log_progress: log each new progress message of the job; the cluster's poller then reads the
        details of this running job too (batched, a bounded number of calls per interval).
    :param array_fail_fast: for a job array, cancel its remaining tasks at the first failed task.
    :param cancel_copies_of: set only when the submit was resent: the task's tag. While the job is
        watched, the caller's newer jobs carrying it (an earlier send the front end carried out late)
        are cancelled. One read of the live queue a poll interval, on this rare path only.
    :param api_version_hint: with ``api_version="auto"``, the version the deferring task spoke with the
        cluster: the triggerer speaks it without negotiating (and negotiates if the cluster no longer serves it).
    :param pending_timeout: seconds a job may stay pending (each spell: after submission, after each
        requeue) before the trigger cancels it and reports an ``error`` a retry may fix. ``None``: no limit.
    :param pending_since: when the first pending spell began (seconds since the epoch, the submission).

    A job pending for a reason no wait can clear (``FINAL_PENDING_REASONS``) is cancelled (with
    ``cancel_on_kill``) and reported as a permanent ``error``.

    With ``[triggerer] queues_enabled``, the trigger runs on a triggerer serving the deferring task's
    ``queue``: Airflow 3.2 and 3.3 read ``supports_triggerer_queue``, 3.4 ``trigger_queue_inherited_from_task``
    (and a trigger's own ``queue``, which this one never sets). Both are said here, not left to the
    base class's default.
    """

    supports_triggerer_queue: bool = True
    trigger_queue_inherited_from_task: bool = True

    def __init__(
        self,
        job_id: int,
        project_id: str | None = None,
        region: str | None = None,
        cluster_id: str | None = None,
        gcp_conn_id: str | None = None,
        api_version: str | None = None,
        poll_interval: float = 30.0,
        impersonation_chain: str | Sequence[str] | None = None,
        api_endpoint: str | None = None,
        cancel_on_kill: bool = True,
        *,
        deadline: float | None = None,
        last_seen: Mapping[str, Any] | None = None,
        pending_since: float | None = None,
        cluster: ClusterRef | None = None,
        watch: WatchSettings | None = None,
        cancel_copies_of: str | None = None,
        api_version_hint: str | None = None,
        **arguments: Any,
    ) -> None:
        """The cluster arguments (``ClusterArgs``) keep their documented positions; ``arguments``: the
        watch settings (``WatchSettings``) each under its own name, as the releases before ``watch`` stored them."""
        given = locals()  # the cluster arguments above, read by their declared names
        super().__init__()
        # A trigger is rebuilt from its serialized kwargs in the triggerer: they are checked here too.
        self.cluster = cluster_ref(cluster, **{name: given[name] for name in CLUSTER_ARG_NAMES})
        settings = {name: arguments.pop(name) for name in WatchSettings.names() if name in arguments}
        if arguments:
            raise TypeError(f"SlurmJobTrigger got unexpected arguments: {', '.join(sorted(arguments))}.")
        self.watch_settings = replace(watch, **settings) if watch is not None else WatchSettings(**settings)
        self.job_id = check_job_id(job_id)
        self.poll_interval = float(poll_interval)
        self.cancel_on_kill = cancel_on_kill
        self.deadline = None if deadline is None else float(deadline)
        self.last_seen = dict(last_seen) if last_seen else None
        self.cancel_copies_of = str(cancel_copies_of) if cancel_copies_of else None
        # With api_version "auto": the version the deferring task spoke (the operator's negotiated one). Only a
        # hint: a version this release does not know is dropped, one the cluster stopped serving renegotiated.
        self.api_version_hint = api_version_hint if api_version_hint in SUPPORTED_API_VERSIONS else None
        self.pending_since = None if pending_since is None else float(pending_since)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The documented arguments, under the keys every release stored: a deferred task resumes after an upgrade.

        The watch settings are stored whole, each field under its own name (as the releases before
        stored them); a field left at ``None`` is left out, as releases without it stored nothing.
        """
        watch = {name: value for name, value in self.watch_settings.as_kwargs().items() if value is not None}
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "job_id": self.job_id,
                **self.cluster.as_kwargs(),
                "poll_interval": self.poll_interval,
                "cancel_on_kill": self.cancel_on_kill,
                "deadline": self.deadline,
                "last_seen": self.last_seen,
                **watch,
                # Only when set: a trigger stored by a release without it still resumes.
                **({"cancel_copies_of": self.cancel_copies_of} if self.cancel_copies_of else {}),
                # Only when set: a trigger without it serializes as the releases before it did.
                **({"pending_since": self.pending_since} if self.pending_since is not None else {}),
                **({"api_version_hint": self.api_version_hint} if self.api_version_hint else {}),
            },
        )

    @property
    def poller_key(self) -> ClusterRef:
        """Triggers of the same cluster share a poller."""
        return self.cluster

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            event = await self._wait_for_event()
        except asyncio.CancelledError:
            if not AIRFLOW_V_3_3_PLUS and self.cancel_on_kill:
                # A task of its own: a second cancellation of this one must not abandon the check or the cancel.
                check = asyncio.get_running_loop().create_task(self._cancel_if_killed())
                _pending_checks.add(check)
                check.add_done_callback(_pending_checks.discard)
                await asyncio.shield(check)
            raise
        # Yielded only once the poller is left: when the triggerer (or dag.test) closes this generator
        # after its event, nothing is left to await.
        yield event

    async def _wait_for_event(self) -> TriggerEvent:
        """Drive the watch plan through the cluster's shared poller until the job is over or cannot be watched."""
        clock = LoopClock()
        watch = self.watch_settings.new_watch(self.job_id, clock=clock, pending_since=self.pending_since)
        seen = SlurmJob.from_dict(self.last_seen) if self.last_seen else None
        if seen is not None:  # the operator logged this state already: the first line is the change from it
            watch.observe(seen)
        plan = watch_plan(
            watch,
            interval=self.poll_interval,
            paced_by_poller=True,
            cancel_on_kill=self.cancel_on_kill,
            copies_of=self.cancel_copies_of,
            deadline=self.deadline,
        )
        async with subscribe(
            self.poller_key,
            self.job_id,
            self.poll_interval,
            seen,
            progress=self.watch_settings.log_progress,
            pending=True,
            version_hint=self.api_version_hint,
        ) as subscription:
            try:
                end = await arun_watch(plan, _PollerPort(self, subscription), clock, self.log, redact_text)
            except SlurmApiError as exc:
                return self._error(exc)
        if end.gave_up is not None:
            return self._error(end.gave_up)
        job = end.job
        if end.timed_out is not None:
            timeout = JobTimeoutEvent(
                status="timeout",
                job_id=self.job_id,
                message=end.timed_out,
                job=job.to_dict() if job is not None else None,
            )
            return TriggerEvent(timeout)
        assert job is not None and end.finished
        finished = JobFinishedEvent(
            status="success" if job.succeeded else "failed",
            job_id=self.job_id,
            message=f"Slurm job {job.job_id}: {job.describe()}" if job.succeeded else job.failure_message(),
            job=job.to_dict(),
        )
        return TriggerEvent(finished)

    def _error(self, error: SlurmApiError) -> TriggerEvent:
        """The job could not be watched, or its wait was given up: an ``error`` event, permanent or not."""
        event = JobErrorEvent(status="error", job_id=self.job_id, message=str(error), permanent=is_permanent(error))
        return TriggerEvent(event)

    async def _cancel_if_killed(self) -> None:
        """Before Airflow 3.3: cancel if the task instance is no longer DEFERRED (a user killed it)."""
        if await self.safe_to_cancel():
            await self._cancel_job("the deferred task was killed")

    async def on_kill(self) -> None:
        """Airflow 3.3+: a user marked or cleared the deferred task; cancel its job."""
        if self.cancel_on_kill:
            await self._cancel_job("the task was killed by a user")

    async def _cancel_job(self, why: str) -> None:
        """Cancel through the cluster's shared poller; the cancel outlives a cancellation of this call."""
        self.log.info("Cancelling Slurm job %s: %s.", self.job_id, why)
        await cancel_job(self.poller_key, self.job_id, self.log)

    async def safe_to_cancel(self) -> bool:
        """Before Airflow 3.3: cancel only if the task instance is no longer DEFERRED.

        A CancelledError also comes from a triggerer shutdown or reassignment, when the task is still
        DEFERRED; then the job must keep running. If the state cannot be read, do not cancel.
        """
        from airflow.utils.state import TaskInstanceState

        ti = self.task_instance
        if ti is None:
            return False
        try:
            if AIRFLOW_V_3_0_PLUS:
                from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

                states = await asyncio.to_thread(
                    RuntimeTaskInstance.get_task_states,
                    dag_id=ti.dag_id,
                    task_ids=[ti.task_id],
                    run_ids=[ti.run_id],
                    map_index=ti.map_index,
                )
                state = states[ti.run_id][ti.task_id]
            else:  # Airflow 2.11: the triggerer reads the metadata database.
                from airflow.models.taskinstance import TaskInstance
                from airflow.utils.session import create_session

                with create_session() as session:
                    row = (
                        session.query(TaskInstance)
                        .filter_by(dag_id=ti.dag_id, task_id=ti.task_id, run_id=ti.run_id, map_index=ti.map_index)
                        .one_or_none()
                    )
                    state = row.state if row else None
        except Exception as exc:
            self.log.warning("Could not read the state of task %s (%s); not cancelling the job.", ti.task_id, exc)
            return False
        return state is not None and state != TaskInstanceState.DEFERRED


class _PollerPort:
    """What the trigger's watch plan looks and cancels through: its subscription to the cluster's poller."""

    def __init__(self, trigger: SlurmJobTrigger, subscription: Subscription) -> None:
        self._trigger = trigger
        self._subscription = subscription

    async def poll(self, job_id: int, within: float | None) -> SlurmJob | NoAnswer | None:
        """The poller's next answer about the job, or ``NO_ANSWER`` once ``within`` seconds have passed."""
        if within is None:
            return await self._subscription.next()
        try:
            async with asyncio.timeout(within):
                return await self._subscription.next()
        except TimeoutError:
            return NO_ANSWER

    async def cancel_job(self, job_id: int) -> None:
        """Cancel through the shared poller, which logs the outcome itself (so nothing is sent back to log)."""
        await cancel_job(self._trigger.poller_key, job_id, self._trigger.log)

    async def cancel_later_copies(self, marker: str, keep_job_id: int) -> None:
        await cancel_later_copies(self._trigger.poller_key, marker, keep_job_id, self._trigger.log)
