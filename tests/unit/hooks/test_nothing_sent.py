"""A request never sent is told apart from an answer lost, in both hooks, on real sockets.

A host under ``.invalid`` (RFC 6761: it never resolves), a closed loopback port, a local TLS server with a
self-signed certificate and a plain TCP server spoken to with https stand for a typo'd region or endpoint,
a gateway that is down and an ``http://`` endpoint written ``https://``. The token comes from the emulator;
only the envelope goes to the endpoint under test. Waits run on fake clocks: the sleeps a plan asks for
are its retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook, SlurmApiHook
from airflow_provider_slurmapi.slurm.api.errors import RequestNotSentError, WrongEndpointError, is_permanent
from airflow_provider_slurmapi.slurm.api.retry import is_transient
from tests.conftest import CLUSTER, connection_uri_env
from tests.unit.hooks.fake_clock import AsyncFakeClock, FakeClock

BUDGET = 20.0
SCRIPT = "#!/bin/bash\necho never sent\n"
# A region's host as a private endpoint would name it, under .invalid: no resolver has it.
TYPO_HOST = "us-centrl1-aiplatform.invalid"


def connect(monkeypatch: pytest.MonkeyPatch, emulator: Any, credentials_file: Path, endpoint: str) -> None:
    """The test connection (its key's token endpoint is the emulator's), with ``endpoint`` as api_endpoint."""
    uri = json.loads(connection_uri_env(emulator, credentials_file, retry_seconds=BUDGET))
    uri["extra"]["api_endpoint"] = endpoint
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", json.dumps(uri))


def job(emulator: Any) -> dict[str, Any]:
    return {"name": "never-sent", "partition": "debug", "current_working_directory": str(emulator.config.workdir)}


def submit_sync(emulator: Any, clock: FakeClock, **args: Any) -> BaseException:
    hook = SlurmApiHook(**{**CLUSTER, **args})
    hook.client.clock = clock
    with pytest.raises(RequestNotSentError) as failed:
        hook.submit_job(job(emulator), SCRIPT)
    return failed.value


def submit_async(emulator: Any, clock: AsyncFakeClock, **args: Any) -> BaseException:
    async def submit() -> BaseException:
        async with SlurmApiAsyncHook(**{**CLUSTER, **args}) as hook:
            hook.client.clock = clock
            with pytest.raises(RequestNotSentError) as failed:
                await hook.submit_job(job(emulator), SCRIPT)
            return failed.value

    return asyncio.run(submit())


def no_lost_answer(capfd: pytest.CaptureFixture[str]) -> bool:
    """No line of the submit-once plan's settle in the log so far: no look-up for a lost answer was made."""
    out = "".join(capfd.readouterr())
    return "answer to the submit was lost" not in out and "The submit's answer was lost" not in out


def test_the_invalid_name_fails_at_once_on_this_machine() -> None:
    """The premise: the resolver answers a .invalid name with 'no such name' (EAI_NONAME), not 'try again'."""
    with pytest.raises(socket.gaierror) as failed:
        socket.getaddrinfo(TYPO_HOST, 443)
    assert failed.value.errno == socket.EAI_NONAME


@pytest.mark.parametrize("api_version", ["v0.0.42", "auto"])
def test_a_host_that_does_not_resolve_fails_a_submit_at_once_naming_it_in_either_hook(
    api_version: str,
    emulator: Any,
    credentials_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    lookups: Callable[[str], int],
) -> None:
    """First contact: no retry, no look-up, one resolution; the endpoint extra named as the fix. With
    ``auto`` the first call is the version's ping, and the submit is never tried."""
    connect(monkeypatch, emulator, credentials_file, f"https://{TYPO_HOST}")
    clock, async_clock = FakeClock(), AsyncFakeClock()
    errors = [
        submit_sync(emulator, clock, api_version=api_version),
        submit_async(emulator, async_clock, api_version=api_version),
    ]
    for error in errors:
        assert isinstance(error, WrongEndpointError) and is_permanent(error) and not is_transient(error)
        assert error.host == TYPO_HOST and error.reason == "name"
        message = str(error)
        assert message.startswith(f"Nothing was sent to {TYPO_HOST}: the name does not resolve"), message
        assert "connection extra api_endpoint" in message and "not an outage" in message
    assert clock.sleeps == [] and async_clock.sleeps == []
    assert lookups(TYPO_HOST) == 2  # one attempt per hook
    assert no_lost_answer(capfd)
    assert emulator.calls()["by_kind"].get("submit", 0) == 0


def test_a_typo_in_the_region_names_the_region_and_its_host(
    emulator: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch, lookups: Callable[[str], int]
) -> None:
    """No api_endpoint: the host is built from the region, and the message says to check the region."""
    host = "us-centrl1-aiplatform.googleapis.com"
    try:
        socket.getaddrinfo(host, 443)
    except socket.gaierror as exc:
        if exc.errno != socket.EAI_NONAME:
            pytest.skip(f"this machine's resolver cannot say that {host} does not exist ({exc})")
    else:
        pytest.skip(f"this machine resolves {host}: nothing is sent to it from a test")
    uri = json.loads(connection_uri_env(emulator, credentials_file, retry_seconds=BUDGET))
    del uri["extra"]["api_endpoint"]
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", json.dumps(uri))
    args = {"region": "us-centrl1", "api_version": "v0.0.42"}
    clock, async_clock = FakeClock(), AsyncFakeClock()
    errors = [submit_sync(emulator, clock, **args), submit_async(emulator, async_clock, **args)]
    for error in errors:
        assert isinstance(error, WrongEndpointError), error
        message = str(error)
        assert f"Nothing was sent to {host}: the name does not resolve" in message
        assert "region='us-centrl1'" in message and "e.g. 'us-central1'" in message, message
    assert clock.sleeps == [] and async_clock.sleeps == []
    assert lookups(host) == 3  # the premise's, then one attempt per hook


class Forwarder:
    """A TCP port that refuses connections until :meth:`open` forwards it to the emulator (a gateway
    coming back). Its port is taken from a socket bound and closed: nothing listens there before."""

    def __init__(self, target_port: int) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.target_port = target_port
        self.server: socket.socket | None = None

    def open(self) -> None:
        if self.server is not None:
            return
        self.server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._serve, args=(self.server,), daemon=True).start()

    def _serve(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            # The emulator answers only requests meant for its own port: the Host header is the gateway's.
            host = (f"Host: 127.0.0.1:{self.port}\r\n".encode(), f"Host: 127.0.0.1:{self.target_port}\r\n".encode())
            for source, sink, rewrite in ((client, upstream, host), (upstream, client, (b"", b""))):
                threading.Thread(target=self._pipe, args=(source, sink, rewrite), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket, rewrite: tuple[bytes, bytes]) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data.replace(*rewrite) if rewrite[0] else data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


@pytest.fixture
def refusing(emulator: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Forwarder]:
    forwarder = Forwarder(emulator.port)
    connect(monkeypatch, emulator, credentials_file, f"http://127.0.0.1:{forwarder.port}")
    yield forwarder
    forwarder.close()


@pytest.mark.parametrize("hook_kind", ["sync", "async"])
def test_a_refused_submit_is_sent_again_without_a_look_up_once_the_port_answers(
    hook_kind: str, emulator: Any, refusing: Forwarder, capfd: pytest.CaptureFixture[str]
) -> None:
    """A refused connection is retried within the budget (it may pass), as a request never sent: once the
    endpoint answers, the submit goes out once and no job list or history is read for a lost answer."""
    emulator.reset_calls()
    if hook_kind == "sync":
        hook = SlurmApiHook(**CLUSTER, api_version="v0.0.42")
        hook.client.clock = clock = FakeClock(before_sleep=refusing.open)
        result = hook.submit_job(job(emulator), SCRIPT)
    else:

        async def submit() -> Any:
            async with SlurmApiAsyncHook(**CLUSTER, api_version="v0.0.42") as hook:
                hook.client.clock = clock
                return await hook.submit_job(job(emulator), SCRIPT)

        clock = AsyncFakeClock(before_sleep=refusing.open)
        result = asyncio.run(submit())
    assert len(clock.sleeps) == 1, "the refused submit was not retried (or retried more than once)"
    assert not result.resent
    calls = emulator.calls()["by_kind"]
    assert calls.get("submit") == 1 and [job["job_id"] for job in emulator.jobs()] == [result.job_id]
    out = "".join(capfd.readouterr())
    assert "answer to the submit was lost" not in out
    # The look-ups of a lost answer read the history (slurmdb) and the live list (jobs); the one job-get
    # reads the job just submitted, to learn the caller's account.
    assert not {kind: n for kind, n in calls.items() if kind in ("slurmdb", "jobs")}, calls
    retried = [line for line in out.splitlines() if "Slurm Job API call failed" in line]
    assert len(retried) == 1 and f"Nothing was sent to 127.0.0.1:{refusing.port}" in retried[0], retried


def test_a_port_that_keeps_refusing_ends_after_one_budget_naming_the_host_in_either_hook(
    emulator: Any, refusing: Forwarder, capfd: pytest.CaptureFixture[str]
) -> None:
    """Not a wrong endpoint (a gateway may be restarting): retried for one budget, then the host named,
    never a 'lost answer'; transient, so a watch rides it out."""
    clock, async_clock = FakeClock(), AsyncFakeClock()
    errors = [
        submit_sync(emulator, clock, api_version="v0.0.42"),
        submit_async(emulator, async_clock, api_version="v0.0.42"),
    ]
    where = f"127.0.0.1:{refusing.port}"
    for error, sleeps in zip(errors, (clock.sleeps, async_clock.sleeps), strict=True):
        assert type(error) is RequestNotSentError and is_transient(error) and not is_permanent(error)
        assert error.host == where and error.reason == "refused"
        assert str(error).startswith(f"Nothing was sent to {where}: the connection was refused"), error
        assert "Nothing listens on" in str(error) and "api_endpoint" in str(error)
        assert sum(sleeps[:-1]) < BUDGET <= sum(sleeps), sleeps
    assert no_lost_answer(capfd)


def self_signed_context(tmp_path: Path) -> ssl.SSLContext:
    """A server context with a fresh self-signed certificate for localhost (no CA trusts it)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    return context


class Listener:
    """A local TCP server that records what each connection sent (a TLS one, or plain TCP)."""

    def __init__(self, context: ssl.SSLContext | None) -> None:
        self.context, self.received, self.handshakes = context, [], 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            with client:
                client.settimeout(5)
                try:
                    if self.context is None:
                        self.received.append(client.recv(65536))
                        client.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                        continue
                    with self.context.wrap_socket(client, server_side=True) as tls:
                        self.handshakes += 1
                        self.received.append(tls.recv(65536))
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()


@pytest.mark.parametrize("server", ["self-signed", "plain-tcp"])
def test_a_tls_failure_before_the_request_is_written_fails_at_once_naming_the_host_in_either_hook(
    server: str,
    emulator: Any,
    credentials_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A certificate this machine does not trust, or https to a server without TLS: the handshake fails, no
    byte of the request reaches the server, and the task is told to check the endpoint's scheme or CA."""
    listener = Listener(self_signed_context(tmp_path) if server == "self-signed" else None)
    host = "localhost" if server == "self-signed" else "127.0.0.1"
    connect(monkeypatch, emulator, credentials_file, f"https://{host}:{listener.port}")
    try:
        clock, async_clock = FakeClock(), AsyncFakeClock()
        errors = [
            submit_sync(emulator, clock, api_version="v0.0.42"),
            submit_async(emulator, async_clock, api_version="v0.0.42"),
        ]
    finally:
        listener.close()
    for error in errors:
        assert isinstance(error, WrongEndpointError) and error.reason == "tls", error
        message = str(error)
        assert message.startswith(f"Nothing was sent to {host}:{listener.port}: the TLS handshake failed"), message
        assert "http:// for a server without TLS" in message
        if server == "self-signed":
            assert "certificate" in message
    assert clock.sleeps == [] and async_clock.sleeps == []
    assert listener.handshakes == 0
    assert not [data for data in listener.received if b"callSlurmRestApi" in data], "the request was written"
    if server == "plain-tcp":  # what reached it: the two TLS hellos, nothing else
        assert len(listener.received) == 2 and all(data[:1] == b"\x16" for data in listener.received)
    assert no_lost_answer(capfd)


def test_a_connection_lost_after_the_request_was_written_is_still_a_lost_answer(
    emulator: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The other side of the line: a connection reset after the submit was sent is a possibly lost answer
    (looked for by its marker), never 'nothing was sent'."""
    connect(monkeypatch, emulator, credentials_file, emulator.url)
    emulator.add_fault("reset-after@submit")
    hook = SlurmApiHook(**CLUSTER, api_version="v0.0.42")
    hook.client.clock = FakeClock()
    result = hook.submit_job(job(emulator), SCRIPT)
    assert emulator.faults() == [], "the fault never hit: nothing tested"
    assert not no_lost_answer(capfd)
    assert not result.resent and [j["job_id"] for j in emulator.jobs()] == [result.job_id]


def test_the_sync_transport_sees_a_real_urllib3_error_for_each_case() -> None:
    """The classification reads the errors requests and aiohttp really raise (no stand-ins): a refused
    port's and an invalid name's, through the libraries, mapped to the socket's own error."""
    from airflow_provider_slurmapi.hooks.slurm import unsent_by_aiohttp, unsent_by_requests

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{closed.getsockname()[1]}/"
    import aiohttp
    import requests

    for url, expected in ((refused, ConnectionRefusedError), (f"https://{TYPO_HOST}/", socket.gaierror)):
        with pytest.raises(requests.ConnectionError) as failed:
            requests.post(url, data=b"{}", timeout=5)
        assert isinstance(unsent_by_requests(failed.value), expected)

        async def post(url: str = url) -> BaseException:
            async with aiohttp.ClientSession() as session:
                with pytest.raises(aiohttp.ClientError) as failed_async:
                    await session.post(url, data=b"{}")
                return failed_async.value

        assert isinstance(unsent_by_aiohttp(asyncio.run(post())), expected)
    assert unsent_by_requests(requests.ReadTimeout("read timed out")) is None
    assert unsent_by_aiohttp(aiohttp.ServerDisconnectedError()) is None
