"""``SlurmJobTrigger``: waits in the triggerer for a Slurm job to finish, without a worker slot.

The trigger is described completely by :meth:`SlurmJobTrigger.serialize`, so a triggerer restart
rebuilds it and it goes on watching. It shares one poller per cluster with the other triggers of its
process (:mod:`airflow_provider_slurmapi.triggers.poller`).

When does it cancel the job? Only when a user kills the task: on Airflow 3.3+ the triggerer calls
:meth:`on_kill` (mark failed/success, clear); before 3.3 the trigger sees ``CancelledError`` and cancels
only if the task instance is no longer DEFERRED (``safe_to_cancel``). A triggerer shutdown, restart or
reassignment never cancels: the task is still DEFERRED then, and ``cleanup()`` cancels nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS, AIRFLOW_V_3_3_PLUS, redact_text
from airflow_provider_slurmapi.slurm.cluster import check_cluster_args, check_job_id
from airflow_provider_slurmapi.slurm.errors import SlurmApiError
from airflow_provider_slurmapi.slurm.versions import DEFAULT_API_VERSION
from airflow_provider_slurmapi.slurm.watch import DEFAULT_MISSING_GRACE_SECONDS, JobWatch
from airflow_provider_slurmapi.triggers.poller import PollerKey, subscribe


class SlurmJobTrigger(BaseTrigger):
    """Fires once the Slurm job ``job_id`` is over.

    The event's payload: ``status`` (``success`` for COMPLETED, ``failed`` for any other finished
    state, ``error`` when the job could not be watched), ``job_id``, ``message`` and ``job`` (the
    job as a dict, see ``SlurmJob.to_dict``).

    :param job_id: the Slurm job id.
    :param poll_interval: seconds between polls (the cluster's poller uses the smallest of its triggers).
    :param cancel_on_kill: cancel the job when a user kills the deferred task.
    :param missing_grace_seconds: how long a job may be in neither the live queue nor the history.
    :param log_progress: log each new progress message of the job; the cluster's poller then reads the
        details of this running job too (batched, a bounded number of calls per interval).
    """

    def __init__(
        self,
        job_id: int,
        project_id: str | None = None,
        region: str | None = None,
        cluster_id: str | None = None,
        gcp_conn_id: str = "google_cloud_default",
        api_version: str = DEFAULT_API_VERSION,
        poll_interval: float = 30.0,
        impersonation_chain: str | Sequence[str] | None = None,
        api_endpoint: str | None = None,
        cancel_on_kill: bool = True,
        missing_grace_seconds: float = DEFAULT_MISSING_GRACE_SECONDS,
        log_progress: bool = False,
    ) -> None:
        super().__init__()
        if not region or not cluster_id:
            raise ValueError(
                f"SlurmJobTrigger needs region and cluster_id (got region={region!r}, cluster_id={cluster_id!r})."
            )
        # A trigger is rebuilt from its serialized kwargs in the triggerer: check them here too.
        check_cluster_args(region=region, cluster_id=cluster_id, project_id=project_id, api_endpoint=api_endpoint)
        self.job_id = check_job_id(job_id)
        self.region = region
        self.cluster_id = cluster_id
        self.project_id = project_id
        self.gcp_conn_id = gcp_conn_id
        self.api_version = api_version
        self.poll_interval = float(poll_interval)
        self.impersonation_chain = impersonation_chain
        self.api_endpoint = api_endpoint
        self.cancel_on_kill = cancel_on_kill
        self.missing_grace_seconds = float(missing_grace_seconds)
        self.log_progress = bool(log_progress)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "job_id": self.job_id,
                "region": self.region,
                "cluster_id": self.cluster_id,
                "project_id": self.project_id,
                "gcp_conn_id": self.gcp_conn_id,
                "api_version": self.api_version,
                "poll_interval": self.poll_interval,
                "impersonation_chain": self.impersonation_chain,
                "api_endpoint": self.api_endpoint,
                "cancel_on_kill": self.cancel_on_kill,
                "missing_grace_seconds": self.missing_grace_seconds,
                "log_progress": self.log_progress,
            },
        )

    @property
    def poller_key(self) -> PollerKey:
        chain = self.impersonation_chain
        return PollerKey(
            gcp_conn_id=self.gcp_conn_id,
            project_id=self.project_id,
            region=self.region,
            cluster_id=self.cluster_id,
            api_version=self.api_version,
            impersonation_chain=chain if chain is None or isinstance(chain, str) else tuple(chain),
            api_endpoint=self.api_endpoint,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        watch = JobWatch(self.job_id, missing_grace_seconds=self.missing_grace_seconds, log_progress=self.log_progress)
        try:
            async with subscribe(
                self.poller_key, self.job_id, self.poll_interval, progress=self.log_progress
            ) as subscription:
                while True:
                    try:
                        step = watch.observe(await subscription.next())
                    except SlurmApiError as exc:
                        yield TriggerEvent({"status": "error", "job_id": self.job_id, "message": str(exc)})
                        return
                    for line in step.lines:
                        self.log.info("%s", redact_text(line))
                    if step.finished and step.job is not None:
                        job = step.job
                        yield TriggerEvent(
                            {
                                "status": "success" if job.succeeded else "failed",
                                "job_id": self.job_id,
                                "message": f"Slurm job {job.job_id}: {job.describe()}"
                                if job.succeeded
                                else job.failure_message(),
                                "job": job.to_dict(),
                            }
                        )
                        return
        except asyncio.CancelledError:
            if not AIRFLOW_V_3_3_PLUS and self.cancel_on_kill and await self.safe_to_cancel():
                await self._cancel_job("the deferred task was killed")
            raise

    async def on_kill(self) -> None:
        """Airflow 3.3+: a user marked or cleared the deferred task; cancel its job."""
        if self.cancel_on_kill:
            await self._cancel_job("the task was killed by a user")

    async def _cancel_job(self, why: str) -> None:
        from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook

        self.log.info("Cancelling Slurm job %s: %s.", self.job_id, why)
        try:
            async with SlurmApiAsyncHook(**self.poller_key.hook_kwargs(), retry_seconds=30) as hook:
                outcome = await hook.cancel_job(self.job_id)
            self.log.info("Slurm job %s: cancel answered %s.", self.job_id, outcome.value)
        except Exception as exc:
            self.log.error("Could not cancel Slurm job %s: %s", self.job_id, exc)

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
