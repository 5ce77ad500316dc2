"""One retry layer: a read takes one retry budget, whatever failed on the way (transient answers, a
garbled record asked for again), counted in attempts at the emulator on a fake clock (no real time)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook, SlurmApiHook
from airflow_provider_slurmapi.slurm.api.envelope import SlurmResponse
from airflow_provider_slurmapi.slurm.api.errors import ApiConnectionError, MalformedRecordError, TransientApiError
from airflow_provider_slurmapi.slurm.api.plans import SlurmRequest, one_call
from tests.conftest import CLUSTER, connection_uri_env
from tests.unit.hooks.fake_clock import AsyncFakeClock, FakeClock

BUDGET = 20.0


def job_gets(emulator: Any) -> int:
    return int(emulator.calls()["by_kind"].get("job-get", 0))


def stopped_at_one_budget(sleeps: list[float]) -> bool:
    """No attempt began once the budget was spent, and the last one began when it was."""
    return sum(sleeps[:-1]) < BUDGET <= sum(sleeps)


def test_a_reread_of_a_garbled_record_shares_the_budget_of_the_transient_retries(gcp_connection: Any) -> None:
    """Three UNAVAILABLE answers, then records the reader finds garbled: asked again, within one budget."""
    hook = SlurmApiHook(**CLUSTER)
    hook.client.retry_seconds, hook.client.retry_initial_wait = BUDGET, 1.0
    hook.client.clock = clock = FakeClock()
    hook.get_live_job(1)  # the version negotiated and a token fetched before counting
    garbled: list[SlurmResponse] = []

    def garbling(response: SlurmResponse) -> None:
        garbled.append(response)
        raise MalformedRecordError("job 1 has a garbled job_state", job_id=1, field="job_state")

    gcp_connection.reset_calls()
    gcp_connection.add_fault("unavailable@job-get*3")
    with pytest.raises(MalformedRecordError):
        hook._run(one_call(SlurmRequest("GET", hook.client.paths.job(1), garbling, reread=True)))
    attempts = job_gets(gcp_connection)
    assert attempts == len(clock.sleeps) + 1 and len(garbled) == attempts - 3 > 0
    assert stopped_at_one_budget(clock.sleeps), clock.sleeps


def test_a_read_failing_all_along_takes_one_budget_in_either_hook(gcp_connection: Any) -> None:
    hook = SlurmApiHook(**CLUSTER)
    hook.client.retry_seconds, hook.client.retry_initial_wait = BUDGET, 1.0
    hook.client.clock = clock = FakeClock()
    hook.get_live_job(1)
    gcp_connection.reset_calls()
    gcp_connection.add_fault("unavailable@job-get*inf")
    with pytest.raises(TransientApiError):
        hook.get_live_job(1)
    assert job_gets(gcp_connection) == len(clock.sleeps) + 1
    assert stopped_at_one_budget(clock.sleeps), clock.sleeps
    gcp_connection.clear_faults()

    async def read_async() -> list[float]:
        async with SlurmApiAsyncHook(**CLUSTER) as async_hook:
            async_hook.client.clock = async_clock = AsyncFakeClock()
            await async_hook.get_live_job(1)
            async_hook.client.retry_seconds, async_hook.client.retry_initial_wait = BUDGET, 1.0
            gcp_connection.reset_calls()
            gcp_connection.add_fault("unavailable@job-get*inf")
            with pytest.raises(TransientApiError):
                await async_hook.get_live_job(1)
            return async_clock.sleeps

    sleeps = asyncio.run(read_async())
    gcp_connection.clear_faults()
    assert job_gets(gcp_connection) == len(sleeps) + 1
    assert stopped_at_one_budget(sleeps), sleeps


def connect_with_token_uri(
    gcp_connection: Any, credentials_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, token_uri: str
) -> None:
    """The test connection, with a key whose token endpoint is ``token_uri``, and a retry budget of BUDGET."""
    key = json.loads(credentials_file.read_text())
    key["token_uri"] = token_uri
    changed_key = tmp_path / "changed-token-uri.json"
    changed_key.write_text(json.dumps(key))
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(gcp_connection, changed_key, retry_seconds=BUDGET)
    )


def both_hooks_give_up_as_no_answer_after_one_budget(first_wait: float) -> None:
    """A read through each hook retries its token for one retry budget (fake clocks), then says "No answer"."""
    hook = SlurmApiHook(**CLUSTER, api_version="v0.0.42")
    hook.client.retry_initial_wait = first_wait
    hook.client.clock = clock = FakeClock()
    with pytest.raises(ApiConnectionError, match="No answer"):
        hook.get_live_job(1)
    assert stopped_at_one_budget(clock.sleeps), clock.sleeps

    async def read_async() -> list[float]:
        async with SlurmApiAsyncHook(**CLUSTER, api_version="v0.0.42") as async_hook:
            async_hook.client.clock = async_clock = AsyncFakeClock()
            async_hook.client.retry_initial_wait = first_wait
            with pytest.raises(ApiConnectionError, match="No answer"):
                await async_hook.get_live_job(1)
            return async_clock.sleeps

    sleeps = asyncio.run(read_async())
    assert stopped_at_one_budget(sleeps), sleeps


def test_a_token_endpoint_that_does_not_answer_is_retried_as_no_answer_in_either_hook(
    gcp_connection: Any, credentials_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused token request is a connection failure (retried, then "No answer"), not a bad key: the
    async hook once made it a final UnauthenticatedError, which ended a trigger on one dropped connection."""
    with socket.socket() as closed:  # a port nothing listens on: the token request is refused
        closed.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{closed.getsockname()[1]}/token"
    connect_with_token_uri(gcp_connection, credentials_file, tmp_path, monkeypatch, refused)
    both_hooks_give_up_as_no_answer_after_one_budget(first_wait=1.0)
    assert job_gets(gcp_connection) == 0  # no envelope went out without a token


@pytest.fixture
def token_endpoint_down() -> Any:
    """A real token endpoint that answers 503 to every request (Google's, during an outage)."""
    import http.server
    import threading

    asked: list[str] = []

    class Unavailable(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            asked.append(self.path)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"error": "temporarily_unavailable", "error_description": "try again"}).encode()
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Unavailable)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/token", asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_token_endpoint_answering_503_is_an_outage_not_a_bad_key_in_either_hook(
    gcp_connection: Any,
    credentials_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    token_endpoint_down: Any,
) -> None:
    """google-auth gives up on a 503 with a RefreshError it marks retryable: a transient failure (retried,
    then "No answer"), never the final "check the connection's key" that would end a watch."""
    url, asked = token_endpoint_down
    connect_with_token_uri(gcp_connection, credentials_file, tmp_path, monkeypatch, url)
    # Few attempts: google-auth retries each one itself, in real time.
    both_hooks_give_up_as_no_answer_after_one_budget(first_wait=8.0)
    assert len(asked) >= 4, asked  # each hook asked for its token again after a failure
    assert job_gets(gcp_connection) == 0  # no envelope went out without a token
