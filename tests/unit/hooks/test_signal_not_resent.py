"""A signal is sent once: a 5xx after Slurm delivered it must not make the hook deliver it again.

The job counts the SIGUSR1 it receives in a file; the emulator counts the DELETE calls that reached
it. A plain cancel, which is harmless to repeat, is still retried.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook, SlurmApiHook
from airflow_provider_slurmapi.slurm.api.errors import SignalOutcomeUnknownError
from airflow_provider_slurmapi.slurm.jobs.readers import CancelOutcome
from tests.conftest import CLUSTER
from tests.waiting import wait_until

# Counts each SIGUSR1 ("got"), marks each SIGUSR2 ("probe": sent after the signal under test, it shows that a
# second SIGUSR1 sent before it would have been counted), and says when its traps are set.
COUNTS_SIGUSR1 = (
    "#!/bin/bash\ntrap 'echo got >> usr1-$SLURM_JOB_ID.txt' USR1\ntrap 'echo probe >> usr1-$SLURM_JOB_ID.txt' USR2\n"
    "touch ready-$SLURM_JOB_ID\nwhile true; do sleep 0.1; done\n"
)


def start_counting_job(emulator: Any) -> tuple[int, Path]:
    workdir = Path(emulator.config.workdir)
    hook = SlurmApiHook(**CLUSTER)
    job_id = hook.submit_job({"partition": "debug", "current_working_directory": str(workdir)}, COUNTS_SIGUSR1).job_id
    emulator.wait_for_state(job_id, ["RUNNING"], timeout=30)
    wait_until(lambda: (workdir / f"ready-{job_id}").exists(), "bash has set its traps", timeout=30)
    return job_id, workdir / f"usr1-{job_id}.txt"


def _lines(record: Path) -> list[str]:
    return record.read_text().splitlines() if record.exists() else []


def signals_received(job_id: int, record: Path) -> int:
    """The SIGUSR1s the job counted, once a SIGUSR2 sent after them through the API has been marked.

    A second SIGUSR1 from the hook under test would have been sent before the probe: the job handles
    pending signals in order, so by the time it marks the probe it has counted every SIGUSR1.
    """
    wait_until(lambda: "got" in _lines(record), "the first SIGUSR1 counted", timeout=5, every=0.1)
    SlurmApiHook(**CLUSTER).cancel_job(job_id, signal="SIGUSR2")
    wait_until(lambda: "probe" in _lines(record), "the SIGUSR2 probe marked", timeout=30, every=0.1)
    return _lines(record).count("got")


async def _async_signal(job_id: int) -> CancelOutcome:
    async with SlurmApiAsyncHook(**CLUSTER) as hook:
        hook.client.retry_initial_wait = 0.05
        return await hook.cancel_job(job_id, signal="SIGUSR1")


@pytest.mark.parametrize("hook_kind", ["sync", "async"])
def test_signal_is_not_resent_after_a_5xx_that_followed_its_delivery(hook_kind: str, gcp_connection: Any) -> None:
    job_id, record = start_counting_job(gcp_connection)
    gcp_connection.reset_calls()
    gcp_connection.add_fault("500-after@job-delete")
    error: BaseException | None = None
    try:
        if hook_kind == "sync":
            hook = SlurmApiHook(**CLUSTER)
            hook.client.retry_initial_wait = 0.05
            hook.cancel_job(job_id, signal="SIGUSR1")
        else:
            asyncio.run(_async_signal(job_id))
    except Exception as exc:
        error = exc
    assert gcp_connection.calls()["by_kind"].get("job-delete") == 1, "the signal DELETE was sent again"
    assert signals_received(job_id, record) == 1
    assert isinstance(error, SignalOutcomeUnknownError), error
    assert f"SIGUSR1 to Slurm job {job_id}" in str(error) and "not resent" in str(error)
    SlurmApiHook(**CLUSTER).cancel_job(job_id)


@pytest.mark.parametrize("hook_kind", ["sync", "async"])
def test_plain_cancel_is_still_retried_after_a_5xx(hook_kind: str, gcp_connection: Any) -> None:
    job_id, _ = start_counting_job(gcp_connection)
    gcp_connection.reset_calls()
    gcp_connection.add_fault("500-before@job-delete")
    if hook_kind == "sync":
        hook = SlurmApiHook(**CLUSTER)
        hook.client.retry_initial_wait = 0.05
        assert hook.cancel_job(job_id) is CancelOutcome.CANCELLED
    else:

        async def cancel() -> CancelOutcome:
            async with SlurmApiAsyncHook(**CLUSTER) as hook:
                hook.client.retry_initial_wait = 0.05
                return await hook.cancel_job(job_id)

        assert asyncio.run(cancel()) is CancelOutcome.CANCELLED
    assert gcp_connection.calls()["by_kind"].get("job-delete") == 2
    gcp_connection.wait_for_state(job_id, ["CANCELLED"], timeout=20)


def test_signal_operator_fails_without_a_task_retry_when_the_answer_is_lost(
    airflow_db: Any, gcp_connection: Any
) -> None:
    """With retries=2, a task retry would send the signal again: the task fails for good instead."""
    from tests.conftest import load_dag
    from tests.dag_runs.test_hostile_input import run_dag_with_conf

    job_id, record = start_counting_job(gcp_connection)
    gcp_connection.reset_calls()
    gcp_connection.add_fault("500-after@job-delete")
    state, tasks = run_dag_with_conf(load_dag("slurm_hostile.py", "signal"), {"job_id": job_id})
    assert gcp_connection.calls()["by_kind"].get("job-delete") == 1, "the signal DELETE was sent again"
    assert signals_received(job_id, record) == 1
    assert state == "failed", tasks
    SlurmApiHook(**CLUSTER).cancel_job(job_id)
