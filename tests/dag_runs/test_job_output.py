"""The job's last output and its progress reach the task log, through the job's own record (emulator)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import load_dag, run_dag


@pytest.fixture(params=[True, False], ids=["deferrable", "sync"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(request.param).lower())
    return bool(request.param)


def _run(name: str, capfd: pytest.CaptureFixture[str], emulator: Any) -> tuple[str, int, str]:
    capfd.readouterr()
    state, _ = run_dag(load_dag("slurm_job_output.py", name))
    out = "".join(capfd.readouterr())
    [job] = [job for job in emulator.jobs() if job["name"] == f"output-{name}"]
    return state, job["job_id"], out


@pytest.mark.parametrize(
    ("scenario", "lines"),
    [
        ("bash_fails", ["step 1 ok", "loading data", "ValueError: bad shard 7"]),
        ("python_fails", ["python starting", "RuntimeError: CUDA out of memory (python)"]),
    ],
)
def test_failed_job_shows_its_last_output(
    scenario: str, lines: list[str], mode: bool, airflow_db: Any, gcp_connection: Any, capfd: Any
) -> None:
    state, job_id, out = _run(scenario, capfd, gcp_connection)
    assert state == "failed"
    expected = f"Last output of job {job_id}:\n" + "\n".join(lines)
    assert expected in out, out[-3000:]
    assert "ended FAILED" in out


def test_progress_messages_are_logged_once_each_in_order(
    mode: bool, airflow_db: Any, gcp_connection: Any, capfd: Any
) -> None:
    state, job_id, out = _run("progress", capfd, gcp_connection)
    assert state == "success"
    seen = re.findall(rf"Slurm job {job_id}: (epoch \d/3 loss=0\.\d)", out)
    expected = ["epoch 1/3 loss=0.5", "epoch 2/3 loss=0.4", "epoch 3/3 loss=0.3"]
    # Airflow 2.11's dag.test() prints each log record through two handlers (stdout and stderr, captured
    # one after the other): each message has as many copies as the others (logged once, not once per
    # poll), and they come in order.
    assert list(dict.fromkeys(seen)) == expected, out[-3000:]
    assert len(set(Counter(seen).values())) == 1, out[-3000:]


@pytest.mark.parametrize("scenario", ["python_progress", "python_progress_plain"])
def test_python_sets_progress_with_plain_scontrol(
    scenario: str, airflow_db: Any, gcp_connection: Any, capfd: Any
) -> None:
    """Wrapped, or as given (nothing configured): progress a script sets itself needs no wrapper."""
    state, job_id, out = _run(scenario, capfd, gcp_connection)
    assert state == "success"
    assert re.findall(rf"Slurm job {job_id}: (python step \d/2)", out) == ["python step 1/2", "python step 2/2"]


def test_output_over_the_limit_is_cut_to_its_last_lines(airflow_db: Any, gcp_connection: Any, capfd: Any) -> None:
    from airflow_provider_slurmapi.slurm.jobs.extra import read_extra

    state, job_id, out = _run("long_output", capfd, gcp_connection)
    assert state == "failed"
    # The Extra the job set, as the emulator keeps it: the live record may have left the queue already
    # (MinJobAge is 2 s here, and Airflow 3.1.8's dag.test() takes longer than that to end the run).
    extra = _extra_of(gcp_connection, job_id)
    assert extra and len(extra.encode()) <= 1024
    report = out.split(f"Last output of job {job_id}:\n", 1)[1]
    assert "output line 400" in report
    lines = [line for line in (read_extra(extra).output or "").split("\n")]
    assert lines[-1] == "output line 400" and all(re.fullmatch(r"output line \d+", line) for line in lines)
    assert int(lines[0].split()[-1]) > 300, "the first, cut line was kept"


def test_report_output_false_submits_the_script_byte_for_byte(airflow_db: Any, gcp_connection: Any, capfd: Any) -> None:
    from tests.dag_runs.dag_files.slurm_job_output import SCENARIOS

    state, job_id, out = _run("untouched", capfd, gcp_connection)
    assert state == "failed"
    copy = Path(gcp_connection.config.workdir) / f"script-copy-{job_id}"
    assert copy.read_text() == SCENARIOS["untouched"]["script"]
    assert "Last output of job" not in out and "No output was reported" not in out


def test_nothing_configured_submits_the_script_byte_for_byte(
    mode: bool, airflow_db: Any, gcp_connection: Any, capfd: Any, monkeypatch: Any
) -> None:
    """The default a user gets (no argument, no setting): no wrapper, and a failure says how to turn it on."""
    from airflow_provider_slurmapi.slurm.jobs.job import REPORT_OUTPUT_HINT
    from tests.dag_runs.dag_files.slurm_job_output import SCENARIOS

    monkeypatch.delenv("AIRFLOW__SLURMAPI__REPORT_OUTPUT", raising=False)
    state, job_id, out = _run("default", capfd, gcp_connection)
    assert state == "failed"
    script = SCENARIOS["default"]["script"].encode()
    assert _emulator_file(gcp_connection, job_id, "sh").read_bytes() == script  # what was submitted
    assert (Path(gcp_connection.config.workdir) / f"script-copy-{job_id}").read_bytes() == script  # what ran
    assert "Last output of job" not in out and "not reported" not in out
    assert "ended FAILED" in out and REPORT_OUTPUT_HINT in out, out[-3000:]
    assert "\n" not in REPORT_OUTPUT_HINT and "report_output=True" in REPORT_OUTPUT_HINT


def test_job_output_goes_through_secret_masking(mode: bool, airflow_db: Any, gcp_connection: Any, capfd: Any) -> None:
    """A value masked in Airflow (here by the task's pre_execute) never reaches the log from the job's output."""
    from tests.dag_runs.dag_files.slurm_job_output import SECRET

    state, job_id, out = _run("secret", capfd, gcp_connection)
    assert state == "failed"
    assert f"Last output of job {job_id}:\ntoken=***" in out, out[-3000:]
    assert SECRET not in out


def _emulator_file(emulator: Any, job_id: int, suffix: str) -> Path:
    """What the emulator keeps of a job in its state directory: the script it ran, the Extra it was set."""
    return Path(emulator.config.workdir) / ".emulator" / f"job{job_id}.{suffix}"


def _extra_of(emulator: Any, job_id: int) -> str:
    path = _emulator_file(emulator, job_id, "extra")
    return path.read_text() if path.exists() else ""


def test_values_airflow_masks_and_sensitive_names_are_redacted_on_the_node(
    airflow_db: Any, gcp_connection: Any, capfd: Any
) -> None:
    """The job's Extra (readable by every user of the cluster) never holds the secret, the rest of the line does."""
    from tests.dag_runs.dag_files.slurm_job_output import SECRET

    state, job_id, out = _run("env_secret", capfd, gcp_connection)
    assert state == "failed"
    extra = _extra_of(gcp_connection, job_id)
    assert SECRET not in extra and "tok-by-name-only" not in extra
    assert extra.endswith("connecting to *** failed; API_TOKEN=***"), extra
    assert SECRET not in out


@pytest.mark.parametrize(("setting", "wrapped"), [(None, False), ("True", True), ("False", False)])
def test_report_output_follows_the_deployment_setting_unless_the_task_says(
    setting: str | None, wrapped: bool, airflow_db: Any, gcp_connection: Any, capfd: Any, monkeypatch: Any
) -> None:
    from tests.dag_runs.dag_files.slurm_job_output import SCENARIOS

    if setting is None:
        monkeypatch.delenv("AIRFLOW__SLURMAPI__REPORT_OUTPUT", raising=False)
    else:
        monkeypatch.setenv("AIRFLOW__SLURMAPI__REPORT_OUTPUT", setting)
    state, job_id, _ = _run("by_config", capfd, gcp_connection)
    assert state == "success"
    sent = _emulator_file(gcp_connection, job_id, "sh").read_text()
    script = SCENARIOS["by_config"]["script"]  # byte for byte, its final newline too
    assert sent.startswith("#!/bin/sh\n# Wrapped by airflow-provider-slurmapi") is wrapped
    assert (sent == script) is not wrapped
    assert (Path(gcp_connection.config.workdir) / f"script-copy-{job_id}").read_text() == script


def test_report_output_is_a_declared_provider_option() -> None:
    from airflow_provider_slurmapi.get_provider_info import get_provider_info

    option = get_provider_info()["config"]["slurmapi"]["options"]["report_output"]
    assert (option["type"], option["default"], option["sensitive"]) == ("boolean", "False", False)
