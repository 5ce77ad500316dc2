"""Never lose a job, never run it twice: a DAG under each injected fault.

Each case runs a scenario DAG with ``dag.test()`` while the emulator injects one fault, then checks: the
task ends in the right state, exactly one Slurm job carries the task instance's tag, and nothing is left
running. The same guarantees against real Slurm: ``tests/live_slurm/test_fault_matrix_live.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import connection_uri_env, load_dag, run_dag
from tests.waiting import wait_until

# Faults on the submit: "before" ones were not acted on, "after" ones were (the job exists).
SUBMIT_FAULTS = [
    "unavailable@submit",
    "429@submit",
    "500-before@submit",
    "503-before@submit",
    "500-after@submit",
    "502-after@submit",
    "503-after@submit",
    "reset-before@submit",
    "reset-after@submit",
    "slow=4@submit",
    "malformed-envelope@submit",
    "non-json-body@submit",
    "expire-token@submit",
    "late=3@submit",  # carried out 3 s after it arrived, the client gave up after 2 s: never answered
]
# Faults on the reads that follow (look-up of the tag, polls, history).
READ_FAULTS = [
    ("unavailable@job-get*2", "both"),
    ("503-after@job-get", "both"),
    ("reset-after@job-get", "both"),
    ("slow=4@job-get", "both"),
    ("malformed-envelope@job-get", "both"),
    ("non-json-body@job-get", "both"),
    ("expire-token@job-get", "both"),
    ("429@jobs", "sync"),
    ("reset-before@jobs", "sync"),
    ("malformed-envelope@slurmdb", "sync"),
    ("unavailable@jobs-state*2", "deferrable"),
    ("reset-after@jobs-state", "deferrable"),
    ("non-json-body@jobs-state", "deferrable"),
    ("expire-token@jobs-state", "deferrable"),
    ("slow=4@jobs-state", "deferrable"),
]
CASES = [pytest.param(f, m, id=f"{f}-{m}") for f in SUBMIT_FAULTS for m in ("sync", "deferrable")] + [
    pytest.param(f, m, id=f"{f}-{m}")
    for f, modes in READ_FAULTS
    for m in (("sync", "deferrable") if modes == "both" else (modes,))
]


def wait_until_late_call_carried_out(emulator: Any, timeout: float = 30) -> None:
    """A ``late`` fault's call is recorded once it was carried out (and its connection dropped): wait for that
    rather than for the fault's delay, so the job it submitted is there to count."""
    wait_until(
        lambda: any(str(call.get("fault", "")).startswith("late=") for call in emulator.calls()["last"]),
        "the late call carried out",
        timeout=timeout,
    )


def tagged_jobs(emulator: Any, dag_id: str) -> list[dict[str, Any]]:
    return [job for job in emulator.jobs() if f"dag={dag_id} " in (job.get("comment") or "")]


@pytest.fixture
def faulty_connection(emulator: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The emulator behind a connection whose request timeout (2 s) is shorter than a slow answer (4 s).

    A lost submit is looked for during 4 s after it was sent: longer than the late fault's 3 s.
    """
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT",
        connection_uri_env(emulator, credentials_file, request_timeout=2, submit_settle_seconds=4),
    )
    for name, value in (
        ("SLURMAPI_PROJECT", "demo-project"),
        ("SLURMAPI_REGION", "us-central1"),
        ("SLURMAPI_CLUSTER_ID", "demo-cluster"),
        ("SLURMAPI_WORKDIR", str(emulator.config.workdir)),
        ("SLURMAPI_POLL_INTERVAL", "0.5"),
    ):
        monkeypatch.setenv(name, value)
    return emulator


@pytest.mark.parametrize(("fault", "mode"), CASES)
def test_dag_survives_fault_with_exactly_one_job(
    fault: str, mode: str, airflow_db: Any, faulty_connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(mode == "deferrable").lower())
    dag = load_dag("slurm_scenarios.py", "completes")
    faulty_connection.add_fault(fault)
    state, tasks = run_dag(dag)
    if fault.startswith("late="):
        wait_until_late_call_carried_out(faulty_connection)
    jobs = tagged_jobs(faulty_connection, dag.dag_id)
    assert state == "success", (tasks, jobs)
    assert len(jobs) == 1, f"duplicate or lost job under {fault}: {jobs}"
    assert jobs[0]["state"] == "COMPLETED"
    assert not [j for j in faulty_connection.jobs() if j["state"] in ("PENDING", "RUNNING")], "orphaned job"


@pytest.mark.parametrize("fault", ["unavailable@job-delete", "503-after@job-delete", "reset-after@job-delete"])
def test_kill_cancels_despite_a_failing_delete(
    fault: str, airflow_db: Any, faulty_connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """execution_timeout on a sync wait calls on_kill; the DELETE is retried until Slurm took it."""
    from datetime import timedelta

    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    dag = load_dag("slurm_scenarios.py", "long")
    dag.task_dict["job"].execution_timeout = timedelta(seconds=3)
    faulty_connection.add_fault(fault)
    state, _ = run_dag(dag)
    assert state == "failed"
    jobs = tagged_jobs(faulty_connection, dag.dag_id)
    assert len(jobs) == 1
    faulty_connection.wait_for_state(jobs[0]["job_id"], ["CANCELLED"], timeout=20)
