"""A trigger's generator, closed after its event the way ``dag.test()`` and the triggerer close it,
leaves nothing behind: no error logged at event-loop shutdown, no traceback, the poller gone."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger
from tests.conftest import CLUSTER


def test_closing_the_trigger_after_its_event_logs_no_error(
    gcp_connection: Any, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    spec = {"partition": "debug", "current_working_directory": str(gcp_connection.config.workdir)}
    job_id = SlurmApiHook(**CLUSTER).submit_job(spec, "#!/bin/bash\necho quick\n").job_id
    trigger = SlurmJobTrigger(job_id=job_id, poll_interval=0.2, **CLUSTER)

    async def first_event() -> Any:  # what Airflow's InProcessTestSupervisor.run_trigger_in_process does
        return await anext(trigger.run(), None)

    with caplog.at_level(logging.WARNING):
        event = asyncio.run(first_event())
    assert event is not None and event.payload["status"] == "success", event
    out = "".join(capfd.readouterr())
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]
    # Airflow 2's console handler may still hold a stream pytest has closed: logging then reports its own
    # "--- Logging error --- ... I/O operation on closed file", which is not the trigger's.
    tracebacks = (out + caplog.text).split("Traceback (most recent call last):")[1:]
    assert [t for t in tracebacks if "ValueError: I/O operation on closed file" not in t] == []
    assert "GeneratorExit" not in out + caplog.text
