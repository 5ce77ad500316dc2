"""Running the emulator in a background thread, for tests and benchmarks.

`run_emulator(config)` gives a handle with the URL to point a client at, and direct access to the
harness (faults, call counters, job table) without going through HTTP. Code that calls the
/_emulator/ control paths over HTTP sends `handle.control_headers()`. On exit the server stops
and every job process still running is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

from .config import EmulatorConfig
from .server import CONTROL_HEADER, EmulatorServer

T = TypeVar("T")


class EmulatorHandle:
    """A running emulator: where it listens, and remote controls for tests."""

    def __init__(self, server: EmulatorServer, loop: asyncio.AbstractEventLoop) -> None:
        self._server = server
        self._loop = loop

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:PORT: the value for the hook's `api_endpoint`."""
        return self._server.url

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def config(self) -> EmulatorConfig:
        return self._server.config

    @property
    def control_token(self) -> str:
        """The secret the /_emulator/ control paths require (random per start unless configured)."""
        return self._server.control_token

    def control_headers(self) -> dict[str, str]:
        """Headers for an HTTP call to a /_emulator/ control path of this emulator."""
        return {CONTROL_HEADER: self.control_token}

    def envelope_url(
        self, cluster: str = "cluster-1", *, project: str | None = None, region: str = "us-central1"
    ) -> str:
        """Full callSlurmRestApi URL of a cluster on this emulator."""
        project = project or self.config.project
        return (
            f"{self.url}/v1beta1/projects/{project}/locations/{region}/modelDevelopmentClusters/"
            f"{cluster}:callSlurmRestApi"
        )

    def _run(self, fn: Callable[[], T], timeout: float = 30.0) -> T:
        async def call() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(timeout)

    def add_fault(self, spec: str) -> None:
        """Arm a fault (grammar: KIND[@MATCH][*COUNT]); raises ValueError on a bad spec."""
        self._run(lambda: self._server.faults.add(spec))

    def add_foreign_jobs(self, count: int, user: str = "nobody", **fields: str) -> list[int]:
        """Held jobs of another user of the cluster (``name``, ``comment``, ``state`` PENDING/COMPLETED)."""
        return self._run(lambda: self._server.add_foreign_jobs(count, user, **fields), timeout=300)

    def clear_faults(self) -> None:
        self._run(self._server.faults.clear)

    def faults(self) -> list[dict[str, Any]]:
        """The faults still armed, with their remaining counts."""
        return self._run(self._server.faults.as_list)

    def jobs(self) -> list[dict[str, Any]]:
        """Every job ever submitted: id, name, comment, state, in_live_queue, ..."""
        return self._run(self._server.jobs_snapshot)

    def calls(self) -> dict[str, Any]:
        """Envelope calls served: {"total", "by_kind": {kind: n}, "last": [{method, path, ...}]}."""
        return self._run(self._server.calls_snapshot)

    def reset_calls(self) -> None:
        self._run(self._server.reset_calls)

    def wait_for_state(self, job_id: int, states: str | Iterable[str], timeout: float = 30.0) -> dict[str, Any]:
        """Wait until the job's base state is one of `states`; returns its summary or raises TimeoutError."""
        wanted = {states} if isinstance(states, str) else set(states)
        deadline = time.monotonic() + timeout
        last: dict[str, Any] | None = None
        while True:
            for job in self.jobs():
                if job["job_id"] == job_id:
                    last = job
                    if job["state"] in wanted:
                        return job
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"job {job_id} not in {sorted(wanted)} after {timeout}s (last: "
                    f"{last['state'] if last else 'unknown job'})"
                )
            time.sleep(0.02)


@contextlib.contextmanager
def run_emulator(config: EmulatorConfig | None = None) -> Iterator[EmulatorHandle]:
    """Start an emulator in a background thread with its own event loop; stop it on exit."""
    config = config or EmulatorConfig()
    server = EmulatorServer(config, cleanup_workdir=True)
    loop = asyncio.new_event_loop()
    started: Future[None] = Future()
    stop_event: asyncio.Event | None = None

    async def main() -> None:
        nonlocal stop_event
        stop_event = asyncio.Event()
        try:
            await server.start()
        except BaseException as exc:
            started.set_exception(exc)
            with contextlib.suppress(Exception):
                await server.stop()
            return
        started.set_result(None)
        await stop_event.wait()
        await server.stop()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), name="slurmapi-emulator", daemon=True)
    thread.start()
    try:
        started.result(timeout=30)
    except BaseException:
        thread.join(10)
        loop.close()
        raise
    try:
        yield EmulatorHandle(server, loop)
    finally:
        if stop_event is not None:
            loop.call_soon_threadsafe(stop_event.set)
        thread.join(30)
        if not thread.is_alive():
            loop.close()
