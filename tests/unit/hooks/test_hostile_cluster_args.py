"""Hostile cluster arguments through the real hooks: no token is fetched, nothing leaves for any host.

The connection's service-account key fetches its tokens from a local trap server, which also stands
where the hostile values would send the calls. Before the checks, every case below fetched a token
from it and most sent ``Authorization: Bearer ...`` to it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook, SlurmApiHook
from airflow_provider_slurmapi.slurm.api.errors import ClusterNotFoundError, ConfigurationError
from tests.trap import Trap, run_trap, trap_connection_env

CONN = "trap"
GOOD = {"project_id": "demo-project", "region": "us-central1", "cluster_id": "demo-cluster"}
SECRET = "s3cret-pw"


@pytest.fixture
def trap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Trap]:
    with run_trap() as trap:
        monkeypatch.setenv(f"AIRFLOW_CONN_{CONN.upper()}", trap_connection_env(trap, tmp_path / "key.json"))
        yield trap


def hostile_cases(trap: Trap) -> list[tuple[str, dict[str, Any]]]:
    """(the field the error must name, hook kwargs). Each, unchecked, fetched a token from the trap."""
    at_trap = {**GOOD, "api_endpoint": trap.url}
    return [
        ("region", {**GOOD, "region": trap.hostile_region}),
        ("region", {**GOOD, "region": f"127.0.0.1:{trap.port}?"}),
        ("region", {**GOOD, "region": "us-central1.attacker.example#"}),
        ("region", {**GOOD, "region": "us-central1\n"}),
        ("region", {**GOOD, "region": "us-central1-a"}),
        ("project_id", {**at_trap, "project_id": "demo-project?alt=x"}),
        ("project_id", {**at_trap, "project_id": "demo-project#"}),
        ("project_id", {**at_trap, "project_id": "demo-project/locations/x"}),
        ("project_id", {**at_trap, "project_id": "demo-project\n"}),
        ("project_id", {**at_trap, "project_id": "example.com:demo-project/../x"}),
        ("cluster_id", {**at_trap, "cluster_id": "demo-cluster:cancel?"}),
        ("cluster_id", {**at_trap, "cluster_id": "demo-cluster?alt=media"}),
        ("cluster_id", {**at_trap, "cluster_id": "demo#"}),
        ("cluster_id", {**at_trap, "cluster_id": "Demo-Cluster"}),
        ("api_endpoint", {**GOOD, "api_endpoint": f"http://user:{SECRET}@127.0.0.1:{trap.port}"}),
        ("api_endpoint", {**GOOD, "api_endpoint": f"http://127.0.0.1:{trap.port}/v1beta1/x?"}),
        ("api_endpoint", {**GOOD, "api_endpoint": f"http://127.0.0.1:{trap.port}/#"}),
        ("api_endpoint", {**GOOD, "api_endpoint": f"http://127.0.0.1:{trap.port}/evil"}),
        ("api_endpoint", {**GOOD, "api_endpoint": f"http://localhost.localdomain:{trap.port}"}),
    ]


CASE_COUNT = 19
# Short retries: on code without the checks these calls fail against the trap instead of hanging.
FAST = {"retry_seconds": 0.5, "timeout": 2}


def test_the_trap_sees_a_token_and_a_bearer_call_when_arguments_are_fine(trap: Trap) -> None:
    """The control: the same trap records what a well-formed call sends, so zero below means zero."""
    with pytest.raises(ClusterNotFoundError):
        SlurmApiHook(gcp_conn_id=CONN, **{**GOOD, "api_endpoint": trap.url}).get_job(1)
    assert trap.token_requests == 1
    assert [(r["method"], r["authorization"]) for r in trap.requests] == [("POST", True)]

    async def run() -> None:
        async with SlurmApiAsyncHook(gcp_conn_id=CONN, **{**GOOD, "api_endpoint": trap.url}) as hook:
            await hook.get_job(1)

    with pytest.raises(ClusterNotFoundError):
        asyncio.run(run())
    assert trap.token_requests == 2 and len(trap.requests) == 2


@pytest.mark.parametrize("case", range(CASE_COUNT))
def test_hostile_cluster_args_fetch_no_token_and_send_nothing(case: int, trap: Trap) -> None:
    cases = hostile_cases(trap)
    assert len(cases) == CASE_COUNT
    field, kwargs = cases[case]

    with pytest.raises(ConfigurationError) as sync_error:
        SlurmApiHook(gcp_conn_id=CONN, **kwargs, **FAST).get_job(1)

    async def run() -> None:
        async with SlurmApiAsyncHook(gcp_conn_id=CONN, **kwargs, **FAST) as hook:
            await hook.get_job(1)

    with pytest.raises(ConfigurationError) as async_error:
        asyncio.run(run())
    for error in (sync_error, async_error):
        message = str(error.value)
        assert message.startswith(field) or f"{field}=" in message, message
        assert SECRET not in message and "user:" not in message
    assert trap.nothing_reached(), trap.summary()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("project", "demo-project?alt=x"),
        ("project", "demo-project:callSlurmRestApi#"),
        ("api_endpoint", "http://user:s3cret-pw@127.0.0.1:1"),
        ("api_endpoint", "http://127.0.0.1:1/x?key=s3cret-pw"),
    ],
)
def test_hostile_connection_extras_fetch_no_token(
    field: str, value: str, trap: Trap, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection's own project and api_endpoint are held to the same rules, before its key is used."""
    extra = {"project": value} if field == "project" else {"api_endpoint": value.replace(":1", f":{trap.port}", 1)}
    if field == "project":
        extra["api_endpoint"] = trap.url
    conn = json.loads(trap_connection_env(trap, tmp_path / "key.json"))
    conn["extra"].update(extra)
    monkeypatch.setenv("AIRFLOW_CONN_TRAP_EXTRA", json.dumps(conn))
    kwargs = {"region": "us-central1", "cluster_id": "demo-cluster"}
    with pytest.raises(ConfigurationError) as error:
        SlurmApiHook(gcp_conn_id="trap_extra", **kwargs, **FAST).get_job(1)

    async def run() -> None:
        async with SlurmApiAsyncHook(gcp_conn_id="trap_extra", **kwargs, **FAST) as hook:
            await hook.get_job(1)

    with pytest.raises(ConfigurationError) as async_error:
        asyncio.run(run())
    for message in (str(error.value), str(async_error.value)):
        assert SECRET not in message
        assert ("project" in message) if field == "project" else ("api_endpoint=" in message)
    assert trap.nothing_reached(), trap.summary()


BAD_JOB_IDS: list[Any] = ["5_3", "1.2", True, 7.9, "\u0663", 0, -4, "5?signal=KILL", "5/../6", None, 2**32]


@pytest.mark.parametrize("job_id", BAD_JOB_IDS, ids=repr)
def test_bad_job_ids_are_refused_by_every_hook_method_before_any_call(job_id: Any, trap: Trap) -> None:
    hook = SlurmApiHook(gcp_conn_id=CONN, **{**GOOD, "api_endpoint": trap.url}, **FAST)
    calls = [
        lambda: hook.get_job(job_id),
        lambda: hook.get_live_job(job_id),
        lambda: hook.get_history_job(job_id),
        lambda: hook.cancel_job(job_id),
        lambda: hook.cancel_job(job_id, signal="SIGUSR1"),
        lambda: hook.get_live_states([7, job_id]),
    ]
    for call in calls:
        with pytest.raises(ConfigurationError, match="job_id="):
            call()

    async def run_async() -> None:
        async with SlurmApiAsyncHook(gcp_conn_id=CONN, **{**GOOD, "api_endpoint": trap.url}, **FAST) as async_hook:
            for coroutine in (
                lambda: async_hook.get_job(job_id),
                lambda: async_hook.get_history_job(job_id),
                lambda: async_hook.cancel_job(job_id),
                lambda: async_hook.get_live_states([7, job_id]),
            ):
                with pytest.raises(ConfigurationError, match="job_id="):
                    await coroutine()

    asyncio.run(run_async())
    assert trap.nothing_reached(), trap.summary()
