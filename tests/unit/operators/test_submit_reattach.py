"""Which job a new try of ``SlurmSubmitJobOperator`` takes on: fast, without a server.

A retry (or a restarted worker) first looks for the job an earlier try of the task instance started:
pending or running, it waits on it; completed, it succeeds with its id; ended otherwise (even while
still COMPLETING), it submits a new one. Slurm's side is recorded answers through the hook's HTTP
session (:mod:`tests.unit.recorded_slurm`); the operator's own code runs whole.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from airflow_provider_slurmapi._compat import AirflowException
from airflow_provider_slurmapi.account_store import variable_name
from airflow_provider_slurmapi.operators.slurm import JOB_ID_STATE_KEY, SlurmSubmitJobOperator
from tests.conftest import CLUSTER_ID, PROJECT, REGION
from tests.unit.recorded_slurm import (
    API_VERSION,
    CALLER,
    ENDPOINT,
    LIVE_CANCELLED,
    LIVE_COMPLETED,
    LIVE_FAILED,
    LIVE_RUNNING,
    RecordedSlurm,
    serve,
)
from tests.unit.task_instance import StateStore, TaskInstance, task_context

try:
    from airflow.sdk.exceptions import TaskDeferred
except ImportError:  # Airflow 2.11
    from airflow.exceptions import TaskDeferred  # type: ignore[no-redef,attr-defined]

EARLIER, NEW = 41, 42


def operator(slurm: RecordedSlurm, **kwargs: Any) -> SlurmSubmitJobOperator:
    settings: dict[str, Any] = {
        "task_id": "train",
        "script": "#!/bin/bash\necho hello\n",
        "job": {"partition": "debug", "current_working_directory": "/tmp"},
        "region": REGION,
        "cluster_id": CLUSTER_ID,
        "project_id": PROJECT,
        "api_endpoint": ENDPOINT,
        "api_version": API_VERSION,
        "accounting_wait_seconds": None,
        "poll_interval": 0.01,
        "deferrable": True,
        **kwargs,
    }
    op = SlurmSubmitJobOperator(**settings)
    serve(op.hook, slurm)
    return op


def second_try(store_job: int | None = EARLIER) -> tuple[TaskInstance, StateStore]:
    store = StateStore() if store_job is None else StateStore(**{JOB_ID_STATE_KEY: store_job})
    return TaskInstance(try_number=2), store


def test_a_first_try_looks_for_nothing_and_submits() -> None:
    """The account is kept (conftest: through a secrets backend, the environment): one call, the submit."""
    slurm = RecordedSlurm()
    slurm.accepts_submit(NEW)
    ti, store = TaskInstance(try_number=1), StateStore()
    job_id = operator(slurm, wait_for_completion=False).execute(task_context(ti, store))
    assert job_id == NEW and ti.xcom["slurm_job_id"] == NEW and store.values[JOB_ID_STATE_KEY] == NEW
    assert [(method, path) for method, path, _ in slurm.calls] == [("POST", f"/slurm/{API_VERSION}/job/submit")]


def test_a_deferrable_first_try_defers_straight_after_the_submit() -> None:
    """No look before deferring: the trigger's batched poll makes the first one, so the start costs one call."""
    slurm = RecordedSlurm()
    slurm.accepts_submit(NEW)
    ti, store = TaskInstance(try_number=1), StateStore()
    with pytest.raises(TaskDeferred) as deferred:
        operator(slurm).execute(task_context(ti, store))
    assert [(method, path) for method, path, _ in slurm.calls] == [("POST", f"/slurm/{API_VERSION}/job/submit")]
    assert deferred.value.trigger.job_id == NEW and deferred.value.trigger.last_seen is None
    assert not deferred.value.kwargs  # its own job: never replaced
    assert ti.xcom["slurm_job_id"] == NEW and store.values[JOB_ID_STATE_KEY] == NEW


def test_a_first_submit_with_no_account_known_reads_its_job_once_to_learn_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing configured, nothing kept: the owner of the job whose submit answer was read is our account."""
    monkeypatch.delenv(f"AIRFLOW_VAR_{kept_account_variable().upper()}")
    slurm = RecordedSlurm()
    slurm.accepts_submit(NEW)
    slurm.job(NEW, LIVE_RUNNING, user_name=CALLER)
    op = operator(slurm, wait_for_completion=False)
    assert op.execute(task_context(TaskInstance(try_number=1), StateStore())) == NEW
    assert [(method, path) for method, path, _ in slurm.calls] == [
        ("POST", f"/slurm/{API_VERSION}/job/submit"),
        ("GET", f"/slurm/{API_VERSION}/job/{NEW}"),
    ]
    assert op.hook.caller_user() == CALLER


def kept_account_variable() -> str:
    return variable_name("google_cloud_default", PROJECT, REGION, CLUSTER_ID)


def test_an_earlier_completed_job_is_the_result_and_nothing_is_submitted() -> None:
    slurm = RecordedSlurm()
    slurm.job(EARLIER, LIVE_COMPLETED)
    ti, store = second_try()
    assert operator(slurm).execute(task_context(ti, store)) == EARLIER
    assert slurm.submits() == []
    assert ti.xcom["slurm_job_id"] == EARLIER and ti.xcom["slurm_job"]["state"] == "COMPLETED"


@pytest.mark.parametrize(
    ("fixture", "state"),
    [
        (LIVE_RUNNING, ["RUNNING"]),
        ("28_job_held_pending", ["PENDING"]),
        # Requeued: the job runs again, so a retry waits for it rather than starting a second copy.
        (LIVE_FAILED, ["FAILED", "REQUEUED"]),
    ],
)
def test_an_earlier_job_that_will_still_run_is_adopted_and_the_wait_says_so(fixture: str, state: list[str]) -> None:
    slurm = RecordedSlurm()
    slurm.job(EARLIER, fixture, job_state=state)
    ti, store = second_try()
    with pytest.raises(TaskDeferred) as deferred:
        operator(slurm).execute(task_context(ti, store))
    assert slurm.submits() == []
    assert deferred.value.trigger.job_id == EARLIER and ti.xcom["slurm_job_id"] == EARLIER
    assert deferred.value.kwargs == {"adopted": True}  # so that a cancel of it is answered by a new job
    # The record its lookup read is the trigger's first view: the job is not read again before deferring.
    assert len(slurm.calls) == 1 and deferred.value.trigger.last_seen["job_id"] == EARLIER


def test_an_adopted_job_is_waited_on_without_deferring_too() -> None:
    slurm = RecordedSlurm()
    slurm.job(EARLIER, LIVE_RUNNING)
    ti, store = second_try()
    assert operator(slurm, wait_for_completion=False).execute(task_context(ti, store)) == EARLIER
    assert slurm.submits() == []


@pytest.mark.parametrize(
    ("fixture", "state"),
    [
        (LIVE_FAILED, ["FAILED"]),
        (LIVE_CANCELLED, ["CANCELLED"]),
        (LIVE_RUNNING, ["TIMEOUT"]),
        # Cancelled, its epilog still running: it will not run again, so it is not waited on.
        (LIVE_CANCELLED, ["CANCELLED", "COMPLETING"]),
    ],
)
def test_an_earlier_job_that_ended_otherwise_is_replaced_by_one_new_job(fixture: str, state: list[str]) -> None:
    slurm = RecordedSlurm()
    slurm.job(EARLIER, fixture, job_state=state)
    slurm.accepts_submit(NEW)
    ti, store = second_try()
    assert operator(slurm, wait_for_completion=False).execute(task_context(ti, store)) == NEW
    assert len(slurm.submits()) == 1
    assert ti.xcom["slurm_job_id"] == NEW and store.values[JOB_ID_STATE_KEY] == NEW


def test_reattach_off_submits_even_beside_a_running_earlier_job() -> None:
    slurm = RecordedSlurm()
    slurm.job(EARLIER, LIVE_RUNNING)
    slurm.accepts_submit(NEW)
    ti, store = second_try()
    op = operator(slurm, wait_for_completion=False, reattach_on_restart=False)
    assert op.execute(task_context(ti, store)) == NEW
    assert [method for method, _, _ in slurm.calls] == ["POST"]


def test_a_retry_finds_the_earlier_job_through_its_xcom_without_a_task_state_store() -> None:
    """Before Airflow 3.3 there is no task state store: the earlier try's XCom holds the id."""
    slurm = RecordedSlurm()
    slurm.job(EARLIER, LIVE_COMPLETED)
    ti = TaskInstance(try_number=2, xcom={"slurm_job_id": EARLIER})
    assert operator(slurm).execute(task_context(ti)) == EARLIER
    assert slurm.submits() == []


def test_a_stored_id_that_is_not_a_job_id_is_ignored_and_the_history_is_asked() -> None:
    """A garbled stored id (a store shared with something else) is not trusted: the tag decides."""
    slurm = RecordedSlurm()
    slurm.answer("GET", f"/slurmdb/{API_VERSION}/jobs/", "53_slurmdb_jobs_user_tester", jobs=[])
    slurm.answer("GET", f"/slurm/{API_VERSION}/jobs/", "10_jobs_all_while_A_running", jobs=[])
    slurm.accepts_submit(NEW)
    ti, store = second_try(store_job=None)
    store.set(JOB_ID_STATE_KEY, "not-a-job")
    assert operator(slurm, wait_for_completion=False).execute(task_context(ti, store)) == NEW
    assert [path.split("/")[1:4] for _, path, _ in slurm.calls] == [
        ["slurmdb", API_VERSION, "jobs"],  # the history first (filtered by name and time)
        ["slurm", API_VERSION, "jobs"],  # it holds nothing: the live queue (a job slurmdbd has not recorded yet)
        ["slurm", API_VERSION, "job"],
    ]


def test_an_adopted_job_that_fails_fails_the_task_with_slurms_reason() -> None:
    """Only a cancel of an adopted job is answered with a new job; any other failure is the task's."""
    slurm = RecordedSlurm()
    slurm.job(EARLIER, LIVE_RUNNING)  # what the look for the earlier job sees
    slurm.job(EARLIER, LIVE_FAILED)  # what the wait sees next
    ti, store = second_try()
    with pytest.raises(AirflowException, match="FAILED"):
        operator(slurm, deferrable=False).execute(task_context(ti, store))
    assert slurm.submits() == []


def test_an_adopted_job_cancelled_while_waited_on_is_replaced_once() -> None:
    """Clearing a deferred task cancels its job while the new try may already wait on it: one new job."""
    slurm = RecordedSlurm()
    slurm.job(EARLIER, LIVE_RUNNING)
    slurm.job(EARLIER, LIVE_CANCELLED)
    slurm.accepts_submit(NEW)
    slurm.job(NEW, LIVE_COMPLETED)
    ti, store = second_try()
    assert operator(slurm, deferrable=False).execute(task_context(ti, store)) == NEW
    assert len(slurm.submits()) == 1
    assert ti.xcom["slurm_job_id"] == NEW and store.values[JOB_ID_STATE_KEY] == NEW


def test_a_job_this_try_submitted_that_is_cancelled_fails_the_task() -> None:
    slurm = RecordedSlurm()
    slurm.accepts_submit(NEW)
    slurm.job(NEW, LIVE_CANCELLED)
    with pytest.raises(AirflowException, match="CANCELLED"):
        operator(slurm, deferrable=False).execute(task_context(TaskInstance(), StateStore()))
    assert len(slurm.submits()) == 1


# -- found by its tag: the stored id is gone (no task state store, XCom cleared) -----------------------
def first_try_comment(ti: TaskInstance) -> str:
    """The comment the first try of ``ti`` put on its job, as sent in its submit."""
    slurm = RecordedSlurm()
    slurm.accepts_submit(EARLIER)
    operator(slurm, wait_for_completion=False).execute(task_context(ti, StateStore()))
    (submit,) = slurm.submits()
    return str(submit["job"]["comment"])


def history_with(slurm: RecordedSlurm, *jobs: tuple[int, str, str, str]) -> None:
    """The history (Slurm's recorded list) holding ``(job_id, state, user, comment)`` records, oldest first."""
    body = slurm.answer("GET", f"/slurmdb/{API_VERSION}/jobs/", "53_slurmdb_jobs_user_tester")
    template = body["jobs"][0]
    body["jobs"] = []
    now = int(time.time())
    for job_id, state, user, comment in jobs:
        record = copy.deepcopy(template)
        record.update(job_id=job_id, user=user)
        record["state"]["current"] = [state]
        record["comment"]["job"] = comment
        record["time"]["submission"] = now - 100 + job_id
        body["jobs"].append(record)


def test_a_retry_without_its_stored_id_finds_its_completed_job_by_its_tag() -> None:
    comment = first_try_comment(TaskInstance(try_number=1))
    slurm = RecordedSlurm()
    history_with(slurm, (7, "COMPLETED", "tester", ""), (EARLIER, "COMPLETED", "tester", comment))
    ti = TaskInstance(try_number=2)
    assert operator(slurm).execute(task_context(ti)) == EARLIER
    assert slurm.submits() == []


def test_the_job_of_another_map_index_is_not_this_task_instances() -> None:
    comment = first_try_comment(TaskInstance(try_number=1, map_index=0))
    slurm = RecordedSlurm()
    history_with(slurm, (EARLIER, "COMPLETED", "tester", comment))
    slurm.answer("GET", f"/slurm/{API_VERSION}/jobs/", "10_jobs_all_while_A_running", jobs=[])
    slurm.accepts_submit(NEW)
    ti = TaskInstance(try_number=2, map_index=1)
    assert operator(slurm, wait_for_completion=False).execute(task_context(ti)) == NEW
    assert len(slurm.submits()) == 1


def test_a_completed_job_of_another_user_carrying_a_copy_of_the_tag_is_not_taken() -> None:
    """The tag is visible in the queue: anyone can copy it onto a job of their own, later than ours."""
    comment = first_try_comment(TaskInstance(try_number=1))
    slurm = RecordedSlurm()
    history_with(slurm, (EARLIER, "FAILED", "tester", comment), (EARLIER + 5, "COMPLETED", "mallory", comment))
    slurm.accepts_submit(NEW)
    ti = TaskInstance(try_number=2)
    assert operator(slurm, wait_for_completion=False).execute(task_context(ti)) == NEW
    assert len(slurm.submits()) == 1


def test_a_try_killed_before_it_has_a_job_sends_none() -> None:
    """Airflow 3 runs a task on after on_kill (until its SIGKILL): a kill before the submit is not a
    submit whose job someone must then cancel; no job is sent at all."""
    slurm = RecordedSlurm()
    slurm.accepts_submit(NEW)
    op = operator(slurm, wait_for_completion=False)
    op.on_kill()  # as Airflow's SIGTERM handler calls it, here before the task reached its submit
    with pytest.raises(AirflowException, match="killed before it sent its Slurm job; nothing was submitted"):
        op.execute(task_context(TaskInstance(try_number=1), StateStore()))
    assert slurm.calls == []


def test_a_retry_killed_while_it_looked_cancels_the_earlier_job_it_then_found() -> None:
    """Killed during the lookup, the retry finds the earlier try's running job: killing the task cancels
    its job, so that job is cancelled rather than waited on (a SIGKILL would have left it running)."""
    slurm = RecordedSlurm()
    slurm.job(EARLIER, LIVE_RUNNING)
    slurm.answer("DELETE", f"/slurm/{API_VERSION}/job/{EARLIER}", "19_cancel_running_B")
    op = operator(slurm, wait_for_completion=False)
    op.on_kill()
    with pytest.raises(AirflowException, match=f"killed before it reattached to Slurm job {EARLIER}; its cancel"):
        op.execute(task_context(*second_try()))
    assert slurm.submits() == [] and slurm.cancels() == [f"/slurm/{API_VERSION}/job/{EARLIER}"]
