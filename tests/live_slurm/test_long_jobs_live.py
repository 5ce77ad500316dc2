"""Long jobs on real Slurm: a requeued or preempted job is waited for to its real end under the same id,
a job that can never start fails its task at once, and ``pending_timeout`` cancels a job that pends too long.

What the lab (Slurm 24.11.5) shows, read by the tests below: after ``scontrol requeue``, a preemption
(``PreemptMode=REQUEUE``, partitions ``low`` and ``high``) or a ``NODE_FAIL`` the live record goes from
RUNNING to ``PENDING`` (first ``PENDING+COMPLETING``, reason ``None``, then ``BeginTime`` until the lab's
``cred_expire`` has passed: 20 s here, Slurm's default 120 s), ``restart_cnt`` grows by one, and no REQUEUED
flag shows in the live queue; the history keeps one record per run, the earlier one ``PENDING+REQUEUED``,
``PREEMPTED`` or ``NODE_FAIL``.

The node-failure test takes the lab's only node down, which kills every job running on it: it runs only
on a lab of its own (``SLURM_LAB_EXCLUSIVE=1``, e.g. ``SLURM_LAB_DIR=/var/tmp/slurmapi-lab-mine``).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DAGS_FOLDER, load_dag
from tests.dag_runs.test_fail_fast import run_with_retries
from tests.live_slurm.conftest import DagResult, run_dag_capture
from tests.live_slurm.lab import LAB_DIR, Lab, V, in_lab
from tests.waiting import wait_until

pytestmark = pytest.mark.slurm

DAG_FILE = "slurm_long_jobs.py"
_link = DAGS_FOLDER / DAG_FILE
if not _link.exists():
    _link.symlink_to(Path(__file__).resolve().parent / "dag_files" / DAG_FILE)

# A requeued job is eligible again cred_expire later (BeginTime; 20 s in the lab, Slurm's default 120 s, and an
# older lab may still run with it): the budget of one run, queue included.
REQUEUE_BUDGET = 420


def job_by_name(lab: Lab, name: str) -> dict[str, Any] | None:
    status, body = lab.call("GET", f"/slurm/{V}/jobs/")
    assert status == 200, body
    return next((job for job in body["jobs"] if job.get("name") == name), None)


class Admin:
    """Acts on a named job once it RUNS, in a thread, while the DAG runs in the test's own."""

    def __init__(self, lab: Lab, name: str, action: Callable[[int], None], budget: float = 240) -> None:
        self.lab, self.name, self.action, self.budget = lab, name, action, budget
        self.job_id: int | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            job = wait_until(
                lambda: (
                    (job := job_by_name(self.lab, self.name)) is not None and job["job_state"] == ["RUNNING"] and job
                ),
                f"job {self.name} running",
                timeout=self.budget,
                every=0.5,
            )
            self.job_id = int(job["job_id"])
            self.action(self.job_id)
        except BaseException as exc:
            self.error = exc

    def join(self) -> int:
        self._thread.join(self.budget + 60)
        if self.error is not None:
            raise self.error
        assert self.job_id is not None
        return self.job_id


@pytest.fixture
def name(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    value = f"long-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("SLURMAPI_LONG_NAME", value)
    yield value


@pytest.fixture
def cleanup(lab: Lab) -> Iterator[list[int]]:
    ids: list[int] = []
    yield ids
    for job_id in ids:
        lab.cancel(job_id)


def preempt_with_a_high_tier_job(lab: Lab, name: str, high: list[int]) -> Callable[[int], None]:
    """The admin's action: submit a job of the higher tier that needs the node's CPUs (its id appended to
    ``high``, e.g. the test's cleanup), so Slurm preempts the low-tier job."""

    def preempt(job_id: int) -> None:
        high.append(lab.submit("#!/bin/bash\nsleep 2\n", name=f"{name}-high", partition="high", minimum_cpus=2))

    return preempt


def run_while_the_admin_acts(
    lab: Lab, name: str, action: Callable[[int], None], cleanup: list[int], capfd: pytest.CaptureFixture[str]
) -> tuple[DagResult, int]:
    """The ``requeue`` DAG, run while ``action`` hits its job once it RUNS; the job is cancelled at the end."""
    admin = Admin(lab, name, action)
    result = run_dag_capture(load_dag(DAG_FILE, "requeue"), capfd)
    job_id = admin.join()
    cleanup.append(job_id)
    return result, job_id


def requeue_lines(log: str, job_id: int) -> list[str]:
    return re.findall(rf"Slurm job {job_id} (?:was|has been) requeued[^\n]*", log)


def assert_waited_to_the_end(result: DagResult, lab: Lab, job_id: int) -> None:
    """The task succeeded on the same job, after its requeue, logged once; the XCom counts it."""
    assert result.tasks == {"job": "success"}, result.log[-4000:]
    record = lab.final(job_id, timeout=30)
    assert record.state == "COMPLETED" and record.raw.get("restart_cnt") == 1, record
    lines = requeue_lines(result.log, job_id)
    assert len(lines) == 1, re.findall(rf"[^\n]*Slurm job {job_id}\b[^\n]*", result.log)
    assert "restart count 1" in lines[0], lines
    xcom = result.xcom("job", "slurm_job")
    assert (xcom["job_id"], xcom["state"], xcom["requeues"]) == (job_id, "COMPLETED", 1), xcom
    assert result.xcom("job") == job_id


# A requeued job is eligible again only cred_expire later (Slurm's BeginTime, ~22 s in the lab with the
# scheduler's next pass): each of these tests waits that out. The sync wait and the trigger share one JobWatch, whose handling of the same
# sequences the unit tests (tests/unit/slurm/jobs/test_watch_long_jobs.py) check in both; the real-Slurm
# run of the sync mode comes with SLURM_LIVE_FULL=1.
SYNC_SKIPPED = "the sync wait's twin of a requeue test: SLURM_LIVE_FULL=1 runs it"


def test_an_admin_requeue_is_waited_out_on_the_same_job(
    mode: bool, lab: Lab, name: str, cleanup: list[int], capfd: pytest.CaptureFixture[str]
) -> None:
    if not mode and os.environ.get("SLURM_LIVE_FULL") != "1":
        pytest.skip(SYNC_SKIPPED)
    result, job_id = run_while_the_admin_acts(
        lab, name, lambda job_id: in_lab("scontrol", "requeue", str(job_id)), cleanup, capfd
    )
    assert_waited_to_the_end(result, lab, job_id)


def test_a_preempted_job_is_requeued_and_waited_out(
    mode: bool,
    lab: Lab,
    name: str,
    cleanup: list[int],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    if not mode and os.environ.get("SLURM_LIVE_FULL") != "1":
        pytest.skip(SYNC_SKIPPED)
    monkeypatch.setenv("SLURMAPI_LONG_PARTITION", "low")
    result, job_id = run_while_the_admin_acts(
        lab, name, preempt_with_a_high_tier_job(lab, name, cleanup), cleanup, capfd
    )
    assert_waited_to_the_end(result, lab, job_id)
    _status, body = lab.call("GET", f"/slurmdb/{V}/job/{job_id}")
    runs = [run["state"]["current"] for run in body["jobs"]]
    assert runs[0] == ["PREEMPTED"] and runs[-1] == ["COMPLETED"], runs  # the preemption really happened


def test_a_job_without_requeue_ends_as_slurm_says_when_preempted(
    mode: bool,
    lab: Lab,
    name: str,
    cleanup: list[int],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SLURMAPI_LONG_PARTITION", "low")
    monkeypatch.setenv("SLURMAPI_LONG_REQUEUE", "false")
    monkeypatch.setenv("SLURMAPI_LONG_SECONDS", "60")
    result, job_id = run_while_the_admin_acts(
        lab, name, preempt_with_a_high_tier_job(lab, name, cleanup), cleanup, capfd
    )
    record = lab.final(job_id, timeout=60)
    assert record.raw.get("restart_cnt", 0) == 0 and record.state != "COMPLETED", record
    assert result.tasks == {"job": "failed"}, result.log[-4000:]
    assert f"Slurm job {job_id} ({name}) ended {record.state}" in result.log
    assert requeue_lines(result.log, job_id) == []


@pytest.mark.skipif(
    os.environ.get("SLURM_LAB_EXCLUSIVE") != "1",
    reason="takes the lab's only node down (every running job fails): needs a lab of its own, SLURM_LAB_EXCLUSIVE=1",
)
def test_a_node_failure_with_requeue_is_waited_out(
    mode: bool, lab: Lab, name: str, cleanup: list[int], capfd: pytest.CaptureFixture[str]
) -> None:
    def node_fail(job_id: int) -> None:
        in_lab("scontrol", "update", "NodeName=localhost", "State=DOWN", "Reason=long-jobs-test")
        lab.wait(job_id, lambda r: r.source == "live" and r.raw.get("restart_cnt") == 1, 60, "requeued")
        in_lab("scontrol", "update", "NodeName=localhost", "State=RESUME")

    admin = Admin(lab, name, node_fail)
    try:
        result = run_dag_capture(load_dag(DAG_FILE, "requeue"), capfd)
    finally:
        admin._thread.join(120)
        subprocess.run(
            ["chroot", str(LAB_DIR / "chroot"), "/usr/bin/env", "-i", "PATH=/usr/bin:/bin",
             "SLURM_CONF=/etc/slurm/slurm.conf", "scontrol", "update", "NodeName=localhost", "State=RESUME"],
            capture_output=True, check=False,
        )  # fmt: skip
    job_id = admin.join()
    cleanup.append(job_id)
    assert_waited_to_the_end(result, lab, job_id)
    _status, body = lab.call("GET", f"/slurmdb/{V}/job/{job_id}")
    assert next(run["state"]["current"] for run in body["jobs"]) == ["NODE_FAIL"]


def submitted(out: str) -> list[int]:
    """The job ids the run submitted, in order (the hook logs each submission)."""
    return list(dict.fromkeys(int(i) for i in re.findall(r"Submitted Slurm job (\d+)", out)))


def test_a_job_whose_dependency_can_never_be_met_fails_at_once_and_is_cancelled(
    mode: bool, lab: Lab, name: str, cleanup: list[int], capfd: pytest.CaptureFixture[str]
) -> None:
    state, tries = run_with_retries(load_dag(DAG_FILE, "never_starts"), retries=2)
    out = "".join(capfd.readouterr())
    ids = submitted(out)
    cleanup.extend(ids)
    assert len(ids) == 2, out[-4000:]  # "first", then "job" once: no retry submitted it again
    first, job_id = ids
    assert (state, tries) == ("failed", 1), out[-4000:]
    assert f"Slurm job {job_id}: PENDING (Dependency) -> PENDING (DependencyNeverSatisfied)" in out
    assert "can never start" in out and "Not retried" in out
    assert "scontrol update JobId=... Dependency=" in out  # the fix
    assert lab.final(first, timeout=60).state == "FAILED"
    record = lab.final(job_id, timeout=60)
    assert record.state == "CANCELLED" and not record.ran, record


def test_pending_timeout_cancels_the_job_and_the_retry_submits_again(
    mode: bool, lab: Lab, name: str, cleanup: list[int], capfd: pytest.CaptureFixture[str]
) -> None:
    state, tries = run_with_retries(load_dag(DAG_FILE, "pending_timeout"), retries=1)
    out = "".join(capfd.readouterr())
    ids = submitted(out)
    cleanup.extend(ids)
    assert (state, tries) == ("failed", 2), out[-4000:]  # the timeout used the retry: a new job, timed out again
    assert len(ids) == 2, ids
    for job_id in ids:
        record = lab.final(job_id, timeout=60)
        assert record.state == "CANCELLED" and not record.ran, record
        assert f"Slurm job {job_id} was still PENDING (JobHeldUser) after" in out
    assert out.count("pending_timeout=15s") >= 2
    assert "Not retried" not in out
