"""The job's last output and its progress, on the real Slurm: failure messages, progress lines, limits."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import load_dag
from tests.live_slurm.conftest import run_dag_capture
from tests.live_slurm.lab import LAB_CHROOT_TMP, Lab

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize(
    ("scenario", "lines"),
    [
        ("bash_fails", ["step 1 ok", "loading data", "ValueError: bad shard 7"]),
        ("python_fails", ["python starting", "RuntimeError: CUDA out of memory (python)"]),
    ],
)
def test_failed_job_shows_its_last_stderr_lines(
    scenario: str, lines: list[str], mode: bool, gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str]
) -> None:
    result = run_dag_capture(load_dag("slurm_job_output.py", scenario), capfd)
    assert result.state == "failed", result.tasks
    job_id = result.job(gateway)
    record = lab.final(job_id)
    assert record.state == "FAILED", record
    assert record.return_code == (2 if scenario == "bash_fails" else 4), "the wrapper changed the exit code"
    assert f"Last output of job {job_id}:\n" + "\n".join(lines) in result.log


def test_three_progress_messages_show_in_order(
    mode: bool, gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str]
) -> None:
    """Messages 4 s apart, polls every second: each is seen by several polls and logged once."""
    result = run_dag_capture(load_dag("slurm_job_output.py", "progress"), capfd)
    assert result.state == "success", result.tasks
    job_id = result.job(gateway)
    seen = re.findall(rf"Slurm job {job_id}: (epoch \d/3 loss=0\.\d)", result.log)
    assert seen == ["epoch 1/3 loss=0.5", "epoch 2/3 loss=0.4", "epoch 3/3 loss=0.3"]


def test_output_over_1024_bytes_is_cut_to_its_last_lines(
    gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str]
) -> None:
    result = run_dag_capture(load_dag("slurm_job_output.py", "long_output"), capfd)
    assert result.state == "failed"
    job_id = result.job(gateway)
    extra = lab.final(job_id).raw.get("extra") or ""
    assert extra.startswith("airflow-output:\n") and len(extra.encode()) <= 1024
    lines = extra.split("\n")[1:]
    assert lines[-1] == "output line 400" and all(re.fullmatch(r"output line \d+", line) for line in lines)
    assert "output line 400" in result.log


def test_sbatch_lines_are_handled_as_without_the_wrapper(
    gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str]
) -> None:
    """Slurm 24.11's REST API itself ignores #SBATCH lines (measured): wrapped or not, the job is the same."""
    wrapped = run_dag_capture(load_dag("slurm_job_output.py", "sbatch"), capfd)
    plain = run_dag_capture(load_dag("slurm_job_output.py", "sbatch_untouched"), capfd)
    a_id, b_id = wrapped.job(gateway), plain.job(gateway)
    a, b = lab.final(a_id).raw, lab.final(b_id).raw
    for key in ("time_limit", "standard_output", "partition"):
        assert str(a[key]).replace(str(a_id), "%j") == str(b[key]).replace(str(b_id), "%j"), key
    assert (a["exit_code"]["return_code"], b["exit_code"]["return_code"]) == (b["exit_code"]["return_code"],) * 2


def test_report_output_false_submits_the_script_byte_for_byte(
    gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str]
) -> None:
    from tests.dag_runs.dag_files.slurm_job_output import SCENARIOS

    result = run_dag_capture(load_dag("slurm_job_output.py", "untouched"), capfd)
    assert result.state == "failed"
    job_id = result.job(gateway)
    lab.final(job_id)
    assert (LAB_CHROOT_TMP / f"script-copy-{job_id}").read_text() == SCENARIOS["untouched"]["script"]
    assert "Last output of job" not in result.log


def test_nothing_configured_submits_the_script_byte_for_byte(
    gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default a user gets: the batch script Slurm stores and runs ($0) is the user's, byte for byte."""
    from airflow_provider_slurmapi.slurm.jobs.job import REPORT_OUTPUT_HINT
    from tests.dag_runs.dag_files.slurm_job_output import SCENARIOS

    monkeypatch.delenv("AIRFLOW__SLURMAPI__REPORT_OUTPUT", raising=False)
    result = run_dag_capture(load_dag("slurm_job_output.py", "default"), capfd)
    assert result.state == "failed"
    job_id = result.job(gateway)
    assert lab.final(job_id).state == "FAILED"
    assert (LAB_CHROOT_TMP / f"script-copy-{job_id}").read_bytes() == SCENARIOS["default"]["script"].encode()
    assert "Last output of job" not in result.log and REPORT_OUTPUT_HINT in result.log
