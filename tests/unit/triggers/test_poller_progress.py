"""Progress reads of the shared poller: only for subscriptions that asked, batched, bounded per round."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook, SlurmApiHook
from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
from airflow_provider_slurmapi.slurm.submit.job_output import wrap_script
from airflow_provider_slurmapi.triggers.poller import MAX_PROGRESS_READS, ClusterPoller, Subscription
from tests.conftest import CLUSTER, connection_uri_env
from tests.waiting import wait_until

KEY = ClusterRef(CLUSTER["project_id"], CLUSTER["region"], CLUSTER["cluster_id"])


def _submit(emulator: Any, count: int, message: str) -> list[int]:
    hook = SlurmApiHook(**CLUSTER)
    script = wrap_script(f"#!/bin/bash\nslurm_progress '{message}'\nsleep 120\n")
    spec = {"partition": "debug", "current_working_directory": str(emulator.config.workdir)}
    ids = [hook.submit_job(spec, script).job_id for _ in range(count)]
    for job_id in ids:
        emulator.wait_for_state(job_id, "RUNNING", 60)
        written = Path(emulator.config.workdir) / ".emulator" / f"job{job_id}.extra"  # the scontrol stand-in's
        wait_until(written.exists, f"job {job_id}'s progress written", timeout=60, give_up=True)
    return ids


async def _poller_with(ids: dict[int, bool]) -> ClusterPoller:
    poller = ClusterPoller(KEY, SlurmApiAsyncHook(cluster=KEY))
    for job_id, progress in ids.items():  # subscribed without starting the poller's own loop
        poller._subscriptions.setdefault(job_id, set()).add(Subscription(job_id, 3600, progress=progress))
    await poller.poll_once()  # first sight: every job's details once
    return poller


@pytest.fixture
def connected(emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    emulator = emulator_factory(cpus=2 * MAX_PROGRESS_READS + 4)
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(emulator, credentials_file))
    return emulator


def test_progress_is_read_only_for_jobs_that_asked(connected: Any) -> None:
    asking, silent = _submit(connected, 2, "epoch 1/3")

    async def scenario() -> dict[int, Any]:
        poller = await _poller_with({asking: True, silent: False})
        first_sight = poller._known[silent]
        connected.reset_calls()
        await poller.poll_once()
        seen = {job_id: next(iter(subs))._job for job_id, subs in poller._subscriptions.items()}
        await poller.hook.close()
        return {"calls": connected.calls()["total"], "first_sight": first_sight, **seen}

    result = asyncio.run(scenario())
    assert result["calls"] == 2, "one jobs/state call, and one detail read for the one job that asked"
    assert result[asking].progress == "epoch 1/3"
    assert result[silent] is result["first_sight"], "the job that did not ask was not read again"
    for job_id in (asking, silent):
        SlurmApiHook(**CLUSTER).cancel_job(job_id)


def test_many_progress_jobs_cost_a_bounded_number_of_reads_per_round(connected: Any) -> None:
    ids = _submit(connected, MAX_PROGRESS_READS + 2, "step 7")

    async def scenario() -> tuple[list[int], list[Any]]:
        poller = await _poller_with(dict.fromkeys(ids, True))
        calls = []
        for _ in range(2):
            connected.reset_calls()
            await poller.poll_once()
            calls.append(connected.calls()["total"])
        jobs = [next(iter(poller._subscriptions[job_id]))._job for job_id in ids]
        await poller.hook.close()
        return calls, jobs

    calls, jobs = asyncio.run(scenario())
    assert calls == [1 + MAX_PROGRESS_READS] * 2, "jobs/state plus a bounded number of reads, never one per job"
    assert [job.progress for job in jobs] == ["step 7"] * len(ids), "every job's progress read within two rounds"
    for job_id in ids:
        SlurmApiHook(**CLUSTER).cancel_job(job_id)
