"""What users expect of an Airflow provider, through ``dag.test()`` against the emulator: script files
of every usual name (or named by ``script_path=``), and ``do_xcom_push=False`` honoured by every
operator and the sensor."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.account_store import variable_name
from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
from tests.conftest import CLUSTER, CLUSTER_ID, PROJECT, REGION, load_dag, point_airflow_at


def run(dag: Any, conf: dict[str, Any] | None = None) -> tuple[Any, dict[str, str]]:
    """``dag.test()``: the run and each task instance's state (mapped ones by ``task_id[i]``)."""
    from airflow.utils.session import create_session

    dag_run = dag.test(run_conf=conf or {})
    with create_session() as session:
        tis = dag_run.get_task_instances(session=session)
        states = {ti.task_id + (f"[{ti.map_index}]" if ti.map_index >= 0 else ""): str(ti.state) for ti in tis}
    return dag_run, states


def outputs(gcp_connection: Any, name: str) -> list[str]:
    """What the jobs named ``name`` wrote to their output files."""
    hook = SlurmApiHook(**CLUSTER)
    jobs = [hook.get_job(job["job_id"]) for job in gcp_connection.jobs() if job["name"] == name]
    return sorted(Path(job.stdout).read_text() for job in jobs if job is not None and job.stdout)


def test_script_files_of_every_usual_name_and_script_path_are_read_and_rendered(
    airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    dag_run, states = run(load_dag("slurm_surface.py", "script_files"))
    assert str(dag_run.state) == "success", (states, "".join(capfd.readouterr())[-3000:])
    for suffix in ("sbatch", "slurm", "bash"):
        assert outputs(gcp_connection, f"surface-{suffix}") == [f"{suffix} file for file_{suffix}\n"]
    assert outputs(gcp_connection, "surface-script-path") == ["script_path file for explicit_path\n"]
    assert outputs(gcp_connection, "surface-mapped") == ["inline for mapped\n", "sbatch file for mapped\n"]


def test_parsing_reads_the_script_files_as_airflow_reads_template_files() -> None:
    """What the DAG processor shows in the UI: the script's text, not its file name."""
    dag = load_dag("slurm_surface.py", "script_files")
    dag.resolve_template_files()
    folder = Path(__file__).parent / "dag_files"
    assert dag.task_dict["file_sbatch"].script == (folder / "train_step.sbatch").read_text()
    assert dag.task_dict["explicit_path"].script == (folder / "train_step_script.tmpl").read_text()


@pytest.mark.parametrize(
    ("script", "says"),
    [
        # A value rendered from dag_run.conf is never read as a file, whatever its name.
        ("train_step.sbatch", "script='train_step.sbatch' is one line that does not start with '#!'"),
        ("train.py", "only one line ending in .sh, .sbatch, .slurm, .bash is read from the DAG's folder"),
    ],
)
def test_a_one_line_script_that_is_no_file_fails_naming_the_rule(
    script: str, says: str, airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    gcp_connection.reset_calls()
    dag_run, states = run(load_dag("slurm_surface.py", "script_from_conf"), {"script": script})
    assert str(dag_run.state) == "failed", states
    assert says in "".join(capfd.readouterr())
    assert gcp_connection.calls()["by_kind"].get("submit", 0) == 0


def test_script_and_script_path_are_one_or_the_other() -> None:
    from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator

    for both_or_neither in ({"script": "#!/bin/bash\n", "script_path": "train.tmpl"}, {}):
        with pytest.raises(ValueError, match=r"script= .* or as script_path="):
            SlurmSubmitJobOperator(task_id="t", region="us-central1", cluster_id="c", **both_or_neither)


def xcom_rows(dag_run: Any) -> list[tuple[str, str]]:
    """Every XCom the run's tasks left in the metadata database."""
    from airflow.utils.session import create_session
    from sqlalchemy import select

    try:
        from airflow.models.xcom import XComModel as XCom
    except ImportError:  # Airflow 2
        from airflow.models.xcom import BaseXCom as XCom  # type: ignore[no-redef,attr-defined,assignment]
    with create_session() as session:
        query = select(XCom.task_id, XCom.key).where(XCom.dag_id == dag_run.dag_id, XCom.run_id == dag_run.run_id)
        return sorted((str(task_id), str(key)) for task_id, key in session.execute(query))


def test_do_xcom_push_false_leaves_nothing_in_xcom(
    airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """Job id, job record, accounting, return values: nothing, from any operator or the sensor."""
    job_id = (
        SlurmApiHook(**CLUSTER)
        .submit_job(
            {"partition": "debug", "current_working_directory": str(gcp_connection.config.workdir)},
            "#!/bin/bash\necho watched\n",
        )
        .job_id
    )
    dag_run, states = run(load_dag("slurm_surface.py", "no_xcom"), {"job_id": job_id})
    out = "".join(capfd.readouterr())
    # The cancel may come before or after the sensors see the job end: a cancelled job fails them.
    assert {task: state for task, state in states.items() if not task.startswith("sensor")} == {
        "submit_sync": "success",
        "submit_deferred": "success",
        "submit_only": "success",
        "get": "success",
        "list": "success",
        "cancel": "success",
    }, out[-3000:]
    assert xcom_rows(dag_run) == []


def xcom_values(dag_run: Any) -> dict[str, Any]:
    """Each task's return value in the run."""
    from airflow.utils.session import create_session
    from sqlalchemy import select

    try:
        from airflow.models.xcom import XComModel as XCom
    except ImportError:  # Airflow 2
        from airflow.models.xcom import BaseXCom as XCom  # type: ignore[no-redef,attr-defined,assignment]
    with create_session() as session:
        query = select(XCom).where(
            XCom.dag_id == dag_run.dag_id, XCom.run_id == dag_run.run_id, XCom.key == "return_value"
        )
        rows = list(session.scalars(query))
        # Airflow 3 keeps the value serialized; Airflow 2.11's column hands it back already read.
        return {
            row.task_id: XCom.deserialize_value(row) if isinstance(row.value, str | bytes) else row.value
            for row in rows
        }


def test_listing_shows_the_callers_own_jobs_unless_asked_for_everyones(
    airflow_db: Any,
    emulator_factory: Any,
    credentials_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Another user's jobs on the shared cluster are their data: listed only with all_users=True.

    As a user gets it: no slurm_user, an endpoint whose meta.client.user names no one the jobs belong to
    (the emulator's "slurmrestd": root); the DAG submits a job, then lists."""
    from airflow.models import Variable

    gcp_connection = point_airflow_at(emulator_factory(meta_client_user="slurmrestd"), credentials_file, monkeypatch)
    with contextlib.suppress(Exception):  # no account kept from an earlier test: learned from this DAG's submit
        Variable.delete(variable_name("google_cloud_default", PROJECT, REGION, CLUSTER_ID))
    gcp_connection.add_foreign_jobs(3, "nobody", name="theirs")
    gcp_connection.add_foreign_jobs(2, "nobody", name="theirs-done", state="COMPLETED")
    dag_run, states = run(load_dag("slurm_surface.py", "list_jobs"))
    assert str(dag_run.state) == "success", (states, "".join(capfd.readouterr())[-3000:])
    listed = xcom_values(dag_run)
    mine = listed["submit"]
    assert [job["job_id"] for job in listed["own"]] == [mine], listed
    assert {job["name"] for job in listed["everyone"]} >= {"mine", "theirs"}
    assert len(listed["everyone"]) >= 4
    assert len(listed["everyone_limited"]) == 2
    # The history: filtered by Slurm itself (users=the account learned from the submitted job).
    assert {job["name"] for job in listed["own_history"]} <= {"mine"}
    assert all(job["name"] != "theirs-done" for job in listed["own_history"])
