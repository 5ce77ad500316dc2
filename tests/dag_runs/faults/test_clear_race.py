"""A new try and the cancel of an earlier try's job cross: the new try must still end with one job of its own.

Clearing a deferred task on Airflow 3.3+ cancels its job from the triggerer while the scheduler already
starts the new try. The new try can find that job cancelled but still completing, or still running and
cancelled a moment later. These tests drive the operator as Airflow would (a task instance at try 2
whose task state store holds the earlier try's job id) against the emulator, and cancel at those instants.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
from airflow_provider_slurmapi.operators.slurm import JOB_ID_STATE_KEY, SlurmSubmitJobOperator
from tests.conftest import CLUSTER
from tests.waiting import wait_until

# Ignores SIGTERM, so a cancel leaves it CANCELLED+COMPLETING until the emulator's KillWait SIGKILL.
STUBBORN = "#!/bin/bash\ntrap '' TERM\nsleep 60\n"
LONG = "#!/bin/bash\nsleep 60\n"
SHORT = "#!/bin/bash\nsleep 0.5\n"


class Store:
    """The two methods of Airflow 3.3's task state store that the operator calls."""

    def __init__(self, **values: Any) -> None:
        self.values = dict(values)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


@pytest.fixture(autouse=True)
def configured_tag_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests call the operator outside an Airflow task, where no Variable store answers."""
    monkeypatch.setenv("AIRFLOW__SLURMAPI__TAG_SECRET", "slurmapi-clear-race-tag-key-of-at-least-32-chars")


class SecondTry:
    """The task instance attributes and XCom calls the operator uses, at try 2."""

    dag_id, task_id, run_id, map_index, try_number = "clear_race", "job", "manual__clear", -1, 2
    stats_tags: dict[str, str] = {}  # read by Airflow 3.3's ResumableJobMixin

    def __init__(self) -> None:
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value

    def xcom_pull(self, **kwargs: Any) -> Any:
        return self.xcom.get(kwargs["key"])


def earlier_job(emulator: Any, script: str) -> int:
    job = {"name": "clear_race.job", "current_working_directory": str(emulator.config.workdir)}
    job_id = SlurmApiHook(**CLUSTER).submit_job(job, script).job_id
    emulator.wait_for_state(job_id, ["RUNNING"], timeout=20)
    return job_id


def operator(**kwargs: Any) -> SlurmSubmitJobOperator:
    settings: dict[str, Any] = {"script": SHORT, "poll_interval": 0.2, "deferrable": False, "report_output": False}
    return SlurmSubmitJobOperator(task_id="job", **CLUSTER, **{**settings, **kwargs})


def test_an_earlier_job_cancelled_but_still_completing_is_not_reattached(gcp_connection: Any) -> None:
    first = earlier_job(gcp_connection, STUBBORN)
    hook = SlurmApiHook(**CLUSTER)
    hook.cancel_job(first)
    seen = hook.get_job(first)
    assert seen is not None and str(seen.state_info) == "CANCELLED+COMPLETING", seen

    ti, store = SecondTry(), Store(**{JOB_ID_STATE_KEY: first})
    second = operator(wait_for_completion=False).execute({"ti": ti, "task_state_store": store})

    assert second != first
    assert ti.xcom["slurm_job_id"] == second and store.values[JOB_ID_STATE_KEY] == second
    assert [j["job_id"] for j in gcp_connection.jobs()] == [first, second]


def test_a_reattached_job_cancelled_for_the_earlier_try_is_replaced_by_one_new_job(gcp_connection: Any) -> None:
    first = earlier_job(gcp_connection, LONG)
    ti, store = SecondTry(), Store(**{JOB_ID_STATE_KEY: first})
    cancelled: list[int] = []

    def cancel_once_reattached() -> None:  # the triggerer's cancel of the earlier try lands now
        # Either outcome of the race is valid: reattached (then cancelled) or not.
        wait_until(lambda: ti.xcom.get("slurm_job_id") == first, "the reattach", timeout=20, give_up=True)
        if ti.xcom.get("slurm_job_id") == first:  # reattached: pushed the earlier try's id
            SlurmApiHook(**CLUSTER).cancel_job(first)
            cancelled.append(first)

    # The operator runs in this thread (Airflow 2.11 refuses an execute() called from another thread).
    canceller = threading.Thread(target=cancel_once_reattached)
    canceller.start()
    try:
        second = operator().execute({"ti": ti, "task_state_store": store})
    finally:
        canceller.join(timeout=30)

    assert cancelled == [first]
    jobs = {j["job_id"]: j["state"] for j in gcp_connection.jobs()}
    assert len(jobs) == 2 and jobs[first] == "CANCELLED", jobs
    assert second != first and jobs[second] == "COMPLETED", jobs
    assert store.values[JOB_ID_STATE_KEY] == second and ti.xcom["slurm_job_id"] == second


def test_a_deferred_reattach_carries_its_origin_to_the_resumed_task(gcp_connection: Any) -> None:
    """Deferrable: the reattached try defers with ``adopted``; resumed with that job cancelled, it submits anew."""
    try:
        from airflow.sdk.exceptions import TaskDeferred
    except ImportError:  # Airflow 2.11
        from airflow.exceptions import TaskDeferred  # type: ignore[no-redef]

    first = earlier_job(gcp_connection, LONG)
    ti, store = SecondTry(), Store(**{JOB_ID_STATE_KEY: first})
    with pytest.raises(TaskDeferred) as deferred:
        operator(deferrable=True).execute({"ti": ti, "task_state_store": store})
    assert deferred.value.kwargs == {"adopted": True}

    hook = SlurmApiHook(**CLUSTER)
    hook.cancel_job(first)
    gcp_connection.wait_for_state(first, ["CANCELLED"], timeout=20)
    # The trigger fires only once the job is over: not while its epilog still runs (CANCELLED+COMPLETING).

    def finished() -> Any:
        job = hook.get_job(first)
        assert job is not None, f"job {first} is gone"
        return job if job.is_finished else None

    cancelled = wait_until(finished, "the cancelled job finished", timeout=20, every=0.1)
    assert cancelled is not None and cancelled.is_finished, cancelled
    event = {"status": "failed", "job_id": first, "message": cancelled.failure_message(), "job": cancelled.to_dict()}
    with pytest.raises(TaskDeferred) as again:
        operator(deferrable=True).execute_complete(
            {"ti": ti, "task_state_store": store}, event, **deferred.value.kwargs
        )
    second = store.values[JOB_ID_STATE_KEY]
    assert second != first and again.value.trigger.job_id == second and not again.value.kwargs


def test_a_job_this_try_submitted_and_someone_cancelled_fails_the_task(gcp_connection: Any) -> None:
    """Only a job adopted from an earlier try is replaced; this try's own job, cancelled, fails the task."""
    from airflow_provider_slurmapi._compat import AirflowException

    first = earlier_job(gcp_connection, LONG)
    SlurmApiHook(**CLUSTER).cancel_job(first)
    gcp_connection.wait_for_state(first, ["CANCELLED"], timeout=20)
    cancelled = SlurmApiHook(**CLUSTER).get_job(first)
    assert cancelled is not None
    event = {"status": "failed", "job_id": first, "message": cancelled.failure_message(), "job": cancelled.to_dict()}
    with pytest.raises(AirflowException, match="CANCELLED"):
        operator(deferrable=True).execute_complete({"ti": SecondTry(), "task_state_store": Store()}, event)
    assert [j["job_id"] for j in gcp_connection.jobs()] == [first]
