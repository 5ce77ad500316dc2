"""Stopping jobs on the real Slurm: the cancel operator, the worker's on_kill, a cancel seen by a deferred
wait, and the trigger's on_kill (what Airflow 3.3's triggerer calls when a user kills a deferred task)."""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

import pytest

from tests.conftest import PROJECT, REGION, load_dag
from tests.live_slurm.conftest import CLUSTER_ID, make_hook, run_dag_capture
from tests.live_slurm.lab import Lab
from tests.waiting import wait_until, wait_until_async

pytestmark = pytest.mark.slurm


def test_cancel_operator_stops_a_running_job(gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str]) -> None:
    result = run_dag_capture(load_dag("slurm_live_dags.py", "cancel_running"), capfd)
    assert result.tasks == {"submit": "success", "wait_running": "success", "cancel": "success", "watch": "failed"}
    job_id = result.job(gateway, "submit")
    record = lab.final(job_id)
    assert record.state == "CANCELLED" and record.ran, f"the job was not cancelled while running: {record}"
    assert result.xcom("cancel") == {"job_id": job_id, "outcome": "cancelled", "state": "CANCELLED"}
    assert f"Slurm job {job_id} is RUNNING" in result.log
    assert f"Cancel of Slurm job {job_id}: cancelled." in result.log
    assert f"Slurm job {job_id} is now CANCELLED" in result.log
    assert re.search(rf"Slurm job {job_id} \(live-cancel-running\),? ended CANCELLED", result.log), (
        "the sensor does not say the job ended CANCELLED"
    )


def test_cancel_operator_stops_a_pending_job(gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str]) -> None:
    result = run_dag_capture(load_dag("slurm_live_dags.py", "cancel_pending"), capfd)
    assert result.tasks == {"submit": "success", "cancel": "success", "watch": "failed"}
    job_id = result.job(gateway, "submit")
    record = lab.final(job_id)
    assert record.state == "CANCELLED" and not record.ran, f"the held job ran or was not cancelled: {record}"
    assert f"Slurm accepted job {job_id} with a warning: Job is in held state" in result.log
    assert result.xcom("cancel") == {"job_id": job_id, "outcome": "cancelled", "state": "CANCELLED"}
    assert re.search(rf"Slurm job {job_id} \(live-cancel-pending\),? ended CANCELLED, reason JobHeldUser", result.log)


@pytest.mark.parametrize(("key", "kill_after"), [("on_kill_running", "8"), ("on_kill_pending", "4")])
def test_execution_timeout_cancels_the_job_through_on_kill(
    key: str,
    kill_after: str,
    gateway: Any,
    lab: Lab,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sync wait hits execution_timeout: the task fails and on_kill cancels the job in Slurm."""
    monkeypatch.setenv("SLURMAPI_LIVE_KILL_AFTER", kill_after)
    result = run_dag_capture(load_dag("slurm_live_dags.py", key), capfd)
    assert (result.state, result.tasks) == ("failed", {"submit": "failed"})
    job_id = result.job(gateway, "submit")
    record = lab.final(job_id)
    assert record.state == "CANCELLED", f"on_kill did not cancel the job: {record}"
    assert "AirflowTaskTimeout" in result.log or "Timeout" in result.log
    assert f"Task killed: cancel of Slurm job {job_id} answered cancelled." in result.log
    if key == "on_kill_running":
        assert record.ran, f"the job never started before the timeout (the cluster was busy?): {record}"
        assert re.search(rf"Slurm job {job_id}: .*RUNNING", result.log), "the log never showed the job RUNNING"
    else:
        assert not record.ran and record.reason == "JobHeldUser", record
        assert "Job is in held state" in result.log


def state_polls(gateway: Any, job_id: int) -> int:
    """How many ``jobs/state`` calls for ``job_id`` the gateway has seen (the trigger's polls)."""
    return sum(
        "/jobs/state/" in (call.get("path") or "") and str(job_id) in re.findall(r"job_id=(\d+)", call["path"])
        for call in gateway.calls()["last"]
    )


def _cancel_when(gateway: Any, hook: Any, lab: Lab, name: str, since: int, state: str, done: dict[str, Any]) -> None:
    """In a thread: find the newest job called ``name`` submitted after ``since``; once it is in ``state``
    and the trigger polls it (a ``jobs/state`` call for it reached the gateway), cancel it."""

    def watched_in_state() -> int | None:
        ids = [j["job_id"] for j in gateway.jobs() if j["name"] == name and j["job_id"] > since]
        if not ids:
            return None
        record = lab.job(max(ids))
        return max(ids) if record is not None and record.state == state and state_polls(gateway, max(ids)) else None

    job_id = wait_until(watched_in_state, f"a {name} job in {state}, polled", timeout=90, every=0.3, give_up=True)
    if job_id is None:
        done["error"] = f"no {name} job reached {state} while the trigger watched it"
        return
    done["job_id"] = job_id
    done["outcome"] = hook.cancel_job(job_id).value


@pytest.mark.parametrize(("scenario", "state"), [("long", "RUNNING"), ("held", "PENDING")])
def test_deferred_wait_reports_a_cancel_from_outside(
    scenario: str,
    state: str,
    gateway: Any,
    lab: Lab,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the task waits in the trigger, someone cancels the job: the task fails, saying CANCELLED."""
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "true")
    name = f"scenario-{scenario}"
    since = max([j["job_id"] for j in gateway.jobs()], default=0)
    done: dict[str, Any] = {}
    # The hook is built and its session opened here: importing in the thread races dag.test()'s imports.
    hook = make_hook(gateway)
    assert hook.session is not None and hook.cluster is not None
    thread = threading.Thread(target=_cancel_when, args=(gateway, hook, lab, name, since, state, done), daemon=True)
    thread.start()
    result = run_dag_capture(load_dag("slurm_scenarios.py", scenario), capfd)
    thread.join(30)
    assert "error" not in done, done
    assert (result.state, result.tasks) == ("failed", {"job": "failed"})
    job_id = result.job(gateway)
    assert done == {"job_id": job_id, "outcome": "cancelled"}
    record = lab.final(job_id)
    assert record.state == "CANCELLED" and record.ran == (state == "RUNNING"), record
    assert "running trigger in line" in result.log, "the task never deferred"
    assert re.search(rf"Slurm job {job_id} \({name}\),? ended CANCELLED", result.log), "no CANCELLED failure message"
    if scenario == "held":
        assert "Slurm accepted job" in result.log and "Job is in held state" in result.log


async def test_trigger_on_kill_cancels_the_running_job(gateway: Any, lab: Lab) -> None:
    """Airflow 3.3+ calls ``trigger.on_kill()`` when a user marks or clears a deferred task."""
    from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger

    hook = make_hook(gateway)
    submitted = await asyncio.to_thread(
        hook.submit_job,
        {"name": "live-trigger-on-kill", "partition": "debug", "current_working_directory": "/tmp"},
        "#!/bin/bash\nsleep 600\n",
    )
    job_id = submitted.job_id
    try:
        await asyncio.to_thread(lab.wait, job_id, lambda r: r.state == "RUNNING", 90, "RUNNING")
        trigger = SlurmJobTrigger(
            job_id=job_id,
            region=REGION,
            cluster_id=CLUSTER_ID,
            project_id=PROJECT,
            api_endpoint=gateway.url,
            poll_interval=0.5,
        )
        events = trigger.run()
        waiting = asyncio.ensure_future(anext(events))

        def polled_thrice() -> bool:  # it has seen the job RUNNING, polls apart, and kept waiting
            assert not waiting.done(), f"the trigger fired while the job runs: {waiting.result()}"
            return state_polls(gateway, job_id) >= 3

        await wait_until_async(polled_thrice, "the trigger polled the job three times", timeout=60, every=0.1)
        assert not waiting.done(), f"the trigger fired while the job runs: {waiting.result()}"
        await trigger.on_kill()
        event = await asyncio.wait_for(waiting, 60)
        await events.aclose()
    finally:
        await asyncio.to_thread(lab.cancel, job_id)  # harmless if on_kill did it
    assert event.payload["status"] == "failed", event.payload
    assert event.payload["job"]["state"] == "CANCELLED", event.payload
    assert "ended CANCELLED" in event.payload["message"]
    record = await asyncio.to_thread(lab.final, job_id)
    assert record.state == "CANCELLED" and record.ran, record
