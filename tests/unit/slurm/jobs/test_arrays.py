"""Job arrays in the Airflow-free core: reading array records, the array view, and one watch of an array.

The records are shaped like Slurm 24.11's answers for an array ``0-3%2`` (job/{id}, slurmdb/job/{id},
jobs/state), as the lab gave them: a meta record for waiting tasks, one record per started task, the
last task taking over the array's own id.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_slurmapi.slurm.api.envelope import SlurmResponse
from airflow_provider_slurmapi.slurm.jobs.array import ArrayView, parse_state_entry_id, parse_task_ids
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob
from airflow_provider_slurmapi.slurm.jobs.readers import (
    CancelOutcome,
    read_array_task_states,
    read_cancel,
    read_history_job,
    read_job_states,
    read_jobs_by_id,
    read_live_job,
)
from airflow_provider_slurmapi.slurm.jobs.watch import JobWatch

A = 8902  # the array's id


def num(n: int | None) -> dict[str, Any]:
    return {"set": n is not None, "infinite": False, "number": n or 0}


def live(job_id: int, task: int | None, state: str, *, pending: str = "", reason: str = "None", rc: int = 0) -> Any:
    return {
        "job_id": job_id,
        "name": "train",
        "array_job_id": num(A),
        "array_task_id": num(task),
        "array_max_tasks": num(2),
        "array_task_string": pending,
        "job_state": [state],
        "state_reason": reason,
        "exit_code": {"status": ["SUCCESS" if rc == 0 else "ERROR"], "return_code": num(rc), "signal": {}},
        "standard_output": f"/tmp/train-{A}_{task if task is not None else 4294967294}.out",
    }


def history(job_id: int, task: int | None, state: str, *, bitmap: str = "", rc: int = 0) -> Any:
    return {
        "job_id": job_id,
        "name": "train",
        "array": {"job_id": A, "limits": {"max": {"running": {"tasks": 2}}}, "task_id": num(task), "task": bitmap},
        "state": {"current": [state], "reason": "None"},
        "exit_code": {"status": ["SUCCESS"], "return_code": num(rc), "signal": {}},
        "time": {"submission": 1, "start": 2, "end": 3},
    }


def response(path: str, jobs: list[Any], status: int = 200) -> SlurmResponse:
    return SlurmResponse(method="GET", path=path, status=status, body={"jobs": jobs, "errors": [], "warnings": []})


def live_answer(*jobs: Any) -> SlurmJob:
    job = read_live_job(response(f"/slurm/v0.0.42/job/{A}", list(jobs)))
    assert job is not None
    return job


# -- reading -----------------------------------------------------------------------------------------------
def test_meta_record_stands_for_every_waiting_task() -> None:
    job = live_answer(live(A, None, "PENDING", pending="0-3%2"))
    assert job.array is not None and sorted(job.array.tasks) == [0, 1, 2, 3]
    assert job.describe() == f"array {A}: 4 PENDING" and job.state.value == "PENDING" and not job.is_finished


def test_started_tasks_and_meta_give_the_counts() -> None:
    job = live_answer(
        live(A, None, "PENDING", pending="2-3%2", reason="JobArrayTaskLimit"),
        live(8904, 1, "RUNNING"),
        live(8903, 0, "COMPLETED"),
    )
    assert job.describe() == f"array {A}: 1 COMPLETED, 1 RUNNING, 2 PENDING"
    assert job.state.value == "RUNNING" and job.reason == "JobArrayTaskLimit" and job.array is not None
    assert job.array.tasks[1].job_id == 8904 and job.array.tasks[2].job_id is None


def test_a_task_asked_by_its_own_id_is_a_plain_job() -> None:
    job = read_live_job(response("/slurm/v0.0.42/job/8904", [live(8904, 1, "RUNNING")]))
    assert job is not None and job.array is None and job.job_id == 8904 and job.array_job_id == A


def test_failed_task_is_named_with_reason_and_exit_code() -> None:
    job = live_answer(
        live(A, 3, "COMPLETED"),
        live(8905, 2, "FAILED", reason="NonZeroExitCode", rc=3),
        live(8904, 1, "COMPLETED"),
        live(8903, 0, "COMPLETED"),
    )
    assert job.is_finished and not job.succeeded and job.state.value == "FAILED"
    message = job.failure_message()
    assert "1 of 4 tasks did not complete (task ids 2)" in message
    assert "task 2 (job 8905) FAILED, reason NonZeroExitCode, exit code 3" in message
    array = job.to_dict()["array"]
    assert array["failed_task_ids"] == [2] and array["counts"] == {"COMPLETED": 3, "FAILED": 1}
    assert [(t["task_id"], t["job_id"], t["state"], t["exit_code"]) for t in array["tasks"]] == [
        (0, 8903, "COMPLETED", 0),
        (1, 8904, "COMPLETED", 0),
        (2, 8905, "FAILED", 3),
        (3, A, "COMPLETED", 0),
    ]
    again = SlurmJob.from_dict(job.to_dict())  # through XCom / a trigger event and back
    assert again.array == job.array and again.failure_message() == message


def test_history_bitmap_and_tasks() -> None:
    answer = response(
        f"/slurmdb/v0.0.42/job/{A}", [history(A, None, "PENDING", bitmap="0xC"), history(8903, 0, "COMPLETED")]
    )
    job = read_history_job(answer)
    assert job is not None and job.describe() == f"array {A}: 1 COMPLETED, 2 PENDING"


def test_other_arrays_records_do_not_count() -> None:
    stranger = dict(live(9999, 0, "FAILED", rc=1), array_job_id=num(9990))
    job = live_answer(live(A, None, "PENDING", pending="0-1"), stranger)
    assert job.describe() == f"array {A}: 2 PENDING"


def test_jobs_state_task_entries() -> None:
    answer = response(
        "/slurm/v0.0.42/jobs/state/",
        [
            {"job_id": "8904_1", "state": ["RUNNING"]},
            {"job_id": f"{A}_2", "state": ["PENDING"]},
            {"job_id": "77", "state": ["RUNNING"]},
            {"job_id": "8904_x", "state": ["RUNNING"]},
        ],
    )
    assert [(j, t, s.state.value) for j, t, s in read_array_task_states(answer)] == [
        (8904, 1, "RUNNING"),
        (A, 2, "PENDING"),
    ]
    assert list(read_job_states(answer)) == [77]  # task entries are not plain jobs


def test_jobs_list_gives_the_whole_array() -> None:
    answer = response("/slurm/v0.0.42/jobs/", [live(A, None, "PENDING", pending="1-3"), live(8903, 0, "RUNNING")])
    found = read_jobs_by_id(answer, [A])
    assert found[A].describe() == f"array {A}: 1 RUNNING, 3 PENDING"


def test_cancel_of_an_array_with_an_ended_task_is_a_cancel() -> None:
    """Slurm lists each task that had already ended (2021, step_id ``A_0``); the rest were cancelled."""
    text = "Job/step already completing or completed"
    item = {"error": {"string": text, "code": 2021, "message": text}, "step_id": f"{A}_0", "job_id": num(8903)}
    answer = SlurmResponse(method="DELETE", path=f"/slurm/v0.0.42/job/{A}", status=200, body={"status": [item]})
    assert read_cancel(answer) is CancelOutcome.CANCELLED


@pytest.mark.parametrize(
    ("text", "ids"),
    [("0-3%2", [0, 1, 2, 3]), ("0xC", [2, 3]), ("0-8:4", [0, 4, 8]), ("1,5-6", [1, 5, 6]), ("a-b", []), ("", [])],
)
def test_task_id_strings(text: str, ids: list[int]) -> None:
    assert parse_task_ids(text) == ids


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(0, 200), min_size=1, max_size=40))
def test_task_strings_of_the_emulator_read_back(ids: set[int]) -> None:
    """What the emulator writes as a meta record's ``array_task_string`` and history bitmap reads back."""
    from types import SimpleNamespace

    from slurmapi_emulator.job_fields import task_string

    meta = SimpleNamespace(is_array_meta=True, array_pending=sorted(ids), array_throttle=3)
    assert parse_task_ids(task_string(meta)) == sorted(ids)  # type: ignore[arg-type]
    assert parse_task_ids(hex(sum(1 << i for i in ids))) == sorted(ids)


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [("12", (12, None)), ("12_3", (12, 3)), (12, (12, None)), ("0_1", None), ("x_1", None), ("1_", None), (None, None)],
)
def test_state_entry_ids(raw: object, parsed: object) -> None:
    assert parse_state_entry_id(raw) == parsed


# -- one watch of an array ----------------------------------------------------------------------------------
def test_watch_logs_counts_as_they_change_and_keeps_tasks_that_left_the_queue() -> None:
    watch = JobWatch(A)
    first = watch.observe(live_answer(live(A, None, "PENDING", pending="0-3%2")))
    assert first.message == f"array {A}: 4 PENDING; stdout: /tmp/train-{A}_%a.out, stderr: /tmp/train-{A}_%a.out"
    same = watch.observe(live_answer(live(A, None, "PENDING", pending="0-3%2")))
    assert same.message is None and not same.finished
    step = watch.observe(
        live_answer(
            live(A, 3, "RUNNING"), live(8905, 2, "RUNNING"), live(8903, 0, "COMPLETED"), live(8904, 1, "COMPLETED")
        )
    )
    assert step.message == f"array {A}: 2 COMPLETED, 2 RUNNING"
    # Tasks 0 and 1 have left the live queue (MinJobAge): the watch still counts them.
    step = watch.observe(live_answer(live(A, 3, "COMPLETED"), live(8905, 2, "FAILED", reason="NonZeroExitCode", rc=3)))
    assert step.finished and step.message == f"array {A}: 3 COMPLETED, 1 FAILED"
    assert step.job is not None and "task ids 2" in step.job.failure_message()


def test_fail_fast_asks_once_for_the_cancel_and_survives_a_restore() -> None:
    watch = JobWatch(A, array_fail_fast=True)
    assert not watch.observe(
        live_answer(live(A, None, "PENDING", pending="1-5%2"), live(8903, 0, "RUNNING"))
    ).cancel_array
    failing = live_answer(
        live(A, None, "PENDING", pending="2-5%2"), live(8903, 0, "FAILED", rc=4), live(8904, 1, "RUNNING")
    )
    step = watch.observe(failing)
    assert (
        step.cancel_array and step.message is not None and "array_fail_fast: task 0 (job 8903) FAILED" in step.message
    )
    restored = JobWatch.restore(watch.snapshot(), A, array_fail_fast=True)  # a sensor's next poke
    assert not restored.observe(failing).cancel_array
    assert restored.last is not None and restored.last.array == step.job.array  # type: ignore[union-attr]
    assert not JobWatch(A).observe(failing).cancel_array  # without fail-fast: wait for every task


def test_state_only_updates_keep_how_tasks_ended() -> None:
    full = ArrayView.from_jobs(A, [SlurmJob.from_live(live(8905, 2, "FAILED", reason="NonZeroExitCode", rc=3))])
    from airflow_provider_slurmapi.slurm.jobs.states import parse_job_state

    updated = full.with_states({2: (8905, parse_job_state(["FAILED"]))}).merged(full)
    assert updated.tasks[2].exit_code == 3 and updated.tasks[2].reason == "NonZeroExitCode"


def test_the_tasks_of_an_array_are_one_tagged_job() -> None:
    """A retry looking for its job by tag finds the array (all its tasks carry the tag), never a task
    taken for a second copy of the job."""
    from airflow_provider_slurmapi.slurm.submit.tag import own_tagged

    tag = "airflow-ti=abc"
    records = [
        SlurmJob.from_live({**live(A, 3, "RUNNING"), "comment": f"airflow {tag}", "user_name": "alice"}),
        SlurmJob.from_live({**live(8905, 2, "COMPLETED"), "comment": f"airflow {tag}", "user_name": "alice"}),
        SlurmJob.from_live({**live(8903, 0, "COMPLETED"), "comment": f"airflow {tag}", "user_name": "alice"}),
    ]
    found = own_tagged(records, tag, user="alice")
    assert [job.job_id for job in found] == [A]
    newest = found[-1]
    assert newest is not None and newest.job_id == A and newest.array_job_id == A
