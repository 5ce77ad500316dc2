"""Errors no retry can fix fail the task at its first try; the others still use the task's retries.

Each DAG runs for real (``dag.test()``) against the emulator with ``retries`` set, and the tries are
counted twice: by the task instance's try number and by the submits the emulator served.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import load_dag


def run_with_retries(dag: Any, retries: int) -> tuple[str, int]:
    """``dag.test()`` with ``retries`` (no delay) on the task ``job``; the run's state and the task's tries."""
    from airflow.utils.session import create_session

    task = dag.task_dict["job"]
    task.retries, task.retry_delay = retries, timedelta(seconds=0)
    run = dag.test()
    with create_session() as session:
        [ti] = [ti for ti in run.get_task_instances(session=session) if ti.task_id == "job"]
        return str(run.state), int(ti.try_number)


@pytest.fixture(params=[True, False], ids=["deferrable", "sync"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(request.param).lower())
    return bool(request.param)


def test_a_bad_partition_fails_at_the_first_try_and_names_the_clusters_partitions(
    mode: bool, airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    gcp_connection.reset_calls()
    state, tries = run_with_retries(load_dag("slurm_scenarios.py", "bad_partition"), retries=2)
    out = "".join(capfd.readouterr())
    assert state == "failed"
    assert gcp_connection.calls()["by_kind"].get("submit") == 1, "a retry submitted the refused job again"
    assert tries == 1
    assert "2000 Invalid partition name specified" in out
    assert "The cluster's partitions: a3, debug." in out
    assert "Not retried" in out


def test_a_failing_partitions_call_does_not_hide_the_refusal(
    airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    gcp_connection.add_fault("500-before@partitions")
    gcp_connection.reset_calls()
    state, tries = run_with_retries(load_dag("slurm_scenarios.py", "bad_partition"), retries=2)
    out = "".join(capfd.readouterr())
    assert gcp_connection.faults() == [], "the partitions call was not made: nothing tested"
    assert (state, tries) == ("failed", 1)
    assert "2000 Invalid partition name specified" in out
    assert "Could not list the cluster's partitions" in out
    assert "The cluster's partitions:" not in out


def test_a_missing_script_file_fails_at_the_first_try_without_a_call(
    airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    dag = load_dag("slurm_scenarios.py", "completes")
    task = dag.task_dict["job"]
    task.script = task._script_file = "no_such_script.sh"  # as built with script="no_such_script.sh"
    gcp_connection.reset_calls()
    state, tries = run_with_retries(dag, retries=2)
    assert (state, tries) == ("failed", 1)
    assert gcp_connection.calls()["total"] == 0
    out = "".join(capfd.readouterr())
    assert "script='no_such_script.sh' is one line ending in .sh, .sbatch" in out
    # the message names the folders it looked in: the DAG's folder (and template_searchpath, none here)
    assert f"template_searchpath (searched: {Path(dag.fileloc).parent})." in out


def test_a_bad_spec_fails_at_the_first_try(
    airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    dag = load_dag("slurm_scenarios.py", "completes")
    dag.task_dict["job"].job = {**dag.task_dict["job"].job, "time_limit": "soon"}
    gcp_connection.reset_calls()
    assert run_with_retries(dag, retries=2) == ("failed", 1)
    assert gcp_connection.calls()["total"] == 0


def test_a_request_of_a_megabyte_fails_at_the_first_try(
    airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    dag = load_dag("slurm_scenarios.py", "completes")
    dag.task_dict["job"].script = "#!/bin/bash\n" + "# padding\n" * 110_000
    gcp_connection.reset_calls()
    assert run_with_retries(dag, retries=2) == ("failed", 1)
    assert gcp_connection.calls()["by_kind"].get("submit") is None
    assert "refuses requests of 1 MB" in "".join(capfd.readouterr())


def test_a_failed_job_still_uses_the_tasks_retries(
    airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job that exits 3 may pass on a retry (a flaky node, a full disk): the task retries it."""
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    gcp_connection.reset_calls()
    assert run_with_retries(load_dag("slurm_scenarios.py", "exit3"), retries=1) == ("failed", 2)
    assert gcp_connection.calls()["by_kind"].get("submit") == 2


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "poke"])
def test_permission_denied_while_watching_fails_the_sensor_at_its_first_try(
    deferrable: bool, airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The principal loses its permission while the sensor waits: the deferred wait and the poke alike
    fail for good (a retry would be denied the same way)."""
    import threading

    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
    from tests.conftest import CLUSTER
    from tests.dag_runs.test_watchers import submit

    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(deferrable).lower())
    job_id = submit(gcp_connection, "#!/bin/bash\nsleep 60\n")
    monkeypatch.setenv("SLURMAPI_WATCH_JOB_ID", str(job_id))
    dag = load_dag("slurm_watchers.py", "sensor")
    task = dag.task_dict["sense"]
    task.retries, task.retry_delay = 2, timedelta(seconds=0)
    gcp_connection.wait_for_state(job_id, ["RUNNING"], timeout=20)
    revoke = threading.Timer(2.0, lambda: setattr(gcp_connection.config, "deny_permission", True))
    revoke.start()
    try:
        from airflow.utils.session import create_session

        run = dag.test()
        with create_session() as session:
            [ti] = run.get_task_instances(session=session)
            assert (str(run.state), int(ti.try_number)) == ("failed", 1)
    finally:
        revoke.cancel()
        gcp_connection.config.deny_permission = False
        SlurmApiHook(**CLUSTER).cancel_job(job_id)
