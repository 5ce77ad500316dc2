"""A job that hits its 1-minute time limit (TIMEOUT, TimeLimit), waited for by a deferrable task.

It takes ~90 s of real time, so it runs ONCE, in a background process started with the session
(``timeout_run``: ``dag.test()`` of the ``timeout`` scenario, own Airflow home); this test waits for
its outcome, whenever it runs.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.live_slurm.conftest import TIMEOUT_RUN_BUDGET, BackgroundDagRun
from tests.live_slurm.lab import Lab

pytestmark = pytest.mark.slurm


def test_time_limit_ends_in_timeout(timeout_run: BackgroundDagRun, lab: Lab, gateway: Any) -> None:
    outcome, log = timeout_run.result(within=TIMEOUT_RUN_BUDGET)
    assert (outcome["state"], outcome["tasks"]) == ("failed", {"job": "failed"}), log[-5000:]
    match = re.search(r"Submitted Slurm job (\d+)", log)
    assert match, log[-5000:]
    job_id = int(match.group(1))
    assert timeout_run.last_live is not None, "the job's live record was never read"
    live = timeout_run.last_live[1]["jobs"][0]
    assert (live["job_state"], live["state_reason"]) == (["TIMEOUT"], "TimeLimit"), live["job_state"]
    record = lab.final(job_id)  # by now usually from the history, which keeps no TimeLimit reason
    assert record.state == "TIMEOUT" and record.ran, record
    assert "running trigger in line" in log, "the task never deferred"
    assert re.search(rf"Slurm job {job_id} \(scenario-timeout\),? ended TIMEOUT, reason TimeLimit", log), log[-5000:]
    assert [j for j in gateway.jobs() if j["job_id"] == job_id], "the job did not go through the session's gateway"
