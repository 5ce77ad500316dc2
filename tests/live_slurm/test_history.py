"""A finished job that has left the live queue (MinJobAge) is read from the accounting history.

The job is submitted through the hook when the session starts (``aged_job``); each test waits until it
has finished and left the live queue (10-14 s after its end), so the tests pass in any order and alone.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import load_dag
from tests.live_slurm.conftest import AgedJob, make_hook, run_dag_capture
from tests.live_slurm.lab import Lab

pytestmark = pytest.mark.slurm


@pytest.fixture
def purged_job(aged_job: AgedJob, lab: Lab, monkeypatch: pytest.MonkeyPatch) -> int:
    lab.final(aged_job.job_id, timeout=300)  # a shared queue may keep it pending for a while
    record = lab.wait_purged(aged_job.job_id, timeout=90)
    assert record.state == "COMPLETED", record
    monkeypatch.setenv("SLURMAPI_LIVE_JOB_ID", str(aged_job.job_id))
    return aged_job.job_id


def test_get_operator_reads_a_purged_job_from_history(
    purged_job: int, lab: Lab, capfd: pytest.CaptureFixture[str]
) -> None:
    result = run_dag_capture(load_dag("slurm_live_dags.py", "get_job"), capfd)
    assert (result.state, result.tasks) == ("success", {"get": "success"})
    job = result.xcom("get")
    assert (job["job_id"], job["source"], job["state"], job["exit_code"]) == (purged_job, "history", "COMPLETED", 0)
    assert job["name"] == "slurm-live-aged" and job["finished"] is True
    assert f"Slurm job {purged_job}: COMPLETED" in result.log
    assert lab.live(purged_job) is None, "the job is back in the live queue?"


def test_sensor_succeeds_on_a_purged_completed_job(
    mode: bool, purged_job: int, capfd: pytest.CaptureFixture[str]
) -> None:
    result = run_dag_capture(load_dag("slurm_live_dags.py", "sensor"), capfd)
    assert (result.state, result.tasks) == ("success", {"watch": "success"})
    assert f"Slurm job {purged_job}: COMPLETED" in result.log


@pytest.mark.parametrize("api_version", ["v0.0.40", "v0.0.41", "v0.0.42"])
def test_hook_reads_a_purged_job_from_history_with_each_version(
    purged_job: int, api_version: str, gateway: Any, lab: Lab
) -> None:
    hook = make_hook(gateway, api_version)
    assert hook.get_live_job(purged_job) is None
    job = hook.get_job(purged_job)
    assert job is not None, f"{api_version}: the history does not know job {purged_job}"
    assert (job.source, job.state.value, job.exit.return_code, job.name) == (
        "history",
        "COMPLETED",
        0,
        "slurm-live-aged",
    )
    # v0.0.40's history has no stdout fields at all; later versions give the expanded path.
    status, raw = lab.call("GET", f"/slurmdb/{api_version}/job/{purged_job}")
    assert status == 200
    expected = raw["jobs"][-1].get("stdout_expanded")
    assert expected == (None if api_version == "v0.0.40" else f"/tmp/slurm-{purged_job}.out"), raw["jobs"][-1].keys()
    assert job.stdout == expected
