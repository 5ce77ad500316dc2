"""A misspelt job key known only when the task runs fails it before any call, and no retry is used."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import load_dag
from tests.dag_runs.test_fail_fast import run_with_retries


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "sync"])
def test_a_rendered_job_with_a_typo_fails_before_any_call_without_retries(
    deferrable: bool,
    airflow_db: Any,
    gcp_connection: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(deferrable).lower())
    dag = load_dag("slurm_scenarios.py", "completes")
    task = dag.task_dict["job"]
    # As a job rendered from dag_run.conf or pulled from XCom: never seen by the parse-time check.
    task.job = {**task.job, "timelimit": "{{ 2 + 3 }}", "time_limit": {"set": True, "numbr": 5}}
    gcp_connection.reset_calls()
    state, tries = run_with_retries(dag, retries=2)
    out = "".join(capfd.readouterr())
    assert (state, tries) == ("failed", 1)
    assert gcp_connection.calls()["total"] == 0, gcp_connection.calls()
    assert "job key 'timelimit' is not a Slurm job field; did you mean 'time_limit'?" in out
    assert "job key 'time_limit.numbr' (job.time_limit.numbr) is not a Slurm job field" in out
    assert "Not retried" in out
