"""The HTTP server: envelope endpoint, OAuth2 token endpoint and the test-harness control endpoints.

It ties together auth, fault injection and a Slurm backend (the local model or a real slurmrestd).
The emulator runs the scripts it is sent, so every request is guarded: its Host header must name
this server on loopback (no DNS rebinding from a web page), the control endpoints under /_emulator/
need the control token, slow or oversized requests are cut off, and log lines escape control
characters.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import pwd
import secrets
import shutil
import socket
import struct
import tempfile
import time
import unicodedata
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from .auth import ServiceAccount, TokenAuthority, TokenError, write_private_file
from .config import WILDCARD_HOSTS, EmulatorConfig, is_loopback
from .envelope import (
    MAX_REQUEST_BYTES,
    RUN_PERMISSION,
    GoogleFrontEndError,
    SlurmCall,
    encode_answer,
    google_error,
    parse_request,
    unauthenticated,
)
from .faults import Fault, FaultInjector, FaultSpecError
from .gateway import GatewayBackend, SlurmrestdUnreachable
from .jobdesc import JobRequest
from .locations import check_resource, check_served
from .model import Cluster, Job
from .slurm_api import BackendAnswer, SlurmBackend, SlurmModelApi

log = logging.getLogger("slurmapi_emulator")

LAST_CALLS = 200
CONTROL_HEADER = "X-Emulator-Control-Token"
CONTROL_PREFIX = "/_emulator"
MAX_BODY_BYTES = MAX_REQUEST_BYTES + 64 * 1024  # the API's limit plus room for its own 400 answer
_ENVELOPE_ROUTE = "/v1beta1/projects/{project}/locations/{region}/modelDevelopmentClusters/{cluster_call}"
_BAD_GATEWAY_HTML = (
    "<!DOCTYPE html>\n<html lang=en><meta charset=utf-8><title>Error 502 (Server Error)!!1</title>"
    "<p><b>502.</b> <ins>That's an error.</ins><p>The server encountered a temporary error and could not "
    "complete your request.<p>Please try again in 30 seconds. <ins>That's all we know.</ins></html>\n"
)


def escape_controls(text: str) -> str:
    """Control, format and line-separator characters as \\xNN / \\uNNNN: one request, one log line."""
    return "".join(
        ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch
        for ch in text
    )


class EscapeControlChars(logging.Filter):
    """Render each record once with its control characters escaped (CR/LF from a path cannot forge lines)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        escaped = escape_controls(message)
        if escaped != message or record.args:
            record.msg, record.args = escaped, None
        return True


_LOG_FILTER = EscapeControlChars()
for _name in ("slurmapi_emulator", "slurmapi_emulator.model", "slurmapi_emulator.auth", "aiohttp.server"):
    if _LOG_FILTER not in logging.getLogger(_name).filters:
        logging.getLogger(_name).addFilter(_LOG_FILTER)


def split_host_header(value: str) -> tuple[str, int] | None:
    """`name[:port]` of a Host header as (lower-case name, port; 80 if absent), or None if malformed."""
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[: end + 1], value[end + 1 :]
    else:
        name, colon, port = value.partition(":")
        rest = colon + port
    if not name:
        return None
    if not rest:
        return name.lower(), 80
    digits = rest[1:]
    if not rest.startswith(":") or not (digits.isascii() and digits.isdigit()) or len(digits) > 5:
        return None
    return name.lower(), int(digits)


class FirstHeadDeadlineSite(web.TCPSite):
    """A TCP site that closes a connection whose first request head is not in within `timeout` s.

    aiohttp's keep-alive timer bounds the wait for every later request head on a connection (and
    in recent versions for the first one too, but only as long as the idle timeout); this bounds
    the first one on any version. The guard middleware calls `request_started` as each request
    reaches it.
    """

    def __init__(self, runner: web.BaseRunner, host: str, port: int, timeout: float) -> None:
        super().__init__(runner, host, port)
        self._head_timeout = timeout
        self._waiting: dict[int, Any] = {}  # connections with no request yet, by id of their handler

    def _protocol(self) -> asyncio.BaseProtocol:
        server = self._runner.server
        assert server is not None
        handler = server()
        self._waiting[id(handler)] = handler
        # The timer holds the handler itself, not its id: once a connection is served and gone, a new
        # handler may be allocated at the same address, and an id-keyed timer would then close it early.
        asyncio.get_running_loop().call_later(self._head_timeout, self._expire, handler)
        return handler

    def _expire(self, handler: web.RequestHandler) -> None:
        if self._waiting.get(id(handler)) is handler:
            del self._waiting[id(handler)]
            handler.force_close()

    def request_started(self, protocol: object) -> None:
        self._waiting.pop(id(protocol), None)

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with its runner
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._protocol, self._host, self._port, backlog=self._backlog)


class ConnectionReset(Exception):
    """Raised inside a handler to drop the TCP connection without answering."""


def job_summary(job: Job, history_delay: float) -> dict[str, Any]:
    """A job as the harness reports it (GET /_emulator/jobs)."""
    return {
        "job_id": job.job_id,
        "name": job.name,
        "user": job.user,
        "comment": job.req.comment,
        "partition": job.partition,
        "state": job.state,
        "job_state": job.job_state,
        "state_reason": job.reason,
        "array_job_id": job.array_job_id or None,
        "array_task_id": job.array_task_id,
        "array_pending": list(job.array_pending) if job.is_array_meta else [],
        "exit_code": job.exit.return_code if job.exit.status != "SIGNALED" else None,
        "signal": job.exit.signal,
        "in_live_queue": job.in_live_queue,
        "in_history": job.submit <= time.time() - history_delay,
        "submit_time": job.submit,
        "start_time": job.start,
        "end_time": job.end,
        "cpus": job.cpus,
        "gpus": job.gpus,
        "stdout": job.stdout_path,
        "stderr": job.stderr_path,
        "cwd": job.run_cwd,
        "pid": job.proc.pid if job.proc is not None else None,
    }


class EmulatorServer:
    """One running emulator: owns the aiohttp runner, the Slurm backend and the harness state."""

    def __init__(self, config: EmulatorConfig, *, cleanup_workdir: bool = True) -> None:
        config.validate()
        self.config = config
        self.faults = FaultInjector()
        for spec in config.faults:
            self.faults.add(spec)
        self.call_counts: collections.Counter[str] = collections.Counter()
        self.last_calls: collections.deque[dict[str, Any]] = collections.deque(maxlen=LAST_CALLS)
        self._late_tasks: set[asyncio.Task[None]] = set()
        self.answer_bytes = 0  # bytes of envelope answers sent: what clients download
        self.cluster: Cluster | None = None
        self.backend: SlurmBackend
        self.auth: TokenAuthority
        self._runner: web.AppRunner | None = None
        self._own_workdir: Path | None = None
        self._cleanup_workdir = cleanup_workdir
        self.port = 0
        self.url = ""
        self.control_token = config.control_token or secrets.token_urlsafe(32)
        self.control_token_file: Path | None = None
        self._control_routes: set[web.AbstractRoute] = set()
        self._site: FirstHeadDeadlineSite | None = None

    # ---------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Bind, start serving, and write the credentials file once the port is known."""
        cfg = self.config
        account = None
        if cfg.credentials_file:
            account = ServiceAccount.load_or_create(Path(cfg.credentials_file), cfg.project)
        self.auth = TokenAuthority(
            static_tokens=cfg.tokens,
            token_file=os.fspath(cfg.token_file) if cfg.token_file else None,
            lifetime=cfg.token_lifetime,
            account=account,
        )
        if cfg.gateway:
            assert cfg.slurmrestd and cfg.slurm_token_file
            self.backend = GatewayBackend(
                cfg.slurmrestd, os.fspath(cfg.slurm_token_file), cfg.slurm_user, meta_user=cfg.meta_user
            )
        else:
            if cfg.workdir:
                workdir = Path(cfg.workdir)
                workdir.mkdir(parents=True, exist_ok=True)
            else:
                workdir = self._own_workdir = Path(tempfile.mkdtemp(prefix="slurmapi-emulator-"))
            self.cluster = Cluster(
                workdir=workdir.resolve(),
                partitions=cfg.partitions,
                cpus=cfg.cpus,
                gpus=cfg.gpus,
                min_job_age=cfg.min_job_age,
                history_delay=cfg.history_delay,
                minute_seconds=cfg.minute_seconds,
                kill_wait=cfg.kill_wait,
                history_comments=cfg.history_comments,
            )
            self.cluster.user = cfg.owner_name(self.cluster.user)
            meta_user = cfg.meta_user(self.cluster.user, "root")
            self.backend = SlurmModelApi(
                self.cluster, slurm_release=cfg.slurm_release, versions=cfg.served_versions, meta_user=meta_user
            )
        app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[self._guard])
        app.router.add_post(_ENVELOPE_ROUTE, self.handle_envelope)
        app.router.add_post("/token", self.handle_token)
        control = (
            app.router.add_get(f"{CONTROL_PREFIX}/jobs", self.handle_jobs),
            app.router.add_get(f"{CONTROL_PREFIX}/calls", self.handle_calls),
            app.router.add_post(f"{CONTROL_PREFIX}/calls/reset", self.handle_calls_reset),
            app.router.add_post(f"{CONTROL_PREFIX}/foreign-jobs", self.handle_foreign_jobs),
            app.router.add_get(f"{CONTROL_PREFIX}/faults", self.handle_faults_get),
            app.router.add_post(f"{CONTROL_PREFIX}/faults", self.handle_faults_post),
            app.router.add_delete(f"{CONTROL_PREFIX}/faults", self.handle_faults_delete),
            app.router.add_get(f"{CONTROL_PREFIX}/health", self.handle_health),
        )
        self._control_routes = set(control)
        # keepalive_timeout bounds the wait for the next request head after an answer: a client
        # trickling header bytes on a kept-alive connection is cut off too (aiohttp closes a
        # connection still waiting for its request when it expires).
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, keepalive_timeout=cfg.idle_timeout, lingering_time=1.0
        )
        await self._runner.setup()
        site = self._site = FirstHeadDeadlineSite(self._runner, cfg.host, cfg.port, cfg.header_timeout)
        await site.start()
        addresses = self._runner.addresses
        self.port = int(addresses[0][1])
        url_host = "127.0.0.1" if cfg.host in WILDCARD_HOSTS else cfg.host
        self.url = f"http://{f'[{url_host}]' if ':' in url_host else url_host}:{self.port}"
        if account is not None and cfg.credentials_file:
            account.write(Path(cfg.credentials_file), cfg.project, f"{self.url}/token")
        token_file = cfg.control_token_file or (
            f"{os.fspath(cfg.credentials_file)}.control-token" if cfg.credentials_file else None
        )
        if token_file:
            self.control_token_file = Path(token_file)
            write_private_file(self.control_token_file, self.control_token + "\n")
        if not self.auth.configured:
            log.warning("no --token, --token-file or --write-credentials: every envelope call will get 401")

    async def stop(self) -> None:
        """Stop serving, kill every job process, release the work dir we created."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.cluster is not None:
            await self.cluster.shutdown()
        await self.backend.close()
        if self._own_workdir is not None and self._cleanup_workdir:
            shutil.rmtree(self._own_workdir, ignore_errors=True)

    # ---------------------------------------------------------------- guard
    def _host_allowed(self, request: web.Request) -> bool:
        """Only this server's own loopback name and port (or a configured name): no DNS rebinding."""
        values = request.headers.getall("Host", [])
        if len(values) != 1:
            return False
        parsed = split_host_header(values[0])
        if parsed is None or parsed[1] != self.port:
            return False
        name = parsed[0]
        extra = {h.lower() for h in self.config.allowed_hosts}
        if self.config.host not in WILDCARD_HOSTS:
            extra.add(self.config.host.lower())
            extra.add(f"[{self.config.host.lower()}]")
        return is_loopback(name) or name in extra

    def _is_control(self, request: web.Request) -> bool:
        return request.match_info.route in self._control_routes or request.path.startswith(CONTROL_PREFIX)

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Host check, control token, bounded body read: before any handler sees the request."""
        if self._site is not None:
            self._site.request_started(request.protocol)
        if not self._host_allowed(request):
            log.warning("refused a request for Host %r (not this server on loopback)", request.headers.get("Host"))
            return web.json_response(
                {
                    "error": "misdirected request: the Host header must be localhost or a loopback address "
                    f"with port {self.port} (this emulator runs scripts; it only answers requests meant for it)"
                },
                status=421,
            )
        if self._is_control(request):
            given = request.headers.get(CONTROL_HEADER, "")
            if not secrets.compare_digest(given.encode("utf-8", "replace"), self.control_token.encode()):
                where = f" (it is in {self.control_token_file})" if self.control_token_file else ""
                log.warning("refused %s %s: no valid %s", request.method, request.path, CONTROL_HEADER)
                return web.json_response(
                    {"error": f"the {CONTROL_PREFIX}/ control paths need the {CONTROL_HEADER} header{where}"},
                    status=401,
                )
        try:
            async with asyncio.timeout(self.config.body_timeout):
                await request.read()  # cached: handlers read it again for free
        except TimeoutError:
            log.warning(
                "request body of %s %s not received within %ss", request.method, request.path, self.config.body_timeout
            )
            response = web.json_response(
                {"error": f"request body not received within {self.config.body_timeout} s"}, status=408
            )
            response.force_close()
            await response.prepare(request)
            await response.write_eof()
            request.protocol.force_close()  # the answer is out (close flushes it): read no more of this body
            return response
        return await handler(request)

    # ---------------------------------------------------------------- envelope
    async def handle_envelope(self, request: web.Request) -> web.StreamResponse:
        """POST ...:callSlurmRestApi — auth, validation, faults, then the Slurm call."""
        started = time.perf_counter()
        record: dict[str, Any] = {
            "method": None,
            "path": None,
            "kind": None,
            "http_status": None,
            "slurm_status": None,
            "fault": None,
        }
        self.call_counts["total"] += 1
        if self.config.latency:
            await asyncio.sleep(self.config.latency)
        try:
            response = await self._envelope(request, record)
        except GoogleFrontEndError as exc:
            response = google_error(exc.code, exc.status, exc.message)
        except ConnectionReset:
            record["http_status"] = "reset"
            self._log(record, started)
            self.last_calls.append(record)
            _reset_connection(request)
            return web.Response(status=499)  # never sent: the transport is gone
        record["http_status"] = response.status
        body = getattr(response, "body", None)
        record["bytes"] = len(body) if isinstance(body, bytes | bytearray) else 0
        self.answer_bytes += record["bytes"]
        self._log(record, started)
        self.last_calls.append(record)
        return response

    async def _envelope(self, request: web.Request, record: dict[str, Any]) -> web.StreamResponse:
        cfg = self.config
        cluster, _, verb = request.match_info["cluster_call"].partition(":")
        if verb != "callSlurmRestApi":
            raise GoogleFrontEndError(404, "NOT_FOUND", f"The requested URL {request.path} was not found.")
        auth = request.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not self.auth.check(token.strip()):
            raise unauthenticated()
        project, region = request.match_info["project"], request.match_info["region"]
        resource = check_resource(project, region, cluster)
        raw = await request.read()
        call = parse_request(raw, reject_query_strings=cfg.reject_query_strings)
        record.update(method=call.method, path=call.path, kind=call.kind)
        self.call_counts[call.kind] += 1
        if cfg.deny_permission:
            raise GoogleFrontEndError(
                403,
                "PERMISSION_DENIED",
                f"Permission '{RUN_PERMISSION}' denied on resource "
                f"'//aiplatform.googleapis.com/{resource}' (or it may not exist).",
            )
        try:
            check_served(project, region, cluster, cfg.regions, cfg.clusters)
        except GoogleFrontEndError:
            served = f"clusters {', '.join(cfg.clusters)}" if cfg.clusters else "any cluster id"
            log.warning(
                "%s is not served here (regions: --region, default Google Cloud's; %s: --cluster)", resource, served
            )
            raise
        fault = self.faults.take(call.kind)
        if fault is not None and fault.kind == "done-later":
            record["fault"] = fault.spec
            self._carry_out_later(call, fault, record)
            return self._fault_error("unavailable")
        if fault is not None:
            record["fault"] = fault.spec
            if not fault.action_done:
                return self._fault_before(fault)
        if fault is not None and fault.kind == "late":  # carried out late, then the connection drops unanswered
            await asyncio.shield(self._carry_out_later(call, fault, record))
            raise ConnectionReset()
        answer = await self._call_slurm(call)
        record["slurm_status"] = answer.status
        if fault is not None:
            return await self._fault_after(fault, answer)
        return web.Response(text=encode_answer(answer, cfg.envelope), content_type="application/json")

    def _carry_out_later(self, call: SlurmCall, fault: Fault, record: dict[str, Any]) -> asyncio.Task[None]:
        """The ``done-later`` and ``late`` faults: do the call ``fault.delay`` seconds from now, whether the
        caller still waits or not (``done-later`` has answered it already, ``late`` drops it after)."""

        async def later() -> None:
            await asyncio.sleep(fault.delay)
            answer = await self._call_slurm(call)
            record["slurm_status"] = answer.status
            log.info(
                "%s fault: %s %s carried out %.1fs after it arrived", fault.kind, call.method, call.path, fault.delay
            )

        task = asyncio.get_running_loop().create_task(later())
        self._late_tasks.add(task)
        task.add_done_callback(self._late_tasks.discard)
        return task

    async def _call_slurm(self, call: SlurmCall) -> BackendAnswer:
        try:
            return await self.backend.call(call.method, call.path, call.body)
        except SlurmrestdUnreachable as exc:
            log.warning("slurmrestd unreachable: %s", exc)
            raise GoogleFrontEndError(503, "UNAVAILABLE", "The service is currently unavailable.") from exc

    def _fault_before(self, fault: Fault) -> web.StreamResponse:
        if fault.kind == "expire-token":
            self.auth.expire_all()
            raise unauthenticated()
        if fault.kind == "reset-before":
            raise ConnectionReset()
        return self._fault_error(fault.kind)

    async def _fault_after(self, fault: Fault, answer: BackendAnswer) -> web.StreamResponse:
        if fault.kind == "reset-after":
            raise ConnectionReset()
        if fault.kind == "slow":
            await asyncio.sleep(fault.delay)
            return web.Response(text=encode_answer(answer, self.config.envelope), content_type="application/json")
        if fault.kind == "malformed-envelope":
            return web.json_response({"kind": "unexpected", "detail": "this is not a callSlurmRestApi response"})
        if fault.kind == "non-json-body":
            return web.json_response(
                {
                    "status": 200,
                    "body": "<html><body>upstream connect error or disconnect/reset before headers</body></html>",
                }
            )
        return self._fault_error(fault.kind)

    @staticmethod
    def _fault_error(kind: str) -> web.StreamResponse:
        if kind == "429":
            return google_error(
                429,
                "RESOURCE_EXHAUSTED",
                "Quota exceeded for quota metric 'Slurm REST API requests' of service 'aiplatform.googleapis.com'.",
            )
        if kind.startswith("500"):
            return google_error(500, "INTERNAL", "Internal error encountered.")
        if kind.startswith("502"):
            return web.Response(status=502, text=_BAD_GATEWAY_HTML, content_type="text/html")
        return google_error(503, "UNAVAILABLE", "The service is currently unavailable.")

    def _log(self, record: dict[str, Any], started: float) -> None:
        log.info(
            "%s %s -> %s%s%s (%.1f ms)",
            record["method"] or "-",
            record["path"] or "-",
            record["http_status"],
            f" slurm {record['slurm_status']}" if record["slurm_status"] is not None else "",
            f" fault {record['fault']}" if record["fault"] else "",
            (time.perf_counter() - started) * 1000,
        )

    # ---------------------------------------------------------------- token
    async def handle_token(self, request: web.Request) -> web.Response:
        """The OAuth2 token endpoint google-auth's service-account credentials post to."""
        form = await request.post()
        if self.config.latency:
            await asyncio.sleep(self.config.latency)
        try:
            answer = self.auth.issue({k: str(v) for k, v in form.items()})
        except TokenError as exc:
            log.info("token request refused: %s", exc.description)
            return web.json_response({"error": exc.error, "error_description": exc.description}, status=400)
        log.info("access token issued (lifetime %ss)", answer["expires_in"])
        return web.json_response(answer)

    # ---------------------------------------------------------------- harness
    def jobs_snapshot(self) -> list[dict[str, Any]]:
        """Every job ever submitted (in gateway mode: those whose submit went through)."""
        if self.cluster is not None:
            return [job_summary(job, self.config.history_delay) for job in self.cluster.jobs.values()]
        if isinstance(self.backend, GatewayBackend):
            return [dict(item) for item in self.backend.submitted]
        return []

    def calls_snapshot(self) -> dict[str, Any]:
        return {
            "total": self.call_counts["total"],
            "by_kind": dict(self.call_counts),
            "answer_bytes": self.answer_bytes,
            "last": list(self.last_calls),
        }

    def reset_calls(self) -> None:
        self.answer_bytes = 0
        self.call_counts.clear()
        self.last_calls.clear()

    async def handle_jobs(self, request: web.Request) -> web.Response:
        return web.json_response({"jobs": self.jobs_snapshot()})

    async def handle_calls(self, request: web.Request) -> web.Response:
        return web.json_response(self.calls_snapshot())

    async def handle_calls_reset(self, request: web.Request) -> web.Response:
        self.reset_calls()
        return web.json_response({"ok": True})

    def add_foreign_jobs(
        self, count: int, user: str, *, name: str = "", comment: str = "", state: str = "PENDING"
    ) -> list[int]:
        """Held jobs of another cluster user (``state`` COMPLETED: finished, as if they had run).

        They stand for the rest of a shared cluster: a busy queue, or a user who copies comments.
        Raises ValueError on a bad request (unknown user, count, state) or in gateway mode.
        """
        if self.cluster is None:
            raise ValueError("foreign jobs exist only in model mode, not in gateway mode")
        try:
            owner = pwd.getpwnam(user)
        except KeyError:
            raise ValueError(f"user={user!r} is not an account of this machine (e.g. 'nobody')") from None
        if not 0 < count <= 100_000 or state not in ("PENDING", "COMPLETED"):
            raise ValueError(f"count={count} must be 1..100000 and state={state!r} PENDING or COMPLETED")
        ids = []
        for _ in range(count):
            req = JobRequest(
                script="#!/bin/bash\ntrue\n",
                name=name or "foreign",
                comment=comment,
                cwd=str(self.cluster.workdir),
                environment=["PATH=/bin"],
                hold=True,
            )
            job = self.cluster.create_job(req, self.cluster.partitions[0])
            job.user, job.uid, job.gid = owner.pw_name, owner.pw_uid, owner.pw_gid
            if state == "COMPLETED":
                self.cluster.pending.pop(job.job_id, None)
                job.state, job.reason = "COMPLETED", "None"
                job.start = job.end = time.time()
            job.touch()
            ids.append(job.job_id)
        return ids

    async def handle_foreign_jobs(self, request: web.Request) -> web.Response:
        """``POST /_emulator/foreign-jobs {"count", "user", "name"?, "comment"?, "state"?}``: see add_foreign_jobs."""
        try:
            data = await request.json()
            if not isinstance(data, dict):
                raise ValueError("expected a JSON object")
            ids = self.add_foreign_jobs(
                int(data.get("count", 1)),
                str(data["user"]),
                name=str(data.get("name") or ""),
                comment=str(data.get("comment") or ""),
                state=str(data.get("state") or "PENDING"),
            )
        except (ValueError, KeyError, TypeError) as exc:
            return web.json_response({"error": f"bad foreign-jobs request: {exc}"}, status=400)
        return web.json_response({"job_ids": ids})

    async def handle_faults_get(self, request: web.Request) -> web.Response:
        return web.json_response({"faults": self.faults.as_list()})

    async def handle_faults_post(self, request: web.Request) -> web.Response:
        try:
            data = await request.json()
            spec = data["spec"] if isinstance(data, dict) else None
            if not isinstance(spec, str):
                raise FaultSpecError('expected {"spec": "KIND[@MATCH][*COUNT]"}')
            self.faults.add(spec)
        except (ValueError, KeyError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"faults": self.faults.as_list()})

    async def handle_faults_delete(self, request: web.Request) -> web.Response:
        self.faults.clear()
        return web.json_response({"faults": []})

    async def handle_health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "mode": "gateway" if self.config.gateway else "model"})


def _reset_connection(request: web.Request) -> None:
    """Close the client's TCP connection with a RST and no HTTP answer."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
