"""The accounting wait is a core plan both hooks carry out; on a fake clock it takes no real time."""

from __future__ import annotations

import asyncio
from typing import Any

from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook, SlurmApiHook
from tests.conftest import CLUSTER
from tests.unit.hooks.fake_clock import AsyncFakeClock, FakeClock


def job(emulator: Any, script: str) -> int:
    spec = {"name": "acct", "partition": "debug", "current_working_directory": str(emulator.config.workdir)}
    return SlurmApiHook(**CLUSTER).submit_job(spec, script).job_id


def test_a_job_not_yet_recorded_is_looked_for_until_the_wait_is_over_then_said_so(gcp_connection: Any) -> None:
    running = job(gcp_connection, "#!/bin/bash\nsleep 60\n")
    hook = SlurmApiHook(**CLUSTER)
    hook.client.clock = clock = FakeClock()
    line, value = hook.wait_for_accounting(running, 10, poll_seconds=3)
    assert clock.sleeps == [3, 3, 3, 1] and value["recorded"] is False, (clock.sleeps, value)
    assert f"Slurm job {running} accounting: no summary" in line and "after 10s" in line

    async def wait_async() -> tuple[list[float], dict[str, Any]]:
        async with SlurmApiAsyncHook(**CLUSTER) as async_hook:
            async_hook.client.clock = async_clock = AsyncFakeClock()
            _, async_value = await async_hook.wait_for_accounting(running, 10, poll_seconds=3)
            return async_clock.sleeps, async_value

    assert asyncio.run(wait_async()) == (clock.sleeps, value)
    hook.cancel_job(running)


def test_a_finished_job_is_summed_up_from_the_history(gcp_connection: Any) -> None:
    done = job(gcp_connection, "#!/bin/bash\ntrue\n")
    gcp_connection.wait_for_state(done, ["COMPLETED"], timeout=30)
    hook = SlurmApiHook(**CLUSTER)
    hook.client.clock = FakeClock()
    line, value = hook.wait_for_accounting(done, 60)
    assert value["recorded"] is True and value["state"] == "COMPLETED", value
    assert str(done) in line
