"""Talking to the real Slurm lab directly (slurmrestd with a JWT), independently of the provider.

The tests judge the provider and the emulator by what real Slurm says, so the real state of a job
is read here with plain ``requests`` calls to slurmrestd, not through the code under test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
LAB_SCRIPT = REPO / "scripts" / "slurm-lab"
# The Slurm release of the lab (scripts/slurm-lab's SLURM_LAB_SLURM) and its default directory.
SLURM_RELEASE = os.environ.get("SLURM_LAB_SLURM", "24.11")
_DEFAULT_LAB_DIR = "/var/tmp/slurmapi-lab" if SLURM_RELEASE == "24.11" else f"/var/tmp/slurmapi-lab-{SLURM_RELEASE}"
LAB_DIR = Path(os.environ.get("SLURM_LAB_DIR", _DEFAULT_LAB_DIR))
LAB_CHROOT_TMP = LAB_DIR / "chroot" / "tmp"
# The version of the suite's own raw calls: every release from 24.11 to 26.05 serves v0.0.42.
V = "v0.0.42"
# The version the provider speaks in the scenarios (SLURM_LIVE_API_VERSION: "auto" or v0.0.NN);
# `make test-slurm-26` runs the 26.05 part once per version.
API_VERSION = os.environ.get("SLURM_LIVE_API_VERSION", "v0.0.42")


# The HTTP status of a submit slurmctld refuses (bad partition, no environment): 24.11 answers 500,
# 26.05 answers 422, on every API version.
SUBMIT_REFUSED_STATUS = 500 if SLURM_RELEASE == "24.11" else 422
# Slurm's error for a submit without environment: 24.11 fails writing it, 26.05 checks it first.
MISSING_ENVIRONMENT_ERROR = (
    (2019, "I/O error writing script/environment to file")
    if SLURM_RELEASE == "24.11"
    else (2127, "Environment is missing in job")
)


def provider_version() -> str:
    """The version the provider's calls use: API_VERSION, or for "auto" the newest the lab's release serves."""
    from airflow_provider_slurmapi.slurm.api.api_versions import NEGOTIATE, served_by

    return served_by(SLURM_RELEASE)[0].name if API_VERSION == NEGOTIATE else API_VERSION


FINISHED = {
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
}


class LabUnavailable(Exception):
    """The lab could not be started or does not answer."""


@dataclass
class JobRecord:
    """What real Slurm says of one job: live queue first, else the accounting history."""

    job_id: int
    source: str  # "live" or "history"
    states: list[str]
    reason: str | None
    exit_code: dict[str, Any]
    raw: dict[str, Any] = field(repr=False)

    @property
    def state(self) -> str:
        return next((s for s in self.states if s in FINISHED or s in ("PENDING", "RUNNING", "SUSPENDED")), "?")

    @property
    def finished(self) -> bool:
        return self.state in FINISHED and "COMPLETING" not in self.states

    @property
    def return_code(self) -> int | None:
        rc = self.exit_code.get("return_code")
        if isinstance(rc, dict):
            return rc.get("number") if rc.get("set") else None
        return rc

    @property
    def signal(self) -> str | None:
        sig = self.exit_code.get("signal") or {}
        return sig.get("name") or None

    @property
    def ran(self) -> bool:
        """True if the job ever started (a job cancelled while pending never did)."""
        if self.source == "live":
            start = self.raw.get("start_time") or {}
            number = start.get("number", 0) if isinstance(start, dict) else start
        else:
            number = (self.raw.get("time") or {}).get("start", 0)
        return (
            bool(number)
            and number < 0xFFFFFFFE
            and bool(self.raw.get("nodes"))
            and self.raw["nodes"] != "None assigned"
        )


@dataclass
class Lab:
    """The running lab: slurmrestd's URL, the JWT file, the job user."""

    url: str
    token_file: Path
    user: str
    session: requests.Session = field(default_factory=requests.Session, repr=False)

    def token(self) -> str:
        return self.token_file.read_text().strip()

    def call(self, method: str, path: str, body: Any = None, timeout: float = 30) -> tuple[int, Any]:
        """One call straight to slurmrestd: (HTTP status, JSON body or text)."""
        headers = {"X-SLURM-USER-TOKEN": self.token(), "Accept": "application/json"}
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body)
        resp = self.session.request(method, self.url + path, headers=headers, data=data, timeout=timeout)
        try:
            return resp.status_code, resp.json()
        except ValueError:
            return resp.status_code, resp.text

    def ping(self) -> bool:
        try:
            status, body = self.call("GET", f"/slurm/{V}/ping", timeout=10)
        except (requests.RequestException, OSError):
            return False
        return status == 200 and isinstance(body, dict) and body["pings"][0].get("pinged") == "UP"

    def submit(self, script: str, **job: Any) -> int:
        desc = {
            "name": "slurm-live",
            "partition": "debug",
            "current_working_directory": "/tmp",
            "environment": ["PATH=/usr/local/bin:/usr/bin:/bin"],
            **job,
        }
        status, body = self.call("POST", f"/slurm/{V}/job/submit", {"job": desc, "script": script})
        assert status == 200 and isinstance(body, dict) and body.get("job_id"), f"submit refused: {status} {body}"
        return int(body["job_id"])

    def cancel(self, job_id: int) -> None:
        self.call("DELETE", f"/slurm/{V}/job/{job_id}")

    def live(self, job_id: int) -> JobRecord | None:
        status, body = self.call("GET", f"/slurm/{V}/job/{job_id}")
        if status == 404 or not isinstance(body, dict) or not body.get("jobs"):
            return None
        raw = body["jobs"][0]
        return JobRecord(
            job_id, "live", list(raw["job_state"]), raw.get("state_reason"), raw.get("exit_code") or {}, raw
        )

    def history(self, job_id: int) -> JobRecord | None:
        status, body = self.call("GET", f"/slurmdb/{V}/job/{job_id}")
        if status != 200 or not isinstance(body, dict) or not body.get("jobs"):
            return None
        raw = body["jobs"][-1]
        state = raw.get("state") or {}
        return JobRecord(
            job_id, "history", list(state.get("current") or []), state.get("reason"), raw.get("exit_code") or {}, raw
        )

    def job(self, job_id: int) -> JobRecord | None:
        return self.live(job_id) or self.history(job_id)

    def wait(
        self, job_id: int, predicate: Callable[[JobRecord], bool], timeout: float = 60, what: str = ""
    ) -> JobRecord:
        """Poll real Slurm until ``predicate(record)``; fail with the last record seen."""
        seen: list[JobRecord | None] = [None]

        def became() -> JobRecord | None:
            seen[0] = self.job(job_id)
            return seen[0] if seen[0] is not None and predicate(seen[0]) else None

        found = wait_until(
            became, f"Slurm job {job_id} became {what or predicate}", timeout=timeout, every=0.5, give_up=True
        )
        if found is None:
            raise AssertionError(
                f"Slurm job {job_id} never became {what or predicate} within {timeout:.0f}s; last seen: {seen[0]}"
            )
        return found

    def final(self, job_id: int, timeout: float = 60) -> JobRecord:
        """The job once it is over for good (finished base state, no COMPLETING flag)."""
        return self.wait(job_id, lambda r: r.finished, timeout, "finished")

    def wait_purged(self, job_id: int, timeout: float = 90) -> JobRecord:
        """Wait until the job has left the live queue (MinJobAge) and only the history knows it."""
        started = time.monotonic()
        wait_until(
            lambda: self.live(job_id) is None, f"Slurm job {job_id} left the live queue", timeout=timeout, every=1
        )
        record: JobRecord = wait_until(
            lambda: self.history(job_id),
            f"Slurm job {job_id} left the live queue: the history knows it",
            timeout=max(timeout - (time.monotonic() - started), 0),
            every=0.5,
        )
        return record

    def output(self, job_id: int) -> str:
        """The job's stdout file (cwd /tmp inside the chroot)."""
        path = LAB_CHROOT_TMP / f"slurm-{job_id}.out"
        return path.read_text() if path.exists() else ""


def in_lab(*command: str, timeout: float = 120) -> str:
    """A command as root in the lab (scontrol, scancel): what an administrator does; its stdout."""
    chroot = LAB_DIR / "chroot"
    prefix = ["chroot", str(chroot)] if chroot.is_dir() else []
    env = ["/usr/bin/env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    env.append("SLURM_CONF=/etc/slurm/slurm.conf")
    done = subprocess.run([*prefix, *env, *command], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
    return done.stdout


def root_token(lifespan: int) -> str:
    """A JWT of the lab's root user (another Slurm user than the job user), as an administrator makes one."""
    return in_lab("scontrol", "token", "username=root", f"lifespan={lifespan}").strip().removeprefix("SLURM_JWT=")


def user_token(user: str, lifespan: int) -> str:
    """A JWT of another Slurm user of the lab (e.g. ``nobody``), as an administrator makes one."""
    return in_lab("scontrol", "token", f"username={user}", f"lifespan={lifespan}").strip().removeprefix("SLURM_JWT=")


def _parse_env(text: str) -> dict[str, str]:
    values = {}
    for line in text.splitlines():
        match = re.match(r"^(?:export\s+)?(SLURM_LAB_\w+)=(.*)$", line.strip())
        if match:
            values[match.group(1)] = match.group(2).strip().strip("'\"")
    return values


def _lab_from(values: dict[str, str]) -> Lab | None:
    if not values.get("SLURM_LAB_URL") or not values.get("SLURM_LAB_TOKEN_FILE"):
        return None
    return Lab(
        values["SLURM_LAB_URL"].rstrip("/"), Path(values["SLURM_LAB_TOKEN_FILE"]), values.get("SLURM_LAB_USER", "")
    )


def find_or_start_lab() -> Lab:
    """The lab named by ``SLURM_LAB_*``; else ``scripts/slurm-lab up`` and ``env``. Raises LabUnavailable."""
    lab = _lab_from(dict(os.environ))
    if lab is not None and lab.token_file.exists() and lab.ping():
        return lab
    why = "SLURM_LAB_URL/SLURM_LAB_TOKEN_FILE not set" if lab is None else f"the lab at {lab.url} does not answer"
    try:
        up = subprocess.run([str(LAB_SCRIPT), "up"], capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LabUnavailable(f"{why}, and `scripts/slurm-lab up` could not run: {exc}") from exc
    if up.returncode != 0:
        raise LabUnavailable(
            f"{why}, and `scripts/slurm-lab up` failed (exit {up.returncode}):\n{up.stdout[-3000:]}\n{up.stderr[-3000:]}"
        )
    env = subprocess.run([str(LAB_SCRIPT), "env"], capture_output=True, text=True, timeout=60)
    lab = _lab_from(_parse_env(env.stdout))
    if lab is None:
        raise LabUnavailable(
            f"`scripts/slurm-lab env` printed no SLURM_LAB_URL/SLURM_LAB_TOKEN_FILE:\n{env.stdout}{env.stderr}"
        )
    if not wait_until(lab.ping, "the lab answers its ping", timeout=60, every=1, give_up=True):
        raise LabUnavailable(f"`scripts/slurm-lab up` succeeded but {lab.url}/slurm/{V}/ping does not answer UP")
    return lab
