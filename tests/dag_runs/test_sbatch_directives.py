"""A script's #SBATCH lines reach the job through the operator, sync and deferrable (emulator)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import CLUSTER, load_dag, run_dag


@pytest.fixture(params=[True, False], ids=["deferrable", "sync"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(request.param).lower())
    return bool(request.param)


def _record(emulator: Any, name: str) -> dict[str, Any]:
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook

    [job] = [job for job in emulator.jobs() if job["name"] == name]
    hook = SlurmApiHook(**CLUSTER)
    answer = hook.call("GET", hook.client.paths.job(job["job_id"]))
    assert answer.body is not None
    record: dict[str, Any] = answer.body["jobs"][0]
    return record


def test_the_directives_become_job_fields_and_job_overrides_one_of_them(
    mode: bool, airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    capfd.readouterr()
    state, _ = run_dag(load_dag("slurm_sbatch_directives.py", "directives"))
    out = "".join(capfd.readouterr())
    assert state == "success", out[-3000:]
    record = _record(gcp_connection, "sbatch-directives")
    job_id = record["job_id"]
    workdir = str(gcp_connection.config.workdir)
    assert record["time_limit"]["number"] == 20  # job={"time_limit": 20} wins over --time=0:45:00
    assert record["tasks"]["number"] == 2 and record["cpus_per_task"]["number"] == 1
    assert record["current_working_directory"] == workdir
    assert record["standard_output"] == f"{workdir}/sbatch-directives-{job_id}.out"  # %x-%j, expanded by "Slurm"
    assert record["comment"].startswith("nightly train | airflow dag=slurm_sbatch_directives task=job")
    assert "job['time_limit']=20 kept over #SBATCH --time=0:45:00 (script line 6)" in out
    assert "From the script's #SBATCH lines: name, partition, tasks" in out
    with open(f"{workdir}/sbatch-directives-{job_id}.out") as output:
        assert output.read().strip() == "epochs=3"  # --export=ALL,TRAIN_EPOCHS=3


def test_sbatch_directives_false_leaves_the_lines_as_comments(
    airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    state, _ = run_dag(load_dag("slurm_sbatch_directives.py", "ignored"))
    assert state == "success"
    record = _record(gcp_connection, "sbatch-ignored")
    assert record["time_limit"]["number"] != 45 and record["tasks"]["number"] == 1
    assert not record["comment"].startswith("nightly")


def test_a_refused_directive_fails_the_task_before_anything_is_sent(
    airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    capfd.readouterr()
    gcp_connection.reset_calls()
    state, _ = run_dag(load_dag("slurm_sbatch_directives.py", "refused"))
    out = "".join(capfd.readouterr())
    assert state == "failed"
    assert "#SBATCH --foo=1 (script line 3): unknown option --foo" in out
    assert gcp_connection.calls()["total"] == 0
    assert not [job for job in gcp_connection.jobs() if job["name"] == "sbatch-refused"]
