"""Hostile input through Airflow: values rendered from ``dag_run.conf``, and ``.sh`` strings in fields.

Runs real DAGs with ``dag.test()``. The cluster arguments come from the run's conf; the connection's
key fetches its tokens from a local trap that also stands where the hostile region would send calls,
so "nothing reached the trap" means no token was fetched and no request left.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLUSTER, DAGS_FOLDER, load_dag
from tests.trap import Trap, run_trap, trap_connection_env


def run_dag_with_conf(dag: Any, conf: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """``dag.test(run_conf=...)``; the run's state and each task's state (a timeout counts as failed)."""
    from airflow.exceptions import AirflowTaskTimeout

    try:
        run = dag.test(run_conf=conf)
    except AirflowTaskTimeout:
        return "failed", {}
    from airflow.utils.session import create_session

    with create_session() as session:
        states = {ti.task_id: str(ti.state) for ti in run.get_task_instances(session=session)}
    return str(run.state), states


@pytest.fixture
def trap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Trap]:
    with run_trap() as trap:
        monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", trap_connection_env(trap, tmp_path / "key.json"))
        yield trap


@pytest.mark.parametrize("dag_name", ["conf_submit", "conf_sensor"])
def test_region_from_dag_run_conf_sends_no_token_anywhere(
    dag_name: str, airflow_db: Any, trap: Trap, capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks = run_dag_with_conf(load_dag("slurm_hostile.py", dag_name), {"region": trap.hostile_region})
    out = "".join(capfd.readouterr())
    assert state == "failed", tasks
    assert f"region='{trap.hostile_region}' is not a Google Cloud region" in out
    assert trap.nothing_reached(), trap.summary()


@pytest.mark.parametrize(
    "conf",
    [
        {"project_id": "demo-project?alt=media"},
        {"cluster_id": "demo-cluster:cancel"},
        {"job_id": "\u0663"},  # an Arabic-Indic 3: str.isdigit() says yes
        {"job_id": "5_3"},
    ],
    ids=["project", "cluster", "non-ascii-job-id", "array-task-job-id"],
)
def test_project_cluster_and_job_id_from_conf_are_refused_before_any_call(
    conf: dict[str, str], airflow_db: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With api_endpoint at the trap, an unchecked value would reach it with a bearer token."""
    with run_trap() as trap:
        monkeypatch.setenv(
            "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT",
            trap_connection_env(trap, tmp_path / "key.json", api_endpoint=trap.url),
        )
        state, tasks = run_dag_with_conf(load_dag("slurm_hostile.py", "conf_sensor"), conf)
        assert state == "failed", tasks
        assert trap.nothing_reached(), trap.summary()


def test_environment_secret_from_conf_stays_out_of_the_logs(
    airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    secret = "tok-5ecret-value-from-conf"
    gcp_connection.reset_calls()
    state, _ = run_dag_with_conf(load_dag("slurm_hostile.py", "env_secret"), {"token": secret})
    out = "".join(capfd.readouterr())
    assert state == "failed"
    assert "job.environment: the entries #2" in out
    assert secret not in out
    assert gcp_connection.calls()["total"] == 0


def test_only_script_is_read_from_a_file_and_only_when_it_is_a_path(
    airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job named "train_step.sh" keeps its name; an inline script ending in ".sh" runs as written; a
    script path is read from the DAG folder and rendered; the same holds for each task of a mapped one."""
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook

    assert (DAGS_FOLDER / "train_step.sh").exists()
    state, tasks = run_dag_with_conf(load_dag("slurm_hostile.py", "sh_fields"), {})
    assert state == "success", tasks
    hook = SlurmApiHook(**CLUSTER)

    def outputs(name: str) -> list[str]:
        jobs = [hook.get_job(job["job_id"]) for job in gcp_connection.jobs() if job["name"] == name]
        return sorted(Path(job.stdout).read_text() for job in jobs if job is not None and job.stdout)

    assert outputs("train_step.sh") == ["inline for named_like_a_file\n"]
    assert outputs("sh-script-file") == ["rendered for slurm_hostile_sh_fields/script_file\n"]
    assert outputs("sh-mapped") == ["inline for mapped\n", "rendered for slurm_hostile_sh_fields/mapped\n"]


def test_parsing_reads_only_the_script_path() -> None:
    """What Airflow does when it parses the DAG file (the UI shows the script's text)."""
    dag = load_dag("slurm_hostile.py", "sh_fields")
    dag.resolve_template_files()
    file_text = (DAGS_FOLDER / "train_step.sh").read_text()
    assert dag.task_dict["script_file"].script == file_text
    named = dag.task_dict["named_like_a_file"]
    assert named.job["name"] == "train_step.sh" and named.script.endswith(": run.sh")
