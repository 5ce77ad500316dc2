"""Gateway mode: the same envelope in front of a real slurmrestd.

Each Slurm call is forwarded as is (method, path with its raw query string, JSON body) with the
JWT read fresh from a file on every call, so a token rotated by `scontrol token` is picked up. The
real status and body come back inside the envelope, which lets the provider's tests run against
real Slurm with the envelope's auth and fault injection. Only plain `/slurm/vX.Y.Z/...` and
`/slurmdb/vX.Y.Z/...` paths are forwarded: no `..`, `.`, empty segments or backslashes, raw or
percent-encoded, so a caller cannot reach any other endpoint of the slurmrestd host.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import aiohttp
from yarl import URL

from .envelope import GoogleFrontEndError
from .slurm_api import BackendAnswer

_PLAIN_PREFIX = re.compile(r"/(slurm|slurmdb)/v[0-9]+\.[0-9]+\.[0-9]+/")
_SEGMENT_CHARS = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@%-]*")
_QUERY_CHARS = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*")


def check_forward_path(path: str) -> str:
    """The path unchanged if it is a plain Slurm REST path; else GoogleFrontEndError 400 naming what is wrong."""
    base, question, query = path.partition("?")
    problem = None
    match = _PLAIN_PREFIX.match(base)
    if match is None:
        problem = "it must start with /slurm/vX.Y.Z/ or /slurmdb/vX.Y.Z/"
    else:
        segments = base[match.end() :].split("/")
        for index, segment in enumerate(segments):
            decoded = unquote(segment)
            last = index == len(segments) - 1
            if not _SEGMENT_CHARS.fullmatch(segment):
                problem = f"segment {segment!r} has characters a Slurm path never holds"
            elif decoded in (".", "..") or "/" in decoded or "\\" in decoded or "%" in decoded:
                problem = f"segment {segment!r} is a dot segment or hides a separator"
            elif not decoded and not last:
                problem = "it has an empty segment (//)"
            elif any(not ch.isprintable() or ch.isspace() for ch in decoded):
                problem = f"segment {segment!r} holds control or space characters"
            if problem:
                break
    if problem is None and question and not _QUERY_CHARS.fullmatch(query):
        problem = "its query string has characters a Slurm query never holds"
    if problem:
        raise GoogleFrontEndError(400, "INVALID_ARGUMENT", f"Invalid path {json.dumps(path)}: {problem}.")
    return path


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

    async def call(self, method: str, path: str, body: Any) -> BackendAnswer:
        """Forward one call; the URL keeps the raw query string (commas, %2C) untouched."""
        url = URL(self.base_url + check_forward_path(path), encoded=True)
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
        return BackendAnswer(status, text, is_json=isinstance(parsed, (dict, list)))

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
