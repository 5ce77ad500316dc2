"""``SlurmJobSensor``: waits for any Slurm job, by id, to finish.

Succeeds on COMPLETED, fails on any other finished state with Slurm's reason. Follows the job from
the live queue into the history. Poke/reschedule mode, or ``deferrable=True`` (the triggerer waits).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_slurmapi._compat import AirflowException, BaseSensorOperator, redact_text
from airflow_provider_slurmapi.cluster_args import (
    CLUSTER_TEMPLATE_FIELDS,
    SlurmClusterMixin,
    default_deferrable,
    parse_job_id,
)
from airflow_provider_slurmapi.slurm.versions import DEFAULT_API_VERSION
from airflow_provider_slurmapi.slurm.watch import DEFAULT_MISSING_GRACE_SECONDS, JobWatch

if TYPE_CHECKING:
    from airflow_provider_slurmapi._compat import Context


class SlurmJobSensor(SlurmClusterMixin, BaseSensorOperator):
    """Wait for the Slurm job ``job_id`` to end.

    :param job_id: the Slurm job id. Templated (e.g. ``{{ ti.xcom_pull(task_ids='submit') }}``).
    :param deferrable: wait in the triggerer (default: ``[operators] default_deferrable``).
    :param cancel_on_kill: in deferrable mode, cancel the job when a user kills the task. Off by
        default: a sensor watches a job it did not start.
    :param missing_grace_seconds: how long the job may be in neither the live queue nor the history.
    :param log_progress: log each new progress message the job sets (``slurm_progress``, ``Extra=``).
    """

    template_fields: Sequence[str] = ("job_id", *CLUSTER_TEMPLATE_FIELDS)
    ui_color = "#e4f0e8"

    def __init__(
        self,
        *,
        job_id: int | str,
        region: str,
        cluster_id: str,
        project_id: str | None = None,
        gcp_conn_id: str = "google_cloud_default",
        api_version: str = DEFAULT_API_VERSION,
        impersonation_chain: str | Sequence[str] | None = None,
        api_endpoint: str | None = None,
        deferrable: bool | None = None,
        cancel_on_kill: bool = False,
        missing_grace_seconds: float = DEFAULT_MISSING_GRACE_SECONDS,
        log_progress: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._set_cluster_args(
            region=region,
            cluster_id=cluster_id,
            project_id=project_id,
            gcp_conn_id=gcp_conn_id,
            api_version=api_version,
            impersonation_chain=impersonation_chain,
            api_endpoint=api_endpoint,
        )
        self.job_id = job_id
        self.deferrable = default_deferrable() if deferrable is None else deferrable
        self.cancel_on_kill = cancel_on_kill
        self.missing_grace_seconds = missing_grace_seconds
        self.log_progress = log_progress
        self._watch: JobWatch | None = None

    def execute(self, context: Context) -> Any:
        self.check_cluster_args()
        parse_job_id(self.job_id)
        if not self.deferrable:
            return super().execute(context)
        if self.poke(context):
            return None
        from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger

        self.defer(
            trigger=SlurmJobTrigger(
                job_id=parse_job_id(self.job_id),
                poll_interval=self.poke_interval,
                cancel_on_kill=self.cancel_on_kill,
                missing_grace_seconds=self.missing_grace_seconds,
                log_progress=self.log_progress,
                **self.cluster_kwargs(),
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout) if self.timeout else None,
        )
        return None

    def poke(self, context: Context) -> bool:
        job_id = parse_job_id(self.job_id)
        if self._watch is None or self._watch.job_id != job_id:
            self._watch = JobWatch(
                job_id, missing_grace_seconds=self.missing_grace_seconds, log_progress=self.log_progress
            )
        step = self._watch.observe(self.hook.get_job(job_id))
        for line in step.lines:
            self.log.info("%s", redact_text(line))
        if not step.finished or step.job is None:
            return False
        if not step.job.succeeded:
            raise AirflowException(redact_text(step.job.failure_message()))
        return True

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """With ``cancel_on_kill``, a deferral that timed out cancels the job, then fails as usual."""
        if self.cancel_on_kill:
            self.cancel_after_deferral_timeout(next_method, next_kwargs, parse_job_id(self.job_id))
        return super().resume_execution(next_method, next_kwargs, context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> None:
        if event.get("status") != "success":
            raise AirflowException(redact_text(str(event.get("message"))))
        self.log.info("%s", event.get("message"))
