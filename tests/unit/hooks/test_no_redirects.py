"""Both transports follow no redirect: a 3xx is an error naming the endpoint, and the envelope is sent once.

A real local HTTP server stands in front of the emulator and answers every POST with a redirect to the
emulator itself, so a transport that followed it would submit the job there (the emulator would hold
one); the tests assert that the emulator got nothing and the redirecting server got one request.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import EndpointRedirectError, SlurmApiAsyncHook, SlurmApiHook
from airflow_provider_slurmapi.slurm.api.errors import is_permanent
from tests.conftest import CLUSTER, connection_uri_env

SCRIPT = "#!/bin/bash\necho redirected\n"


class Redirector:
    """Answers each POST with ``status`` and ``Location: target``; counts what it got."""

    def __init__(self, status: int, target: str) -> None:
        self.status, self.target, self.posts = status, target, 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.posts += 1
                self.send_response(owner.status)
                self.send_header("Location", owner.target)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(params=[301, 302, 307, 308])
def redirector(
    request: pytest.FixtureRequest, emulator: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Redirector]:
    """The connection's api_endpoint is the redirecting server; its redirects point at the emulator."""
    target = (
        emulator.url.rstrip("/") + "/v1/projects/demo-project/locations/x/modelDevelopmentClusters/y:callSlurmRestApi"
    )
    server = Redirector(int(request.param), target)
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(SimpleNamespace(url=server.url), credentials_file)
    )
    yield server
    server.close()


def _spec(emulator: Any) -> dict[str, Any]:
    return {"name": "redirected", "partition": "debug", "current_working_directory": str(emulator.config.workdir)}


def _check(error: EndpointRedirectError, server: Redirector, emulator: Any) -> None:
    message = str(error)
    assert server.url in message and f"HTTP {server.status}" in message, message
    assert "api_endpoint" in message and "never redirects" in message
    assert is_permanent(error)
    assert server.posts == 1, "the envelope was sent again"
    assert emulator.jobs() == [], "the redirect was followed: the envelope reached its target"


def test_sync_transport_follows_no_redirect(redirector: Redirector, emulator: Any) -> None:
    hook = SlurmApiHook(**CLUSTER)
    with pytest.raises(EndpointRedirectError) as caught:
        hook.submit_job(_spec(emulator), SCRIPT)
    _check(caught.value, redirector, emulator)


async def test_async_transport_follows_no_redirect(redirector: Redirector, emulator: Any) -> None:
    async with SlurmApiAsyncHook(**CLUSTER) as hook:
        with pytest.raises(EndpointRedirectError) as caught:
            await hook.submit_job(_spec(emulator), SCRIPT)
    _check(caught.value, redirector, emulator)


def test_the_error_names_only_the_redirects_host() -> None:
    from airflow_provider_slurmapi.hooks.slurm import redirect_error
    from airflow_provider_slurmapi.slurm.api.cluster import cluster_ref

    ref = cluster_ref(None, **CLUSTER)
    error = redirect_error(ref, 307, "https://evil.example/steal?token=abc")
    assert "https://evil.example" in str(error) and "token=abc" not in str(error)
    assert json.dumps(str(redirect_error(ref, 302, None)))
