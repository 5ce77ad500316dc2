"""Cancel exactly when the user means it; reattach after a crash; never cancel on a triggerer restart.

The trigger cases run inside Airflow 3.3's own ``TriggerRunner.run_trigger``, which decides whether a
cancellation is a user action (it then calls ``trigger.on_kill()``), a timeout or a shutdown.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger
from tests.conftest import CLUSTER, DAGS_FOLDER, REPO, load_dag
from tests.waiting import wait_until, wait_until_async

LONG = "#!/bin/bash\nsleep 120\n"


def submit(emulator: Any, script: str = LONG) -> int:
    job = {"name": "watched", "partition": "debug", "current_working_directory": str(emulator.config.workdir)}
    return SlurmApiHook(**CLUSTER).submit_job(job, script).job_id


def trigger_for(job_id: int, emulator: Any) -> SlurmJobTrigger:
    return SlurmJobTrigger(job_id=job_id, poll_interval=0.3, **CLUSTER)


def cancels(emulator: Any) -> int:
    """The DELETE calls the emulator has answered: a cancel, from wherever it came."""
    return int(emulator.calls()["by_kind"].get("job-delete", 0))


async def run_in_trigger_runner(
    trigger: SlurmJobTrigger, emulator: Any, *, timeout_after: datetime | None = None
) -> tuple[Any, Any]:
    """The trigger in Airflow's runner, returned once it has polled the emulator."""
    from airflow.jobs.triggerer_job_runner import TriggerRunner

    polls = (await asyncio.to_thread(emulator.calls))["by_kind"].get("jobs-state", 0)
    runner = TriggerRunner()
    task = asyncio.create_task(runner.run_trigger(1, trigger, timeout_after=timeout_after))
    runner.triggers[1] = {"task": task, "is_watcher": False, "name": "slurm", "events": 0}

    async def polled() -> bool:
        return task.done() or (await asyncio.to_thread(emulator.calls))["by_kind"].get("jobs-state", 0) != polls

    await wait_until_async(polled, "the trigger polled")
    return runner, task


@pytest.fixture(autouse=True)
def _no_greenback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_DISABLE_GREENBACK_PORTAL", "true")


async def test_user_kill_of_deferred_task_cancels_the_job(gcp_connection: Any) -> None:
    """Mark failed / mark success / clear: the triggerer cancels with its user-action message."""
    job_id = submit(gcp_connection)
    gcp_connection.wait_for_state(job_id, ["RUNNING"], timeout=20)
    runner, task = await run_in_trigger_runner(trigger_for(job_id, gcp_connection), gcp_connection)
    runner.to_cancel.append(1)
    await runner.cancel_triggers()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(gcp_connection.wait_for_state, job_id, ["CANCELLED"], 20)


async def test_triggerer_shutdown_never_cancels_and_a_rebuilt_trigger_goes_on(gcp_connection: Any) -> None:
    job_id = submit(gcp_connection, "#!/bin/bash\nsleep 4\n")
    trigger = trigger_for(job_id, gcp_connection)
    _, task = await run_in_trigger_runner(trigger, gcp_connection)
    task.cancel()  # shutdown or reassignment: no user-action message
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancels(gcp_connection) == 0  # and the rebuilt trigger below sees the job COMPLETED, not cancelled
    assert [j["state"] for j in gcp_connection.jobs() if j["job_id"] == job_id] in (["RUNNING"], ["PENDING"])
    # Another triggerer rebuilds the trigger from serialize() alone and sees the job through.
    from airflow.sdk._shared.module_loading import import_string

    classpath, kwargs = trigger.serialize()
    rebuilt = import_string(classpath)(**json.loads(json.dumps(kwargs)))
    events = [event async for event in rebuilt.run()]
    assert len(events) == 1 and events[0].payload["status"] == "success"
    assert events[0].payload["job"]["state"] == "COMPLETED"


async def test_trigger_timeout_does_not_call_on_kill_but_the_resumed_task_cancels(gcp_connection: Any) -> None:
    job_id = submit(gcp_connection)
    gcp_connection.wait_for_state(job_id, ["RUNNING"], timeout=20)
    past = datetime.now(UTC) - timedelta(seconds=1)
    _, task = await run_in_trigger_runner(trigger_for(job_id, gcp_connection), gcp_connection, timeout_after=past)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    before = cancels(gcp_connection)
    assert [j["state"] for j in gcp_connection.jobs() if j["job_id"] == job_id] == ["RUNNING"]

    # Airflow then resumes the task with next_method "__fail__": the operator cancels the job.
    from airflow.sdk.exceptions import TaskDeferralTimeout

    from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator

    operator = SlurmSubmitJobOperator(task_id="train", script="#!/bin/bash\n", **CLUSTER)

    class ResumedTaskInstance:  # the two attributes resume_execution reads of Airflow's task instance
        task_id = "train"
        map_index = -1

        def xcom_pull(self, **kwargs: Any) -> int:
            assert kwargs["key"] == "slurm_job_id"
            return job_id

    with pytest.raises(TaskDeferralTimeout):
        await asyncio.to_thread(
            operator.resume_execution, "__fail__", {"error": "Trigger timeout"}, {"ti": ResumedTaskInstance()}
        )
    await asyncio.to_thread(gcp_connection.wait_for_state, job_id, ["CANCELLED"], 20)
    assert cancels(gcp_connection) == before + 1  # the resumed task's cancel alone: the trigger sent none


async def test_a_failed_trigger_does_not_cancel(gcp_connection: Any) -> None:
    """A trigger *failure* (not a timeout) leaves the job alone: a retry reattaches to it."""
    from airflow.sdk.exceptions import TaskDeferralError

    from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator

    job_id = submit(gcp_connection)
    operator = SlurmSubmitJobOperator(task_id="train", script="#!/bin/bash\n", **CLUSTER)

    class ResumedTaskInstance:
        task_id = "train"
        map_index = -1

        def xcom_pull(self, **kwargs: Any) -> int:
            return job_id

    before = cancels(gcp_connection)
    with pytest.raises(TaskDeferralError):
        operator.resume_execution("__fail__", {"error": "Trigger failure"}, {"ti": ResumedTaskInstance()})
    assert cancels(gcp_connection) == before  # resume_execution returned without a cancel
    assert [j["state"] for j in gcp_connection.jobs() if j["job_id"] == job_id] in (["RUNNING"], ["PENDING"])
    SlurmApiHook(**CLUSTER).cancel_job(job_id)


def _dag_test_in_subprocess(dag_id: str, logical_date: str, env: dict[str, str]) -> subprocess.Popen[str]:
    code = (
        "import runpy, sys, datetime\n"
        f"ns = runpy.run_path({str(DAGS_FOLDER / 'slurm_scenarios.py')!r})\n"
        f"dag = ns['DAGS'][{dag_id!r}]\n"
        f"when = datetime.datetime.fromisoformat({logical_date!r})\n"
        "run = dag.test(logical_date=when, run_after=when)\n"
        "sys.exit(0 if run.state == 'success' else 1)\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _wait_for_job(
    emulator: Any, name: str, states: list[str], worker: subprocess.Popen[str] | None = None, timeout: float = 240
) -> dict[str, Any]:
    """The job once it is in one of ``states``. A worker process starts Airflow first: on a loaded
    machine that alone takes a minute, so the wait is long, and ends early if the worker has died."""

    def in_states() -> dict[str, Any] | None:
        jobs = [j for j in emulator.jobs() if j["name"] == name and j["state"] in states]
        if jobs:
            return jobs[-1]
        if worker is not None and worker.poll() is not None:
            output = worker.stdout.read() if worker.stdout else ""
            raise AssertionError(
                f"the worker ended ({worker.returncode}) before job {name} was in {states}: {output[-3000:]}"
            )
        return None

    job: dict[str, Any] = wait_until(in_states, f"job {name} in {states}", timeout=timeout, every=0.2)
    return job


def test_a_retry_reattaches_to_the_job_of_the_earlier_try(
    airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Try 1 submits, then times out while the job runs on (no cancel); try 2 finds that job and waits on it."""
    from datetime import timedelta

    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    dag = load_dag("slurm_scenarios.py", "completes_slowly")
    task = dag.task_dict["job"]
    task.execution_timeout = timedelta(seconds=3)
    task.cancel_on_kill = False
    task.retries, task.retry_delay = 1, timedelta(seconds=0)
    first = datetime(2026, 3, 1, tzinfo=UTC)
    run = dag.test(logical_date=first, run_after=first)
    mine = [j for j in gcp_connection.jobs() if j["name"] == "scenario-completes_slowly"]
    # The retry waited on the first try's job (its own timeout is 3 s too): one job, never a second.
    assert len(mine) == 1, mine
    assert f"Reattaching to Slurm job {mine[0]['job_id']} of this task instance" in "".join(capfd.readouterr())
    if str(run.state) != "success":  # the retry's 3 s ran out before the job's 6 s: it still ends COMPLETED
        gcp_connection.wait_for_state(mine[0]["job_id"], ["COMPLETED"], timeout=30)


def _sigterm_the_worker_once_its_job_runs(
    emulator: Any, logical_date: datetime, timeout: float
) -> tuple[dict[str, Any], subprocess.Popen[str], str]:
    """A worker process runs the ``long`` scenario (sync wait); SIGTERM to it once its job is RUNNING,
    then the job once CANCELLED, the worker and its output."""
    worker = _dag_test_in_subprocess("long", logical_date.isoformat(), dict(os.environ))
    job = _wait_for_job(emulator, "scenario-long", ["RUNNING"], worker)
    worker.send_signal(signal.SIGTERM)
    output, _ = worker.communicate(timeout=timeout)
    emulator.wait_for_state(job["job_id"], ["CANCELLED"], timeout=20)
    assert worker.returncode != 0, output[-2000:]
    return job, worker, output


def test_worker_sigterm_cancels_the_job(airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    _sigterm_the_worker_once_its_job_runs(gcp_connection, datetime(2026, 3, 2, tzinfo=UTC), timeout=60)


def test_a_kill_while_the_submit_is_on_its_way_cancels_the_job_once_slurm_names_it(
    airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM after Slurm made the job but before its id reached the task (the answer is 8 s late)."""
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    gcp_connection.add_fault("slow=8@submit")
    job, _, output = _sigterm_the_worker_once_its_job_runs(gcp_connection, datetime(2026, 3, 4, tzinfo=UTC), 120)
    assert "Task killed while its Slurm job was being submitted" in output, output[-3000:]
    assert f"The task was killed while Slurm job {job['job_id']} was being submitted" in output, output[-3000:]


def test_a_run_recreated_with_the_same_id_starts_afresh_and_a_failed_job_is_never_reused(
    airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dag.test()`` deletes and recreates a run of the same id: its task's first try submits without looking
    (a retry, try 2 and on, reattaches: see above)."""
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "true")
    when = datetime(2026, 3, 3, tzinfo=UTC)
    done = load_dag("slurm_scenarios.py", "completes")
    assert str(done.test(logical_date=when, run_after=when).state) == "success"
    assert str(done.test(logical_date=when, run_after=when).state) == "success"
    assert len([j for j in gcp_connection.jobs() if j["name"] == "scenario-completes"]) == 2

    failing = load_dag("slurm_scenarios.py", "exit3")
    assert str(failing.test(logical_date=when, run_after=when).state) == "failed"
    assert str(failing.test(logical_date=when, run_after=when).state) == "failed"
    assert len([j for j in gcp_connection.jobs() if j["name"] == "scenario-exit3"]) == 2


def test_reattach_can_be_turned_off(airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    when = datetime(2026, 3, 4, tzinfo=UTC)
    dag = load_dag("slurm_scenarios.py", "completes")
    dag.task_dict["job"].reattach_on_restart = False
    assert str(dag.test(logical_date=when, run_after=when).state) == "success"
    assert str(dag.test(logical_date=when, run_after=when).state) == "success"
    assert len([j for j in gcp_connection.jobs() if j["name"] == "scenario-completes"]) == 2


def test_trigger_takes_the_documented_positional_order() -> None:
    trigger = SlurmJobTrigger(
        7, "proj-1", "us-central1", "cluster-a", "conn", "v0.0.41", 5.0, "sa@p.iam.gserviceaccount.com"
    )
    _, kwargs = trigger.serialize()
    assert (kwargs["job_id"], kwargs["project_id"], kwargs["region"], kwargs["cluster_id"]) == (
        7,
        "proj-1",
        "us-central1",
        "cluster-a",
    )
    assert (kwargs["gcp_conn_id"], kwargs["api_version"], kwargs["poll_interval"]) == ("conn", "v0.0.41", 5.0)
    assert kwargs["impersonation_chain"] == "sa@p.iam.gserviceaccount.com"
    with pytest.raises(ValueError, match="region and cluster_id"):
        SlurmJobTrigger(7, "proj-1")
