"""A kill while the submit is on its way: the job Slurm made is cancelled, on every Airflow version.

A worker process (``dag.test()`` of the ``long`` scenario, sync wait) is sent SIGTERM after Slurm made
the job but before the answer reached the task (the emulator answers the submit late). Airflow 2's
handler would raise inside the request; Airflow 3's supervisor sends SIGKILL 5 s after SIGTERM. The
task's own cancel covers an answer that comes while it lives; the reaper process that ``on_kill``
starts covers one that comes after it died.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DAGS_FOLDER, REPO, load_dag, run_dag, seed_tag_key
from tests.waiting import wait_until


def _worker(logical_date: datetime, log: Path | None = None, cwd: Path = REPO) -> subprocess.Popen[str]:
    """``dag.test()`` of the ``long`` scenario in a process of its own; its output piped, or in ``log``.

    Run from ``cwd`` as a worker runs a task: with ``-P`` and the checkout on ``PYTHONPATH``, its own
    imports never come from ``cwd`` (``airflow`` and ``celery`` are console scripts, whose ``sys.path``
    starts with their ``bin`` directory, not the working directory)."""
    code = (
        "import runpy, sys, datetime\n"
        f"ns = runpy.run_path({str(DAGS_FOLDER / 'slurm_scenarios.py')!r})\n"
        "dag = ns['DAGS']['long']\n"
        f"when = datetime.datetime.fromisoformat({logical_date.isoformat()!r})\n"
        "try:\n"
        "    run = dag.test(logical_date=when, run_after=when)\n"
        "except TypeError:  # Airflow 2: no run_after\n"
        "    run = dag.test(execution_date=when)\n"
        "sys.exit(0 if run.state == 'success' else 1)\n"
    )
    return subprocess.Popen(
        [sys.executable, "-P", "-c", code],
        env=dict(os.environ, SLURMAPI_DEFERRABLE="false", PYTHONPATH=str(REPO)),
        cwd=cwd,
        stdout=subprocess.PIPE if log is None else log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )


def _made_job(emulator: Any, worker: subprocess.Popen[str], timeout: float = 240) -> dict[str, Any]:
    """The worker's job once Slurm made it (its answer is still on its way)."""

    def made() -> dict[str, Any] | None:
        jobs = [j for j in emulator.jobs() if j["name"] == "scenario-long"]
        if jobs:
            return jobs[-1]
        if worker.poll() is not None:
            output = worker.stdout.read() if worker.stdout else ""
            raise AssertionError(f"the worker ended ({worker.returncode}) before submitting: {output[-3000:]}")
        return None

    job: dict[str, Any] = wait_until(made, "the worker's job made", timeout=timeout, every=0.1)
    return job


def test_sigterm_during_the_submit_lets_the_answer_arrive_and_cancels_the_job(
    airflow_db: Any, gcp_connection: Any
) -> None:
    """Answered 6 s late, the worker lives on (Airflow 2: the raise is held back until the answer) and
    cancels the job the answer names."""
    gcp_connection.add_fault("slow=6@submit")
    worker = _worker(datetime(2026, 3, 5, tzinfo=UTC))
    job = _made_job(gcp_connection, worker)
    worker.send_signal(signal.SIGTERM)
    output, _ = worker.communicate(timeout=120)
    gcp_connection.wait_for_state(job["job_id"], ["CANCELLED"], timeout=30)
    assert worker.returncode != 0, output[-2000:]
    assert "Task killed while its Slurm job was being submitted" in output, output[-3000:]
    assert f"The task was killed while Slurm job {job['job_id']} was being submitted" in output, output[-3000:]
    assert [j["job_id"] for j in gcp_connection.jobs() if j["name"] == "scenario-long"] == [job["job_id"]]


def _reaper_started_by(ancestor: int) -> bool:
    """A reaper process (its command line names ``airflow_provider_slurmapi.slurm.reaper``) runs below ``ancestor``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"airflow_provider_slurmapi.slurm.reaper" not in (entry / "cmdline").read_bytes():
                continue
            pid = int(entry.name)
            while pid > 1:  # up the parents: the 4th field of /proc/PID/stat, after the command's ")"
                pid = int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if pid == ancestor:
                    return True
        except (OSError, ValueError, IndexError):
            continue
    return False


def _sigkill_before_the_answer(emulator: Any, logical_date: datetime, log: Path, cwd: Path = REPO) -> None:
    """Answered 30 s late; SIGKILL once on_kill has started the reaper (before the answer): the job ends
    CANCELLED, by the reaper (the task never learnt its id), and it is the only one."""
    emulator.add_fault("slow=30@submit")
    worker = _worker(logical_date, log=log, cwd=cwd)
    job = _made_job(emulator, worker)
    worker.send_signal(signal.SIGTERM)
    # on_kill runs in the signal handler and starts the reaper: SIGKILL once it has handed the reaper its
    # order (logged after the order is written), as Airflow's SIGKILL comes 5 s after the SIGTERM. The
    # reaper's process alone is not enough: killed before the order is written, it has nothing to do.
    wait_until(lambda: _reaper_started_by(worker.pid), "on_kill started the reaper", timeout=20)
    wait_until(lambda: "cancels the job carrying slurmapi-send=" in log.read_text(), "the order handed", timeout=20)
    worker.kill()
    worker.wait(timeout=30)
    output = log.read_text()
    assert "Task killed while its Slurm job was being submitted" in output, output[-3000:]
    assert "cancels the job carrying slurmapi-send=" in output, output[-3000:]
    emulator.wait_for_state(job["job_id"], ["CANCELLED"], timeout=60)
    assert [j["job_id"] for j in emulator.jobs() if j["name"] == "scenario-long"] == [job["job_id"]]


def test_sigkill_before_the_answer_leaves_the_cancel_to_the_reaper(
    airflow_db: Any, gcp_connection: Any, tmp_path: Path
) -> None:
    """The task never learns the job's id, and the reaper process, which outlives it, finds the job by its
    send marker and cancels it."""
    _sigkill_before_the_answer(gcp_connection, datetime(2026, 3, 6, tzinfo=UTC), tmp_path / "worker.log")


# Planted in a task's working directory by someone who can write there: imported, it notes by whom
# (the reaper's order, token included, would be in reach), then hands over to the real module.
_PLANTED = """\
import importlib, os, sys
with open({note!r} + __name__, "a") as note:
    note.write(" ".join(sys.argv) + "\\n")
here, saved = os.path.dirname(os.path.abspath(__file__)), sys.path[:]
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
del sys.modules[__name__]
try:
    importlib.import_module(__name__)
finally:
    sys.path[:] = saved
"""


def test_the_reaper_imports_nothing_from_the_tasks_working_directory(
    airflow_db: Any, gcp_connection: Any, tmp_path: Path
) -> None:
    """A task run from a directory that holds a ``json.py`` (and ``base64.py``, and the ``simplejson.py``
    that requests tries first): the reaper, which reads its order with json, runs isolated from ``/``,
    cancels the job all the same, and none of them is imported."""
    workdir, notes = tmp_path / "workdir", tmp_path / "notes"
    workdir.mkdir()
    notes.mkdir()
    for module in ("json", "base64", "simplejson"):
        (workdir / f"{module}.py").write_text(_PLANTED.format(note=f"{notes}/imported-"))
    _sigkill_before_the_answer(gcp_connection, datetime(2026, 3, 9, tzinfo=UTC), tmp_path / "worker.log", cwd=workdir)
    imported = {path.name: path.read_text() for path in notes.iterdir()}
    assert imported == {}, f"modules planted in the task's working directory were imported: {imported}"


def test_an_execution_timeout_during_the_submit_cancels_the_job(
    airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """execution_timeout raises inside the request (on every version): the task never learns the job's id,
    so the reaper cancels it. The timeout (10 s) must come after the submit is sent (the task's work before
    it takes a second or two) and before its answer (60 s late)."""
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    gcp_connection.add_fault("slow=60@submit")
    dag = load_dag("slurm_scenarios.py", "long")
    task = dag.task_dict["job"]
    task.execution_timeout = timedelta(seconds=10)
    # The scenarios' 5-minute limit is 10 s on the emulator's clock: the job would end TIMEOUT about when the
    # reaper starts. An hour (2 minutes here) leaves only the reaper to end it within the wait below.
    task.job = {**task.job, "time_limit": 60}
    state, _ = run_dag(dag)
    assert state == "failed"
    jobs = [j for j in gcp_connection.jobs() if j["name"] == "scenario-long"]
    assert len(jobs) == 1, f"the timeout came before the submit was sent: nothing tested ({jobs})"
    gcp_connection.wait_for_state(jobs[0]["job_id"], ["CANCELLED"], timeout=60)


def test_sigterm_before_the_submit_sends_no_job(airflow_db: Any, gcp_connection: Any, tmp_path: Path) -> None:
    """Airflow 3 runs a task on after its on_kill until the SIGKILL (5 s later in a deployment): a task
    killed while it waited for a tag key to settle went on to submit a job that no one cancelled. Now it
    sends none. (Airflow 2 raises in the task on SIGTERM, and never waits for the key.)"""
    from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
    from airflow_provider_slurmapi.tag_secret import VARIABLE_KEY, _new_key

    if not AIRFLOW_V_3_0_PLUS:
        pytest.skip("Airflow 2 raises inside the task on SIGTERM, and its tag key is never waited for")
    from airflow.models.variable import Variable

    made_now = _new_key()  # another task's first use, a moment ago: this one waits up to 20 s for it to settle
    Variable.set(VARIABLE_KEY, made_now)
    log = tmp_path / "worker.log"
    try:
        worker = _worker(datetime(2026, 3, 8, tzinfo=UTC), log=log)
        wait_until(lambda: "for other first uses to finish writing" in log.read_text(), "the key wait", timeout=120)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=120)  # the wait ends, and the task with it
    finally:
        seed_tag_key()
    output = log.read_text()
    sent = [j["job_id"] for j in gcp_connection.jobs() if j["name"] == "scenario-long"]
    assert sent == [], f"a job was submitted after the kill: {sent}\n{output[-3000:]}"
    assert worker.returncode != 0, output[-3000:]
    assert "Task killed before it had a Slurm job" in output, output[-3000:]
    assert "killed before it sent its Slurm job" in output and "nothing was submitted" in output, output[-3000:]
