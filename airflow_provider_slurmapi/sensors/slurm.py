"""``SlurmJobSensor``: waits for any Slurm job, by id, to finish.

Succeeds on COMPLETED, fails on any other finished state with Slurm's reason. Follows the job from
the live queue into the history. Poke/reschedule mode, or ``deferrable=True`` (the triggerer waits).

In reschedule mode every poke is a new process. On Airflow 3.3+ the watch (last state seen, since
when the job is missing, since when the API is down) is kept in the task state store between pokes.
Earlier versions have no store that outlives a poke (XComs are cleared when a rescheduled task
starts again), so there a poke waits out a missing job itself (up to ``missing_grace_seconds``), gives
its slot back during an API outage (the poke returns False, the next one looks again, and the
sensor's ``timeout`` bounds the outage), and logs the job's state on the first poke and its changes
only as far as one poke sees them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_slurmapi._compat import (
    AirflowException,
    AirflowFailException,
    BaseSensorOperator,
    is_deferral_timeout,
    redact_text,
)
from airflow_provider_slurmapi.cluster_task import (
    CLUSTER_TEMPLATE_FIELDS,
    DEFAULT_ACCOUNTING_WAIT_SECONDS,
    SlurmClusterMixin,
    default_deferrable,
    fails_permanently,
    parse_job_id,
    permanent_message,
)
from airflow_provider_slurmapi.deferral import cancel_after_deferral_timeout, deferral_deadline
from airflow_provider_slurmapi.slurm.errors import SlurmApiError
from airflow_provider_slurmapi.slurm.paths import DEFAULT_API_VERSION
from airflow_provider_slurmapi.slurm.watch import (
    DEFAULT_MISSING_GRACE_SECONDS,
    DEFAULT_OUTAGE_TOLERANCE_SECONDS,
    JobWatch,
    WatchStep,
)
from airflow_provider_slurmapi.triggers.event import event_job, read_event

if TYPE_CHECKING:
    from airflow_provider_slurmapi._compat import Context
    from airflow_provider_slurmapi.slurm.job import SlurmJob

# task_state_store key of the watch of a rescheduled sensor (Airflow 3.3+).
WATCH_STATE_KEY = "slurm_job_watch"
# XCom key of the finished job (as the submit operator pushes it), with its accounting summary.
JOB_XCOM_KEY = "slurm_job"


class SlurmJobSensor(SlurmClusterMixin, BaseSensorOperator):
    """Wait for the Slurm job ``job_id`` to end.

    :param job_id: the Slurm job id. Templated (e.g. ``{{ ti.xcom_pull(task_ids='submit') }}``).
    :param deferrable: wait in the triggerer (default: ``[operators] default_deferrable``).
    :param cancel_on_kill: in deferrable mode, cancel the job when a user kills the task; in any mode,
        cancel a job that can never start (pending for a reason only an admin or its user can clear,
        ``FINAL_PENDING_REASONS``: the task fails at once either way). Off by default: a sensor watches
        a job it did not start.
    :param missing_grace_seconds: how long the job may be in neither the live queue nor the history.
    :param outage_tolerance_seconds: how long the wait rides out an API outage (UNAVAILABLE, 5xx, no
        connection; warned about every few minutes) before the task fails. Permanent errors fail at once.
        In reschedule mode before Airflow 3.3 no poke knows when the outage began: each poke that
        meets it gives its slot back, and the sensor's ``timeout`` ends the wait instead.
    :param log_progress: log each new progress message the job sets (``slurm_progress``, ``Extra=``).
    :param array_fail_fast: when ``job_id`` is a job array, cancel its remaining tasks at the first
        failed task. The sensor waits for every task of an array and succeeds when all COMPLETED.
    :param accounting_wait_seconds: once the job has ended, how long to wait for its accounting record
        (slurmdbd lags a little): its summary is logged in one line and pushed with the job to XCom
        ``slurm_job`` (key ``accounting``). ``None``: no summary. Never fails the task.
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
        outage_tolerance_seconds: float = DEFAULT_OUTAGE_TOLERANCE_SECONDS,
        log_progress: bool = False,
        array_fail_fast: bool = False,
        accounting_wait_seconds: float | None = DEFAULT_ACCOUNTING_WAIT_SECONDS,
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
        self.outage_tolerance_seconds = outage_tolerance_seconds
        self.log_progress = log_progress
        self.array_fail_fast = array_fail_fast
        self.accounting_wait_seconds = accounting_wait_seconds
        self._watch: JobWatch | None = None
        self._outage: SlurmApiError | None = None  # the error of the last look, when the API did not answer
        self._last_event_job: SlurmJob | None = None

    @fails_permanently
    def execute(self, context: Context) -> Any:
        self.check_cluster_args()
        parse_job_id(self.job_id)
        if not self.deferrable:
            return super().execute(context)
        if self.poke(context):
            return None
        from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger

        deadline, backstop = deferral_deadline(timedelta(seconds=self.timeout) if self.timeout else None)
        last = self._watch.last if self._watch is not None else None
        self.defer(
            trigger=SlurmJobTrigger(
                job_id=parse_job_id(self.job_id),
                poll_interval=self.poke_interval,
                cancel_on_kill=self.cancel_on_kill,
                missing_grace_seconds=self.missing_grace_seconds,
                outage_tolerance_seconds=self.outage_tolerance_seconds,
                deadline=deadline,
                last_seen=last.to_dict() if last is not None else None,
                log_progress=self.log_progress,
                array_fail_fast=self.array_fail_fast,
                cluster=self.cluster,
            ),
            method_name="execute_complete",
            timeout=backstop,
        )
        return None

    def poke(self, context: Context) -> bool:
        job_id = parse_job_id(self.job_id)
        store = context.get("task_state_store") if self.reschedule else None
        fresh = self._watch is None or self._watch.job_id != job_id
        try_number = getattr(context["ti"], "try_number", None)
        if store is not None:  # a watch saved by an earlier poke of this try (not of an earlier try)
            saved = store.get(WATCH_STATE_KEY)
            same_try = isinstance(saved, dict) and saved.get("try_number") == try_number
            self._watch = self._new_watch(job_id, saved.get("watch") if same_try and isinstance(saved, dict) else None)
        elif fresh:
            self._watch = self._new_watch(job_id)
        watch = self._watch
        assert watch is not None
        # Before Airflow 3.3 a rescheduled poke cannot keep its watch: it says the state on the first
        # poke only, and waits out a missing job or an outage here, where the grace and the tolerance
        # can end the wait.
        forgetful = self.reschedule and store is None
        step = self._look(watch, job_id, quiet=forgetful and not _is_first_poke(context), forgetful=forgetful)
        while forgetful and step.job is None and self._outage is None:
            time.sleep(self.poke_interval)
            step = self._look(watch, job_id, forgetful=forgetful)
        if forgetful and self._outage is not None:
            self.log.warning(
                "The Slurm Job API did not answer while watching Slurm job %s (%s); the job runs on. This poke "
                "gives its slot back and the next one looks again (the sensor's timeout of %ss bounds the outage).",
                job_id,
                self._outage,
                self.timeout,
            )
            return False
        if store is not None:
            store.set(WATCH_STATE_KEY, {"try_number": try_number, "watch": watch.snapshot()})
        if not step.finished or step.job is None:
            return False
        self._push_job(context, step.job.to_dict())
        if not step.job.succeeded:
            raise AirflowException(redact_text(step.job.failure_message()))
        return True

    def _push_job(self, context: Context, record: dict[str, Any]) -> None:
        """XCom ``slurm_job``: the finished job, with its accounting summary (also logged)."""
        job_id = parse_job_id(self.job_id)
        array = record.get("array") is not None
        record = {
            **record,
            "requeues": record.get("restart_count") or 0,
            "accounting": self.report_accounting(job_id, self.accounting_wait_seconds, array=array),
        }
        self.push_xcom(context, JOB_XCOM_KEY, record)

    def _new_watch(self, job_id: int, saved: object = None) -> JobWatch:
        """A watch of ``job_id``, going on from ``saved`` (an earlier poke's snapshot) if it is one."""
        return JobWatch.restore(
            saved,
            job_id,
            missing_grace_seconds=self.missing_grace_seconds,
            outage_tolerance_seconds=self.outage_tolerance_seconds,
            log_progress=self.log_progress,
            array_fail_fast=self.array_fail_fast,
        )

    def _look(self, watch: JobWatch, job_id: int, *, quiet: bool = False, forgetful: bool = False) -> WatchStep:
        """One observation of the job; ``quiet`` keeps an unchanged, unfinished state out of the log.

        Sets ``_outage`` when the API gave no usable answer (an outage the watch still rides out);
        ``forgetful`` (a poke that keeps no watch) leaves the outage to the poke to log.
        """
        self._outage = None
        try:
            job = self.hook.get_job(job_id)
        except SlurmApiError as exc:
            step = watch.observe_error(exc)
            self._outage = exc
        else:
            step = watch.observe(job)
        if forgetful and self._outage is not None:
            pass
        elif quiet and not step.finished and not step.warning:
            self.log.debug("%s", step.message)
            if step.progress:
                self.log.info("%s", redact_text(step.progress))
        else:
            step.log_to(self.log, redact_text)
        if step.cancel_array:
            self.hook.cancel_job(job_id)
        if step.give_up is not None:  # a job that can never start; cancelled only with cancel_on_kill
            if self.cancel_on_kill:
                self.log.info("Cancel of Slurm job %s: %s.", job_id, self.hook.cancel_job(job_id).value)
            raise step.give_up
        return step

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """With ``cancel_on_kill``, a deferral that timed out cancels the job, then fails as usual."""
        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except Exception as exc:
            if self.cancel_on_kill and is_deferral_timeout(exc):
                cancel_after_deferral_timeout(self, parse_job_id(self.job_id))
            raise

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The run facet ``slurmJob``: the cluster and the job watched (called by the OpenLineage listener)."""
        return self._lineage()

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        return self._lineage()

    def _lineage(self) -> Any:
        try:
            job_id: int | None = parse_job_id(self.job_id)
        except Exception:  # an unrendered or bad id: the facet still names the cluster
            job_id = None
        last = self._watch.last if self._watch is not None else self._last_event_job
        return self.slurm_job_lineage(job_id, last if last is not None and last.job_id == job_id else None)

    @fails_permanently
    def execute_complete(self, context: Context, event: dict[str, Any]) -> None:
        payload = read_event(event)
        if payload["status"] == "error" and payload["permanent"]:
            raise AirflowFailException(permanent_message(redact_text(payload["message"])))
        if payload["status"] in ("success", "failed"):
            self._push_job(context, payload["job"])
        self._last_event_job = event_job(payload)
        if payload["status"] != "success":
            raise AirflowException(redact_text(payload["message"]))
        self.log.info("%s", payload["message"])


def _is_first_poke(context: Context) -> bool:
    """Whether this is the first poke of this try (no reschedule recorded yet)."""
    if "task_reschedule_count" in context:  # Airflow 3
        return not context["task_reschedule_count"]
    from airflow.models.taskreschedule import TaskReschedule  # Airflow 2.11: the metadata database
    from airflow.utils.session import create_session

    with create_session() as session:
        first = TaskReschedule.stmt_for_task_instance(context["ti"]).limit(1)  # type: ignore[arg-type]
        return session.scalar(first) is None
