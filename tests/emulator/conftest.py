"""Shared helpers of the emulator tests: a real emulator per test, and a tiny envelope client.

Every test talks real HTTP to a real emulator started by `run_emulator`; nothing is mocked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from slurmapi_emulator import EmulatorConfig, EmulatorHandle, run_emulator
from slurmapi_emulator.versions import versions_of

from tests.waiting import wait_until as wait_until  # the one wait, as the emulator tests name it

TOKEN = "test-token"
V = "v0.0.42"


@dataclass
class Answer:
    """One envelope call's outcome: HTTP status, raw envelope, and the unwrapped Slurm answer."""

    http_status: int
    envelope: Any
    slurm_status: int | None
    body: Any  # parsed Slurm JSON, or the plain text slurmrestd sent
    raw_text: str

    @property
    def jobs(self) -> list[dict[str, Any]]:
        return self.body["jobs"]


class Client:
    """Posts envelope requests to an emulator and unwraps both answer shapes."""

    def __init__(
        self, emu: EmulatorHandle, token: str | None = TOKEN, cluster: str = "cluster-1", cwd: str | None = None
    ) -> None:
        self.emu = emu
        self.cwd = cwd or str(emu.config.workdir or "/tmp")
        self.url = emu.envelope_url(cluster)
        self.token = token
        self.session = requests.Session()

    def post_raw(
        self, data: bytes | str, *, token: str | None = None, url: str | None = None, timeout: float = 30
    ) -> requests.Response:
        headers = {"Content-Type": "application/json"}
        tok = token if token is not None else self.token
        if tok:
            headers["Authorization"] = f"Bearer {tok}"
        return self.session.post(url or self.url, data=data, headers=headers, timeout=timeout)

    def call(
        self, method: str, path: str, body: Any = None, *, token: str | None = None, timeout: float = 30
    ) -> Answer:
        request: dict[str, Any] = {"method": f"HTTP_METHOD_{method}", "path": path}
        if body is not None:
            request["body"] = body
        resp = self.post_raw(json.dumps(request), token=token, timeout=timeout)
        try:
            envelope = resp.json()
        except ValueError:
            return Answer(resp.status_code, resp.text, None, None, resp.text)
        if not isinstance(envelope, dict) or "status" not in envelope:
            return Answer(resp.status_code, envelope, None, None, resp.text)
        if "structuredBody" in envelope:
            body_obj: Any = envelope["structuredBody"]
        else:
            text = envelope.get("body", "")
            try:
                body_obj = json.loads(text)
            except ValueError:
                body_obj = text
        return Answer(resp.status_code, envelope, envelope["status"], body_obj, resp.text)

    # shortcuts
    def submit(self, job: dict[str, Any] | None = None, script: str = "#!/bin/bash\ntrue\n", **fields: Any) -> Answer:
        desc = job_desc(self.cwd, **{**(job or {}), **fields})
        return self.call("POST", f"/slurm/{V}/job/submit", {"job": desc, "script": script})

    def submit_id(self, script: str = "#!/bin/bash\ntrue\n", **fields: Any) -> int:
        """Submit and return the job id (the submit must succeed)."""
        answer = self.submit(script=script, **fields)
        assert answer.slurm_status == 200, answer.raw_text
        return int(answer.body["job_id"])

    def job(self, job_id: int) -> Answer:
        return self.call("GET", f"/slurm/{V}/job/{job_id}")

    def state(self, job_id: int) -> list[str] | None:
        answer = self.job(job_id)
        return answer.jobs[0]["job_state"] if answer.slurm_status == 200 else None

    def cancel(self, job_id: int, query: str = "") -> Answer:
        return self.call("DELETE", f"/slurm/{V}/job/{job_id}{query}")

    def history(self, job_id: int) -> Answer:
        return self.call("GET", f"/slurmdb/{V}/job/{job_id}")


def job_desc(cwd: str, **fields: Any) -> dict[str, Any]:
    """A valid job description (cwd, environment, partition) with overrides."""
    desc: dict[str, Any] = {
        "name": "t",
        "partition": "debug",
        "current_working_directory": cwd,
        "environment": ["PATH=/bin:/usr/bin"],
    }
    desc.update(fields)
    return desc


@pytest.fixture
def make_emulator(tmp_path: Path) -> Iterator[Callable[..., EmulatorHandle]]:
    """Start emulators with given config fields; all are stopped at the end of the test."""
    stack: list[Any] = []

    def start(**fields: Any) -> EmulatorHandle:
        fields.setdefault("tokens", [TOKEN])
        workdir = tmp_path / f"work{len(stack)}"
        workdir.mkdir(exist_ok=True)
        fields.setdefault("workdir", str(workdir))
        fields.setdefault("kill_wait", 0.5)
        cm = run_emulator(EmulatorConfig(**fields))
        handle = cm.__enter__()
        stack.append(cm)
        return handle

    yield start
    for cm in reversed(stack):
        cm.__exit__(None, None, None)


@pytest.fixture
def emu(make_emulator: Callable[..., EmulatorHandle]) -> EmulatorHandle:
    """A default emulator with fast clocks: 1 s minutes, 1 s MinJobAge, 4 CPUs."""
    return make_emulator(minute_seconds=1, min_job_age=1, cpus=4)


@pytest.fixture
def client(emu: EmulatorHandle) -> Client:
    return Client(emu)


@pytest.fixture
def every_version_client(make_emulator: Callable[..., EmulatorHandle]) -> Client:
    """``emu``'s settings, serving every API version the emulator knows (``api_versions=["all"]``) on one
    cluster: for the tests that read the same jobs in each version's shape."""
    return Client(make_emulator(minute_seconds=1, min_job_age=1, cpus=4, api_versions=["all"]))


def release_serving(version: str) -> str:
    """A Slurm release the emulator can act as that serves ``version`` (24.11 up to v0.0.42, else 26.05)."""
    return "24.11" if version in versions_of("24.11") else "26.05"
