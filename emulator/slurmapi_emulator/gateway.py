"""Gateway mode: the same envelope in front of a real slurmrestd.

Each Slurm call is forwarded as is (method, path with its raw query string, JSON body) with the
JWT read fresh from a file on every call, so a token rotated by `scontrol token` is picked up. The
real status and body come back inside the envelope, which lets the provider's tests run against
real Slurm with the envelope's auth and fault injection. Only plain `/slurm/vX.Y.Z/...` and
`/slurmdb/vX.Y.Z/...` paths are forwarded: no `..`, `.`, empty segments or backslashes, raw or
percent-encoded, so a caller cannot reach any other endpoint of the slurmrestd host.

By default each JSON answer names the token's user in ``meta.client.user`` (the ``sun`` claim of the
JWT), as the Slurm Job API is described to. What the Job API's front end really writes there is
documented nowhere, and a plain slurmrestd with ``rest_auth/jwt`` over TCP says ``root`` whoever the
token's user is: ``meta_client_user`` makes the gateway answer as slurmrestd does ("slurmrestd"),
with an empty user ("empty") or with a fixed other account ("user:NAME").
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

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


async def _exchange(method: str, url: URL, data: bytes | None, headers: dict[str, str]) -> tuple[int, str]:
    """One HTTP/1.1 request on its own connection; the answer is what its Content-Length covers.

    slurmrestd closes every connection (``Connection: Close``), and Slurm 26.05.5 writes some error
    answers twice (a 404 for an unknown job: the body, then the whole answer again). A strict client
    (aiohttp: "Data after `Connection: close`") refuses the lot; a lenient one, as Google's service
    is, reads Content-Length bytes and drops the rest. So does this.
    """
    if url.scheme != "http" or not url.host:
        raise ValueError(f"the gateway speaks plain HTTP to a local slurmrestd, not {url}")
    reader, writer = await asyncio.open_connection(url.host, url.port or 80)
    try:
        lines = [f"{method} {url.raw_path_qs} HTTP/1.1", f"Host: {url.raw_authority}", "Connection: close"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if data is not None:
            lines.append(f"Content-Length: {len(data)}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (data or b""))
        await writer.drain()
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        status_line, *field_lines = head.split("\r\n")
        status = int(status_line.split()[1])
        fields = {}
        for line in field_lines:
            name, sep, value = line.partition(":")
            if sep:
                fields[name.strip().lower()] = value.strip()
        if "chunked" in fields.get("transfer-encoding", "").lower():
            raise ValueError("slurmrestd answered with chunked encoding, which the gateway does not read")
        length = fields.get("content-length")
        body = await reader.readexactly(int(length)) if length is not None else await reader.read()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return status, body.decode("utf-8", errors="replace")


class GatewayBackend:
    """Forwards Slurm REST calls to a real slurmrestd, one connection a call (as slurmrestd closes them)."""

    def __init__(
        self,
        base_url: str,
        token_file: str,
        user: str | None,
        timeout: float = 60.0,
        *,
        meta_user: Callable[[str | None, str | None], str | None] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        # (token's user, slurmrestd's) -> what meta.client.user says; default: the token's user.
        self._meta_user = meta_user or (lambda token_user, _slurmrestd: token_user)
        self.token_file = Path(token_file)
        self.user = user
        self._timeout = timeout
        self.submitted: list[dict[str, Any]] = []  # what went through, for /_emulator/jobs

    async def close(self) -> None:
        """Nothing to release: each call has its own connection (slurmrestd closes them)."""

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
            status, text = await asyncio.wait_for(
                _exchange(method, url, data.encode() if data is not None else None, headers), self._timeout
            )
        except (TimeoutError, OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            raise SlurmrestdUnreachable(f"{type(exc).__name__}: {exc}") from exc
        try:
            parsed = json.loads(text) if text.strip() else None
        except ValueError:
            parsed = None
        if method == "POST" and path.split("?")[0].rstrip("/").endswith("/job/submit"):
            self._record_submit(body, parsed)
        token_user = self.user or _token_user(headers["X-SLURM-USER-TOKEN"])
        if _name_the_caller(parsed, self._meta_user(token_user, None)):
            text = json.dumps(parsed)
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


def _token_user(token: str) -> str | None:
    """The user a Slurm JWT was made for (its ``sun`` claim); ``None`` for anything else."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None
    user = claims.get("sun") if isinstance(claims, dict) else None
    return user if isinstance(user, str) and user else None


def _name_the_caller(answer: Any, user: str | None) -> bool:
    """Name ``user`` as the caller in ``meta.client.user``, as the Job API does; whether it changed."""
    meta = answer.get("meta") if isinstance(answer, dict) else None
    client = meta.get("client") if isinstance(meta, dict) else None
    if user is None or not isinstance(client, dict) or client.get("user") in (None, "", user):
        return False
    client["user"] = user
    return True
