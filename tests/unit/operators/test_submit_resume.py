"""``SlurmSubmitJobOperator.execute_complete``: what the task does with each event of the trigger,
and a clear error, naming the field, for an event the trigger would not send. Fast, without a server."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_slurmapi._compat import AirflowException, AirflowFailException
from airflow_provider_slurmapi.operators.slurm import JOB_ID_STATE_KEY
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob
from airflow_provider_slurmapi.triggers.event import MalformedEventError
from tests.unit.operators.test_submit_reattach import EARLIER, NEW, operator
from tests.unit.recorded_slurm import API_VERSION, LIVE_CANCELLED, LIVE_COMPLETED, LIVE_FAILED, RecordedSlurm
from tests.unit.task_instance import StateStore, TaskInstance, deferral_timeout, task_context

try:
    from airflow.sdk.exceptions import TaskDeferred
except ImportError:  # Airflow 2.11
    from airflow.exceptions import TaskDeferred  # type: ignore[no-redef,attr-defined]


def recorded_job(fixture: str, job_id: int = EARLIER, **fields: Any) -> dict[str, Any]:
    """A job as the trigger puts it in its event: Slurm's recorded record, read by our reader."""
    from airflow_provider_slurmapi.slurm.jobs.readers import read_live_job
    from tests.unit.recorded_slurm import answer_of

    job = read_live_job(answer_of(fixture, f"/slurm/{API_VERSION}/job/{job_id}", job_id=job_id, **fields))
    assert isinstance(job, SlurmJob)
    return job.to_dict()


def finished(fixture: str, job_id: int = EARLIER, **fields: Any) -> dict[str, Any]:
    job = SlurmJob.from_dict(recorded_job(fixture, job_id, **fields))
    status = "success" if job.succeeded else "failed"
    message = f"Slurm job {job_id}: {job.describe()}" if job.succeeded else job.failure_message()
    return {"status": status, "job_id": job_id, "message": message, "job": job.to_dict()}


def test_a_completed_job_succeeds_with_its_id_and_record_in_xcom() -> None:
    ti = TaskInstance()
    assert operator(RecordedSlurm()).execute_complete(task_context(ti), finished(LIVE_COMPLETED)) == EARLIER
    assert ti.xcom["slurm_job"]["job_id"] == EARLIER and ti.xcom["slurm_job"]["state"] == "COMPLETED"
    assert ti.xcom["slurm_job"]["accounting"] is None  # accounting_wait_seconds=None: not asked for


def test_a_failed_job_fails_the_task_with_slurms_reason_and_keeps_its_record() -> None:
    ti = TaskInstance()
    with pytest.raises(AirflowException, match="exit code 3") as failure:
        operator(RecordedSlurm()).execute_complete(task_context(ti), finished(LIVE_FAILED))
    assert not isinstance(failure.value, AirflowFailException)  # a retry may succeed
    assert ti.xcom["slurm_job"]["state"] == "FAILED"


def test_an_adopted_job_found_cancelled_on_resume_is_replaced_and_the_new_job_waited_on() -> None:
    slurm = RecordedSlurm()
    slurm.accepts_submit(NEW)
    slurm.job(NEW, "09_job_A_running")
    ti, store = TaskInstance(try_number=2), StateStore(**{JOB_ID_STATE_KEY: EARLIER})
    with pytest.raises(TaskDeferred) as deferred:
        operator(slurm).execute_complete(task_context(ti, store), finished(LIVE_CANCELLED), adopted=True)
    assert len(slurm.submits()) == 1 and store.values[JOB_ID_STATE_KEY] == NEW
    assert deferred.value.trigger.job_id == NEW and not deferred.value.kwargs  # its own job: never replaced


def test_a_cancelled_job_this_try_submitted_fails_the_task() -> None:
    slurm = RecordedSlurm()
    with pytest.raises(AirflowException, match="CANCELLED"):
        operator(slurm).execute_complete(task_context(TaskInstance()), finished(LIVE_CANCELLED))
    assert slurm.calls == []


def test_a_permanent_watch_error_fails_without_retries_and_a_transient_one_with() -> None:
    op = operator(RecordedSlurm())
    event = {"status": "error", "job_id": EARLIER, "message": "PERMISSION_DENIED", "permanent": True}
    with pytest.raises(AirflowFailException, match="Not retried"):
        op.execute_complete(task_context(TaskInstance()), event)
    event = {**event, "message": "UNAVAILABLE for an hour", "permanent": False}
    with pytest.raises(AirflowException, match="UNAVAILABLE for an hour") as failure:
        op.execute_complete(task_context(TaskInstance()), event)
    assert not isinstance(failure.value, AirflowFailException)


def test_a_timeout_fails_the_task_and_a_kill_then_cancels_nothing_more() -> None:
    """The trigger has cancelled the job at the deadline: on_kill must not send a second cancel."""
    slurm = RecordedSlurm()
    op = operator(slurm)
    event = {"status": "timeout", "job_id": EARLIER, "message": "the task's timeout passed", "job": None}
    with pytest.raises(AirflowException, match="timeout passed"):
        op.execute_complete(task_context(TaskInstance()), event)
    op.on_kill()
    assert slurm.calls == []


def test_a_deferral_timeout_cancels_the_job_the_task_submitted() -> None:
    """Airflow resumes a timed-out deferred task only to fail it (no on_kill): the job must not run on."""
    slurm = RecordedSlurm()
    slurm.answer("DELETE", f"/slurm/{API_VERSION}/job/{EARLIER}", "19_cancel_running_B")
    ti = TaskInstance(xcom={"slurm_job_id": EARLIER})
    with pytest.raises(Exception, match=r"(?i)timeout"):
        operator(slurm).resume_execution(*deferral_timeout(), task_context(ti))
    assert slurm.cancels() == [f"/slurm/{API_VERSION}/job/{EARLIER}"]

    slurm = RecordedSlurm()  # cancel_on_kill=False: the job is left running
    with pytest.raises(Exception, match=r"(?i)timeout"):
        operator(slurm, cancel_on_kill=False).resume_execution(*deferral_timeout(), task_context(ti))
    assert slurm.calls == []


GOOD = {"status": "success", "job_id": EARLIER, "message": "done"}


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({k: v for k, v in GOOD.items() if k != "job_id"}, "job_id"),
        ({**GOOD, "job_id": "41"}, "job_id"),
        ({**GOOD, "job_id": True}, "job_id"),
        ({**GOOD, "job_id": -1}, "job_id"),
        ({k: v for k, v in GOOD.items() if k != "status"}, "status"),
        ({**GOOD, "status": "done"}, "status"),
        ({**GOOD, "status": None}, "status"),
        ({**GOOD, "message": 7}, "message"),
        (GOOD, "job"),  # a finished event without its job
        ({**GOOD, "job": {"job_id": EARLIER, "state": 5}}, "job.state"),
        ({"status": "error", "job_id": EARLIER, "message": "x"}, "permanent"),
        ({"status": "error", "job_id": EARLIER, "message": "x", "permanent": "no"}, "permanent"),
        ({"status": "timeout", "job_id": EARLIER, "message": "x", "job": []}, "job"),
        (["success", EARLIER], "event"),
        (None, "event"),
    ],
)
def test_an_event_the_trigger_would_not_send_is_refused_naming_the_field(event: Any, field: str) -> None:
    slurm = RecordedSlurm()
    with pytest.raises(MalformedEventError, match="not one SlurmJobTrigger sends") as refused:
        operator(slurm).execute_complete(task_context(TaskInstance()), event)
    assert refused.value.field == field and f"{field} " in str(refused.value)
    assert "same airflow-provider-slurmapi version" in str(refused.value)  # the fix
    assert slurm.calls == []  # nothing was submitted or cancelled on its word
