"""The emulator in its own process (so its CPU is never counted with the client's), and its harness.

Only ``requests`` and the standard library here: the orchestrator must not import Airflow.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

API_VERSION = "v0.0.42"
PROJECT = "bench-project"
REGION = "us-central1"
CLUSTER_ID = "bench-cluster"
STATIC_TOKEN = "bench-static-token"  # for the orchestrator's own submits; the clients use the key file
CONTROL_HEADER = "X-Emulator-Control-Token"
CONTROL_TOKEN_FILE_ENV = "SLURMAPI_EMULATOR_CONTROL_TOKEN_FILE"  # tells a case process where the token is


TAG_SECRET_ENV = "AIRFLOW__SLURMAPI__TAG_SECRET"
GOAL_MISSED = 3
"""The exit code of a part that ran to the end and missed a goal; any other non-zero code is a crash
(an uncaught exception exits 1), which ``run.py`` fails on."""


def set_tag_secret() -> None:
    """Give this process and its children a tag key, as a deployment that manages its secrets does
    (``[slurmapi] tag_secret``, docs/security.md), unless one is set. Without it the provider keeps its
    key in an Airflow Variable, which on Airflow 3 only a running task can read: a task start outside a
    deployment would fail with that ConfigurationError (and a first use would wait 20 s for the key to settle)."""
    os.environ.setdefault(TAG_SECRET_ENV, secrets.token_urlsafe(32))


def run_in_airflow_home(prefix: str, bench: Callable[[Path], Coroutine[Any, Any, int]]) -> int:
    """``asyncio.run(bench(tmp))`` in a throwaway directory that is also Airflow's home (no examples, warnings
    only, no ambient Google credentials): what every client-side benchmark needs; removed afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ.update(
        AIRFLOW_HOME=str(tmp / "airflow-home"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__LOGGING__LOGGING_LEVEL="WARNING",
    )
    os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
    set_tag_secret()
    try:
        return asyncio.run(bench(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def control_headers(token_file: Path | str | None = None) -> dict[str, str]:
    """The header the emulator's /_emulator/ paths require; the emulator writes the token at start."""
    path = token_file if token_file is not None else os.environ[CONTROL_TOKEN_FILE_ENV]
    return {CONTROL_HEADER: Path(path).read_text().strip()}


@dataclass
class Emulator:
    """A running ``slurmapi-emulator`` subprocess."""

    url: str
    credentials_file: Path
    control_token_file: Path
    workdir: Path
    process: subprocess.Popen[str]

    def envelope_url(self, cluster: str = CLUSTER_ID) -> str:
        return (
            f"{self.url}/v1beta1/projects/{PROJECT}/locations/{REGION}/modelDevelopmentClusters/"
            f"{cluster}:callSlurmRestApi"
        )

    # -- harness (control token, loopback only; not an envelope call, so never counted) -----------
    def calls(self) -> dict[str, Any]:
        return dict(requests.get(f"{self.url}/_emulator/calls", headers=self._control(), timeout=30).json())

    def reset_calls(self) -> None:
        requests.post(f"{self.url}/_emulator/calls/reset", headers=self._control(), timeout=30).raise_for_status()

    def jobs(self) -> list[dict[str, Any]]:
        return list(requests.get(f"{self.url}/_emulator/jobs", headers=self._control(), timeout=60).json()["jobs"])

    def _control(self) -> dict[str, str]:
        return control_headers(self.control_token_file)

    def connection_env(self) -> dict[str, str]:
        """Environment of a client process: ``google_cloud_default`` with a real service-account key."""
        extra = {"key_path": str(self.credentials_file), "api_endpoint": self.url, "project": PROJECT}
        return {
            "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT": json.dumps({"conn_type": "google_cloud_platform", "extra": extra}),
            CONTROL_TOKEN_FILE_ENV: str(self.control_token_file),
        }

    def add_foreign_jobs(self, count: int, user: str = "nobody") -> list[int]:
        """``count`` held jobs of another user of the cluster (the harness makes them; nothing is counted)."""
        ids: list[int] = []
        for start in range(0, count, 5000):
            answer = requests.post(
                f"{self.url}/_emulator/foreign-jobs",
                json={"count": min(5000, count - start), "user": user, "name": "someone-elses"},
                headers=self._control(),
                timeout=600,
            )
            answer.raise_for_status()
            ids += answer.json()["job_ids"]
        return ids

    def submit_held_jobs(self, count: int, threads: int = 4) -> list[int]:
        """``count`` jobs with ``hold: true``: they stay PENDING (JobHeldUser) and never start a process."""
        body = {
            "method": "HTTP_METHOD_POST",
            "path": f"/slurm/{API_VERSION}/job/submit",
            "body": {
                "script": "#!/bin/bash\nsleep 3600\n",
                "job": {
                    "name": "bench-held",
                    "partition": "debug",
                    "hold": True,
                    "current_working_directory": str(self.workdir),
                    "environment": ["PATH=/usr/bin:/bin"],
                },
            },
        }
        headers = {"Authorization": f"Bearer {STATIC_TOKEN}"}

        def batch(size: int) -> list[int]:
            session = requests.Session()
            ids = []
            for _ in range(size):
                answer = session.post(self.envelope_url(), json=body, headers=headers, timeout=60)
                answer.raise_for_status()
                ids.append(int(json.loads(answer.json()["body"])["job_id"]))
            return ids

        sizes = [count // threads + (1 if k < count % threads else 0) for k in range(threads)]
        with ThreadPoolExecutor(threads) as pool:
            return sorted(i for chunk in pool.map(batch, sizes) for i in chunk)


@contextmanager
def start_emulator(tmp: Path, slurm_release: str | None = None) -> Iterator[Emulator]:
    """``python -m slurmapi_emulator`` on a free port (acting as ``slurm_release`` if given); stopped on exit."""
    workdir = tmp / "jobs"
    workdir.mkdir(parents=True, exist_ok=True)
    credentials = tmp / "service-account.json"
    control_token = tmp / "control-token"
    command = [
        sys.executable,
        "-m",
        "slurmapi_emulator",
        "--port",
        "0",
        "--write-credentials",
        str(credentials),
        "--control-token-file",
        str(control_token),
        "--token",
        STATIC_TOKEN,
        "--project",
        PROJECT,
        "--cpus",
        "1",
        "--min-job-age",
        "3600",
        "--workdir",
        str(workdir),
        "--quiet",
        *(["--slurm-release", slurm_release] if slurm_release else []),
    ]
    stderr = (tmp / "emulator.stderr").open("w")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=os.environ.copy())
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError(f"the emulator did not start: {(tmp / 'emulator.stderr').read_text()[-2000:]}")
        deadline = time.monotonic() + 30
        while not (credentials.exists() and control_token.exists()) and time.monotonic() < deadline:
            time.sleep(0.05)
        yield Emulator(
            url=url, credentials_file=credentials, control_token_file=control_token, workdir=workdir, process=process
        )
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        stderr.close()
