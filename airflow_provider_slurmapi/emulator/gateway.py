"""Gateway mode: the same envelope in front of a real slurmrestd.

Each Slurm call is forwarded as is (method, path with its raw query string, JSON body) with the
JWT read fresh from a file on every call, so a token rotated by `scontrol token` is picked up. The
real status and body come back inside the envelope, which lets the provider's tests run against
real Slurm with the envelope's auth and fault injection.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
from yarl import URL

from .slurm_api import SlurmResponse


class SlurmrestdUnreachable(Exception):
    """The real slurmrestd could not be reached (answered as UNAVAILABLE by the envelope)."""


class GatewayBackend:
    """Forwards Slurm REST calls to a real slurmrestd with one shared HTTP session."""

    def __init__(self, base_url: str, token_file: str, user: str | None, timeout: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token_file = Path(token_file)
        self.user = user
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self.submitted: list[dict[str, Any]] = []  # what went through, for /_emulator/jobs

    def _session_get(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _headers(self) -> dict[str, str]:
        headers = {"X-SLURM-USER-TOKEN": self.token_file.read_text().strip(), "Accept": "application/json"}
        if self.user:
            headers["X-SLURM-USER-NAME"] = self.user
        return headers

    async def call(self, method: str, path: str, body: Any) -> SlurmResponse:
        """Forward one call; the URL keeps the raw query string (commas, %2C) untouched."""
        url = URL(self.base_url + path, encoded=True)
        headers = self._headers()
        data = None
        if method == "POST":
            data = json.dumps(body if body is not None else {})
            headers["Content-Type"] = "application/json"
        try:
            async with self._session_get().request(method, url, data=data, headers=headers) as resp:
                text = await resp.text(errors="replace")
                status = resp.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise SlurmrestdUnreachable(str(exc)) from exc
        try:
            parsed = json.loads(text) if text.strip() else None
        except ValueError:
            parsed = None
        if method == "POST" and path.split("?")[0].rstrip("/").endswith("/job/submit"):
            self._record_submit(body, parsed)
        return SlurmResponse(status, text, is_json=isinstance(parsed, (dict, list)))

    def _record_submit(self, body: Any, answer: Any) -> None:
        if not isinstance(answer, dict) or not isinstance(answer.get("job_id"), int):
            return
        job = body.get("job", {}) if isinstance(body, dict) else {}
        job = job if isinstance(job, dict) else {}
        self.submitted.append(
            {
                "job_id": answer["job_id"],
                "name": job.get("name", ""),
                "comment": job.get("comment", ""),
                "state": None,
                "job_state": None,
                "in_live_queue": None,
            }
        )
