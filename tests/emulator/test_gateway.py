"""Gateway mode against a tiny fake slurmrestd served on 127.0.0.1 by the test."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from slurmapi_emulator import EmulatorHandle

from .conftest import Client, V


class FakeSlurmrestd:
    """Records every request and answers like slurmrestd would (JSON, or plain text for errors)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.loop = asyncio.new_event_loop()
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.text()
        self.requests.append(
            {
                "method": request.method,
                "path_qs": request.raw_path,
                "token": request.headers.get("X-SLURM-USER-TOKEN"),
                "user": request.headers.get("X-SLURM-USER-NAME"),
                "content_type": request.headers.get("Content-Type"),
                "body": json.loads(body) if body else None,
            }
        )
        if "," in request.raw_path:
            return web.Response(status=400, text="Unable to parse query.")
        if request.raw_path.endswith("/job/submit"):
            return web.json_response({"job_id": 41, "step_id": "batch", "errors": [], "warnings": []})
        if request.path.endswith("/job/404"):
            return web.json_response({"jobs": [], "errors": [{"error_number": 2017}], "warnings": []}, status=404)
        return web.json_response({"echo": request.raw_path, "errors": [], "warnings": []})

    def start(self) -> None:
        self._thread.start()

        async def boot() -> None:
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

        asyncio.run_coroutine_threadsafe(boot(), self.loop).result(10)

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


@pytest.fixture
def fake() -> Iterator[FakeSlurmrestd]:
    server = FakeSlurmrestd()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def gateway(make_emulator: Callable[..., EmulatorHandle], fake: FakeSlurmrestd, tmp_path: Path) -> EmulatorHandle:
    (tmp_path / "jwt").write_text("jwt-1\n")
    return make_emulator(slurmrestd=fake.url + "/", slurm_token_file=str(tmp_path / "jwt"), slurm_user="alice")


def test_calls_are_forwarded_with_fresh_token_and_user(
    gateway: EmulatorHandle, fake: FakeSlurmrestd, tmp_path: Path
) -> None:
    client = Client(gateway)
    answer = client.call("GET", f"/slurm/{V}/jobs/state/?job_id=1&job_id=2")
    assert answer.slurm_status == 200
    assert answer.body["echo"] == f"/slurm/{V}/jobs/state/?job_id=1&job_id=2"
    (tmp_path / "jwt").write_text("jwt-2\n")
    body = {"job": {"name": "gw", "comment": "c1"}, "script": "#!/bin/bash\ntrue\n"}
    answer = client.call("POST", f"/slurm/{V}/job/submit", body)
    assert answer.body["job_id"] == 41
    client.call("DELETE", f"/slurm/{V}/job/41?signal=SIGTERM")
    first, second, third = fake.requests
    assert (first["method"], first["token"], first["user"]) == ("GET", "jwt-1", "alice")
    assert (second["method"], second["token"], second["body"]) == ("POST", "jwt-2", body)
    assert second["content_type"] == "application/json"
    assert (third["method"], third["path_qs"]) == ("DELETE", f"/slurm/{V}/job/41?signal=SIGTERM")
    assert gateway.jobs() == [
        {"job_id": 41, "name": "gw", "comment": "c1", "state": None, "job_state": None, "in_live_queue": None}
    ]


def test_raw_query_and_plain_text_and_error_statuses_pass_through(
    gateway: EmulatorHandle, fake: FakeSlurmrestd
) -> None:
    client = Client(gateway)
    answer = client.call("GET", f"/slurm/{V}/jobs/state/?job_id=1,2")
    assert (answer.slurm_status, answer.body) == (400, "Unable to parse query.")
    assert client.call("GET", f"/slurm/{V}/jobs/state/?job_id=1%2C2").body["echo"].endswith("job_id=1%2C2")
    answer = client.call("GET", f"/slurm/{V}/job/404")
    assert answer.slurm_status == 404 and answer.body["errors"][0]["error_number"] == 2017


def test_gateway_keeps_auth_and_faults(gateway: EmulatorHandle, fake: FakeSlurmrestd) -> None:
    assert Client(gateway, token="wrong").call("GET", f"/slurm/{V}/ping").http_status == 401
    assert fake.requests == []
    gateway.add_fault("500-before@submit")
    body = {"job": {"name": "x"}, "script": "#!/bin/bash\ntrue\n"}
    assert Client(gateway).call("POST", f"/slurm/{V}/job/submit", body).http_status == 500
    assert fake.requests == []  # not forwarded
    gateway.add_fault("500-after@submit")
    assert Client(gateway).call("POST", f"/slurm/{V}/job/submit", body).http_status == 500
    assert len(fake.requests) == 1  # forwarded: the job exists on the real cluster


def test_structured_envelope_in_gateway_mode(
    make_emulator: Callable[..., EmulatorHandle], fake: FakeSlurmrestd, tmp_path: Path
) -> None:
    (tmp_path / "jwt").write_text("jwt")
    emu = make_emulator(envelope="structured", slurmrestd=fake.url, slurm_token_file=str(tmp_path / "jwt"))
    answer = Client(emu).call("GET", f"/slurm/{V}/ping")
    assert answer.envelope["structuredBody"]["echo"] == f"/slurm/{V}/ping"
    assert fake.requests[0]["user"] is None


def test_unreachable_slurmrestd_is_unavailable(make_emulator: Callable[..., EmulatorHandle], tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (tmp_path / "jwt").write_text("jwt")
    emu = make_emulator(slurmrestd=f"http://127.0.0.1:{port}", slurm_token_file=str(tmp_path / "jwt"))
    answer = Client(emu).call("GET", f"/slurm/{V}/ping")
    assert answer.http_status == 503
    assert answer.envelope["error"]["status"] == "UNAVAILABLE"
