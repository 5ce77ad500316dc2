"""``@task.slurm`` end to end against the emulator, sync and deferrable: the function's script runs
as a Slurm job, with the function's arguments (XCom, params, context) and templates rendered; a
function that returns no script fails the task and says what to return."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
from tests.conftest import CLUSTER, load_dag, run_dag


@pytest.fixture(params=[True, False], ids=["deferrable", "sync"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(request.param).lower())
    return bool(request.param)


def test_task_slurm_is_registered_as_a_task_decorator() -> None:
    from airflow_provider_slurmapi.decorators.slurm import slurm_task
    from airflow_provider_slurmapi.get_provider_info import get_provider_info

    assert {"class-name": "airflow_provider_slurmapi.decorators.slurm.slurm_task", "name": "slurm"} in (
        get_provider_info()["task-decorators"]
    )
    try:
        from airflow.sdk import task
    except ImportError:  # Airflow 2.11
        from airflow.decorators import task  # type: ignore[no-redef,attr-defined]
    assert task.slurm is slurm_task  # found through the installed provider's metadata


def test_task_slurm_runs_the_returned_script(
    mode: bool, airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks = run_dag(load_dag("slurm_lineage.py", "taskflow"))
    out = "".join(capfd.readouterr())
    assert state == "success", (tasks, out[-3000:])
    assert tasks == {"learning_rate": "success", "train": "success", "from_file": "success"}
    jobs = {job["name"]: job for job in gcp_connection.jobs()}
    assert jobs["taskflow-train"]["state"] == jobs["taskflow-file"]["state"] == "COMPLETED"
    written = (Path(gcp_connection.config.workdir) / f"train-{jobs['taskflow-train']['job_id']}.txt").read_text()
    # The upstream task's XCom, the rendered param and a context value reach the function; the
    # script it returns is submitted as is: template text in a value is never evaluated.
    assert written.startswith("model=tiny{{ 7 * 7 }} rate=0.125 ds=20")
    assert written.rstrip().endswith("task={{ ti.task_id }}")
    # A returned path is the DAG folder's file, rendered as script="train_step.sh" is.
    record = SlurmApiHook(**CLUSTER).get_job(jobs["taskflow-file"]["job_id"])
    assert record is not None and record.stdout
    assert Path(record.stdout).read_text() == "rendered for slurm_taskflow/from_file\n"
    # Deferred, the wait ran in the trigger's shared poller (``jobs/state``); in sync mode, on the worker.
    assert ("jobs-state" in gcp_connection.calls()["by_kind"]) is mode


@pytest.mark.parametrize(
    ("task_id", "says"), [("returns_none", "returned NoneType"), ("returns_blank", "returned an empty script")]
)
def test_task_slurm_without_a_script_fails_and_says_what_to_return(
    task_id: str, says: str, mode: bool, airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks = run_dag(load_dag("slurm_lineage.py", "taskflow_bad"))
    out = "".join(capfd.readouterr())
    assert state == "failed"
    assert tasks[task_id] == "failed"
    assert f"@task.slurm function {task_id!r} {says}" in out
    assert "must return the batch script as a non-empty string starting with '#!'" in out
    assert not gcp_connection.jobs()  # nothing was submitted
