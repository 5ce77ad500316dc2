"""A wait rides out an API outage longer than one call's retries, and fails clearly after its budget.

The emulator answers UNAVAILABLE, a 502 page and a reset connection to every call for a while (the
connection's ``retry_seconds`` is 1 s, so each failing call gives up after a second or two), while
the job runs on; then the API recovers and the job ends. Sync, deferrable (the shared poller) and the
sensor (poke and reschedule) must all wait through it. A longer outage than the budget fails the
task, naming the job and saying that a retry reattaches.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import connection_uri_env, load_dag, run_dag
from tests.dag_runs.test_watchers import submit
from tests.waiting import wait_until

# Each failing call meets two of these (first try, one retry): three failed polls in a row.
OUTAGE = ["unavailable*2", "502-before*2", "reset-before*2"]


@pytest.fixture
def short_retries(gcp_connection: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The emulator behind a connection whose calls give up after 1 s of retries."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(gcp_connection, credentials_file, retry_seconds=1)
    )
    return gcp_connection


def tagged_jobs(emulator: Any, dag_id: str) -> list[dict[str, Any]]:
    return [job for job in emulator.jobs() if f"dag={dag_id} " in (job.get("comment") or "")]


@contextmanager
def outage(emulator: Any, faults: list[str], *, after_submit_of: str | None = None) -> Iterator[None]:
    """Arm ``faults`` (once the DAG's job exists, if named); when all are spent, let the job end."""
    stop = threading.Event()

    def run() -> None:
        if after_submit_of:
            wait_until(
                lambda: stop.is_set() or tagged_jobs(emulator, after_submit_of),
                f"the job of {after_submit_of}",
                timeout=600,
                give_up=True,  # the DAG run says what went wrong
            )
        for fault in faults:
            emulator.add_fault(fault)
        wait_until(
            lambda: stop.is_set() or not emulator.faults(), "every fault spent", timeout=600, every=0.1, give_up=True
        )
        if not stop.is_set():
            (Path(emulator.config.workdir) / "release").touch()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def output(capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> str:
    return "".join(capfd.readouterr()) + caplog.text


@pytest.mark.parametrize("mode", ["sync", "deferrable"])
def test_submit_operator_rides_out_an_outage(
    mode: str,
    airflow_db: Any,
    short_retries: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(mode == "deferrable").lower())
    dag = load_dag("slurm_scenarios.py", "until_released")
    with outage(short_retries, OUTAGE, after_submit_of=dag.dag_id):
        state, tasks = run_dag(dag)
    out = output(capfd, caplog)
    assert state == "success", f"{tasks}\n{out[-4000:]}"
    assert short_retries.faults() == [], "the outage was not served: nothing tested"
    jobs = tagged_jobs(short_retries, dag.dag_id)
    assert [job["state"] for job in jobs] == ["COMPLETED"]
    assert f"while watching Slurm job {jobs[0]['job_id']}" in out, "the outage is warned about"


@pytest.mark.parametrize("mode", ["sync", "deferrable"])
def test_an_outage_longer_than_the_budget_fails_naming_the_job(
    mode: str,
    airflow_db: Any,
    short_retries: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(mode == "deferrable").lower())
    monkeypatch.setenv("SLURMAPI_OUTAGE_TOLERANCE", "3")
    dag = load_dag("slurm_scenarios.py", "until_released")
    with outage(short_retries, ["unavailable*inf"], after_submit_of=dag.dag_id):
        state, _ = run_dag(dag)
    short_retries.clear_faults()
    out = output(capfd, caplog)
    (job,) = tagged_jobs(short_retries, dag.dag_id)
    assert state == "failed"
    assert f"a retry of this task reattaches to Slurm job {job['job_id']}" in out, out[-4000:]
    assert job["state"] == "RUNNING", "the job was left running for the retry to reattach"


@pytest.mark.parametrize("mode", ["poke", "reschedule", "deferrable"])
def test_sensor_rides_out_an_outage(
    mode: str,
    airflow_db: Any,
    short_retries: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    job_id = submit(short_retries, "#!/bin/bash\nwhile [ ! -e release ]; do sleep 0.2; done\n")
    monkeypatch.setenv("SLURMAPI_WATCH_JOB_ID", str(job_id))
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(mode == "deferrable").lower())
    monkeypatch.setenv("SLURMAPI_SENSOR_MODE", "poke" if mode == "deferrable" else mode)
    with outage(short_retries, OUTAGE):
        state, tasks = run_dag(load_dag("slurm_watchers.py", "sensor"))
    out = output(capfd, caplog)
    assert state == "success", f"{tasks}\n{out[-4000:]}"
    assert short_retries.faults() == [], "the outage was not served: nothing tested"
    assert f"while watching Slurm job {job_id}" in out
