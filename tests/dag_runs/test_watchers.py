"""The sensor, get, cancel and list operators on jobs they did not start, through dag.test()."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
from tests.conftest import CLUSTER, DAGS_FOLDER, load_dag, point_airflow_at, run_dag
from tests.waiting import wait_until


def submit(emulator: Any, script: str) -> int:
    job = {"name": "watched", "partition": "debug", "current_working_directory": str(emulator.config.workdir)}
    return SlurmApiHook(**CLUSTER).submit_job(job, script).job_id


def xcom(dag_id: str, task_id: str, key: str = "return_value") -> Any:
    """The newest XCom ``key`` of a task (its return value by default), read from the metadata database."""
    from airflow.utils.session import create_session

    try:
        from airflow.models.xcom import XComModel as XCom
    except ImportError:  # Airflow 2.11: the value column holds the value itself
        from airflow.models.xcom import XCom  # type: ignore[no-redef]

        deserialize = lambda row: row.value  # noqa: E731
    else:
        deserialize = XCom.deserialize_value
    with create_session() as session:
        row = (
            session.query(XCom)
            .filter_by(dag_id=dag_id, task_id=task_id, key=key)
            .order_by(XCom.timestamp.desc())
            .first()
        )
        return None if row is None else deserialize(row)


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "poke"])
@pytest.mark.parametrize(
    ("script", "dag_state"),
    [
        ("#!/bin/bash\nsleep 1\n", "success"),
        ("#!/bin/bash\nexit 3\n", "failed"),
        ("#!/bin/bash\nkill -9 $$\n", "failed"),
    ],
    ids=["completed", "exit3", "sigkill"],
)
def test_sensor_succeeds_only_on_completed(
    script: str, dag_state: str, deferrable: bool, airflow_db: Any, gcp_connection: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(deferrable).lower())
    monkeypatch.setenv("SLURMAPI_WATCH_JOB_ID", str(submit(gcp_connection, script)))
    state, tasks = run_dag(load_dag("slurm_watchers.py", "sensor"))
    assert state == dag_state, tasks


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "poke"])
def test_sensor_on_unknown_job_fails_after_the_grace(
    deferrable: bool, airflow_db: Any, gcp_connection: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(deferrable).lower())
    monkeypatch.setenv("SLURMAPI_WATCH_JOB_ID", "424242")
    state, _ = run_dag(load_dag("slurm_watchers.py", "sensor"))
    assert state == "failed"


def test_sensor_on_a_job_already_in_history(airflow_db: Any, gcp_connection: Any, monkeypatch: Any) -> None:
    job_id = submit(gcp_connection, "#!/bin/bash\necho quick\n")
    gcp_connection.wait_for_state(job_id, ["COMPLETED"], timeout=20)
    hook = SlurmApiHook(**CLUSTER)

    wait_until(
        lambda: hook.get_live_job(job_id) is None, "the job left the live queue", timeout=20, every=0.3, give_up=True
    )
    monkeypatch.setenv("SLURMAPI_WATCH_JOB_ID", str(job_id))
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "true")
    assert run_dag(load_dag("slurm_watchers.py", "sensor"))[0] == "success"
    assert run_dag(load_dag("slurm_watchers.py", "get"))[0] == "success"
    got = xcom("slurm_watch_get", "get")
    assert got["job_id"] == job_id and got["source"] == "history" and got["state"] == "COMPLETED"
    assert run_dag(load_dag("slurm_watchers.py", "list_history"))[0] == "success"
    listed = xcom("slurm_watch_list_history", "list")
    assert job_id in [job["job_id"] for job in listed]


def test_get_unknown_job_fails_and_cancel_unknown_succeeds(
    airflow_db: Any, gcp_connection: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("SLURMAPI_WATCH_JOB_ID", "424242")
    assert run_dag(load_dag("slurm_watchers.py", "get"))[0] == "failed"
    assert run_dag(load_dag("slurm_watchers.py", "cancel"))[0] == "success"
    assert xcom("slurm_watch_cancel", "cancel")["outcome"] == "unknown job"


def test_cancel_of_a_finished_job_still_in_the_queue_says_already_finished(
    airflow_db: Any, emulator_factory: Any, credentials_file: Any, monkeypatch: Any
) -> None:
    # Finished jobs stay in the live queue for a minute here (2 s by default): parsing and running
    # the DAG takes longer than 2 s on a loaded machine, and the job would be gone from the queue.
    emulator = point_airflow_at(emulator_factory(min_job_age=60.0), credentials_file, monkeypatch)
    job_id = submit(emulator, "#!/bin/bash\necho x\n")
    emulator.wait_for_state(job_id, ["COMPLETED"], timeout=20)
    monkeypatch.setenv("SLURMAPI_WATCH_JOB_ID", str(job_id))
    assert run_dag(load_dag("slurm_watchers.py", "cancel"))[0] == "success"
    assert xcom("slurm_watch_cancel", "cancel") == {
        "job_id": job_id,
        "outcome": "already finished",
        "state": "COMPLETED",
    }


def test_cancel_operator_waits_until_the_job_has_stopped(
    airflow_db: Any, gcp_connection: Any, monkeypatch: Any
) -> None:
    job_id = submit(gcp_connection, "#!/bin/bash\nsleep 120\n")
    gcp_connection.wait_for_state(job_id, ["RUNNING"], timeout=20)
    monkeypatch.setenv("SLURMAPI_WATCH_JOB_ID", str(job_id))
    assert run_dag(load_dag("slurm_watchers.py", "cancel"))[0] == "success"
    assert xcom("slurm_watch_cancel", "cancel") == {"job_id": job_id, "outcome": "cancelled", "state": "CANCELLED"}


def test_bad_arguments_are_refused_when_the_dag_is_parsed() -> None:
    from airflow_provider_slurmapi.operators.slurm import SlurmListJobsOperator, SlurmSubmitJobOperator
    from airflow_provider_slurmapi.slurm.api.errors import UnsupportedApiVersionError

    with pytest.raises(ValueError, match="history=True"):
        SlurmListJobsOperator(task_id="x", filters={"users": ["a"]}, **CLUSTER)
    with pytest.raises(UnsupportedApiVersionError, match=r"v0\.0\.39"):
        SlurmSubmitJobOperator(task_id="y", script="#!/bin/bash\n", api_version="v0.0.39", **CLUSTER)
    from airflow_provider_slurmapi.operators.base import parse_job_id

    with pytest.raises(ValueError, match="xcom_pull"):
        parse_job_id("None")
    assert parse_job_id(" 42 ") == 42
    assert (DAGS_FOLDER / "slurm_watchers.py").exists()
