"""Every example DAG imports cleanly and runs green with dag.test() against the emulator, sync and deferrable."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import DAGS_FOLDER, REPO, load_dag, run_dag

EXAMPLES = sorted(p.name for p in (REPO / "example_dags").glob("example_*.py"))


def test_example_dags_parse_without_errors(airflow_db: Any) -> None:
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow 2.11
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef]

    bag = DagBag(dag_folder=str(DAGS_FOLDER))
    assert bag.import_errors == {}
    assert {"example_slurm_submit", "example_slurm_sensor", "example_slurm_cancel"} <= set(bag.dag_ids)


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "sync"])
@pytest.mark.parametrize("file_name", EXAMPLES)
def test_example_dag_runs_green(
    file_name: str, deferrable: bool, airflow_db: Any, gcp_connection: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(deferrable).lower())
    dag = load_dag(file_name)
    state, tasks = run_dag(dag)
    assert state == "success", tasks
    assert set(tasks.values()) == {"success"}
    jobs = [job for job in gcp_connection.jobs() if f"dag={dag.dag_id}" in (job.get("comment") or "")]
    assert jobs, "the DAG's job carries its task-instance tag in its comment"
    if dag.dag_id == "example_slurm_cancel":
        assert [job["state"] for job in jobs] == ["CANCELLED"]
    else:
        assert {job["state"] for job in jobs} == {"COMPLETED"}
        assert len(jobs) == len({job["comment"] for job in jobs}), "one job per task instance"
