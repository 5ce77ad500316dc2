"""OpenLineage: the events of a DAG run carry the Slurm job facet, and each job gets its task's run
in its environment; without the OpenLineage provider the same DAG runs as before.

Each run is a process of its own (``tests.dag_runs.lineage_runner``): OpenLineage reads its transport
once per process. Events go to OpenLineage's file transport, one JSON object a line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLUSTER, DAGS_FOLDER, REPO

NAMESPACE = "slurmapi-lineage-tests"


def _run(dag_key: str, env: dict[str, str], *extra: str) -> tuple[dict[str, Any], str]:
    result = subprocess.run(
        [sys.executable, "-m", "tests.dag_runs.lineage_runner", str(DAGS_FOLDER / "slurm_lineage.py"), dag_key, *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    out = result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("DAG-RESULT ")]
    assert lines, f"the DAG did not run (exit {result.returncode}):\n{out[-4000:]}"
    # raw_decode: another thread of the run (OpenLineage's, the trigger's) may write to stdout right
    # after the result, on the same line, before the runner's newline.
    result_json, _end = json.JSONDecoder().raw_decode(lines[-1][len("DAG-RESULT ") :])
    return result_json, out


def _job_env(workdir: Path, job_id: int) -> dict[str, str]:
    text = (workdir / f"env-{job_id}.txt").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _jobs_by_name(emulator: Any) -> dict[str, dict[str, Any]]:
    return {job["name"]: job for job in emulator.jobs()}


@pytest.fixture
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(request.param).lower())
    return bool(request.param)


@pytest.mark.parametrize("mode", [True, False], ids=["deferrable-sensor", "sync-sensor"], indirect=True)
def test_events_carry_the_slurm_job_and_jobs_get_their_parent_run(
    mode: bool, airflow_db: Any, gcp_connection: Any, tmp_path: Path
) -> None:
    pytest.importorskip("airflow.providers.openlineage")
    events_file = tmp_path / "events.jsonl"
    env = {
        **os.environ,
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(events_file), "append": True}
        ),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": NAMESPACE,
    }
    result, out = _run("lineage", env)
    assert result["tasks"] == {
        "submit_sync": "success",
        "submit_deferred": "success",
        "submit_own_parent": "success",
        "submit_failing": "failed",
        "watch": "success",
    }, out[-4000:]
    jobs = _jobs_by_name(gcp_connection)
    workdir = Path(gcp_connection.config.workdir)
    events = [json.loads(line) for line in events_file.read_text().splitlines() if line.strip()]
    by_task: dict[str, dict[str, dict[str, Any]]] = {}
    for event in events:
        task_id = event["job"]["name"].rpartition(".")[2]
        if event["job"]["name"].startswith("slurm_lineage."):
            by_task.setdefault(task_id, {})[event["eventType"]] = event

    expected_end = {
        "submit_sync": ("COMPLETE", "lineage-sync"),
        "submit_deferred": ("COMPLETE", "lineage-deferred"),
        "submit_own_parent": ("COMPLETE", "lineage-own"),
        "submit_failing": ("FAIL", "lineage-failing"),
        "watch": ("COMPLETE", "lineage-sync"),
    }
    for task_id, (end, job_name) in expected_end.items():
        assert end in by_task.get(task_id, {}), f"no {end} event of {task_id}: {sorted(by_task.get(task_id, {}))}"
        facet = by_task[task_id][end]["run"]["facets"]["slurmJob"]
        assert facet["jobId"] == jobs[job_name]["job_id"], (task_id, facet)
        assert (facet["projectId"], facet["region"], facet["clusterId"]) == (
            CLUSTER["project_id"],
            CLUSTER["region"],
            CLUSTER["cluster_id"],
        )
        assert facet["jobName"] == job_name
        assert facet["state"] == ("FAILED" if end == "FAIL" else "COMPLETED")
        assert facet["_schemaURL"].endswith("#SlurmJobRunFacet")

    # Each submitted job was given its own task's run: the ids of the task's events.
    for task_id, job_name in (
        ("submit_sync", "lineage-sync"),
        ("submit_deferred", "lineage-deferred"),
        ("submit_failing", "lineage-failing"),
    ):
        event = by_task[task_id][expected_end[task_id][0]]
        job_env = _job_env(workdir, jobs[job_name]["job_id"])
        run_id = event["run"]["runId"]
        dag_run = event["run"]["facets"]["parent"]
        assert job_env["OPENLINEAGE_PARENT_RUN_ID"] == run_id
        assert job_env["OPENLINEAGE_PARENT_JOB_NAME"] == f"slurm_lineage.{task_id}" == event["job"]["name"]
        assert job_env["OPENLINEAGE_PARENT_JOB_NAMESPACE"] == NAMESPACE
        assert job_env["OPENLINEAGE_PARENT_ID"] == f"{NAMESPACE}/slurm_lineage.{task_id}/{run_id}"
        assert job_env["OPENLINEAGE_ROOT_PARENT_RUN_ID"] == dag_run["run"]["runId"]
        assert job_env["OPENLINEAGE_ROOT_PARENT_JOB_NAME"] == "slurm_lineage"
        assert job_env["OPENLINEAGE_ROOT_PARENT_ID"] == f"{NAMESPACE}/slurm_lineage/{dag_run['run']['runId']}"
        assert job_env["OWN"] == "kept"  # the job's own environment is kept
    # A job that names its own parent keeps it, and gets none of this task's variables.
    own = _job_env(workdir, jobs["lineage-own"]["job_id"])
    assert own["OPENLINEAGE_PARENT_ID"] == "a/b/c"
    assert not {name for name in own if name.startswith("OPENLINEAGE_") and name != "OPENLINEAGE_PARENT_ID"}


def test_without_the_openlineage_provider_the_jobs_run_without_parent_info(
    airflow_db: Any, gcp_connection: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "true")
    events_file = tmp_path / "events.jsonl"
    env = {
        **os.environ,
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(events_file), "append": True}
        ),
    }
    result, out = _run("lineage", env, "--without-openlineage")
    assert result["openlineage_modules"] == [], "the provider was not hidden"
    assert result["tasks"] == {
        "submit_sync": "success",
        "submit_deferred": "success",
        "submit_own_parent": "success",
        "submit_failing": "failed",
        "watch": "success",
    }, out[-4000:]
    assert "apache-airflow-providers-openlineage is not installed: the job gets no parent run" in out
    assert not events_file.exists()
    jobs = _jobs_by_name(gcp_connection)
    job_env = _job_env(Path(gcp_connection.config.workdir), jobs["lineage-sync"]["job_id"])
    assert not [name for name in job_env if name.startswith("OPENLINEAGE_")]
    assert job_env["OWN"] == "kept"
