"""What starting a task costs, and who can steer it: real DAG runs (``dag.test()``) against the emulator."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
from tests.conftest import load_dag, run_dag


@pytest.fixture(params=[True, False], ids=["deferrable", "sync"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(request.param).lower())
    return bool(request.param)


def test_a_first_try_submits_with_exactly_one_call_and_lists_nothing(
    mode: bool, airflow_db: Any, gcp_connection: Any
) -> None:
    """No earlier try and no stored job id: the submit is the first call, and no list is ever read."""
    gcp_connection.add_foreign_jobs(100, "nobody")
    gcp_connection.reset_calls()
    state, tasks = run_dag(load_dag("slurm_scenarios.py", "completes"))
    assert state == "success", tasks
    calls = gcp_connection.calls()
    kinds = [call["kind"] for call in calls["last"]]
    assert kinds[0] == "submit", kinds
    assert calls["by_kind"]["submit"] == 1, kinds
    # No list is read: the only history call is the accounting summary of this job, once it has ended.
    assert "jobs" not in kinds, kinds
    history = [call["path"] for call in calls["last"] if call["kind"] == "slurmdb"]
    assert history == [f"/slurmdb/v0.0.42/job/{gcp_connection.jobs()[-1]['job_id']}"], history
    assert kinds.index("slurmdb") > kinds.index("submit"), kinds


@pytest.mark.skipif(not AIRFLOW_V_3_0_PLUS, reason="dag.test(run_after=...) names the run on Airflow 3")
def test_a_job_pre_created_by_another_user_with_the_predictable_comment_is_never_adopted(
    airflow_db: Any, gcp_connection: Any
) -> None:
    """Another user knows the dag, task and run ids and squats a COMPLETED job with their comment and hash."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.types import DagRunType

    when = datetime.now(UTC).replace(microsecond=0)
    run_id = DagRun.generate_run_id(run_type=DagRunType.MANUAL, logical_date=when, run_after=when)
    dag = load_dag("slurm_scenarios.py", "completes")
    public_hash = hashlib.sha256(f"{dag.dag_id}\x00job\x00{run_id}\x00-1".encode()).hexdigest()
    comment = f"airflow dag={dag.dag_id} task=job run={run_id} airflow-ti={public_hash[:24]}"
    [squatter] = gcp_connection.add_foreign_jobs(
        1, "nobody", name="scenario-completes", comment=comment, state="COMPLETED"
    )
    run = dag.test(run_after=when, logical_date=when)
    assert run.run_id == run_id and str(run.state) == "success"
    ours = [job for job in gcp_connection.jobs() if job["job_id"] != squatter and f"run={run_id} " in job["comment"]]
    assert len(ours) == 1 and ours[0]["user"] != "nobody" and ours[0]["state"] == "COMPLETED", ours
