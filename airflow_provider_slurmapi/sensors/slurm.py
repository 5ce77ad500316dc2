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

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_slurmapi._compat import (
    AirflowException,
    AirflowFailException,
    BaseSensorOperator,
    redact_text,
)
from airflow_provider_slurmapi.operators.base import (
    SlurmWatchingBaseOperator,
    fails_permanently,
    parse_job_id,
    permanent_message,
)
from airflow_provider_slurmapi.slurm.api.cluster import CLUSTER_TEMPLATE_FIELDS
from airflow_provider_slurmapi.slurm.jobs.watch import JobWatch
from airflow_provider_slurmapi.triggers.event import event_job, read_event

if TYPE_CHECKING:
    from airflow_provider_slurmapi._compat import Context
    from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob

# task_state_store key of the watch of a rescheduled sensor (Airflow 3.3+).
WATCH_STATE_KEY = "slurm_job_watch"


class SlurmJobSensor(SlurmWatchingBaseOperator, BaseSensorOperator):
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

    def __init__(self, *, job_id: int | str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job_id = job_id
        self._watch: JobWatch | None = None
        self._last_event_job: SlurmJob | None = None

    @fails_permanently
    def execute(self, context: Context) -> Any:
        self.check_cluster_args()
        parse_job_id(self.job_id)
        if not self.deferrable:
            return super().execute(context)
        if self.poke(context):
            return None
        last = self._watch.last if self._watch is not None else None
        timeout = timedelta(seconds=self.timeout) if self.timeout else None
        self._defer_wait(parse_job_id(self.job_id), last, poll_interval=self.poke_interval, timeout=timeout)

    def poke(self, context: Context) -> bool:
        job_id = parse_job_id(self.job_id)
        store = context.get("task_state_store") if self.reschedule else None
        fresh = self._watch is None or self._watch.job_id != job_id
        try_number = getattr(context["ti"], "try_number", None)
        if store is not None:  # a watch saved by an earlier poke of this try (not of an earlier try)
            saved = store.get(WATCH_STATE_KEY)
            same_try = isinstance(saved, dict) and saved.get("try_number") == try_number
            earlier = saved.get("watch") if same_try and isinstance(saved, dict) else None
            self._watch = self._new_watch(job_id, saved=earlier)
        elif fresh:
            self._watch = self._new_watch(job_id)
        watch = self._watch
        assert watch is not None
        # Before Airflow 3.3 a rescheduled poke cannot keep its watch: it says the state on the first
        # poke only, and waits out a missing job here, where the grace can end the wait.
        forgetful = self.reschedule and store is None
        plan = self._watch_plan(
            watch,
            self.poke_interval,
            pause=lambda step, outage: not (forgetful and step.job is None and outage is None),
            quiet_first=forgetful and not _is_first_poke(context),
            log_outage=not forgetful,
        )
        end = self._follow(plan)
        step = end.step
        assert step is not None
        if forgetful and end.outage is not None:
            self.log.warning(
                "The Slurm Job API did not answer while watching Slurm job %s (%s); the job runs on. This poke "
                "gives its slot back and the next one looks again (the sensor's timeout of %ss bounds the outage).",
                job_id,
                end.outage,
                self.timeout,
            )
            return False
        if store is not None:
            store.set(WATCH_STATE_KEY, {"try_number": try_number, "watch": watch.snapshot()})
        if not step.finished or step.job is None:
            return False
        self._push_finished(context, job_id, step.job.to_dict())
        if not step.job.succeeded:
            raise AirflowException(redact_text(step.job.failure_message()))
        return True

    def _deferred_job_id(self, context: Context) -> int | None:
        return parse_job_id(self.job_id)

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
            self._push_finished(context, parse_job_id(self.job_id), payload["job"])
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
