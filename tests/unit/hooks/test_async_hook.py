"""The async hook (what triggers use) against the emulator."""

from __future__ import annotations

from typing import Any

from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook, SlurmApiHook
from airflow_provider_slurmapi.slurm.jobs.readers import CancelOutcome
from tests.conftest import CLUSTER


async def test_async_get_cancel_and_token_refresh(gcp_connection: Any) -> None:
    job_id = (
        SlurmApiHook(**CLUSTER)
        .submit_job(
            {"partition": "debug", "current_working_directory": str(gcp_connection.config.workdir)},
            "#!/bin/bash\nsleep 30\n",
        )
        .job_id
    )
    async with SlurmApiAsyncHook(**CLUSTER) as hook:
        hook.client.retry_initial_wait = 0.05
        job = await hook.get_job(job_id)
        assert job is not None and not job.is_finished
        states = await hook.get_live_states([job_id])
        assert job_id in states
        # The emulator forgets every token for one call: the hook refreshes once and goes on.
        gcp_connection.add_fault("expire-token@job-get")
        assert (await hook.get_job(job_id)) is not None
        gcp_connection.add_fault("unavailable@job-delete")
        assert await hook.cancel_job(job_id) is CancelOutcome.CANCELLED
        assert await hook.cancel_job(999999) is CancelOutcome.UNKNOWN_JOB
