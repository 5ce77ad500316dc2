"""A local server that stands where an attacker's host would: it records every connection and request.

It is also the token endpoint of the service-account key the tests use, so a fetched token shows up
here too. A test points hostile cluster arguments at it (``region="127.0.0.1:PORT#"`` makes the old
default endpoint ``https://127.0.0.1:PORT#-aiplatform.googleapis.com``) and then asserts that nothing
reached it: no token was fetched, no connection was opened, no request carried a bearer token.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PROJECT = "demo-project"


@dataclass
class Trap:
    """What reached the trap: connections (a TLS handshake counts) and HTTP requests."""

    port: int = 0
    connections: int = 0
    token_requests: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def hostile_region(self) -> str:
        """A region that, unchecked, moves the default endpoint's host to this trap."""
        return f"127.0.0.1:{self.port}#"

    def nothing_reached(self) -> bool:
        return self.connections == 0 and self.token_requests == 0 and not self.requests

    def summary(self) -> str:
        return f"connections={self.connections} token_requests={self.token_requests} requests={self.requests}"


def _handler(trap: Trap) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            if self.path == "/token":
                with trap.lock:
                    trap.token_requests += 1
                self._answer(200, {"access_token": "trap-token", "expires_in": 3600, "token_type": "Bearer"})
                return
            self._record()
            self._answer(404, {"error": {"code": 404, "status": "NOT_FOUND", "message": "trap"}})

        def do_GET(self) -> None:
            self._record()
            self._answer(404, {})

        def _record(self) -> None:
            with trap.lock:
                trap.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "host": self.headers.get("Host"),
                        "authorization": bool(self.headers.get("Authorization")),
                    }
                )

        def _answer(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def run_trap() -> Iterator[Trap]:
    trap = Trap()

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def verify_request(self, request: Any, client_address: Any) -> bool:
            with trap.lock:
                trap.connections += 1
            return True

    server = Server(("127.0.0.1", 0), _handler(trap))
    trap.port = int(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield trap
    finally:
        server.shutdown()
        server.server_close()


def trap_connection_env(trap: Trap, key_file: Path, **extra: Any) -> str:
    """An Airflow Google Cloud connection whose service-account key fetches its tokens from the trap."""
    from slurmapi_emulator.auth import ServiceAccount

    ServiceAccount.load_or_create(key_file, PROJECT).write(key_file, PROJECT, f"{trap.url}/token")
    return json.dumps(
        {"conn_type": "google_cloud_platform", "extra": {"key_path": str(key_file), "project": PROJECT, **extra}}
    )
