"""When a job ends, one log line and XCom ``slurm_job["accounting"]`` give what the history knows of it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import connection_uri_env, load_dag, run_dag
from tests.dag_runs.test_watchers import submit, xcom

LINE = re.compile(r"Slurm job (\d+) accounting: [^\n]*? times\.")


def job_xcom(dag_id: str, task_id: str) -> Any:
    """The newest ``slurm_job`` XCom of a task, read from the metadata database."""
    return xcom(dag_id, task_id, "slurm_job")


@pytest.fixture(params=[True, False], ids=["deferrable", "sync"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(request.param).lower())
    return bool(request.param)


def test_a_gpu_job_ends_with_its_accounting_summary(
    mode: bool, airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    dag = load_dag("slurm_scenarios.py", "completes_slowly")
    dag.task_dict["job"].job = {**dag.task_dict["job"].job, "tres_per_node": "gres/gpu:2"}
    state, tasks = run_dag(dag)
    out = "".join(capfd.readouterr())
    assert state == "success", tasks
    record = job_xcom(dag.dag_id, "job")
    accounting = record["accounting"]
    assert accounting["recorded"] is True, accounting
    assert accounting["state"] == "COMPLETED" and accounting["exit_code"] == 0 and accounting["signal"] is None
    assert accounting["elapsed_seconds"] >= 6
    assert (accounting["nodes"], accounting["cpus"], accounting["gpus"]) == (1, 1, 2)
    assert accounting["tres_allocated"]["gres/gpu"] == 2
    assert accounting["node_hours"] == pytest.approx(accounting["elapsed_seconds"] / 3600, abs=1e-4)
    assert accounting["gpu_hours"] == pytest.approx(2 * accounting["elapsed_seconds"] / 3600, abs=1e-4)
    assert accounting["max_rss_bytes"] > 0 and accounting["max_rss_step"] == f"{record['job_id']}.batch"
    assert accounting["requeues"] == 0
    # One line for this job (Airflow 2.11's dag.test() may print a task's log twice).
    [line] = {m.group(0) for m in LINE.finditer(out) if m.group(1) == str(record["job_id"])}
    assert line.startswith(f"Slurm job {record['job_id']} accounting: COMPLETED after ")
    assert "gres/gpu=2" in line and "GPU-hours" in line and "MaxRSS " in line and "requeued 0 times" in line


def test_a_failed_job_has_its_summary_too(airflow_db: Any, gcp_connection: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    dag = load_dag("slurm_scenarios.py", "sigkill")
    assert run_dag(dag)[0] == "failed"
    accounting = job_xcom(dag.dag_id, "job")["accounting"]
    assert (accounting["recorded"], accounting["state"], accounting["signal"]) == (True, "FAILED", "KILL")


@pytest.fixture
def lagging_history(
    emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch, gcp_connection: Any
) -> Any:
    """An emulator whose slurmdbd records jobs 120 s late (the connection now points at it)."""
    lagging = emulator_factory(history_delay=120.0, min_job_age=60.0)
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(lagging, credentials_file))
    monkeypatch.setenv("SLURMAPI_WORKDIR", str(lagging.config.workdir))
    return lagging


def test_no_record_in_time_is_said_and_fails_nothing(
    mode: bool, airflow_db: Any, lagging_history: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    dag = load_dag("slurm_scenarios.py", "completes")
    dag.task_dict["job"].accounting_wait_seconds = 1.0
    state, tasks = run_dag(dag)
    out = "".join(capfd.readouterr())
    assert state == "success", tasks
    accounting = job_xcom(dag.dag_id, "job")["accounting"]
    assert accounting["recorded"] is False and "no finished record" in accounting["reason"]
    assert "accounting: no summary: the history (slurmdbd) has no finished record of it after 1s" in out


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "poke"])
def test_the_sensor_pushes_the_job_with_its_summary(
    deferrable: bool, airflow_db: Any, gcp_connection: Any, monkeypatch: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(deferrable).lower())
    job_id = submit(gcp_connection, "#!/bin/bash\nsleep 1\nexit 3\n")
    monkeypatch.setenv("SLURMAPI_WATCH_JOB_ID", str(job_id))
    state, _ = run_dag(load_dag("slurm_watchers.py", "sensor"))
    assert state == "failed"
    record = job_xcom("slurm_watch_sensor", "sense")
    assert record["job_id"] == job_id and record["state"] == "FAILED"
    assert (record["accounting"]["recorded"], record["accounting"]["exit_code"]) == (True, 3)
    assert f"Slurm job {job_id} accounting: FAILED after " in "".join(capfd.readouterr())
