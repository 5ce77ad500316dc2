"""A job id Slurm does not know: the get operator and the sensor fail with a message that says so."""

from __future__ import annotations

import pytest

from tests.conftest import load_dag
from tests.live_slurm.conftest import run_dag_capture
from tests.live_slurm.lab import Lab

pytestmark = pytest.mark.slurm

UNKNOWN_JOB_ID = 60000000


def test_get_operator_fails_on_an_unknown_job(
    lab: Lab, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert lab.job(UNKNOWN_JOB_ID) is None, "the 'unknown' job id exists on the lab"
    monkeypatch.setenv("SLURMAPI_LIVE_JOB_ID", str(UNKNOWN_JOB_ID))
    result = run_dag_capture(load_dag("slurm_live_dags.py", "get_job"), capfd)
    assert (result.state, result.tasks) == ("failed", {"get": "failed"})
    assert (
        f"Slurm job {UNKNOWN_JOB_ID} is in neither the live queue nor the accounting history: check the job id "
        "and the cluster (project, region, cluster_id)." in result.log
    )


def test_sensor_fails_on_an_unknown_job_after_its_grace(
    mode: bool, lab: Lab, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURMAPI_LIVE_JOB_ID", str(UNKNOWN_JOB_ID))
    monkeypatch.setenv("SLURMAPI_LIVE_GRACE", "2")
    result = run_dag_capture(load_dag("slurm_live_dags.py", "sensor"), capfd)
    assert (result.state, result.tasks) == ("failed", {"watch": "failed"})
    assert (
        f"Slurm job {UNKNOWN_JOB_ID} is in neither the live queue nor the history yet; looking again for up to 2s"
        in result.log
    )
    assert f"Slurm job {UNKNOWN_JOB_ID} has been in neither the live queue nor the accounting history for" in result.log
    assert "(grace 2s). Check the job id and the cluster" in result.log
    if mode:
        assert "running trigger in line" in result.log, "the deferrable sensor never deferred"
