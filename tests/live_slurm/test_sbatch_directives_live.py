"""The operator runs a script with #SBATCH lines on real Slurm, sync and deferrable, wrapped (the default)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import load_dag
from tests.live_slurm.conftest import run_dag_capture
from tests.live_slurm.lab import LAB_CHROOT_TMP, Lab


def test_the_directives_of_the_script_shape_the_real_job(
    mode: bool, gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str]
) -> None:
    result = run_dag_capture(load_dag("slurm_sbatch_directives.py", "directives"), capfd)
    assert result.state == "success", result.log[-3000:]
    job_id = result.job(gateway)
    record = lab.final(job_id, timeout=120).raw
    assert record["name"] == "sbatch-directives"
    assert record["time_limit"]["number"] == 20  # job={"time_limit": 20} over --time=0:45:00
    assert record["tasks"]["number"] == 2 and record["cpus_per_task"]["number"] == 1
    assert record["standard_output"] == f"/tmp/sbatch-directives-{job_id}.out"  # %x-%j, expanded by Slurm
    assert record["comment"].startswith("nightly train | airflow dag=slurm_sbatch_directives task=job")
    assert "job['time_limit']=20 kept over #SBATCH --time=0:45:00 (script line 6)" in result.log
    output = LAB_CHROOT_TMP / f"sbatch-directives-{job_id}.out"
    assert output.read_text().strip() == "epochs=3"  # --export=ALL,TRAIN_EPOCHS=3, through the wrapper
    output.unlink()
