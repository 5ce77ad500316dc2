"""Exactly once on real Slurm with nothing configured: a retry after a dead try reattaches to its job.

The connection has no ``slurm_user`` and the gateway answers ``meta.client.user`` as slurmrestd does
(``root``): the provider knows its account only from its own jobs. Try 1 dies while its job runs (the
gateway answers every read of the job UNAVAILABLE beyond the task's ``outage_tolerance_seconds``, so
nothing is learned from the job either); the outage ends once Airflow has given up on try 1. Run on Airflow 3.3 (``make test-slurm``) and 2.10.5 (``make test-slurm-airflow2105``:
no task state store, the tag lookup alone, the path that submitted a second job before). A submit carried
out after the settle window leaves one job. The lost-answer cases on real Slurm are ``test_fault_matrix_live.py``.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROJECT, REGION, connection_uri_env, load_dag, run_dag
from tests.dag_runs.test_fail_fast import run_with_retries
from tests.live_slurm.conftest import LIVE_DAG_FILE
from tests.live_slurm.lab import Lab

pytestmark = pytest.mark.slurm


def test_a_retry_after_a_try_that_died_while_its_job_ran_reattaches_to_it(
    lab: Lab,
    emulator_factory: Any,
    credentials_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    gateway = emulator_factory(slurmrestd=lab.url, slurm_token_file=lab.token_file, meta_client_user="slurmrestd")
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(gateway, credentials_file, retry_seconds=1)
    )
    monkeypatch.setenv("SLURMAPI_CLUSTER_ID", f"dead-try-{time.monotonic_ns()}")  # no account kept from before
    gateway.add_fault("unavailable@job-get*inf")
    stop = threading.Event()

    def end_the_outage_once_try_1_is_over() -> None:
        """The outage ends when Airflow has given up on try 1 (the task is up for retry, or in try 2)."""
        from airflow.models import TaskInstance
        from airflow.utils.session import create_session

        while not stop.wait(0.1):
            with create_session() as session:
                over = (
                    session.query(TaskInstance)
                    .filter(TaskInstance.dag_id == "slurm_live_dead_try", TaskInstance.run_id.notin_(earlier_runs))
                    .filter((TaskInstance.state == "up_for_retry") | (TaskInstance.try_number >= 2))
                    .count()
                )
            if over:
                gateway.clear_faults()
                return

    from airflow.models import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        earlier_runs = [
            ti.run_id for ti in session.query(TaskInstance).filter(TaskInstance.dag_id == "slurm_live_dead_try")
        ]
    watcher = threading.Thread(target=end_the_outage_once_try_1_is_over, daemon=True)
    watcher.start()
    try:
        state, tries = run_with_retries(load_dag(LIVE_DAG_FILE, "dead_try"), retries=1)
    finally:
        stop.set()
        watcher.join(10)
    out = "".join(capfd.readouterr())
    ids = list(dict.fromkeys(int(i) for i in re.findall(r"Submitted Slurm job (\d+)", out)))
    for job_id in ids[1:]:  # a second job: the bug; it must not run on
        lab.cancel(job_id)
    assert len(ids) == 1, f"the retry submitted a second job: {ids}\n{out[-4000:]}"
    assert tries == 2, out[-4000:]  # try 1 died, try 2 reattached
    assert re.search(rf"Reattaching to Slurm job {ids[0]}\b", out), out[-4000:]
    assert state == "success", out[-4000:]
    assert lab.final(ids[0], timeout=60).state == "COMPLETED"


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "sync"])
def test_a_submit_carried_out_after_the_settle_window_leaves_one_job_running(
    deferrable: bool, lab: Lab, emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway answers the submit 503 at once and carries it out 6 s later, after the 4 s settle window:
    the task has resent by then; the late copy (same send marker, newer) is cancelled while the task watches
    its own job, which runs to its end. Nothing configured; meta.client.user says "root"."""
    gateway = emulator_factory(slurmrestd=lab.url, slurm_token_file=lab.token_file, meta_client_user="slurmrestd")
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT",
        connection_uri_env(gateway, credentials_file, request_timeout=2, submit_settle_seconds=4),
    )
    for name, value in (
        ("SLURMAPI_CLUSTER_ID", f"late-submit-{time.monotonic_ns()}"),  # no account kept from before
        ("SLURMAPI_WORKDIR", "/tmp"),
        ("SLURMAPI_PARTITION", "debug"),
        ("SLURMAPI_POLL_INTERVAL", "1"),
        ("SLURMAPI_DEFERRABLE", str(deferrable).lower()),
    ):
        monkeypatch.setenv(name, value)
    gateway.add_fault("done-later=6@submit")
    state, tasks = run_dag(load_dag("slurm_scenarios.py", "completes_slowly"))
    assert gateway.faults() == [], "the late submit was not served: nothing tested"
    ids = sorted(job["job_id"] for job in gateway.jobs())
    records = {job_id: lab.final(job_id, timeout=120) for job_id in ids}
    assert len(ids) == 2, f"the late send was not carried out: {records}"
    ours, copy = ids
    assert state == "success", tasks
    assert records[ours].state == "COMPLETED", records
    assert records[copy].state == "CANCELLED", records


def test_the_default_listing_right_after_a_submit_shows_the_callers_own_jobs(lab: Lab) -> None:
    """SlurmListJobsOperator() with nothing set, after the DAG submitted a held job: never a silent []."""
    from airflow.models import Variable

    from airflow_provider_slurmapi.account_store import variable_name
    from tests.dag_runs.test_conventions import xcom_values
    from tests.live_slurm.conftest import CLUSTER_ID, JOB_USER

    with contextlib.suppress(Exception):  # nothing kept from earlier tests: learned from this DAG's submit
        Variable.delete(variable_name("google_cloud_default", PROJECT, REGION, CLUSTER_ID))
    dag_run = load_dag(LIVE_DAG_FILE, "list_own").test()
    listed = xcom_values(dag_run)
    held = listed.get("submit")
    try:
        assert str(dag_run.state) == "success", listed
        own = listed["own"]
        assert held in [job["job_id"] for job in own], own
        assert {job["user"] for job in own} == {JOB_USER}, own  # the lab is shared: other tests' jobs too
    finally:
        if held:
            lab.cancel(int(held))
