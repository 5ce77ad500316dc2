"""Bytes no path can hold, in the fields the emulator opens on disk: answered as the real API does,
and the node is released whatever happens to the job.

Real Slurm 24.11.5 (the lab, v0.0.42, a held job) answered a ``standard_output`` of
``"/tmp/h8-out\\u0000.log"`` with 200 and kept ``/tmp/h8-out``: slurmrestd reads every JSON string as a C
string, which ends at the first NUL. A lone surrogate (``\\ud800``) is not text at all: Google's front
end, which reads the envelope as a protocol buffer (UTF-8 strings only), refuses it with 400
INVALID_ARGUMENT before Slurm sees it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from slurmapi_emulator import EmulatorHandle

from .conftest import Client, wait_until

PATH_FIELDS = ("standard_output", "standard_error", "standard_input", "current_working_directory")
SLEEP = "#!/bin/bash\nsleep 300\n"


@pytest.fixture
def one_cpu(make_emulator: Callable[..., EmulatorHandle]) -> Client:
    """A node with one CPU: a job that kept it would hold every next job PENDING."""
    return Client(make_emulator(cpus=1, minute_seconds=1, min_job_age=30))


def runs_next_job(client: Client) -> None:
    """The node is free: a new job starts and completes."""
    job_id = client.submit_id(script="#!/bin/bash\necho next\n")
    client.emu.wait_for_state(job_id, "COMPLETED", timeout=20)


def _value(field: str, cwd: str, text: str) -> str:
    if field == "current_working_directory":
        return f"{cwd}{text}"
    if field == "standard_input":
        return f"/dev/null{text}"
    return f"{cwd}/out-%j{text}.log"


@pytest.mark.parametrize("field", PATH_FIELDS)
def test_a_nul_in_a_path_field_ends_the_string_there_as_slurm_reads_it(one_cpu: Client, field: str) -> None:
    value = _value(field, one_cpu.cwd, "\x00.tail")
    answer = one_cpu.submit(**{field: value}, script="#!/bin/bash\necho ran\n")
    assert answer.slurm_status == 200, answer.raw_text
    job_id = int(answer.body["job_id"])
    summary = one_cpu.emu.wait_for_state(job_id, ("COMPLETED", "FAILED"), timeout=20)
    record = one_cpu.job(job_id).jobs[0]
    kept = value.split("\x00")[0].replace("%j", str(job_id))
    assert record[field] == kept, record[field]
    assert "\x00" not in repr(record) and ".tail" not in str(record[field])
    assert summary["state"] == "COMPLETED", summary
    if field == "standard_output":
        assert Path(kept).read_text() == "ran\n"
    runs_next_job(one_cpu)


def test_a_nul_in_every_string_of_a_job_never_wedges_the_node(one_cpu: Client) -> None:
    cwd = one_cpu.cwd
    answer = one_cpu.submit(
        name="na\x00me",
        standard_output=f"{cwd}/a\x00",
        standard_error=f"{cwd}/b\x00",
        environment=["PATH=/bin:/usr/bin\x00:/evil", "X=1\x00"],
        argv=["x\x00", "y\x00z"],
        script="#!/bin/bash\necho $X\n\x00echo never\n",
    )
    assert answer.slurm_status == 200, answer.raw_text
    job_id = int(answer.body["job_id"])
    assert one_cpu.emu.wait_for_state(job_id, ("COMPLETED", "FAILED"), timeout=20)["state"] == "COMPLETED"
    assert Path(f"{cwd}/a").read_text() == "1\n"
    assert one_cpu.job(job_id).jobs[0]["name"] == "na"
    runs_next_job(one_cpu)


@pytest.mark.parametrize("field", PATH_FIELDS)
def test_a_lone_surrogate_in_a_path_field_gets_400_naming_the_field(one_cpu: Client, field: str) -> None:
    answer = one_cpu.submit(**{field: _value(field, one_cpu.cwd, "\ud800")})
    assert answer.http_status == 400, answer.raw_text
    error = answer.envelope["error"]
    assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 400
    assert f"'body.job.{field}'" in error["message"] and "\\ud800" in error["message"], error["message"]
    assert one_cpu.emu.jobs() == []
    runs_next_job(one_cpu)


def test_a_lone_surrogate_far_into_a_long_path_is_shown_in_the_message(one_cpu: Client) -> None:
    answer = one_cpu.submit(standard_output="/" + "d" * 300 + "\udc80.log")
    assert answer.http_status == 400
    message = answer.envelope["error"]["message"]
    assert "\\udc80" in message and len(message) < 250, message


def test_a_lone_surrogate_deeper_in_the_body_is_named_with_its_index(one_cpu: Client) -> None:
    answer = one_cpu.submit(environment=["PATH=/bin", "BAD=\udfff"])
    assert answer.http_status == 400
    assert "'body.job.environment[1]'" in answer.envelope["error"]["message"]
    assert one_cpu.emu.jobs() == []


def test_an_output_path_that_cannot_be_opened_fails_the_job_and_frees_the_node(one_cpu: Client) -> None:
    fifo = Path(one_cpu.cwd) / "no-reader.fifo"
    os.mkfifo(fifo)  # opening it for writing would wait for a reader for ever
    for fields in (
        {"standard_output": f"{one_cpu.cwd}/no/such/dir/out.log"},
        {"standard_error": "x" * 5000},
        {"standard_output": str(fifo)},
        {"standard_input": f"{one_cpu.cwd}/missing-input"},
    ):
        job_id = one_cpu.submit_id(**fields)
        summary = one_cpu.emu.wait_for_state(job_id, ("COMPLETED", "FAILED"), timeout=20)
        assert (summary["state"], summary["exit_code"]) == ("FAILED", 1), (fields, summary)
        runs_next_job(one_cpu)


def test_after_a_cancel_of_a_running_job_the_node_runs_the_next_job(one_cpu: Client) -> None:
    running = one_cpu.submit_id(script=SLEEP)
    one_cpu.emu.wait_for_state(running, "RUNNING")
    waiting = one_cpu.submit_id(script="#!/bin/bash\necho after\n")
    wait_until(lambda: one_cpu.job(waiting).jobs[0]["state_reason"] == "Resources")
    assert one_cpu.cancel(running).slurm_status == 200
    one_cpu.emu.wait_for_state(waiting, "COMPLETED", timeout=20)
    assert one_cpu.emu.wait_for_state(running, "CANCELLED")["cpus"] == 1
    runs_next_job(one_cpu)


def test_a_cancel_right_after_submit_frees_the_node(one_cpu: Client) -> None:
    for _ in range(5):
        job_id = one_cpu.submit_id(script=SLEEP)
        assert one_cpu.cancel(job_id).slurm_status == 200
        one_cpu.emu.wait_for_state(job_id, "CANCELLED")
    runs_next_job(one_cpu)
