"""Job arrays through Airflow (dag.test() on the emulator): every task waited for, failures named,
fail-fast, the sensor, and each task's outcome in XCom."""

from __future__ import annotations

import re
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
from tests.conftest import CLUSTER, load_dag, run_dag
from tests.dag_runs.test_watchers import xcom


@pytest.fixture(params=[True, False], ids=["deferrable", "sync"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(request.param).lower())
    return bool(request.param)


def slurm_job_xcom(dag_id: str, task_id: str = "job") -> Any:
    """The newest ``slurm_job`` XCom of a task, read from the metadata database."""
    return xcom(dag_id, task_id, "slurm_job")


def tasks_of(emulator: Any, name: str) -> dict[int, dict[str, Any]]:
    """The emulator's task records of the array named ``name``, by task id (pending ones under the meta)."""
    found: dict[int, dict[str, Any]] = {}
    for job in emulator.jobs():
        if job["name"] != name:
            continue
        for task_id in job["array_pending"]:
            found[task_id] = job
        if job["array_task_id"] is not None:
            found[job["array_task_id"]] = job
    return found


def test_array_succeeds_when_every_task_completed(
    mode: bool, airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    state, _ = run_dag(load_dag("slurm_arrays.py", "completes"))
    out = "".join(capfd.readouterr())
    assert state == "success", out[-3000:]
    tasks = tasks_of(gcp_connection, "array-completes")
    assert sorted(tasks) == [0, 1, 2, 3] and {t["state"] for t in tasks.values()} == {"COMPLETED"}
    array_id = min(t["job_id"] for t in tasks.values())
    assert f"array {array_id}: 4 COMPLETED" in out
    lines = set(re.findall(rf"array {array_id}: [0-9A-Z_, ]+", out))
    assert len(lines) >= 2 and any("RUNNING" in line for line in lines), lines  # the counts, as they changed
    sent = slurm_job_xcom("slurm_array_completes")
    assert sent["job_id"] == array_id and sent["state"] == "COMPLETED"
    assert sent["array"]["counts"] == {"COMPLETED": 4} and sent["array"]["failed_task_ids"] == []
    assert [(t["task_id"], t["state"], t["exit_code"]) for t in sent["array"]["tasks"]] == [
        (i, "COMPLETED", 0) for i in range(4)
    ]
    assert {t["job_id"] for t in sent["array"]["tasks"]} == {t["job_id"] for t in tasks.values()}


def test_sbatch_array_line_makes_an_array(
    airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "true")
    state, _ = run_dag(load_dag("slurm_arrays.py", "sbatch"))
    out = "".join(capfd.readouterr())
    assert state == "success", out[-3000:]
    assert sorted(tasks_of(gcp_connection, "array-sbatch")) == [0, 1, 2]
    assert slurm_job_xcom("slurm_array_sbatch")["array"]["counts"] == {"COMPLETED": 3}


def test_failed_task_is_named_with_state_reason_and_exit_code(
    mode: bool, airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    state, _ = run_dag(load_dag("slurm_arrays.py", "one_fails"))
    out = "".join(capfd.readouterr())
    assert state == "failed"
    tasks = tasks_of(gcp_connection, "array-one_fails")
    assert {i: t["state"] for i, t in tasks.items()} == {0: "COMPLETED", 1: "COMPLETED", 2: "FAILED", 3: "COMPLETED"}
    failed_job = tasks[2]["job_id"]
    assert "1 of 4 tasks did not complete (task ids 2)" in out
    assert f"task 2 (job {failed_job}) FAILED, reason NonZeroExitCode, exit code 3" in out
    sent = slurm_job_xcom("slurm_array_one_fails")
    assert sent["state"] == "FAILED" and sent["array"]["failed_task_ids"] == [2]
    assert sent["array"]["counts"] == {"COMPLETED": 3, "FAILED": 1}


def test_fail_fast_cancels_the_remaining_tasks(
    mode: bool, airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    state, _ = run_dag(load_dag("slurm_arrays.py", "fail_fast"))
    out = "".join(capfd.readouterr())
    assert state == "failed"
    tasks = tasks_of(gcp_connection, "array-fail_fast")
    assert sorted(tasks) == [0, 1, 2, 3, 4, 5]
    assert tasks[0]["state"] == "FAILED" and tasks[0]["exit_code"] == 4
    others = {i: t["state"] for i, t in tasks.items() if i}
    assert set(others.values()) == {"CANCELLED"}, others  # none ran on: all were cancelled
    assert "array_fail_fast: task 0" in out and "cancelling the remaining tasks" in out
    assert "task 0 (job" in out and "exit code 4" in out
    sent = slurm_job_xcom("slurm_array_fail_fast")
    assert sent["array"]["counts"] == {"CANCELLED": 5, "FAILED": 1}


@pytest.mark.parametrize("fails", [False, True], ids=["completes", "one_fails"])
def test_sensor_waits_for_every_task(
    fails: bool,
    mode: bool,
    airflow_db: Any,
    gcp_connection: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    script = "#!/bin/bash\nsleep 1\n" + ('if [ "$SLURM_ARRAY_TASK_ID" = 1 ]; then exit 7; fi\n' if fails else "")
    job = {
        "name": "watched-array",
        "partition": "debug",
        "current_working_directory": str(gcp_connection.config.workdir),
        "array": "0-2%1",
    }
    array_id = SlurmApiHook(**CLUSTER).submit_job(job, script).job_id
    monkeypatch.setenv("SLURMAPI_WATCH_JOB_ID", str(array_id))
    state, _ = run_dag(load_dag("slurm_arrays.py", "sensor"))
    out = "".join(capfd.readouterr())
    tasks = tasks_of(gcp_connection, "watched-array")
    assert all(t["state"] in ("COMPLETED", "FAILED") for t in tasks.values())  # it waited for all three
    if fails:
        assert state == "failed"
        assert "task ids 1" in out and "exit code 7" in out
    else:
        assert state == "success", out[-3000:]
        assert f"array {array_id}: 3 COMPLETED" in out
