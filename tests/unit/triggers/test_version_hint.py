"""With ``api_version="auto"``, the deferring task hands the version it spoke to its trigger: the
triggerer speaks it at once, instead of negotiating again in every triggerer process.

Against the emulator acting as Slurm 24.11 (it serves v0.0.40 to v0.0.42: negotiating costs a refused
``v0.0.45/ping`` and a ``v0.0.42/ping``), over real HTTP, with the trigger run as the triggerer runs it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger
from tests.conftest import CLUSTER, point_airflow_at
from tests.unit.triggers.rebuild import import_string

NEGOTIATION = ["/slurm/v0.0.45/ping", "/slurm/v0.0.42/ping"]


@pytest.fixture
def finished_job(emulator_factory: Any, credentials_file: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, int]:
    """A COMPLETED job on a 24.11 cluster, submitted with a fixed version (no negotiation before the trigger)."""
    emulator = point_airflow_at(emulator_factory(slurm_release="24.11"), credentials_file, monkeypatch)
    hook = SlurmApiHook(**{**CLUSTER, "api_version": "v0.0.42"})
    spec = {"name": "hint", "partition": "debug", "current_working_directory": str(emulator.config.workdir)}
    job_id = hook.submit_job(spec, "#!/bin/bash\ntrue\n").job_id
    emulator.wait_for_state(job_id, ["COMPLETED"], timeout=30)
    emulator.reset_calls()
    return emulator, job_id


def run_rebuilt(trigger: SlurmJobTrigger) -> dict[str, Any]:
    """The trigger as the triggerer has it (rebuilt from its serialized kwargs), run to its event."""
    classpath, kwargs = trigger.serialize()
    rebuilt = import_string(classpath)(**kwargs)

    async def first_event() -> Any:
        return await anext(rebuilt.run())

    event = asyncio.run(first_event())
    assert event is not None
    return dict(event.payload)


def pings(emulator: Any) -> list[str]:
    return [str(c["path"]) for c in emulator.calls()["last"] if str(c.get("path") or "").endswith("/ping")]


@pytest.mark.parametrize(
    ("hint", "expected_pings"),
    [
        (None, NEGOTIATION),  # the baseline: a triggerer process that knows nothing negotiates
        ("v0.0.42", []),  # the task's version, spoken at once
        ("v0.0.44", NEGOTIATION),  # a version the cluster does not serve: negotiated again, not a failure
        ("v9.9.9", NEGOTIATION),  # not a version this release knows (a stored kwarg is data): ignored
    ],
)
def test_the_trigger_speaks_the_version_its_task_spoke(
    finished_job: tuple[Any, int], hint: str | None, expected_pings: list[str]
) -> None:
    emulator, job_id = finished_job
    trigger = SlurmJobTrigger(job_id=job_id, poll_interval=0.2, api_version_hint=hint, **CLUSTER)
    assert trigger.cluster.api_version == "auto"
    payload = run_rebuilt(trigger)
    assert payload["status"] == "success", payload
    assert pings(emulator) == expected_pings
    paths = [str(c["path"]) for c in emulator.calls()["last"]]
    after_negotiation = paths[paths.index(expected_pings[-1]) + 1 :] if expected_pings else paths
    assert after_negotiation and all("/v0.0.42/" in path for path in after_negotiation), paths


def test_the_hint_is_stored_only_when_known_so_older_triggers_resume_unchanged() -> None:
    _, with_hint = SlurmJobTrigger(job_id=7, api_version_hint="v0.0.42", **CLUSTER).serialize()
    assert with_hint["api_version_hint"] == "v0.0.42"
    _, without = SlurmJobTrigger(job_id=7, **CLUSTER).serialize()
    assert "api_version_hint" not in without
    _, unknown = SlurmJobTrigger(job_id=7, api_version_hint="v9.9.9", **CLUSTER).serialize()
    assert "api_version_hint" not in unknown
