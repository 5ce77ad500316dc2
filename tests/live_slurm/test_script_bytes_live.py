"""Real Slurm is the judge of the script's bytes: each job of ``slurm_script_bytes`` writes the SHA-256
of the script its node runs (``$0``, the copy slurmd stored), which must be the user's bytes, final
newline and trailing blank line included; the two scripts with DOS line breaks send no job."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from tests.conftest import load_dag
from tests.dag_runs.dag_files.slurm_script_bytes import SUCCEEDS
from tests.dag_runs.test_script_bytes import expected
from tests.live_slurm.conftest import run_dag_capture
from tests.live_slurm.lab import LAB_CHROOT_TMP, Lab


def test_each_form_of_the_script_reaches_real_slurm_byte_for_byte(
    gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str]
) -> None:
    result = run_dag_capture(load_dag("slurm_script_bytes.py", "script_bytes"), capfd)
    assert {task: result.tasks[task] for task in SUCCEEDS} == dict.fromkeys(SUCCEEDS, "success"), result.log[-3000:]
    jobs = {task: result.job(gateway, task) for task in SUCCEEDS}
    assert not result.jobs(gateway, "crlf_file") and not result.jobs(gateway, "crlf_param")
    digests = {}
    for task, job_id in jobs.items():
        assert lab.final(job_id, timeout=120).state == "COMPLETED", task
        written = LAB_CHROOT_TMP / f"bytes-{job_id}.txt"
        digests[task] = written.read_text().split()[0]
        written.unlink()
    assert digests == {task: hashlib.sha256(expected(task)).hexdigest() for task in jobs}
