"""The accounting summary of a real Slurm 24.11 job, checked against the lab's own history record.

The lab's node has no GPUs and gathers no step statistics (``JobAcctGatherType=jobacct_gather/none``,
``CR_Core``: no memory allocated), so the summary shows cpu, node count and node-hours, 0 GPU-hours,
"MaxRSS not accounted" and the requeue count. Measured: the history held the finished record 0.01 s
after the live queue said the job was over (3 of 3 jobs, quiet lab).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import load_dag
from tests.live_slurm.conftest import run_dag_capture
from tests.live_slurm.lab import Lab

pytestmark = pytest.mark.slurm


def test_a_real_jobs_summary_matches_its_history_record(
    mode: bool, gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str]
) -> None:
    result = run_dag_capture(load_dag("slurm_scenarios.py", "completes_slowly"), capfd)
    assert result.state == "success", result.tasks
    job_id = result.job(gateway)
    record = result.xcom("job", key="slurm_job")
    accounting = record["accounting"]
    assert accounting["recorded"] is True, accounting

    history = lab.history(job_id)
    assert history is not None
    raw = history.raw
    allocated = {t["type"]: t["count"] for t in raw["tres"]["allocated"] if t["count"] >= 0}
    assert accounting["state"] == "COMPLETED" and accounting["exit_code"] == 0 and accounting["signal"] is None
    assert accounting["elapsed_seconds"] == raw["time"]["elapsed"] >= 6
    assert accounting["cpus"] == allocated["cpu"] and accounting["nodes"] == allocated["node"] == 1
    assert accounting["node_list"] == raw["nodes"]
    assert accounting["node_hours"] == pytest.approx(raw["time"]["elapsed"] / 3600, abs=1e-4)
    assert (accounting["gpus"], accounting["gpu_hours"]) == (0, 0.0)
    assert accounting["requeues"] == raw["restart_cnt"] == 0
    assert accounting["max_rss_bytes"] is None  # the lab gathers no step statistics

    lines = re.findall(rf"Slurm job {job_id} accounting: [^\n]*", result.log)
    assert lines and lines[0].startswith(f"Slurm job {job_id} accounting: COMPLETED after ")
    assert f"cpu={allocated['cpu']}" in lines[0] and "MaxRSS not accounted" in lines[0]
    assert "requeued 0 times" in lines[0]
