"""``SlurmJobSensor`` without a server: a poke in reschedule mode, the deferral, the resume.

In reschedule mode every poke is a new process: on Airflow 3.3+ the watch (last state, since when the
job is missing, since when the API is down) goes through the task state store from poke to poke of one
try; without a store, a poke waits out a missing job itself. Slurm's side is recorded answers through
the hook's HTTP session (:mod:`tests.unit.recorded_slurm`); the sensor's own code runs whole.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from airflow_provider_slurmapi._compat import AirflowException, AirflowFailException
from airflow_provider_slurmapi.sensors.slurm import WATCH_STATE_KEY, SlurmJobSensor
from airflow_provider_slurmapi.slurm.api.errors import JobNotFoundError
from airflow_provider_slurmapi.triggers.event import MalformedEventError
from tests.conftest import CLUSTER_ID, PROJECT, REGION
from tests.unit.operators.test_submit_resume import finished
from tests.unit.recorded_slurm import (
    API_VERSION,
    ENDPOINT,
    LIVE_COMPLETED,
    LIVE_FAILED,
    LIVE_RUNNING,
    RecordedSlurm,
    serve,
)
from tests.unit.task_instance import StateStore, TaskInstance, deferral_timeout, task_context

try:
    from airflow.sdk.exceptions import TaskDeferred
except ImportError:  # Airflow 2.11
    from airflow.exceptions import TaskDeferred  # type: ignore[no-redef,attr-defined]

JOB = 77
GRACE = 0.3


def sensor(slurm: RecordedSlurm, **kwargs: Any) -> SlurmJobSensor:
    """A new sensor, as each poke of a rescheduled sensor is a new process."""
    settings: dict[str, Any] = {
        "task_id": "wait",
        "job_id": str(JOB),  # as a template renders it
        "region": REGION,
        "cluster_id": CLUSTER_ID,
        "project_id": PROJECT,
        "api_endpoint": ENDPOINT,
        "api_version": API_VERSION,
        "accounting_wait_seconds": None,
        "poke_interval": 0.05,
        "timeout": 60,
        "mode": "reschedule",
        "missing_grace_seconds": GRACE,
        **kwargs,
    }
    task = SlurmJobSensor(**settings)
    serve(task.hook, slurm)
    return task


def poke(slurm: RecordedSlurm, ti: TaskInstance, store: StateStore | None, pokes_before: int, **kwargs: Any) -> bool:
    return sensor(slurm, **kwargs).poke(task_context(ti, store, task_reschedule_count=pokes_before))


def test_a_poke_saves_the_watch_for_the_next_poke_of_the_same_try() -> None:
    slurm = RecordedSlurm()
    slurm.job(JOB, LIVE_RUNNING)
    ti, store = TaskInstance(try_number=3), StateStore()
    assert poke(slurm, ti, store, 0) is False
    saved = store.values[WATCH_STATE_KEY]
    assert saved["try_number"] == 3 and saved["watch"]["job_id"] == JOB
    assert saved["watch"]["last"]["state"] == "RUNNING"


def test_a_missing_job_runs_out_its_grace_across_pokes_of_one_try_only() -> None:
    """The grace counts from the first poke that missed the job, not from each poke."""
    slurm = RecordedSlurm()
    slurm.unknown_job(JOB)
    ti, store = TaskInstance(try_number=1), StateStore()
    assert poke(slurm, ti, store, 0) is False  # with a store, a poke does not wait: the next one looks again
    time.sleep(GRACE + 0.1)  # the scenario: the grace (0.3 s of the watch's clock) runs out between two pokes
    saved = dict(store.values)

    with pytest.raises(JobNotFoundError, match="neither the live queue nor the accounting history"):
        poke(slurm, ti, store, 1)

    # A new try starts its own watch: the earlier try's missing time does not count.
    store.values = saved
    assert poke(slurm, TaskInstance(try_number=2), store, 0) is False


def test_without_a_task_state_store_a_poke_waits_out_a_missing_job_itself() -> None:
    """Before Airflow 3.3 nothing outlives a poke: it waits for the job here, up to the grace."""
    slurm = RecordedSlurm()
    slurm.unknown_job(JOB)
    with pytest.raises(JobNotFoundError):
        poke(slurm, TaskInstance(), None, 2)
    looks = len(slurm.calls) // 2  # each look asks the live queue, then the history
    assert looks >= 2, slurm.calls  # it looked again within this one poke


def test_a_poke_of_a_finished_job_ends_the_wait_with_its_record() -> None:
    slurm = RecordedSlurm()
    slurm.job(JOB, LIVE_COMPLETED)
    ti = TaskInstance()
    assert poke(slurm, ti, StateStore(), 0) is True
    assert ti.xcom["slurm_job"]["job_id"] == JOB and ti.xcom["slurm_job"]["accounting"] is None

    slurm = RecordedSlurm()
    slurm.job(JOB, LIVE_FAILED)
    ti = TaskInstance()
    with pytest.raises(AirflowException, match="exit code 3"):
        poke(slurm, ti, StateStore(), 0)
    assert ti.xcom["slurm_job"]["state"] == "FAILED"


def test_deferrable_defers_with_the_state_it_saw_or_ends_at_once() -> None:
    slurm = RecordedSlurm()
    slurm.job(JOB, LIVE_RUNNING)
    with pytest.raises(TaskDeferred) as deferred:
        sensor(slurm, deferrable=True, mode="poke").execute(task_context(TaskInstance()))
    trigger = deferred.value.trigger
    assert trigger.job_id == JOB and trigger.last_seen["state"] == "RUNNING"  # the trigger's first line is a change

    slurm = RecordedSlurm()
    slurm.job(JOB, LIVE_COMPLETED)
    ti = TaskInstance()
    assert sensor(slurm, deferrable=True, mode="poke").execute(task_context(ti)) is None
    assert ti.xcom["slurm_job"]["state"] == "COMPLETED"


def test_a_deferral_timeout_cancels_the_job_with_cancel_on_kill() -> None:
    """Airflow resumes a timed-out deferred task only to fail it: the job must not run on."""
    slurm = RecordedSlurm()
    slurm.answer("DELETE", f"/slurm/{API_VERSION}/job/{JOB}", "19_cancel_running_B")
    with pytest.raises(Exception, match=r"(?i)timeout"):
        sensor(slurm, cancel_on_kill=True).resume_execution(*deferral_timeout(), task_context(TaskInstance()))
    assert slurm.cancels() == [f"/slurm/{API_VERSION}/job/{JOB}"]

    slurm = RecordedSlurm()  # off by default: a sensor watches a job it did not start
    with pytest.raises(Exception, match=r"(?i)timeout"):
        sensor(slurm).resume_execution(*deferral_timeout(), task_context(TaskInstance()))
    assert slurm.calls == []


# -- execute_complete ---------------------------------------------------------------------------------
def test_resumed_on_success_the_sensor_pushes_the_job_and_succeeds() -> None:
    ti = TaskInstance()
    assert sensor(RecordedSlurm()).execute_complete(task_context(ti), finished(LIVE_COMPLETED, JOB)) is None
    assert ti.xcom["slurm_job"]["state"] == "COMPLETED"


def test_resumed_on_a_failed_job_the_sensor_pushes_it_and_fails_with_slurms_reason() -> None:
    ti = TaskInstance()
    with pytest.raises(AirflowException, match="exit code 3"):
        sensor(RecordedSlurm()).execute_complete(task_context(ti), finished(LIVE_FAILED, JOB))
    assert ti.xcom["slurm_job"]["state"] == "FAILED"


@pytest.mark.parametrize("permanent", [True, False])
def test_resumed_on_an_error_the_sensor_fails_retrying_only_what_a_retry_can_fix(permanent: bool) -> None:
    ti = TaskInstance()
    event = {"status": "error", "job_id": JOB, "message": "watch failed", "permanent": permanent}
    with pytest.raises(AirflowException, match="watch failed") as failure:
        sensor(RecordedSlurm()).execute_complete(task_context(ti), event)
    assert isinstance(failure.value, AirflowFailException) is permanent
    assert "slurm_job" not in ti.xcom


def test_resumed_on_a_timeout_the_sensor_fails_without_pushing_a_job() -> None:
    ti = TaskInstance()
    event = {"status": "timeout", "job_id": JOB, "message": "timeout passed", "job": finished(LIVE_RUNNING, JOB)["job"]}
    with pytest.raises(AirflowException, match="timeout passed"):
        sensor(RecordedSlurm()).execute_complete(task_context(ti), event)
    assert "slurm_job" not in ti.xcom


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"job_id": JOB, "message": "m"}, "status"),
        ({"status": "finished", "job_id": JOB, "message": "m"}, "status"),
        ({"status": "success", "message": "m"}, "job_id"),
        ({"status": "success", "job_id": JOB, "message": "m"}, "job"),
        ({"status": "failed", "job_id": JOB, "message": "m", "job": "FAILED"}, "job"),
        ({"status": "error", "job_id": JOB, "message": None, "permanent": True}, "message"),
        ("success", "event"),
    ],
)
def test_resumed_by_an_event_the_trigger_would_not_send_the_sensor_names_the_field(event: Any, field: str) -> None:
    ti = TaskInstance()
    with pytest.raises(MalformedEventError, match="not one SlurmJobTrigger sends") as refused:
        sensor(RecordedSlurm()).execute_complete(task_context(ti), event)
    assert refused.value.field == field
    assert "slurm_job" not in ti.xcom


class _Outage(RecordedSlurm):
    """The Slurm Job API does not answer at all: every call meets a refused connection."""

    def send(self, request: Any, **kwargs: Any) -> Any:
        import requests

        self.calls.append(("GET", str(request.url), None))
        raise requests.ConnectionError("connection refused")


def test_without_a_task_state_store_a_poke_gives_its_slot_back_during_an_outage() -> None:
    """Before Airflow 3.3 a rescheduled poke does not sleep through an outage: it returns False at once
    (the next poke looks again), and the job is neither failed nor cancelled."""
    slurm = _Outage()
    task = sensor(slurm, outage_tolerance_seconds=0.5)
    task.hook.client.retry_seconds = 0  # no retry inside the call: the outage reaches the poke at once
    assert task.poke(task_context(TaskInstance(), None, task_reschedule_count=3)) is False
    assert len(slurm.calls) == 1, slurm.calls
