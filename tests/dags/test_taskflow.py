"""``@task.slurm`` end to end against the emulator, sync and deferrable: the function's script runs
as a Slurm job, with the function's arguments (XCom, params, context) and templates rendered; a
function that returns no script fails the task and says what to return."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import load_dag, run_dag


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
    assert tasks == {"learning_rate": "success", "train": "success"}
    [job] = [job for job in gcp_connection.jobs() if job["name"] == "taskflow-train"]
    assert job["state"] == "COMPLETED"
    written = (Path(gcp_connection.config.workdir) / f"train-{job['job_id']}.txt").read_text()
    # The upstream task's XCom, the rendered param, a context value, and the script's own template.
    assert written.startswith("model=tiny rate=0.125 ds=20")
    assert written.rstrip().endswith("task=train")
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
