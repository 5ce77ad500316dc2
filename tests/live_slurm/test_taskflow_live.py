"""``@task.slurm`` on real Slurm, sync and deferrable: the returned script runs as the task's job."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import load_dag
from tests.live_slurm.conftest import run_dag_capture
from tests.live_slurm.lab import LAB_CHROOT_TMP, Lab


def test_task_slurm_runs_the_returned_script_on_real_slurm(
    mode: bool, gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str]
) -> None:
    result = run_dag_capture(load_dag("slurm_lineage.py", "taskflow"), capfd)
    assert result.state == "success", result.log[-3000:]
    assert result.tasks == {"learning_rate": "success", "train": "success", "from_file": "success"}
    train, from_file = result.xcom("train", key="slurm_job_id"), result.xcom("from_file", key="slurm_job_id")
    assert lab.final(train, timeout=120).state == lab.final(from_file, timeout=120).state == "COMPLETED"
    # The upstream task's XCom and the rendered param reached the function; template text in a value
    # stays text. The script ran in the job's working directory (/tmp, inside the lab's chroot).
    written = LAB_CHROOT_TMP / f"train-{train}.txt"
    assert written.read_text().startswith("model=tiny{{ 7 * 7 }} rate=0.125 ds=20"), written.read_text()
    written.unlink()
