"""Killed and timed-out deferred tasks cancel their jobs; the trigger's first line names the change.

The kills run inside Airflow 3.3's own ``TriggerRunner.run_trigger``, cancelled again every second while
the trigger has not finished, as the triggerer's main loop does; the emulator adds Google-like latency
to its token endpoint and to every call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_3_PLUS
from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
from airflow_provider_slurmapi.slurm.api.envelope import SlurmResponse
from airflow_provider_slurmapi.slurm.client import log_slurm_warnings
from airflow_provider_slurmapi.triggers import poller as poller_module
from airflow_provider_slurmapi.triggers.poller import pollers_of_this_loop
from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger
from tests.conftest import CLUSTER, connection_uri_env
from tests.unit.triggers.test_poller import Triggerer, until

KILLED = 100
LATENCY = 0.3
POLL = 3.0


@pytest.fixture(autouse=True)
def _no_greenback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_DISABLE_GREENBACK_PORTAL", "true")


def connect(monkeypatch: pytest.MonkeyPatch, emulator: Any, key_file: Path) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(emulator, key_file))


def submit_held(emulator: Any, count: int) -> list[int]:
    hook = SlurmApiHook(**CLUSTER)
    job = {"partition": "debug", "current_working_directory": str(emulator.config.workdir), "hold": True}
    return [hook.submit_job({**job, "name": f"held{i}"}, "#!/bin/bash\ntrue\n").job_id for i in range(count)]


def logged_to(trigger: SlurmJobTrigger, name: str) -> SlurmJobTrigger:
    """Send the trigger's log lines to a stdlib logger of its own (caplog reads them by logger name)."""
    trigger._log = logging.getLogger(f"test.trigger.{name}")
    return trigger


def lines_of(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == f"test.trigger.{name}"]


def states(emulator: Any, job_ids: list[int]) -> dict[int, str]:
    wanted = set(job_ids)
    return {j["job_id"]: j["state"] for j in emulator.jobs() if j["job_id"] in wanted}


async def kill_like_the_triggerer(runner: Any, trigger_ids: list[int]) -> None:
    """User action on every task: cancel with the user-action message, again each second until done."""
    while True:
        alive = [t for t in trigger_ids if not runner.triggers[t]["task"].done()]
        if not alive:
            return
        runner.to_cancel.extend(alive)
        await runner.cancel_triggers()
        # Until every cancelled trigger has ended, or for the triggerer's own cadence: it cancels what is
        # left on its next loop, a second later.
        await asyncio.wait([runner.triggers[t]["task"] for t in alive], timeout=1.0)


@pytest.mark.skipif(
    not AIRFLOW_V_3_3_PLUS,
    reason="before 3.3 the triggerer gives a killed trigger no on_kill: the kill path there (CancelledError, "
    "then safe_to_cancel reads the task instance) needs a deployment, tests/deployment shows it",
)
async def test_killing_a_hundred_deferred_tasks_at_once_cancels_every_job_within_two_polls(
    emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.jobs.triggerer_job_runner import TriggerRunner

    emu = emulator_factory()
    connect(monkeypatch, emu, credentials_file)
    job_ids = await asyncio.to_thread(submit_held, emu, KILLED)
    emu.config.latency = LATENCY  # Google's token endpoint and API are not on loopback

    runner = TriggerRunner()
    for n, job_id in enumerate(job_ids, start=1):
        trigger = SlurmJobTrigger(job_id=job_id, poll_interval=POLL, **CLUSTER)
        task = asyncio.create_task(runner.run_trigger(n, trigger))
        runner.triggers[n] = {"task": task, "is_watcher": False, "name": f"slurm-{job_id}", "events": 0}
    poller = await until(lambda: next(iter(pollers_of_this_loop().values()), None), "the poller")
    await until(lambda: poller.polls >= 1 and len(poller.job_ids) == KILLED, "every trigger subscribed")

    emu.reset_calls()
    await kill_like_the_triggerer(runner, list(runner.triggers))
    await until(lambda: set(states(emu, job_ids).values()) == {"CANCELLED"}, f"every one of {KILLED} jobs CANCELLED")
    calls = emu.calls()["by_kind"]
    assert calls.get("job-delete") == KILLED, calls  # one DELETE each, none repeated
    # Within two polls, counted rather than timed: every job was CANCELLED before a third jobs/state round.
    assert calls.get("jobs-state", 0) <= 2, calls
    # The cancels' poller closes its session once every cancel is answered.
    await until(lambda: pollers_of_this_loop() == {}, "the poller released")


async def test_a_cancel_that_cannot_be_confirmed_is_logged_as_an_error_naming_the_job(
    emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    emu = emulator_factory()
    connect(monkeypatch, emu, credentials_file)
    (job_id,) = await asyncio.to_thread(submit_held, emu, 1)
    monkeypatch.setattr(poller_module, "CANCEL_CONFIRM_SECONDS", 1.5)
    emu.add_fault("unavailable@job-delete*inf")
    caplog.set_level(logging.INFO)
    trigger = logged_to(SlurmJobTrigger(job_id=job_id, poll_interval=POLL, **CLUSTER), "killed")

    await trigger.on_kill()

    errors = [(r.name, r.getMessage()) for r in caplog.records if r.levelno == logging.ERROR]
    wanted = f"Could not confirm the cancel of Slurm job {job_id}"
    assert any(name == "test.trigger.killed" and wanted in m for name, m in errors), errors  # the task log
    assert any(name == poller_module.__name__ and wanted in m for name, m in errors), errors  # the triggerer's
    assert states(emu, [job_id]) == {job_id: "PENDING"}
    emu.clear_faults()
    await until(lambda: pollers_of_this_loop() == {}, "the poller released")


async def test_at_its_deadline_the_trigger_cancels_the_job_and_reports_the_timeout(
    emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No worker slot is needed: the trigger itself cancels at the deadline it was given."""
    emu = emulator_factory()
    connect(monkeypatch, emu, credentials_file)
    held, kept = await asyncio.to_thread(submit_held, emu, 2)
    triggerer = Triggerer()
    deadline = time.time() + 1.0
    triggerer.start("cancels", SlurmJobTrigger(job_id=held, poll_interval=0.3, deadline=deadline, **CLUSTER))
    triggerer.start(
        "keeps", SlurmJobTrigger(job_id=kept, poll_interval=0.3, deadline=deadline, cancel_on_kill=False, **CLUSTER)
    )
    await triggerer.finish()

    event = triggerer.event("cancels")
    assert event["status"] == "timeout" and event["job_id"] == held, event
    assert "cancelled" in event["message"] and event["job"]["state"] == "PENDING"
    assert triggerer.event("keeps")["status"] == "timeout"
    assert states(emu, [held, kept]) == {held: "CANCELLED", kept: "PENDING"}
    await asyncio.to_thread(SlurmApiHook(**CLUSTER).cancel_job, kept)


def test_a_payload_serialized_before_deadline_and_last_seen_still_loads() -> None:
    from tests.unit.triggers.rebuild import import_string

    classpath, kwargs = SlurmJobTrigger(
        job_id=7, deadline=123.5, last_seen={"job_id": 7, "state": "PENDING"}, **CLUSTER
    ).serialize()
    rebuilt = import_string(classpath)(**json.loads(json.dumps(kwargs)))
    assert (rebuilt.deadline, rebuilt.last_seen) == (123.5, {"job_id": 7, "state": "PENDING"})
    old = {k: v for k, v in kwargs.items() if k not in ("deadline", "last_seen")}
    legacy = import_string(classpath)(**old)
    assert legacy.deadline is None and legacy.last_seen is None


async def test_the_first_line_is_the_change_from_what_the_operator_saw_with_the_node(
    emulator_factory: Any,
    credentials_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    """A job that started between the operator's look and the trigger's first poll: PENDING (...) -> RUNNING on <node>."""
    emu = emulator_factory(cpus=1)
    connect(monkeypatch, emu, credentials_file)
    go = tmp_path / "go"
    hook = SlurmApiHook(**CLUSTER)
    spec = {"partition": "debug", "current_working_directory": str(emu.config.workdir)}
    blocker = hook.submit_job(
        {**spec, "name": "blocker"}, f"#!/bin/bash\nwhile [ ! -e {go} ]; do sleep 0.05; done\n"
    ).job_id
    emu.wait_for_state(blocker, "RUNNING", 30)
    job_id = hook.submit_job(
        {**spec, "name": "watched"}, f"#!/bin/bash\nwhile [ ! -e {go}2 ]; do sleep 0.05; done\n"
    ).job_id
    seen = await until(lambda: (job := hook.get_job(job_id)) is not None and job.reason and job, "a reason")
    assert seen.state.value == "PENDING"  # what the operator saw and logged before deferring
    hook.cancel_job(blocker)
    await asyncio.to_thread(emu.wait_for_state, job_id, "RUNNING", 30)
    running = hook.get_job(job_id)
    assert running is not None and running.nodes

    caplog.set_level(logging.INFO)
    triggerer = Triggerer()
    triggerer.start(
        "seen",
        logged_to(SlurmJobTrigger(job_id=job_id, poll_interval=0.3, last_seen=seen.to_dict(), **CLUSTER), "seen"),
    )
    await until(lambda: lines_of(caplog, "seen"), "the first line")
    # A trigger that knows nothing of the job: the poller's first sighting carries its details.
    triggerer.start("fresh", logged_to(SlurmJobTrigger(job_id=job_id, poll_interval=0.3, **CLUSTER), "fresh"))
    await until(lambda: lines_of(caplog, "fresh"), "the fresh trigger's first line")
    (go.parent / f"{go.name}2").touch()
    await triggerer.finish()
    assert lines_of(caplog, "seen")[0] == f"Slurm job {job_id}: PENDING ({seen.reason}) -> RUNNING on {running.nodes}"
    assert lines_of(caplog, "fresh")[0].startswith(f"Slurm job {job_id}: RUNNING on {running.nodes}; stdout: ")


def test_zero_jobs_to_dump_is_routine(caplog: pytest.LogCaptureFixture) -> None:
    """Real Slurm's answer to a jobs/ list of an empty queue: debug, not a warning in every task log."""
    caplog.set_level(logging.DEBUG)
    response = SlurmResponse(
        "GET",
        "/slurm/v0.0.42/jobs/",
        200,
        {"jobs": [], "warnings": [{"description": "Zero jobs to dump", "source": "_dump_jobs"}]},
    )
    log_slurm_warnings(logging.getLogger("t"), response)
    (record,) = [r for r in caplog.records if "Zero jobs to dump" in r.getMessage()]
    assert record.levelno == logging.DEBUG
