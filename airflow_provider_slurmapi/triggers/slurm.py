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
import contextlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS, AIRFLOW_V_3_3_PLUS, redact_text
from airflow_provider_slurmapi.slurm.cluster import ClusterRef, cluster_ref
from airflow_provider_slurmapi.slurm.errors import SlurmApiError, is_permanent
from airflow_provider_slurmapi.slurm.job import SlurmJob
from airflow_provider_slurmapi.slurm.validation import check_job_id
from airflow_provider_slurmapi.slurm.watch import (
    DEFAULT_MISSING_GRACE_SECONDS,
    DEFAULT_OUTAGE_TOLERANCE_SECONDS,
    WatchSettings,
)
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
        missing_grace_seconds: float = DEFAULT_MISSING_GRACE_SECONDS,
        outage_tolerance_seconds: float = DEFAULT_OUTAGE_TOLERANCE_SECONDS,
        deadline: float | None = None,
        last_seen: Mapping[str, Any] | None = None,
        log_progress: bool = False,
        array_fail_fast: bool = False,
        pending_timeout: float | None = None,
        pending_since: float | None = None,
        *,
        cluster: ClusterRef | None = None,
        cancel_copies_of: str | None = None,
    ) -> None:
        super().__init__()
        # A trigger is rebuilt from its serialized kwargs in the triggerer: they are checked here too.
        self.cluster = cluster_ref(
            cluster,
            region=region,
            cluster_id=cluster_id,
            project_id=project_id,
            gcp_conn_id=gcp_conn_id,
            api_version=api_version,
            impersonation_chain=impersonation_chain,
            api_endpoint=api_endpoint,
        )
        self.job_id = check_job_id(job_id)
        self.poll_interval = float(poll_interval)
        self.cancel_on_kill = cancel_on_kill
        self.watch_settings = WatchSettings(
            missing_grace_seconds=float(missing_grace_seconds),
            outage_tolerance_seconds=float(outage_tolerance_seconds),
            log_progress=bool(log_progress),
            array_fail_fast=bool(array_fail_fast),
            pending_timeout=None if pending_timeout is None else float(pending_timeout),
        )
        self.deadline = None if deadline is None else float(deadline)
        self.last_seen = dict(last_seen) if last_seen else None
        self.cancel_copies_of = str(cancel_copies_of) if cancel_copies_of else None
        self.pending_since = None if pending_since is None else float(pending_since)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The documented arguments, under the keys every release stored: a deferred task resumes after an upgrade."""
        watch = self.watch_settings.as_kwargs()
        if watch["pending_timeout"] is None:  # a trigger without it serializes as the releases before it did
            del watch["pending_timeout"]
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
        """Follow the job through the cluster's shared poller until it is over or cannot be watched."""
        watch = self.watch_settings.new_watch(self.job_id, pending_since=self.pending_since)
        seen = SlurmJob.from_dict(self.last_seen) if self.last_seen else None
        if seen is not None:  # the operator logged this state already: the first line is the change from it
            watch.observe(seen)
        async with (
            subscribe(
                self.poller_key,
                self.job_id,
                self.poll_interval,
                seen,
                progress=self.watch_settings.log_progress,
                pending=True,
            ) as subscription,
            self._late_copies_cancelled(),
        ):
            while True:
                try:
                    try:
                        job = await self._next_before_deadline(subscription, watch.pending_deadline)
                    except TimeoutError:
                        if self.deadline is not None and time.time() >= self.deadline:
                            return await self._deadline_event(watch.last)
                        step = watch.observe(watch.last)  # the pending timeout: judge the last view again
                    except SlurmApiError as exc:
                        step = watch.observe_error(exc)
                    else:
                        step = watch.observe(job)
                except SlurmApiError as exc:
                    error = JobErrorEvent(
                        status="error", job_id=self.job_id, message=str(exc), permanent=is_permanent(exc)
                    )
                    return TriggerEvent(error)
                step.log_to(self.log, redact_text)
                if step.cancel_array:
                    await self._cancel_job("array_fail_fast: a task of the array failed")
                if step.give_up is not None:
                    if self.cancel_on_kill:
                        await self._cancel_job(str(step.give_up))
                    error = JobErrorEvent(
                        status="error",
                        job_id=self.job_id,
                        message=str(step.give_up),
                        permanent=is_permanent(step.give_up),
                    )
                    return TriggerEvent(error)
                if step.finished and step.job is not None:
                    job = step.job
                    finished = JobFinishedEvent(
                        status="success" if job.succeeded else "failed",
                        job_id=self.job_id,
                        message=f"Slurm job {job.job_id}: {job.describe()}" if job.succeeded else job.failure_message(),
                        job=job.to_dict(),
                    )
                    return TriggerEvent(finished)

    @contextlib.asynccontextmanager
    async def _late_copies_cancelled(self) -> AsyncIterator[None]:
        """After a resent submit, while the job is watched: every poll interval, cancel its late copies."""
        tag = self.cancel_copies_of
        if not tag:
            yield
            return

        async def sweep() -> None:
            while True:
                await cancel_later_copies(self.poller_key, tag, self.job_id, self.log)
                await asyncio.sleep(self.poll_interval)

        task = asyncio.get_running_loop().create_task(sweep(), name=f"slurm-copies-of-{self.job_id}")
        try:
            yield
        finally:
            task.cancel()

    async def _cancel_if_killed(self) -> None:
        """Before Airflow 3.3: cancel if the task instance is no longer DEFERRED (a user killed it)."""
        if await self.safe_to_cancel():
            await self._cancel_job("the deferred task was killed")

    async def _next_before_deadline(
        self, subscription: Subscription, pending_deadline: float | None = None
    ) -> SlurmJob | None:
        """The next observation; ``TimeoutError`` once the deadline (or the pending deadline) has passed."""
        deadlines = [d for d in (self.deadline, pending_deadline) if d is not None]
        if not deadlines:
            return await subscription.next()
        async with asyncio.timeout_at(asyncio.get_running_loop().time() + min(deadlines) - time.time()):
            return await subscription.next()

    async def _deadline_event(self, last: SlurmJob | None) -> TriggerEvent:
        """The wait timed out: cancel the job here (no worker slot needed) and say so."""
        waited = "the task's timeout"
        if self.cancel_on_kill:
            await self._cancel_job(f"{waited} has passed")
            message = f"Slurm job {self.job_id}: {waited} passed; the job was cancelled."
        else:
            message = f"Slurm job {self.job_id}: {waited} passed; the job was left running (cancel_on_kill=False)."
        self.log.error("%s", message)
        timeout = JobTimeoutEvent(
            status="timeout", job_id=self.job_id, message=message, job=last.to_dict() if last is not None else None
        )
        return TriggerEvent(timeout)

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
