"""What a deferrable task's start and resume cost in API calls: a real DAG run (``dag.test()``) against the
emulator, whose call log is split where the task hands its wait to the triggerer and where it resumes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger
from tests.conftest import load_dag, run_dag


@pytest.fixture
def phases(monkeypatch: pytest.MonkeyPatch, gcp_connection: Any) -> dict[str, int]:
    """How many calls the emulator had served when the trigger started and when it fired.

    ``dag.test()`` runs the task, then its trigger, then the resumed task, one after the other: the calls
    before the trigger runs are the task's start, those after it fired are the resumed task's.
    """
    marks: dict[str, int] = {}
    run = SlurmJobTrigger.run

    async def marked(trigger: SlurmJobTrigger) -> AsyncIterator[Any]:
        marks["deferred"] = int(gcp_connection.calls()["total"])
        async for event in run(trigger):
            marks["fired"] = int(gcp_connection.calls()["total"])
            yield event

    monkeypatch.setattr(SlurmJobTrigger, "run", marked)
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "true")
    return marks


def calls_of_a_deferred_run(dag: Any, gcp_connection: Any, phases: dict[str, int]) -> list[dict[str, Any]]:
    """Run ``dag`` (one deferrable task) to success: every call of the run, in order (``phases`` marks
    where its trigger started and fired)."""
    phases.clear()
    gcp_connection.reset_calls()
    state, tasks = run_dag(dag)
    assert state == "success", tasks
    calls = gcp_connection.calls()
    assert calls["total"] == len(calls["last"]), calls["last"]  # the log holds every call of the run
    assert {"deferred", "fired"} <= phases.keys(), (phases, calls["last"])  # the wait did go through the trigger
    return list(calls["last"])


def deferred_run(dag: Any, gcp_connection: Any, phases: dict[str, int]) -> tuple[list[str], list[str], str]:
    """Run ``dag`` (one deferrable task): the kinds of calls of its start and of its resume, and the last path."""
    calls = calls_of_a_deferred_run(dag, gcp_connection, phases)
    kinds = [call["kind"] for call in calls]
    return kinds[: phases["deferred"]], kinds[phases["fired"] :], str(calls[-1]["path"])


def test_a_deferrable_start_costs_the_submit_and_its_resume_the_accounting_read(
    phases: dict[str, int], airflow_db: Any, gcp_connection: Any
) -> None:
    """Start: the submit, then the task defers (the trigger's batched poll makes the first look).
    Resume: the trigger's event carries the finished job, so only its accounting summary is read.

    The deployment's first task also learns the caller's account from its job (one read, then kept):
    every later task's start is the submit alone.
    """
    from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator

    start, resume, _ = deferred_run(load_dag("slurm_scenarios.py", "completes"), gcp_connection, phases)
    # The read that learns the account: only where no earlier task of this deployment (or test) taught it.
    assert start in (["submit"], ["submit", "job-get"]), start
    assert resume == ["slurmdb"], resume

    start, resume, last = deferred_run(load_dag("slurm_scenarios.py", "completes"), gcp_connection, phases)
    assert start == ["submit"], start
    assert resume == ["slurmdb"], resume
    assert last == f"/slurmdb/v0.0.42/job/{gcp_connection.jobs()[-1]['job_id']}", last

    # Without an accounting summary, the resumed task finishes from the trigger's event alone.
    dag = load_dag("slurm_scenarios.py", "completes")
    for task in dag.tasks:
        assert isinstance(task, SlurmSubmitJobOperator)
        task.accounting_wait_seconds = None
    start, resume, _ = deferred_run(dag, gcp_connection, phases)
    assert start == ["submit"], start
    assert resume == [], resume


def test_with_auto_the_trigger_speaks_the_version_its_task_spoke(
    phases: dict[str, int], airflow_db: Any, gcp_connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``api_version="auto"`` (the default): the task negotiates (or finds the deployment's kept version);
    its trigger is handed that version and polls with it at once, with no ping of its own."""
    monkeypatch.setenv("SLURMAPI_API_VERSION", "auto")
    calls = calls_of_a_deferred_run(load_dag("slurm_scenarios.py", "completes"), gcp_connection, phases)
    paths = [str(call["path"]) for call in calls]
    trigger_paths = paths[phases["deferred"] : phases["fired"]]
    assert trigger_paths, paths  # the trigger did poll
    assert not [p for p in trigger_paths if p.endswith("/ping")], trigger_paths
    assert all("/v0.0.42/" in p for p in trigger_paths), trigger_paths
