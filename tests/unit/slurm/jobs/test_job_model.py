"""One job model for live and history answers, checked on every real job answer."""

from __future__ import annotations

import json

import pytest

from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob, describe_transition, format_duration
from airflow_provider_slurmapi.slurm.jobs.states import JobState, parse_job_state
from tests.fixtures import fixture_body, fixture_names

LIVE = [
    n
    for n in fixture_names("*_job_*")
    if not n.split("_", 1)[1].startswith("slurmdb")
    and "unknown" not in n
    and "nonnumeric" not in n
    and "purge" not in n
    and "bad_token" not in n
]
HISTORY = [
    n
    for n in fixture_names("*_slurmdb_job_*")
    if "unknown" not in n and "purge" not in n and "bad_token" not in n and "not_configured" not in n
]


@pytest.mark.parametrize("name", LIVE)
def test_every_live_job_answer_parses(name: str) -> None:
    raw = fixture_body(name)["jobs"][0]
    job = SlurmJob.from_live(raw)
    assert job.job_id == raw["job_id"]
    assert job.state.value == raw["job_state"][0]
    assert json.loads(json.dumps(job.to_dict())) == job.to_dict()
    assert SlurmJob.from_dict(job.to_dict()) == job


@pytest.mark.parametrize("name", HISTORY)
def test_every_history_job_answer_parses(name: str) -> None:
    raw = fixture_body(name)["jobs"][0]
    job = SlurmJob.from_history(raw)
    assert job.source == "history"
    assert job.state.value == raw["state"]["current"][0]
    assert SlurmJob.from_dict(job.to_dict()) == job


def test_completed_job_live_and_history_agree() -> None:
    live = SlurmJob.from_live(fixture_body("16_job_A_completed")["jobs"][0])
    history_record = fixture_body("48_slurmdb_job_A")["jobs"][0]
    history = SlurmJob.from_history(history_record)
    for field in ("job_id", "state", "exit_code", "start_time", "end_time", "elapsed_seconds", "nodes", "name"):
        assert live.to_dict()[field] == history.to_dict()[field], field
    assert live.succeeded and history.succeeded
    assert live.describe() == f"COMPLETED after {history_record['time']['elapsed']}s"  # ``sleep 5``: 5 or 6 s


def test_failure_messages_carry_state_reason_and_exit() -> None:
    exit3 = SlurmJob.from_live(fixture_body("66_job_failed_exit3_live")["jobs"][0])
    assert not exit3.succeeded
    assert "FAILED" in exit3.failure_message() and "NonZeroExitCode" in exit3.failure_message()
    assert "exit code 3" in exit3.failure_message()
    killed = SlurmJob.from_live(fixture_body("67_job_sigkill_live")["jobs"][0])
    assert "signal KILL" in killed.failure_message() and "RaisedSignal" in killed.failure_message()
    timeout = SlurmJob.from_live(fixture_body("71_job_timeout_live")["jobs"][0])
    assert timeout.state is JobState.TIMEOUT and "TimeLimit" in timeout.failure_message()
    assert "signal TERM" in timeout.failure_message()


def test_running_job_has_no_end_time_yet_and_names_its_node() -> None:
    running = SlurmJob.from_live(fixture_body("09_job_A_running")["jobs"][0])
    assert running.end_time is None and not running.is_finished
    assert running.describe() == "RUNNING on localhost"


def test_cancelled_while_pending_has_no_start() -> None:
    job = SlurmJob.from_history(fixture_body("51_slurmdb_job_H_cancelled_pending")["jobs"][0])
    assert job.start_time is None and job.nodes is None and job.elapsed_seconds is None
    assert job.state is JobState.CANCELLED


def test_paths_of_output_are_read_from_both_shapes() -> None:
    live = SlurmJob.from_live(fixture_body("70_job_with_stdout_stderr_paths")["jobs"][0])
    history = SlurmJob.from_history(fixture_body("75_slurmdb_job_paths")["jobs"][0])
    assert live.stdout and live.stderr and history.stdout
    assert "%j" not in (history.stdout or "")


def test_held_job_reason() -> None:
    held = SlurmJob.from_live(fixture_body("28_job_held_pending")["jobs"][0])
    assert held.describe() == "PENDING (JobHeldUser)"


@pytest.mark.parametrize(
    ("raw", "state", "flags", "finished", "ended"),
    [
        (["RUNNING"], "RUNNING", (), False, False),
        (["COMPLETED"], "COMPLETED", (), True, True),
        (["COMPLETED", "COMPLETING"], "COMPLETED", ("COMPLETING",), False, True),
        (["CANCELLED", "COMPLETING"], "CANCELLED", ("COMPLETING",), False, True),  # epilog runs; never runs again
        (["PENDING", "REQUEUED"], "PENDING", ("REQUEUED",), False, False),
        (["FAILED", "REQUEUED"], "FAILED", ("REQUEUED",), False, False),  # goes back to PENDING
        ("CANCELLED", "CANCELLED", (), True, True),  # v0.0.39 and older: one string
        ("FAILED,COMPLETING", "FAILED", ("COMPLETING",), False, True),
        (["OUT_OF_MEMORY"], "OUT_OF_MEMORY", (), True, True),
        (["SOMETHING_NEW"], "UNKNOWN", ("SOMETHING_NEW",), False, False),
        (None, "UNKNOWN", (), False, False),
    ],
)
def test_state_parsing(raw: object, state: str, flags: tuple[str, ...], finished: bool, ended: bool) -> None:
    info = parse_job_state(raw)  # type: ignore[arg-type]
    assert (info.state.value, info.flags, info.is_finished, info.has_ended) == (state, flags, finished, ended)


def test_transitions_are_logged_once() -> None:
    pending = SlurmJob.from_live(fixture_body("17_job_F_pending_queued_behind_A_B")["jobs"][0])
    running = SlurmJob.from_live(fixture_body("09_job_A_running")["jobs"][0])
    assert describe_transition(None, pending) is not None
    assert describe_transition(pending, pending) is None
    line = describe_transition(pending, running)
    assert line is not None and "->" in line and "RUNNING on localhost" in line
    assert format_duration(303) == "5m03s" and format_duration(3723) == "1h02m03s"
