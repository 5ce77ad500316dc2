"""Each way a job can end, through Airflow: the task's state and the message the user reads."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import load_dag, run_dag


@pytest.fixture(params=[True, False], ids=["deferrable", "sync"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(request.param).lower())
    return bool(request.param)


@pytest.mark.parametrize(
    ("scenario", "dag_state", "job_state", "says"),
    [
        ("completes", "success", "COMPLETED", ["COMPLETED after"]),
        ("exit3", "failed", "FAILED", ["ended FAILED", "NonZeroExitCode", "exit code 3"]),
        ("sigkill", "failed", "FAILED", ["ended FAILED", "signal KILL"]),
        ("timeout", "failed", "TIMEOUT", ["ended TIMEOUT", "TimeLimit"]),
        ("defaults_filled", "success", "COMPLETED", []),
    ],
)
def test_job_outcome_reaches_the_task(
    scenario: str,
    dag_state: str,
    job_state: str,
    says: list[str],
    mode: bool,
    airflow_db: Any,
    gcp_connection: Any,
    capfd: pytest.CaptureFixture[str],
) -> None:
    state, tasks = run_dag(load_dag("slurm_scenarios.py", scenario))
    out = "".join(capfd.readouterr())
    assert state == dag_state, tasks
    jobs = [job for job in gcp_connection.jobs() if job["name"] == f"scenario-{scenario}"]
    assert [job["state"] for job in jobs] == [job_state]
    for text in says:
        assert text in out, text
    if scenario == "defaults_filled":  # the documented default working directory was used
        from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
        from tests.conftest import CLUSTER

        job = SlurmApiHook(**CLUSTER).get_job(jobs[0]["job_id"])
        assert job is not None and (job.stdout or "").startswith("/tmp/")


def test_bad_partition_fails_with_slurms_reason_and_no_job(
    mode: bool, airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    state, _ = run_dag(load_dag("slurm_scenarios.py", "bad_partition"))
    out = "".join(capfd.readouterr())
    assert state == "failed"
    assert "2000 Invalid partition name specified (Batch job submission failed)" in out
    assert not [job for job in gcp_connection.jobs() if job["name"] == "scenario-bad_partition"]


def test_held_job_is_cancelled_by_on_kill_at_execution_timeout(
    airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A held job never runs; the task's execution_timeout fires on_kill, which cancels it."""
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    dag = load_dag("slurm_scenarios.py", "held")
    from datetime import timedelta

    dag.task_dict["job"].execution_timeout = timedelta(seconds=4)
    state, _ = run_dag(dag)
    assert state == "failed"
    jobs = [job for job in gcp_connection.jobs() if job["name"] == "scenario-held"]
    assert len(jobs) == 1
    gcp_connection.wait_for_state(jobs[0]["job_id"], ["CANCELLED"], timeout=20)


def test_a_bad_spec_fails_before_any_call(
    airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    dag = load_dag("slurm_scenarios.py", "completes")
    dag.task_dict["job"].job = {**dag.task_dict["job"].job, "time_limit": "soon"}
    gcp_connection.reset_calls()
    state, _ = run_dag(dag)
    assert state == "failed"
    assert gcp_connection.calls()["total"] == 0, "nothing is looked up or sent for a bad spec"


def test_a_script_ending_in_sh_is_read_from_the_dag_folder_and_rendered(
    airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
    from tests.conftest import CLUSTER

    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    state, tasks = run_dag(load_dag("slurm_scenarios.py", "script_file"))
    assert state == "success", tasks
    [job] = [j for j in gcp_connection.jobs() if j["name"] == "scenario-script_file"]
    record = SlurmApiHook(**CLUSTER).get_job(job["job_id"])
    assert record is not None and record.stdout
    assert Path(record.stdout).read_text() == "rendered for slurm_scenario_script_file/job\n"
