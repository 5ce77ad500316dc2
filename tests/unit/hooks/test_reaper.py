"""The reaper process that cancels a killed submit's job: a real detached process, real HTTP to the emulator.

Started as ``on_kill`` starts it (:meth:`SlurmApiHook.start_reaper`); what it is given is read back from
``/proc`` to show that the token is in neither its command line nor its environment.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
from airflow_provider_slurmapi.slurm.submit.spec import CLOCK_SKEW_SECONDS
from airflow_provider_slurmapi.slurm.submit.tag import task_comment, task_tag
from tests.conftest import CLUSTER, connection_uri_env
from tests.waiting import wait_until

KEY = b"the reaper tests' secret key, 32+ chars"


def _proc(pid: int, name: str) -> bytes:
    try:
        return (Path("/proc") / str(pid) / name).read_bytes()
    except OSError:
        return b""


def _ended(pid: int) -> bool:
    status = _proc(pid, "status")
    return not status or b"\nState:\tZ" in status


def _submit_tagged(hook: SlurmApiHook, emulator: Any, run: str) -> tuple[int, str]:
    """A job of task run ``run``: its id and its submit's send marker."""
    tag = task_tag("reaper_dag", "job", run, key=KEY)
    job = {
        "name": "reaped",
        "partition": "debug",
        "current_working_directory": str(emulator.config.workdir),
    }
    comment = task_comment(tag, "reaper_dag", "job", run)
    result = hook.submit_job(job, "#!/bin/bash\nsleep 120\n", tag=tag, comment=comment)
    assert result.send_marker
    return result.job_id, result.send_marker


def test_the_reaper_outlives_its_starter_and_cancels_the_job_with_the_marker(
    emulator: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(emulator, credentials_file))
    monkeypatch.setenv("AIRFLOW_VAR_SOMETHING_SECRET", "do-not-pass-me-on")
    hook = SlurmApiHook(**CLUSTER)
    since = int(time.time()) - CLOCK_SKEW_SECONDS
    earlier, _ = _submit_tagged(hook, emulator, "run-1")  # an earlier try's job (same tag): never this submit's
    job_id, marker = _submit_tagged(hook, emulator, "run-1")
    pid = hook.start_reaper(marker=marker, name="reaped", since=since)
    token = str(hook._transport.credentials.token).encode()
    assert token and token not in _proc(pid, "cmdline") and token not in _proc(pid, "environ")
    environ = _proc(pid, "environ")
    assert b"AIRFLOW_CONN_" not in environ and b"AIRFLOW_VAR_" not in environ
    assert os.getsid(pid) == pid, "not in a session of its own: the kill of the task's group would reach it"
    emulator.wait_for_state(job_id, ["CANCELLED"], timeout=30)
    wait_until(lambda: _ended(pid), "the reaper ended once it had cancelled the job", timeout=30, every=0.1)
    assert [j["state"] for j in emulator.jobs() if j["job_id"] == earlier] == ["RUNNING"]


def test_a_reaper_that_finds_no_job_ends_at_the_settle_deadline(
    emulator: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(emulator, credentials_file))
    hook = SlurmApiHook(**CLUSTER, submit_settle_seconds=2)
    other, _ = _submit_tagged(hook, emulator, "run-2")
    pid = hook.start_reaper(marker="slurmapi-send=000000000000000000000000", name="reaped", since=0)
    wait_until(lambda: _ended(pid), "the reaper ended at its settle window", timeout=60, every=0.2)
    assert [j["state"] for j in emulator.jobs() if j["job_id"] == other] == ["RUNNING"]
    hook.cancel_job(other)
