"""The HTTP server: envelope endpoint, OAuth2 token endpoint and the test-harness control endpoints.

It ties together auth, fault injection and a Slurm backend (the local model or a real slurmrestd).
The control endpoints under /_emulator/ need no token: they are a harness on the loopback
interface, not part of the emulated API.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import pwd
import shutil
import socket
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from .auth import ServiceAccount, TokenAuthority, TokenError
from .config import EmulatorConfig
from .envelope import (
    RUN_PERMISSION,
    EnvelopeError,
    SlurmCall,
    encode_answer,
    google_error,
    parse_request,
    unauthenticated,
)
from .faults import Fault, FaultInjector, FaultSpecError
from .gateway import GatewayBackend, SlurmrestdUnreachable
from .jobdesc import JobRequest
from .model import Cluster, Job
from .slurm_api import SlurmBackend, SlurmModelApi, SlurmResponse

log = logging.getLogger("slurmapi_emulator")

LAST_CALLS = 200
_ENVELOPE_ROUTE = "/v1beta1/projects/{project}/locations/{region}/modelDevelopmentClusters/{cluster_call}"
_BAD_GATEWAY_HTML = (
    "<!DOCTYPE html>\n<html lang=en><meta charset=utf-8><title>Error 502 (Server Error)!!1</title>"
    "<p><b>502.</b> <ins>That's an error.</ins><p>The server encountered a temporary error and could not "
    "complete your request.<p>Please try again in 30 seconds. <ins>That's all we know.</ins></html>\n"
)


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
            self.backend = GatewayBackend(cfg.slurmrestd, os.fspath(cfg.slurm_token_file), cfg.slurm_user)
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
            )
            self.backend = SlurmModelApi(self.cluster)
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_post(_ENVELOPE_ROUTE, self.handle_envelope)
        app.router.add_post("/token", self.handle_token)
        app.router.add_get("/_emulator/jobs", self.handle_jobs)
        app.router.add_get("/_emulator/calls", self.handle_calls)
        app.router.add_post("/_emulator/calls/reset", self.handle_calls_reset)
        app.router.add_post("/_emulator/foreign-jobs", self.handle_foreign_jobs)
        app.router.add_get("/_emulator/faults", self.handle_faults_get)
        app.router.add_post("/_emulator/faults", self.handle_faults_post)
        app.router.add_delete("/_emulator/faults", self.handle_faults_delete)
        app.router.add_get("/_emulator/health", self.handle_health)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, cfg.host, cfg.port)
        await site.start()
        addresses = self._runner.addresses
        self.port = int(addresses[0][1])
        self.url = f"http://{cfg.host}:{self.port}"
        if account is not None and cfg.credentials_file:
            account.write(Path(cfg.credentials_file), cfg.project, f"{self.url}/token")
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
        try:
            response = await self._envelope(request, record)
        except EnvelopeError as exc:
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
            raise EnvelopeError(404, "NOT_FOUND", f"The requested URL {request.path} was not found.")
        auth = request.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not self.auth.check(token.strip()):
            raise unauthenticated()
        raw = await request.read()
        call = parse_request(raw, reject_query_strings=cfg.reject_query_strings)
        record.update(method=call.method, path=call.path, kind=call.kind)
        self.call_counts[call.kind] += 1
        resource = (
            f"projects/{request.match_info['project']}/locations/{request.match_info['region']}"
            f"/modelDevelopmentClusters/{cluster}"
        )
        if cfg.deny_permission:
            raise EnvelopeError(
                403,
                "PERMISSION_DENIED",
                f"Permission '{RUN_PERMISSION}' denied on resource "
                f"'//aiplatform.googleapis.com/{resource}' (or it may not exist).",
            )
        if cfg.clusters and cluster not in cfg.clusters:
            raise EnvelopeError(404, "NOT_FOUND", f"ModelDevelopmentCluster `{resource}` not found.")
        fault = self.faults.take(call.kind)
        if fault is not None:
            record["fault"] = fault.spec
            if not fault.action_done:
                return self._fault_before(fault)
        if fault is not None and fault.kind == "late":
            await self._carry_out_late(call, fault.delay, record)
        answer = await self._call_slurm(call)
        record["slurm_status"] = answer.status
        if fault is not None:
            return await self._fault_after(fault, answer)
        return web.Response(text=encode_answer(answer, cfg.envelope), content_type="application/json")

    async def _carry_out_late(self, call: SlurmCall, delay: float, record: dict[str, Any]) -> None:
        """The ``late`` fault: do the call ``delay`` seconds from now, whether the client still waits or not,
        then drop the connection without an answer."""

        async def later() -> None:
            await asyncio.sleep(delay)
            answer = await self._call_slurm(call)
            record["slurm_status"] = answer.status
            log.info("late fault: %s %s carried out %.1fs after it arrived", call.method, call.path, delay)

        task = asyncio.get_running_loop().create_task(later())
        self._late_tasks.add(task)
        task.add_done_callback(self._late_tasks.discard)
        await asyncio.shield(task)
        raise ConnectionReset()

    async def _call_slurm(self, call: SlurmCall) -> SlurmResponse:
        try:
            return await self.backend.call(call.method, call.path, call.body)
        except SlurmrestdUnreachable as exc:
            log.warning("slurmrestd unreachable: %s", exc)
            raise EnvelopeError(503, "UNAVAILABLE", "The service is currently unavailable.") from exc

    def _fault_before(self, fault: Fault) -> web.StreamResponse:
        if fault.kind == "expire-token":
            self.auth.expire_all()
            raise unauthenticated()
        if fault.kind == "reset-before":
            raise ConnectionReset()
        return self._fault_error(fault.kind)

    async def _fault_after(self, fault: Fault, answer: SlurmResponse) -> web.StreamResponse:
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

    async def handle_foreign_jobs(self, request: web.Request) -> web.Response:
        """Held jobs of another cluster user: ``{"count", "user", "name"?, "comment"?, "state"?}``.

        They stand for the rest of a shared cluster (a busy queue, or a user who copies comments).
        ``state`` "COMPLETED" makes them finished jobs, as if they had run.
        """
        if self.cluster is None:
            return web.json_response({"error": "foreign jobs exist only in model mode"}, status=400)
        try:
            data = await request.json()
            count, user = int(data.get("count", 1)), str(data["user"])
            owner = pwd.getpwnam(user)
            state = str(data.get("state") or "PENDING")
            if not 0 < count <= 100_000 or state not in ("PENDING", "COMPLETED"):
                raise ValueError(f"count={count} must be 1..100000 and state={state!r} PENDING or COMPLETED")
        except (ValueError, KeyError, TypeError) as exc:
            return web.json_response({"error": f"bad foreign-jobs request: {exc}"}, status=400)
        ids = []
        for _ in range(count):
            req = JobRequest(
                script="#!/bin/bash\ntrue\n",
                name=str(data.get("name") or "foreign"),
                comment=str(data.get("comment") or ""),
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
