"""The emulator runs the scripts it is sent: it must be safe to leave running on a developer's machine.

Every test talks to a running emulator over real HTTP (raw sockets where a normal client would not
send such a request: a forged Host, a trickled header, a body that never comes).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
from slurmapi_emulator import EmulatorConfig, EmulatorHandle, run_emulator

from .conftest import TOKEN, Client, V
from .test_gateway import FakeSlurmrestd

CONTROL_HEADER = "X-Emulator-Control-Token"
CONTROL_CALLS = [
    ("GET", "/_emulator/jobs", None),
    ("GET", "/_emulator/calls", None),
    ("POST", "/_emulator/calls/reset", None),
    ("GET", "/_emulator/faults", None),
    ("POST", "/_emulator/faults", {"spec": "500-before@submit*inf"}),
    ("DELETE", "/_emulator/faults", None),
    ("GET", "/_emulator/health", None),
]


def raw_request(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send bytes as they are on a fresh connection; return everything the server sends back."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def http(method: str, path: str, host: str, headers: dict[str, str] | None = None, body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Connection: close", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


# ---------------------------------------------------------------- control token
@pytest.mark.parametrize(("method", "path", "body"), CONTROL_CALLS)
def test_control_paths_need_the_control_token(
    emu: EmulatorHandle, method: str, path: str, body: dict[str, str] | None
) -> None:
    url = emu.url + path
    for headers in ({}, {CONTROL_HEADER: "guessed-" + "x" * 40}, {CONTROL_HEADER: ""}, {CONTROL_HEADER: "é"}):
        resp = requests.request(method, url, json=body, headers=headers, timeout=10)
        assert resp.status_code == 401, (headers, resp.text)
        assert CONTROL_HEADER in resp.json()["error"]
    assert emu.faults() == []  # a refused POST armed nothing
    resp = requests.request(method, url, json=body, headers=emu.control_headers(), timeout=10)
    assert resp.status_code == 200, resp.text


def test_control_path_refusal_does_not_depend_on_path_spelling(emu: EmulatorHandle) -> None:
    for path in ("/_emulator/faults/", "/%5Femulator/faults", "/_emulator/Faults", "/_emulator/faults/../faults"):
        answer = raw_request(emu.port, http("POST", path, f"127.0.0.1:{emu.port}", body=b'{"spec": "429*inf"}'))
        assert status_of(answer) in (401, 404), (path, answer[:200])
    assert emu.faults() == []


def test_cli_writes_the_control_token_privately_beside_the_key(tmp_path: Path) -> None:
    creds = tmp_path / "sa.json"
    with cli_emulator("--write-credentials", str(creds)) as url:
        token_file = tmp_path / "sa.json.control-token"
        assert token_file.stat().st_mode & 0o777 == 0o600
        assert creds.stat().st_mode & 0o777 == 0o600
        assert requests.get(f"{url}/_emulator/health", timeout=10).status_code == 401
        headers = {CONTROL_HEADER: token_file.read_text().strip()}
        assert requests.get(f"{url}/_emulator/health", headers=headers, timeout=10).json()["ok"] is True
    with cli_emulator("--write-credentials", str(creds)) as url:  # a new token per start
        assert requests.get(f"{url}/_emulator/health", headers=headers, timeout=10).status_code == 401


# ---------------------------------------------------------------- Host header
@pytest.mark.parametrize(
    "host",
    [
        "attacker.example:{port}",  # DNS rebinding: the page's own name, resolved to 127.0.0.1
        "attacker.example",
        "127.0.0.1.attacker.example:{port}",
        "localhost.localdomain:{port}",
        "127.0.0.1:1{port}",
        "127.0.0.1",  # port 80 implied
        "[::1]x:{port}",
        "127.0.0.1:{port}@attacker.example",
        "",
    ],
)
def test_requests_for_another_host_are_refused(emu: EmulatorHandle, host: str) -> None:
    host = host.format(port=emu.port)
    envelope = json.dumps({"method": "HTTP_METHOD_GET", "path": f"/slurm/{V}/jobs/"}).encode()
    api = http("POST", emu.envelope_url().removeprefix(emu.url), host, {"Authorization": f"Bearer {TOKEN}"}, envelope)
    answer = raw_request(emu.port, api)
    assert status_of(answer) == 421, answer[:300]
    assert b"Host" in answer
    control = http("POST", "/_emulator/faults", host, emu.control_headers(), b'{"spec": "429*inf"}')
    assert status_of(raw_request(emu.port, control)) == 421
    assert emu.faults() == [] and emu.calls()["total"] == 0


def test_two_host_headers_or_none_are_refused(emu: EmulatorHandle) -> None:
    path = "/_emulator/health"
    token = emu.control_headers()[CONTROL_HEADER]
    two = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{emu.port}\r\nHost: attacker.example:{emu.port}\r\n"
    two += f"{CONTROL_HEADER}: {token}\r\nConnection: close\r\n\r\n"
    assert status_of(raw_request(emu.port, two.encode())) in (400, 421)
    none = f"GET {path} HTTP/1.0\r\n{CONTROL_HEADER}: {token}\r\n\r\n"
    assert status_of(raw_request(emu.port, none.encode())) == 421


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}", "127.3.4.5:{port}"])
def test_loopback_names_with_the_right_port_are_served(emu: EmulatorHandle, host: str) -> None:
    answer = raw_request(emu.port, http("GET", "/_emulator/health", host.format(port=emu.port), emu.control_headers()))
    assert status_of(answer) == 200, answer[:300]


def test_allowed_hosts_extend_the_loopback_names(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(allowed_hosts=["devbox.internal"])
    ok = raw_request(emu.port, http("GET", "/_emulator/health", f"devbox.internal:{emu.port}", emu.control_headers()))
    assert status_of(ok) == 200
    other = raw_request(emu.port, http("GET", "/_emulator/health", f"other.internal:{emu.port}", emu.control_headers()))
    assert status_of(other) == 421


# ---------------------------------------------------------------- bind address
def test_non_loopback_bind_is_refused_without_allow_remote(tmp_path: Path) -> None:
    for host in ("0.0.0.0", "::", "192.0.2.10", "localhost.localdomain"):
        proc = subprocess.run(_cli("--host", host, "--port", "0"), capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2, proc.stderr
        assert "--allow-remote" in proc.stderr and "runs every script" in proc.stderr and host in proc.stderr
        assert proc.stdout == ""
        with pytest.raises(ValueError, match="not a loopback address"):
            EmulatorConfig(host=host).validate()
    EmulatorConfig(host="0.0.0.0", allow_remote=True).validate()
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        EmulatorConfig(host=host).validate()


def test_allow_remote_binds_and_still_checks_the_host_header() -> None:
    with run_emulator(EmulatorConfig(host="0.0.0.0", allow_remote=True, tokens=[TOKEN])) as emu:
        assert emu.url == f"http://127.0.0.1:{emu.port}"
        assert requests.get(f"{emu.url}/_emulator/health", headers=emu.control_headers(), timeout=10).ok
        answer = raw_request(emu.port, http("GET", "/_emulator/health", f"0.0.0.0:{emu.port}", emu.control_headers()))
        assert status_of(answer) == 421


# ---------------------------------------------------------------- timeouts and size
@pytest.mark.parametrize("after_a_request", [False, True], ids=["first-request", "kept-alive"])
def test_a_trickled_request_head_is_cut_off(
    make_emulator: Callable[..., EmulatorHandle], after_a_request: bool
) -> None:
    emu = make_emulator(header_timeout=1.0, idle_timeout=1.0)
    host = f"127.0.0.1:{emu.port}"
    with socket.create_connection(("127.0.0.1", emu.port), timeout=10) as sock:
        if after_a_request:  # a served request first: the timer restarts for the next head
            sock.sendall(http("GET", "/_emulator/health", host, emu.control_headers()).replace(b"close", b"keep-alive"))
            assert status_of(sock.recv(65536)) == 200
        sock.sendall(f"GET /_emulator/health HTTP/1.1\r\nHost: {host}\r\n".encode())
        closed = False
        for n in range(40):  # one header line every 0.25 s: 10 s of trickle if nobody stops it
            try:
                sock.sendall(f"X-Slow-{n}: 1\r\n".encode())
                sock.settimeout(0.25)
                closed = sock.recv(1024) == b""
            except TimeoutError:
                continue
            except OSError:
                closed = True
            if closed:
                break
        assert closed, "the server kept a connection whose head never ended"  # within the 40 lines


def test_an_idle_connection_is_closed(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(header_timeout=0.5)
    with socket.create_connection(("127.0.0.1", emu.port), timeout=8) as sock:
        assert sock.recv(1024) == b""  # closed by the server, no request ever sent


def test_a_body_that_never_arrives_gets_408(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(body_timeout=0.5)
    head = http("POST", emu.envelope_url().removeprefix(emu.url), f"127.0.0.1:{emu.port}", {})
    head = head.replace(b"Content-Length: 0", b"Content-Length: 1000")
    with socket.create_connection(("127.0.0.1", emu.port), timeout=8) as sock:
        sock.sendall(head + b'{"method": ')
        answer = sock.recv(65536)
    assert status_of(answer) == 408
    assert emu.calls()["total"] == 0


def test_a_body_far_over_the_api_limit_is_refused_unread(client: Client, emu: EmulatorHandle) -> None:
    big = b'{"method": "HTTP_METHOD_GET", "path": "/slurm/v0.0.42/ping", "x": "' + b"x" * 3_000_000 + b'"}'
    resp = client.post_raw(big)
    assert resp.status_code == 413
    token = requests.post(f"{emu.url}/token", data={"assertion": "x" * 3_000_000}, timeout=30)
    assert token.status_code == 413
    assert emu.calls()["total"] == 0


# ---------------------------------------------------------------- logs
def test_control_characters_from_requests_are_escaped_in_log_lines(
    client: Client, emu: EmulatorHandle, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    forged = "\r\n2026-01-01 00:00:00 INFO GET /slurm/v0.0.42/ping -> 200 \x1b[2J\u2028"
    client.call("GET", f"/slurm/{V}/ping{forged}")
    raw_request(emu.port, http("GET", "/_emulator/jobs%0d%0aFORGED", f"127.0.0.1:{emu.port}"))
    raw_request(emu.port, http("GET", "/_emulator/jobs", f"evil\x0b.example:{emu.port}"))
    lines = [r.getMessage() for r in caplog.records if r.name.startswith(("slurmapi_emulator", "aiohttp"))]
    assert any("ping\\r\\n2026" in line for line in lines), lines
    assert any("FORGED" in line for line in lines), lines
    for line in lines:
        assert not any(ch in line for ch in "\r\n\x1b\x0b\u2028"), repr(line)


def test_log_lines_of_the_cli_carry_no_raw_control_characters(tmp_path: Path) -> None:
    with cli_emulator("--token", TOKEN, stderr=tmp_path / "log") as url:
        envelope = {"method": "HTTP_METHOD_GET", "path": f"/slurm/{V}/ping\r\nFAKE 200 line"}
        url = f"{url}/v1beta1/projects/demo-project/locations/us-central1/modelDevelopmentClusters/c:callSlurmRestApi"
        requests.post(url, json=envelope, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    log = (tmp_path / "log").read_text()
    assert "ping\\r\\nFAKE 200 line" in log
    assert not any(line.startswith("FAKE") for line in log.splitlines())


# ---------------------------------------------------------------- key and token files
def test_a_reused_credentials_file_open_to_others_is_refused(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path
) -> None:
    path = tmp_path / "sa.json"
    make_emulator(tokens=[], credentials_file=str(path))
    for mode in (0o644, 0o640, 0o620, 0o602):
        path.chmod(mode)
        with pytest.raises(ValueError, match=f"mode {mode:04o}.*chmod 600"):
            make_emulator(tokens=[], credentials_file=str(path))
    proc = subprocess.run(
        _cli("--port", "0", "--write-credentials", str(path)), capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2 and "chmod 600" in proc.stderr and "Traceback" not in proc.stderr
    path.chmod(0o600)
    emu = make_emulator(tokens=[], credentials_file=str(path))
    assert requests.get(f"{emu.url}/_emulator/health", headers=emu.control_headers(), timeout=10).ok


def test_a_planted_credentials_file_is_refused(make_emulator: Callable[..., EmulatorHandle], tmp_path: Path) -> None:
    path = tmp_path / "sa.json"
    make_emulator(tokens=[], credentials_file=str(path))
    planted = path.read_text()  # the key another user would know
    link = tmp_path / "link.json"
    link.symlink_to(path)
    with pytest.raises(ValueError, match="symbolic link"):
        make_emulator(tokens=[], credentials_file=str(link))
    if os.geteuid() != 0:
        pytest.skip("handing a file to another user needs root")
    other = tmp_path / "other.json"
    other.write_text(planted)
    other.chmod(0o600)
    os.chown(other, 65534, 65534)
    with pytest.raises(ValueError, match="belongs to uid 65534, not to you"):
        make_emulator(tokens=[], credentials_file=str(other))


def test_a_token_file_open_to_others_is_refused(make_emulator: Callable[..., EmulatorHandle], tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("file-token\n")
    tokens.chmod(0o644)
    with pytest.raises(ValueError, match="token file"):
        make_emulator(tokens=[], token_file=str(tokens))
    tokens.chmod(0o600)
    emu = make_emulator(tokens=[], token_file=str(tokens))
    client = Client(emu, token="file-token")
    assert client.call("GET", f"/slurm/{V}/ping").http_status == 200
    tokens.chmod(0o666)  # opened up while running: its tokens stop working
    assert client.call("GET", f"/slurm/{V}/ping").http_status == 401
    tokens.chmod(0o600)
    assert client.call("GET", f"/slurm/{V}/ping").http_status == 200


# ---------------------------------------------------------------- gateway paths
@pytest.fixture
def fake() -> Iterator[FakeSlurmrestd]:
    server = FakeSlurmrestd()
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize(
    "path",
    [
        f"/slurm/{V}/../../admin/shutdown",
        f"/slurm/{V}/%2e%2e/%2E%2E/admin",
        f"/slurm/{V}/.%2e/admin",
        f"/slurm/{V}/jobs/./",
        f"/slurm/{V}/..\\..\\admin",
        f"/slurm/{V}/%5c..%5cadmin",
        f"/slurm/{V}//admin",
        f"/slurm//{V}/jobs",
        f"/slurm/{V}/job/1%2f..%2f..%2fadmin",
        f"/slurm/{V}/job/1%0d%0aX-Injected: 1",
        f"/slurm/{V}/job/1 HTTP/1.1",
        f"/slurm/{V}/jobs?x=1#frag",
        "/slurm/latest/jobs",
        "/slurmdb/../openapi",
    ],
)
def test_gateway_forwards_only_plain_slurm_paths(
    make_emulator: Callable[..., EmulatorHandle], fake: FakeSlurmrestd, tmp_path: Path, path: str
) -> None:
    (tmp_path / "jwt").write_text("jwt")
    gateway = make_emulator(slurmrestd=fake.url, slurm_token_file=str(tmp_path / "jwt"))
    answer = Client(gateway).call("GET", path)
    assert answer.http_status == 400, answer.raw_text
    assert answer.envelope["error"]["status"] == "INVALID_ARGUMENT"
    assert "Invalid path" in answer.envelope["error"]["message"]
    assert fake.requests == []
    good = Client(gateway).call("GET", f"/slurm/{V}/jobs/state/?job_id=1%2C2&job_id=3")
    assert good.slurm_status == 200 and fake.requests[-1]["path_qs"] == f"/slurm/{V}/jobs/state/?job_id=1%2C2&job_id=3"


# ---------------------------------------------------------------- helpers
def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "slurmapi_emulator", *args]


@contextlib.contextmanager
def cli_emulator(*args: str, stderr: Path | None = None) -> Iterator[str]:
    """`slurmapi-emulator --port 0 ARGS` in a subprocess; yields its URL; SIGTERM on exit."""
    with open(stderr or os.devnull, "w") as err:
        proc = subprocess.Popen(_cli("--port", "0", *args), stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:"), url
            yield url
        finally:
            proc.terminate()
            proc.wait(30)
