"""Each way a job ends, through Airflow and the gateway, on the real Slurm: task state, Slurm's state, the log."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import load_dag
from tests.live_slurm.conftest import make_hook, run_dag_capture
from tests.live_slurm.lab import MISSING_ENVIRONMENT_ERROR, SUBMIT_REFUSED_STATUS, Lab, V, provider_version

pytestmark = pytest.mark.slurm


def test_completed_job_succeeds(mode: bool, gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str]) -> None:
    result = run_dag_capture(load_dag("slurm_scenarios.py", "completes"), capfd)
    assert (result.state, result.tasks) == ("success", {"job": "success"})
    job_id = result.job(gateway)
    record = lab.final(job_id)
    assert (record.state, record.return_code, record.signal) == ("COMPLETED", 0, None), record
    assert f"hello from {job_id}" in lab.output(job_id)
    assert f"Submitted Slurm job {job_id}" in result.log
    assert f"Slurm job {job_id} COMPLETED after" in result.log
    final = result.xcom("job", "slurm_job")
    assert final["state"] == "COMPLETED" and final["exit_code"] == 0 and final["job_id"] == job_id
    assert result.xcom("job") == job_id
    if mode:
        assert "running trigger in line" in result.log, "the deferrable run never deferred"


@pytest.mark.parametrize(
    ("scenario", "state", "reason", "says"),
    [
        ("exit3", "FAILED", "NonZeroExitCode", "exit code 3"),
        ("sigkill", "FAILED", None, "signal KILL"),
    ],
)
def test_failed_job_fails_the_task_with_slurms_words(
    scenario: str,
    state: str,
    reason: str | None,
    says: str,
    mode: bool,
    gateway: Any,
    lab: Lab,
    capfd: pytest.CaptureFixture[str],
) -> None:
    result = run_dag_capture(load_dag("slurm_scenarios.py", scenario), capfd)
    assert (result.state, result.tasks) == ("failed", {"job": "failed"})
    job_id = result.job(gateway)
    record = lab.final(job_id)
    assert record.state == state, record
    if scenario == "exit3":
        assert (record.reason, record.return_code) == ("NonZeroExitCode", 3), record
    else:
        assert record.signal == "KILL", f"Slurm's exit_code has no KILL signal: {record.exit_code}"
    # What the task fails with: "Slurm job 28 (scenario-exit3), ended FAILED, reason ..., exit code 3. Output: ..."
    message = rf"Slurm job {job_id} \(scenario-{scenario}\),? ended {state}\b"
    assert re.search(message, result.log), f"the failure message /{message}/ is not in the log"
    assert says in result.log
    if reason:
        assert f"reason {reason}" in result.log
    assert f"Output: /tmp/slurm-{job_id}.out" in result.log
    if mode:
        assert "running trigger in line" in result.log, "the deferrable run never deferred"


def test_missing_fields_are_filled_and_said(
    mode: bool, gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str]
) -> None:
    """No working directory and no environment: the operator fills both, logs it, and the job runs."""
    result = run_dag_capture(load_dag("slurm_scenarios.py", "defaults_filled"), capfd)
    assert result.state == "success", result.tasks
    assert "job.current_working_directory was not set; using '/tmp'" in result.log
    assert "job.environment was not set; using ['PATH=/usr/local/bin:/usr/bin:/bin']" in result.log
    record = lab.final(result.job(gateway))
    assert record.state == "COMPLETED", record
    assert record.raw.get("current_working_directory", "/tmp") == "/tmp"


def test_bad_partition_fails_with_slurms_reason_and_no_job(
    mode: bool, gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str]
) -> None:
    result = run_dag_capture(load_dag("slurm_scenarios.py", "bad_partition"), capfd)
    assert (result.state, result.tasks) == ("failed", {"job": "failed"})
    assert f"Slurm answered HTTP {SUBMIT_REFUSED_STATUS} to POST /slurm/{provider_version()}/job/submit" in result.log
    assert "2000 Invalid partition name specified (Batch job submission failed)" in result.log
    assert result.jobs(gateway) == []
    status, body = lab.call("GET", f"/slurm/{V}/jobs/")
    assert status == 200
    assert not [j for j in body["jobs"] if j["name"] == "scenario-bad_partition"], "Slurm queued the refused job"


def test_missing_environment_slurm_refuses_raw_submit(gateway: Any, lab: Lab) -> None:
    """Through the hook's raw call, without ``environment``: Slurm's own refusal reaches the caller."""
    from airflow_provider_slurmapi.slurm.api.errors import SlurmError

    hook = make_hook(gateway)
    body = {
        "job": {"name": "live-no-environment", "partition": "debug", "current_working_directory": "/tmp"},
        "script": "#!/bin/bash\necho x\n",
    }
    response = hook.call("POST", hook.client.paths.submit(), body)
    assert response.status == SUBMIT_REFUSED_STATUS, response
    number, text = MISSING_ENVIRONMENT_ERROR
    assert [e["error_number"] for e in response.errors] == [number], response.errors
    assert response.errors[0]["error"] == text
    with pytest.raises(SlurmError) as caught:
        response.raise_for_errors()
    assert f"HTTP {SUBMIT_REFUSED_STATUS}" in str(caught.value)
    assert f"{number} {text} (Batch job submission failed)" in str(caught.value)
    assert "job_id" not in (response.body or {}) or not response.body.get("job_id")
