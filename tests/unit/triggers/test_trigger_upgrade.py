"""A trigger deferred by the previous release resumes after an upgrade.

The triggerer stores ``serialize()``'s payload in its database and rebuilds the trigger from it with the
code installed *now*. ``PAYLOAD`` was written by the release before the cluster became one value object
(captured from its ``SlurmJobTrigger.serialize()``): the new class must accept it as it stands, watch the
job to its end, and serialize to the same keys and values.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger
from tests.unit.triggers.rebuild import import_string
from tests.unit.triggers.test_poller import (
    Triggerer,
    assert_failed,
    connect,
    running,
    submit,
    triggerer,  # noqa: F401 (the fixture)
    waiting_script,
)

# Written by the previous release; only the job id (here 4242) is replaced by the test's job.
PAYLOAD: tuple[str, dict[str, Any]] = (
    "airflow_provider_slurmapi.triggers.slurm.SlurmJobTrigger",
    {
        "job_id": 4242,
        "region": "us-central1",
        "cluster_id": "demo-cluster",
        "project_id": "demo-project",
        "gcp_conn_id": "google_cloud_default",
        "api_version": "v0.0.42",
        "poll_interval": 0.2,
        "impersonation_chain": None,
        "api_endpoint": None,
        "cancel_on_kill": True,
        "missing_grace_seconds": 42.0,
        "outage_tolerance_seconds": 3600.0,
        "deadline": None,
        "last_seen": {
            "job_id": 4242,
            "name": "demo.train",
            "state": "RUNNING",
            "flags": [],
            "finished": False,
            "reason": None,
            "exit_code": None,
            "exit_status": [],
            "signal": None,
            "signal_number": None,
            "submit_time": None,
            "start_time": None,
            "end_time": None,
            "elapsed_seconds": None,
            "time_limit_minutes": None,
            "nodes": "node-1",
            "partition": "debug",
            "user": None,
            "account": None,
            "stdout": None,
            "stderr": None,
            "comment": None,
            "extra": None,
            "source": "live",
            "array_job_id": None,
            "array_task_id": None,
            "array_pending": None,
            "array_throttle": None,
            "array": None,
        },
        "log_progress": True,
        "array_fail_fast": False,
    },
)

# The same release, deferred with a chain of service accounts and a private endpoint.
PAYLOAD_WITH_CHAIN: dict[str, Any] = {
    **PAYLOAD[1],
    "impersonation_chain": ["a@demo-project.iam.gserviceaccount.com", "b@demo-project.iam.gserviceaccount.com"],
    "api_endpoint": "https://private.example.com",
    "last_seen": None,
}


def rebuild(classpath: str, kwargs: dict[str, Any]) -> Any:
    """As the triggerer does: the stored JSON, read back, handed to the class found by its path."""
    return import_string(classpath)(**json.loads(json.dumps(kwargs)))


async def test_a_trigger_deferred_by_the_previous_release_resumes_and_watches_its_job(
    triggerer: Triggerer,  # noqa: F811
    emulator_factory: Any,
    credentials_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    emu = emulator_factory(cpus=4)
    connect(monkeypatch, emu, credentials_file)
    go = tmp_path / "go"
    job_id = await submit(emu, waiting_script(go, 3))
    await running(emu, job_id)
    classpath, stored = copy.deepcopy(PAYLOAD)
    stored["job_id"] = stored["last_seen"]["job_id"] = job_id

    trigger = rebuild(classpath, stored)
    assert type(trigger) is SlurmJobTrigger
    assert trigger.serialize() == (classpath, stored)  # resumes into the same stored form

    triggerer.start("resumed", trigger)
    go.touch()
    await triggerer.finish()
    assert_failed(triggerer.event("resumed"), job_id, "FAILED", 3)


def test_a_stored_impersonation_chain_and_endpoint_survive_the_upgrade() -> None:
    classpath = PAYLOAD[0]
    trigger = rebuild(classpath, PAYLOAD_WITH_CHAIN)
    assert trigger.serialize() == (classpath, PAYLOAD_WITH_CHAIN)
    same = rebuild(*trigger.serialize())
    assert same.poller_key == trigger.poller_key and hash(same.poller_key) == hash(trigger.poller_key)
