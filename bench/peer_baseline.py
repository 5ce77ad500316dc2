"""The baseline of the fan-in benchmark: what the peer providers' triggers do.

:class:`PeerPollingTrigger` watches one job exactly like ``SlurmJobTrigger`` does (same ``JobWatch``,
same events), except that it shares nothing: each trigger builds its own
:class:`~airflow_provider_slurmapi.hooks.slurm.SlurmApiAsyncHook` (its own aiohttp session, its own
credential and token) and calls ``get_job`` for its own job once per interval. N waiting triggers
therefore spend N calls of the project's API quota every interval, N sessions and N tokens. This is
the pattern of the Google provider's deferrable operators (one hook per trigger, one ``get_*`` per
``poll_interval``), so it is what the shared poller is measured against.

It lives in ``bench/`` only: it is not part of the provider.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook
from airflow_provider_slurmapi.slurm.api.errors import SlurmApiError
from airflow_provider_slurmapi.slurm.jobs.watch import JobWatch


class PeerPollingTrigger(BaseTrigger):
    """One job, one hook, one session, one token, one ``get_job`` call per interval (the baseline)."""

    def __init__(
        self,
        job_id: int,
        region: str,
        cluster_id: str,
        project_id: str | None = None,
        gcp_conn_id: str = "google_cloud_default",
        api_version: str = "v0.0.42",
        poll_interval: float = 30.0,
    ) -> None:
        super().__init__()
        self.job_id = int(job_id)
        self.region = region
        self.cluster_id = cluster_id
        self.project_id = project_id
        self.gcp_conn_id = gcp_conn_id
        self.api_version = api_version
        self.poll_interval = float(poll_interval)
        self.polls = 0  # completed get_job calls (read by the benchmark)
        # Bench only, not serialized: after its first poll the trigger waits here until every trigger
        # has made its first one, so that the start-up cost (N hooks, keys, tokens, sessions) is measured
        # apart from the polling.
        self.start_gate: asyncio.Event | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "job_id": self.job_id,
                "region": self.region,
                "cluster_id": self.cluster_id,
                "project_id": self.project_id,
                "gcp_conn_id": self.gcp_conn_id,
                "api_version": self.api_version,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        watch = JobWatch(self.job_id)
        hook = SlurmApiAsyncHook(
            region=self.region,
            cluster_id=self.cluster_id,
            project_id=self.project_id,
            gcp_conn_id=self.gcp_conn_id,
            api_version=self.api_version,
        )
        async with hook:
            while True:
                try:
                    step = watch.observe(await hook.get_job(self.job_id))
                except SlurmApiError as exc:
                    yield TriggerEvent({"status": "error", "job_id": self.job_id, "message": str(exc)})
                    return
                self.polls += 1
                if step.message:
                    self.log.info("%s", step.message)
                if step.finished and step.job is not None:
                    job = step.job
                    yield TriggerEvent(
                        {
                            "status": "success" if job.succeeded else "failed",
                            "job_id": self.job_id,
                            "message": job.describe() if job.succeeded else job.failure_message(),
                            "job": job.to_dict(),
                        }
                    )
                    return
                if self.start_gate is not None:
                    await self.start_gate.wait()
                    self.start_gate = None
                    # Deferred tasks arrive at different times: spread the cadences over the interval.
                    await asyncio.sleep(random.uniform(0, self.poll_interval))
                    continue
                await asyncio.sleep(self.poll_interval)
