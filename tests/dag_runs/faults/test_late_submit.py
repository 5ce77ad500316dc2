"""A submit the front end carries out late, after the settle window and a resend, leaves one job running.

The emulator answers the first submit UNAVAILABLE at once and carries it out 5 s later
(``done-later=5@submit``). The connection's settle window is 2 s, so the task has looked for its tag,
found nothing and resent by then: the late copy appears while the task watches its own job. Sync
and deferrable, the wait finds the copy (our own job, newer, with this submit's send marker) and cancels
it; the task's own job is the one that runs to its end.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import connection_uri_env, load_dag, run_dag
from tests.dag_runs.faults.test_outage import output, tagged_jobs
from tests.waiting import wait_until

LATE_SECONDS = 5
BUDGET_SECONDS = 120


@pytest.mark.parametrize("mode", ["sync", "deferrable"])
def test_a_submit_carried_out_after_the_settle_window_is_cancelled_while_the_task_waits(
    mode: str,
    airflow_db: Any,
    gcp_connection: Any,
    credentials_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    emulator = gcp_connection
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT",
        connection_uri_env(emulator, credentials_file, submit_settle_seconds=2),
    )
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(mode == "deferrable").lower())
    dag = load_dag("slurm_scenarios.py", "until_released")
    emulator.add_fault(f"done-later={LATE_SECONDS}@submit")
    stop = threading.Event()

    def settled(jobs: list[dict[str, Any]]) -> bool:
        return len(jobs) == 2 and any(job["state"] == "CANCELLED" for job in jobs)

    def release_when_settled() -> None:
        """Let the jobs end once two carry the tag and one was cancelled (or the budget is spent)."""
        wait_until(
            lambda: stop.is_set() or settled(tagged_jobs(emulator, dag.dag_id)),
            "two tagged jobs, one cancelled",
            timeout=BUDGET_SECONDS,
            every=0.1,
            give_up=True,  # the budget spent: released all the same, the test then says what went wrong
        )
        (Path(emulator.config.workdir) / "release").touch()

    thread = threading.Thread(target=release_when_settled, daemon=True)
    thread.start()
    try:
        state, tasks = run_dag(dag)
    finally:
        stop.set()
        thread.join(timeout=10)
    out = output(capfd, caplog)
    assert emulator.faults() == [], "the late submit was not served: nothing tested"
    jobs = sorted(tagged_jobs(emulator, dag.dag_id), key=lambda job: job["job_id"])
    assert len(jobs) == 2, f"the late send was not carried out: {jobs}\n{out[-3000:]}"
    ours, copy = jobs
    assert state == "success", f"{tasks}\n{out[-4000:]}"
    assert ours["state"] == "COMPLETED", jobs
    assert copy["state"] == "CANCELLED", f"the late copy {copy['job_id']} was left running\n{out[-3000:]}"
    assert f"Slurm job {copy['job_id']} carries slurmapi-send=" in out  # this submit's marker, not the task's tag
