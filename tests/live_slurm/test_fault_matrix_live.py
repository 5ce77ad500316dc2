"""Never lose a job, never run it twice, on real Slurm: the gateway injects one fault in front of slurmrestd.

The emulator-side matrix (every fault, both wait modes) is ``tests/dag_runs/faults/test_fault_matrix.py``;
here a few of its faults run a scenario DAG against the lab through a gateway of the test's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import connection_uri_env, load_dag, run_dag
from tests.dag_runs.faults.test_fault_matrix import wait_until_late_call_carried_out
from tests.live_slurm.lab import Lab

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize(
    "fault",
    [
        "503-after@submit",
        "reset-after@submit",
        "reset-before@submit",
        "slow=4@submit",
        "late=3@submit",
        "unavailable@jobs-state*2",
    ],
)
def test_real_slurm_through_faulty_gateway_keeps_one_job(
    fault: str, lab: Lab, emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same guarantees against real Slurm: the gateway injects the fault in front of slurmrestd."""
    # meta.client.user as slurmrestd answers it ("root"), no slurm_user: as a user gets it.
    gateway = emulator_factory(slurmrestd=lab.url, slurm_token_file=lab.token_file, meta_client_user="slurmrestd")
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT",
        connection_uri_env(gateway, credentials_file, request_timeout=2, submit_settle_seconds=4),
    )
    for name, value in (
        ("SLURMAPI_REGION", "us-central1"),
        ("SLURMAPI_CLUSTER_ID", "lab"),
        ("SLURMAPI_WORKDIR", "/tmp"),
        ("SLURMAPI_PARTITION", "debug"),
        ("SLURMAPI_POLL_INTERVAL", "1"),
        ("SLURMAPI_DEFERRABLE", "true"),
    ):
        monkeypatch.setenv(name, value)
    dag = load_dag("slurm_scenarios.py", "completes")
    gateway.add_fault(fault)
    state, tasks = run_dag(dag)
    if fault.startswith("late="):
        wait_until_late_call_carried_out(gateway)
    assert state == "success", tasks
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook

    hook = SlurmApiHook(region="us-central1", cluster_id="lab")
    mine = [job for job in hook.list_jobs() if job.comment and f"dag={dag.dag_id} " in job.comment]
    run_ids = {job.comment.split(" run=")[1].split(" ")[0] for job in mine if job.comment}
    # Several runs of this DAG may be in the live queue; the newest run must have exactly one job.
    newest_run = max(run_ids)
    assert len([job for job in mine if f"run={newest_run} " in (job.comment or "")]) == 1, mine
    assert not [job for job in mine if not job.is_finished]
