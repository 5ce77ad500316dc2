"""Scenarios on a real deployment: what an operator sees, read through the REST API and real Slurm.

The figures each scenario measures (seconds from kill to CANCELLED, jobs cancelled of jobs killed, calls
per poll interval) are listed in the run's summary under "deployment figures".
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_3_PLUS
from tests.deployment.conftest import FIGURES, POLL_INTERVAL, set_tag_key
from tests.deployment.harness import Deployment, wait_for
from tests.live_slurm.lab import Lab

SLEEP = "#!/bin/bash\nsleep {seconds}\nexit {code}\n"


def figure(name: str, value: Any) -> None:
    FIGURES.append(f"{name}: {value}")


def airflow_version_text() -> str:
    import airflow

    return str(airflow.__version__)


def airflow_version() -> tuple[int, int]:
    major, minor = airflow_version_text().split(".")[:2]
    return int(major), int(minor)


def run_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def jobs_of(gateway: Any, dag_id: str, run: str) -> list[int]:
    """The Slurm jobs a run submitted, from the tag in their comment, oldest first."""
    return sorted(
        j["job_id"]
        for j in gateway.jobs()
        if f"dag={dag_id} " in (j.get("comment") or "") and f" run={run} " in f" {j.get('comment')} "
    )


def wait_jobs(gateway: Any, dag_id: str, run: str, count: int = 1) -> list[int]:
    return wait_for(lambda: len(ids := jobs_of(gateway, dag_id, run)) >= count and ids, f"{count} job(s) of {run}")


def wait_watched(deployment: Deployment, gateway: Any, dag_id: str, run: str) -> int:
    """The run's one job, once a triggerer polls it: a task is DEFERRED before a triggerer runs its
    trigger, and a kill in between reaches no trigger (Airflow's gap, not what these tests measure)."""
    deployment.wait_ti(dag_id, run, {"deferred"})
    (job_id,) = jobs_of(gateway, dag_id, run)
    wait_for(
        lambda: any(f"job_id={job_id}" in (c.get("path") or "") for c in gateway.calls()["last"]),
        f"job {job_id} polled by a triggerer",
        timeout=60,
    )
    return job_id


def state(lab: Lab, job_id: int) -> str:
    record = lab.live(job_id) or lab.history(job_id)
    return record.state if record is not None else "?"


def wait_state(lab: Lab, job_ids: list[int], wanted: str, timeout: float = 120) -> float:
    """Seconds until every job is in ``wanted`` (a failure if not within ``timeout``)."""
    start = time.monotonic()
    wait_for(lambda: all(state(lab, j) == wanted for j in job_ids), f"jobs {job_ids} {wanted}", timeout, every=0.2)
    return time.monotonic() - start


def test_providers_list_shows_the_provider(deployment: Deployment) -> None:
    listed = deployment.airflow("providers", "list")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "airflow-provider-slurmapi" in listed.stdout, listed.stdout[-3000:]


def test_deferrable_success_and_failure_with_the_trigger_lines_in_the_log(
    deployment: Deployment, gateway: Any, lab: Lab
) -> None:
    ok, bad = run_id("ok"), run_id("bad")
    deployment.trigger("deploy_submit", ok, {"script": SLEEP.format(seconds=8, code=0)})
    deployment.trigger("deploy_submit", bad, {"script": SLEEP.format(seconds=8, code=3)})
    assert deployment.wait_ti("deploy_submit", ok, {"success", "failed"})["state"] == "success"
    ti = deployment.wait_ti("deploy_submit", bad, {"success", "failed"})
    assert ti["state"] == "failed"
    for run, word in ((ok, "COMPLETED"), (bad, "FAILED")):
        (job_id,) = jobs_of(gateway, "deploy_submit", run)
        log = deployment.log("deploy_submit", run, 1)
        assert f"Submitted Slurm job {job_id}" in log, log[-3000:]
        # The trigger's lines (written in the triggerer) are in the task's log. A change it saw reads
        # "A -> B"; a job that ended before the trigger's first poll (which a loaded triggerer may make
        # after this 8 s job is over: the deferred start makes no look of its own) reads "B" alone.
        assert re.search(rf"Slurm job {job_id}: (\S.* -> )?{word}", log), log[-3000:]
        assert "Zero jobs to dump" not in log
    assert "exit code 3" in deployment.log("deploy_submit", bad, 1)


def test_mark_failed_while_deferred_cancels_the_job(deployment: Deployment, gateway: Any, lab: Lab) -> None:
    run = run_id("markfailed")
    deployment.trigger("deploy_submit", run, {"script": SLEEP.format(seconds=300, code=0)})
    job_id = wait_watched(deployment, gateway, "deploy_submit", run)
    deployment.patch_ti("deploy_submit", run, "failed")
    seconds = wait_state(lab, [job_id], "CANCELLED", timeout=60)
    figure("mark failed while deferred: seconds from kill to CANCELLED", f"{seconds:.1f}")


def test_triggerer_sigterm_and_restart_keeps_the_job_and_the_task_succeeds(
    deployment: Deployment, gateway: Any, lab: Lab
) -> None:
    run = run_id("restart")
    deployment.trigger("deploy_submit", run, {"script": SLEEP.format(seconds=40, code=0)})
    job_id = wait_watched(deployment, gateway, "deploy_submit", run)
    triggerer = deployment.component("triggerer")
    triggerer.signal(signal.SIGTERM)
    try:
        triggerer.proc.wait(60)  # 3.0-3.2 take up to 10 s more (the trigger runner is killed after its grace)
        after_stop = state(lab, job_id)
    finally:
        deployment.start_triggerer()  # the other scenarios need a triggerer, whatever happens here
    assert after_stop in ("RUNNING", "PENDING", "COMPLETED"), after_stop  # a shutdown never cancels
    assert deployment.wait_ti("deploy_submit", run, {"success", "failed"})["state"] == "success"
    assert jobs_of(gateway, "deploy_submit", run) == [job_id]
    assert state(lab, job_id) == "COMPLETED"


def _processes_of(marker: str) -> list[int]:
    """PIDs whose command line names the task instance: Airflow 3 titles carry its UUID, Airflow 2's
    its run id."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline:
                found.append(int(proc.name))
    return found


def test_task_process_and_supervisor_sigkill_then_the_retry_reattaches_to_the_one_job(
    deployment: Deployment, gateway: Any, lab: Lab
) -> None:
    run = run_id("sigkill")
    deployment.trigger("deploy_sync_retry", run, {"script": SLEEP.format(seconds=75, code=0)})
    ti = deployment.wait_ti("deploy_sync_retry", run, {"running"})
    (job_id,) = wait_jobs(gateway, "deploy_sync_retry", run)
    wait_state(lab, [job_id], "RUNNING", timeout=180)  # the shared lab's queue may be busy
    victims = {int(ti["pid"])} if ti.get("pid") else set()
    victims.update(_processes_of(ti.get("id") or run))
    assert victims, f"no process of task instance {ti['id']}"
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    final = deployment.wait_ti("deploy_sync_retry", run, {"success", "failed"}, timeout=240)
    assert final["state"] == "success", deployment.log("deploy_sync_retry", run, final["try_number"])[-3000:]
    assert final["try_number"] == 2
    assert jobs_of(gateway, "deploy_sync_retry", run) == [job_id]
    retry_log = deployment.log("deploy_sync_retry", run, 2)
    # Still running: the retry waits on it; already over: the retry takes its result. Never a second job.
    assert (
        f"Reattaching to Slurm job {job_id}" in retry_log
        or f"Slurm job {job_id} of this task instance already COMPLETED" in retry_log
    ), retry_log[-3000:]
    if AIRFLOW_V_3_3_PLUS:  # through Airflow's ResumableJobMixin and the task state store, not the tag
        assert "Reconnecting to existing job" in retry_log or "Job already completed successfully" in retry_log, (
            retry_log[-3000:]
        )


def test_execution_timeout_with_every_worker_slot_busy_cancels_the_job_from_the_trigger(
    deployment: Deployment, gateway: Any, lab: Lab
) -> None:
    if airflow_version() < (3, 0):
        pytest.skip(
            f"Airflow {airflow_version_text()}: not shown; its LocalExecutor ran 7 of the 8 slot holders at once, "
            "so the timed-out task resumed on a free slot and the worker cancelled the job"
        )
    run = run_id("timeout")
    deployment.trigger("deploy_timeout", run, {"script": SLEEP.format(seconds=600, code=0)})
    deferred = deployment.wait_ti("deploy_timeout", run, {"deferred"})
    (job_id,) = jobs_of(gateway, "deploy_timeout", run)
    busy = run_id("busy")
    deployment.trigger("deploy_busy", busy, {"count": 8, "seconds": 90})  # [core] parallelism = 8
    wait_for(
        lambda: sum(t["state"] == "running" for t in deployment.tis("deploy_busy", busy, "hold_a_slot")) == 8,
        "every worker slot busy",
    )
    seconds = wait_state(lab, [job_id], "CANCELLED", timeout=120)
    # Cancelled while the task could not resume: the trigger did it, not a worker.
    assert deployment.ti("deploy_timeout", run)["state"] not in ("running", "failed", "up_for_retry"), deferred
    figure("deferral timeout, every slot busy: seconds from deadline-wait start to CANCELLED", f"{seconds:.1f}")
    final = deployment.wait_ti("deploy_timeout", run, {"failed", "success", "up_for_retry"}, timeout=240)
    assert final["state"] == "failed"
    assert "was cancelled" in deployment.log("deploy_timeout", run, 1)
    assert jobs_of(gateway, "deploy_timeout", run) == [job_id]


def test_clearing_a_deferred_task_cancels_its_job_and_the_new_try_submits_one(
    deployment: Deployment, gateway: Any, lab: Lab
) -> None:
    run = run_id("clear")
    deployment.trigger("deploy_submit", run, {"script": SLEEP.format(seconds=20, code=0)})
    first = wait_watched(deployment, gateway, "deploy_submit", run)
    deployment.clear_ti("deploy_submit", run)
    if airflow_version() < (3, 3):
        # Before 3.3 a clear reaches the trigger only if the triggerer drops it before the new try defers
        # again: then the job is cancelled and the new try submits another (as on 3.3); else the job is
        # kept and the new try reattaches to it. Either way one job at a time, and the task succeeds.
        final = deployment.wait_ti("deploy_submit", run, {"success", "failed"}, timeout=240)
        assert final["state"] == "success"
        jobs = jobs_of(gateway, "deploy_submit", run)
        if jobs == [first]:
            log = deployment.log("deploy_submit", run, int(final["try_number"]))
            assert f"Reattaching to Slurm job {first}" in log or f"Slurm job {first} of this task instance" in log
            figure("clear while deferred: job kept, the new try reattached (jobs)", 1)
            return
        assert len(jobs) == 2 and jobs[0] == first and state(lab, first) == "CANCELLED", jobs
        figure("clear while deferred: job cancelled, the new try submitted one (jobs)", 2)
    else:
        seconds = wait_state(lab, [first], "CANCELLED", timeout=60)
        figure("clear while deferred: seconds from clear to CANCELLED", f"{seconds:.1f}")
        final = deployment.wait_ti("deploy_submit", run, {"success", "failed"}, timeout=240)
        assert final["state"] == "success"
    first_job, second_job = wait_jobs(gateway, "deploy_submit", run, 2)
    assert first_job == first and state(lab, second_job) == "COMPLETED"
    ended = (lab.history(first) or lab.live(first)).raw.get("time", {}).get("end")
    started = (lab.history(second_job) or lab.live(second_job)).raw.get("time", {}).get("start")
    assert ended and started and started >= ended, (ended, started)  # one job at a time


def test_a_hundred_mapped_deferred_tasks_two_triggerers_one_call_each_then_killed_at_once(
    deployment: Deployment, gateway: Any, lab: Lab
) -> None:
    if airflow_version() < (3, 3):
        pytest.skip(
            f"Airflow {airflow_version_text()}: before 3.3 the triggerer gives a killed trigger no on_kill (each "
            "cancels alone after safe_to_cancel); the 100-task run is kept to 3.3 to keep CI's time"
        )
    if deployment.celery:
        pytest.skip(
            "the Celery deployment's wave (test_celery_scale.py: 200 deferred tasks over 3 clusters, a run of 60 "
            "marked failed over both triggerers) asserts the same calls per interval and kill within two polls"
        )
    count = 100
    # The Celery deployment runs two triggerers already; the LocalExecutor one gets its second here.
    second = deployment.start_triggerer("triggerer-2") if len(deployment.running("triggerer")) < 2 else None
    run = run_id("mapped")
    deployment.trigger("deploy_mapped", run, {"count": count})
    wait_for(
        lambda: sum(t["state"] == "deferred" for t in deployment.tis("deploy_mapped", run)) == count,
        f"{count} mapped tasks deferred",
        timeout=900,
        every=3.0,
    )
    job_ids = jobs_of(gateway, "deploy_mapped", run)
    assert len(job_ids) == count

    gateway.reset_calls()
    counted_from = time.monotonic()

    def polled_ids() -> set[int]:
        return {int(j) for c in gateway.calls()["last"] for j in re.findall(r"job_id=(\d+)", c.get("path") or "")}

    # The window the calls are counted over: three poll intervals at least, and until every job was polled
    # in it (the event that shows each triggerer's calls, and any extra ones, are in the count).
    wait_for(
        lambda: time.monotonic() - counted_from >= 3 * POLL_INTERVAL and polled_ids() >= set(job_ids),
        "three poll intervals in which every job was polled",
        timeout=30 * POLL_INTERVAL,
        every=0.5,
    )
    calls = dict(gateway.calls()["by_kind"])
    per_interval = calls.get("jobs-state", 0) / ((time.monotonic() - counted_from) / POLL_INTERVAL)
    figure(f"{count} deferred tasks, 2 triggerers: jobs/state calls per interval", f"{per_interval:.2f} ({calls})")
    assert per_interval <= 2 + 1 / 3, calls  # at most one per triggerer (+1 round in flight)
    # Per-job calls only for jobs whose state or reason changed, never one per job per interval.
    assert calls.get("job-get", 0) + calls.get("jobs", 0) < count, calls
    assert polled_ids() == set(job_ids)  # every trigger runs, in one triggerer or the other

    gateway.config.latency = 0.3  # Google's token endpoint and API are not on loopback
    try:
        gateway.reset_calls()
        killed = time.monotonic()
        deployment.patch_run("deploy_mapped", run, "failed")
        deadline = killed + 2 * POLL_INTERVAL
        wait_for(
            lambda: all(state(lab, j) == "CANCELLED" for j in job_ids) or time.monotonic() > deadline + 60,
            "the kill answered",
            timeout=300,
            every=0.5,
        )
        seconds = time.monotonic() - killed
        calls = dict(gateway.calls()["by_kind"])
        cancelled = sum(state(lab, j) == "CANCELLED" for j in job_ids)
    finally:
        gateway.config.latency = 0.0
    figure(f"bulk kill of {count} deferred tasks: jobs cancelled of jobs killed", f"{cancelled}/{count}")
    figure(f"bulk kill of {count} deferred tasks: seconds from kill to all CANCELLED", f"{seconds:.1f}")
    assert cancelled == count
    # Within two polls, counted rather than timed (the seconds are the figure above): every job CANCELLED
    # before either triggerer's fourth jobs/state round (rounds at 0, 1 and 2 intervals after the kill).
    assert calls.get("jobs-state", 0) <= 2 * 3, (calls, f"{seconds:.1f}s")
    if second is not None:
        second.stop()


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _task_process(ti: dict[str, Any]) -> int:
    """The process that runs the task's code: Airflow 3's task process (not its supervisor), Airflow 2's
    raw task process (the task instance's ``pid``)."""
    if airflow_version() >= (3, 0):
        # Both carry the task instance's UUID in their title (the supervisor: "airflow worker --
        # LocalExecutor: <uuid>" or, under Celery, "airflow supervisor: <uuid>"); the task process is the
        # one whose parent is the supervisor.
        titled = _processes_of(ti["id"])
        pids = [pid for pid in titled if _parent(pid) in titled]
        assert len(pids) == 1, [(pid, _cmdline(pid)) for pid in titled]
        return pids[0]
    return int(ti["pid"])


def _parent(pid: int) -> int:
    try:
        status = (Path("/proc") / str(pid) / "status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")), 0)


def _terminate_as_airflow_does(pid: int) -> bool:
    """SIGTERM ``pid``, then SIGKILL 5 s later if it still runs (Airflow 3's supervisor's escalation;
    Airflow 2's after killed_task_cleanup_time). Whether the SIGKILL was needed."""
    os.kill(pid, signal.SIGTERM)
    with contextlib.suppress(AssertionError):
        wait_for(lambda: not _alive(pid), "the task process ended after SIGTERM", timeout=5, every=0.1)
    sigkilled = _alive(pid)
    if sigkilled:
        os.kill(pid, signal.SIGKILL)
    return sigkilled


def _alive(pid: int) -> bool:
    try:
        status = (Path("/proc") / str(pid) / "status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status  # a zombie has ended: its parent has not reaped it yet


@pytest.mark.parametrize("late", [4, 25], ids=["answer-before-sigkill", "answer-after-sigkill"])
def test_sigterm_while_the_submit_answer_is_late_cancels_the_one_job(
    deployment: Deployment, gateway: Any, lab: Lab, late: int
) -> None:
    """SIGTERM to the task process after Slurm made the job, before its answer came; SIGKILL 5 s later if
    it still runs (Airflow 3's supervisor's escalation; Airflow 2's after killed_task_cleanup_time).
    Answered 4 s late, the task normally sees the job's id and cancels it itself; answered 25 s late, it is
    dead by then and only the reaper process that on_kill started can cancel it. Either way: one job,
    CANCELLED, none left running."""
    run = run_id(f"killsubmit{late}")
    gateway.add_fault(f"slow={late}@submit")
    try:
        deployment.trigger("deploy_submit", run, {"script": SLEEP.format(seconds=300, code=0)})
        (job_id,) = wait_jobs(gateway, "deploy_submit", run)  # Slurm made it; the answer is on its way
        victim = _task_process(deployment.wait_ti("deploy_submit", run, {"running"}))
        termed = time.monotonic()
        sigkilled = _terminate_as_airflow_does(victim)
        wait_state(lab, [job_id], "CANCELLED", timeout=120)
        seconds = time.monotonic() - termed
    finally:
        gateway.clear_faults()
    path = "the reaper (the task was SIGKILLed first)" if sigkilled else "the task itself and the reaper"
    figure(f"SIGTERM, submit answer {late}s late: cancelled by", path)
    figure(f"SIGTERM, submit answer {late}s late: seconds from SIGTERM to CANCELLED", f"{seconds:.1f}")
    if late > 5:
        assert sigkilled, "the task process ended before its submit was answered: the reaper was not needed"
    final = deployment.wait_ti("deploy_submit", run, {"success", "failed", "up_for_retry"}, timeout=240)
    assert final["state"] == "failed", final
    assert jobs_of(gateway, "deploy_submit", run) == [job_id], "a second job was made"
    assert state(lab, job_id) == "CANCELLED"
    log = deployment.log("deploy_submit", run, 1)
    assert "Task killed while its Slurm job was being submitted" in log, log[-3000:]
    assert "cancels the job carrying slurmapi-send=" in log, log[-3000:]  # the reaper was started
    if not sigkilled:
        assert f"The task was killed while Slurm job {job_id} was being submitted" in log, log[-3000:]


def test_sigterm_while_the_tag_key_settles_sends_no_job(deployment: Deployment, gateway: Any, lab: Lab) -> None:
    """Airflow 3 runs a task on after SIGTERM (and its on_kill) until the SIGKILL 5 s later. A task killed
    while it waited for a new tag key to settle used to go on and submit a job that no one cancelled:
    SIGTERM 3 s before the wait ends, and the submit came 2 s before the SIGKILL. Now it sends none."""
    if airflow_version() < (3, 0):
        pytest.skip("Airflow 2 raises inside the task on SIGTERM, and never waits for the tag key")
    from airflow_provider_slurmapi.tag_secret import _new_key
    from tests.conftest import settled_tag_key

    run = run_id("killkeywait")
    # Stamped an hour ahead, as by a writer whose clock runs fast: counted as made at the task's first read,
    # so the task waits the full 20 s from it however late the worker starts it (a new key: no task has
    # recorded it settled).
    set_tag_key(deployment, _new_key(made=time.time() + 3600))
    sent: list[int] = []
    try:
        deployment.trigger("deploy_submit", run, {"script": SLEEP.format(seconds=300, code=0)})
        ti = deployment.wait_ti("deploy_submit", run, {"running"})
        ends = wait_for(lambda: _key_wait_ends(deployment, run), "the tag key wait", timeout=120, every=0.5)
        victim = _task_process(ti)
        time.sleep(max(0.0, ends - 3 - time.time()))
        _terminate_as_airflow_does(victim)
        time.sleep(2 * POLL_INTERVAL)  # a job sent late would be in Slurm by now
        sent = jobs_of(gateway, "deploy_submit", run)
        assert sent == [], f"a job was submitted after the kill, and no one cancels it: {sent}"
        final = deployment.wait_ti("deploy_submit", run, {"success", "failed", "up_for_retry"}, timeout=240)
    finally:
        set_tag_key(deployment, settled_tag_key())
        for job_id in sent:  # leave no 300 s job behind a failed check
            lab.cancel(job_id)
        if sent:
            deployment.patch_run("deploy_submit", run, "failed")
    assert final["state"] == "failed", final
    log = deployment.log("deploy_submit", run, 1)
    assert "Task killed before it had a Slurm job" in log, log[-3000:]
    assert "killed before it sent its Slurm job" in log and "nothing was submitted" in log, log[-3000:]
    figure("SIGTERM 3 s before the tag key settled: jobs sent", 0)


_KEY_WAIT = re.compile(r"waiting ([0-9.]+) s for other first uses to finish writing")


def _key_wait_ends(deployment: Deployment, run: str) -> float | None:
    """When (unix seconds) the task's wait for the tag key to settle ends: the time of its log record
    (Airflow 3's JSON) plus the wait it names; ``None`` before that record is written."""
    for text in deployment.log("deploy_submit", run, 1).splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(text)
            found = _KEY_WAIT.search(str(record.get("event"))) if isinstance(record, dict) else None
            if found and "timestamp" in record:
                return datetime.fromisoformat(record["timestamp"]).timestamp() + float(found[1])
    return None
