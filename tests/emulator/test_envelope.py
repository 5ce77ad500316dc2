"""The envelope: both answer shapes, every envelope error, the harness endpoints and the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
from slurmapi_emulator import EmulatorConfig, EmulatorHandle, run_emulator

from .conftest import TOKEN, Client, V, wait_until

PING = {"method": "HTTP_METHOD_GET", "path": f"/slurm/{V}/ping"}


def test_body_mode_wraps_slurm_json_as_a_string(client: Client) -> None:
    answer = client.call("GET", f"/slurm/{V}/ping")
    assert answer.http_status == 200
    assert set(answer.envelope) == {"status", "body"}
    assert isinstance(answer.envelope["body"], str)
    assert answer.slurm_status == 200
    assert answer.body["pings"][0]["pinged"] == "UP"


def test_structured_mode_wraps_slurm_json_as_an_object(make_emulator: Callable[..., EmulatorHandle]) -> None:
    client = Client(make_emulator(envelope="structured"))
    answer = client.call("GET", f"/slurm/{V}/ping")
    assert set(answer.envelope) == {"status", "structuredBody"}
    assert answer.envelope["structuredBody"]["pings"][0]["responding"] is True
    # a plain-text Slurm answer stays a "body" string in structured mode too
    answer = client.call("GET", "/slurm/v0.0.39/ping")
    assert answer.envelope == {
        "status": 404,
        "body": "Unable find requested URL. Please view /openapi/v3 for API reference.",
    }
    answer = client.call("GET", f"/slurm/{V}/jobs/?flags=DETAIL,ALL")
    assert answer.envelope == {"status": 400, "body": "Unable to parse query."}


def test_plain_text_slurm_answers_in_body_mode(client: Client) -> None:
    answer = client.call("GET", "/slurm/v0.0.39/ping")
    assert (answer.slurm_status, answer.body) == (
        404,
        "Unable find requested URL. Please view /openapi/v3 for API reference.",
    )
    answer = client.call("GET", f"/slurm/{V}/no/such/path")
    assert answer.slurm_status == 404


def _error(resp: requests.Response) -> dict[str, object]:
    body = resp.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "status"}
    assert body["error"]["code"] == resp.status_code
    return body["error"]


def test_missing_bad_and_wrong_scheme_tokens_are_unauthenticated(client: Client) -> None:
    for token in ("", "not-a-token"):
        resp = (
            client.post_raw(json.dumps(PING), token=token or None)
            if token
            else requests.post(client.url, json=PING, timeout=10)
        )
        assert resp.status_code == 401
        assert _error(resp)["status"] == "UNAUTHENTICATED"
        assert "Bearer" in resp.headers["WWW-Authenticate"]
    resp = requests.post(client.url, json=PING, headers={"Authorization": f"Basic {TOKEN}"}, timeout=10)
    assert resp.status_code == 401


def test_token_file_tokens_are_accepted_and_reread(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path
) -> None:
    token_file = tmp_path / "tokens"
    token_file.write_text("# comment\nfile-token-1\n")
    token_file.chmod(0o600)
    emu = make_emulator(tokens=[], token_file=str(token_file))
    client = Client(emu, token="file-token-1")
    assert client.call("GET", f"/slurm/{V}/ping").http_status == 200
    token_file.write_text("file-token-2\n")
    os.utime(token_file, (time.time() + 5, time.time() + 5))
    assert client.call("GET", f"/slurm/{V}/ping").http_status == 401
    assert client.call("GET", f"/slurm/{V}/ping", token="file-token-2").http_status == 200


def test_permission_denied_names_the_run_permission(make_emulator: Callable[..., EmulatorHandle]) -> None:
    client = Client(make_emulator(deny_permission=True))
    resp = client.post_raw(json.dumps(PING))
    assert resp.status_code == 403
    err = _error(resp)
    assert err["status"] == "PERMISSION_DENIED"
    assert "aiplatform.googleapis.com/modelDevelopmentClusters.run" in str(err["message"])


def test_unknown_cluster_is_not_found(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(clusters=["good"])
    assert Client(emu, cluster="good").call("GET", f"/slurm/{V}/ping").http_status == 200
    resp = Client(emu, cluster="other").post_raw(json.dumps(PING))
    assert resp.status_code == 404
    assert _error(resp)["status"] == "NOT_FOUND"
    # a wrong verb after the cluster id is not the API either
    resp = Client(emu, cluster="good").post_raw(
        json.dumps(PING), url=emu.envelope_url("good").replace(":callSlurmRestApi", ":somethingElse")
    )
    assert resp.status_code == 404


def test_any_cluster_is_accepted_by_default(client: Client, emu: EmulatorHandle) -> None:
    assert Client(emu, cluster="whatever-cluster").call("GET", f"/slurm/{V}/ping").http_status == 200


@pytest.mark.parametrize(
    "payload",
    [
        json.dumps({"method": "HTTP_METHOD_PATCH", "path": f"/slurm/{V}/ping"}),
        json.dumps({"method": "GET", "path": f"/slurm/{V}/ping"}),
        json.dumps({"path": f"/slurm/{V}/ping"}),
        json.dumps({"method": "HTTP_METHOD_GET", "path": "/etc/passwd"}),
        json.dumps({"method": "HTTP_METHOD_GET", "path": f"slurm/{V}/ping"}),
        json.dumps({"method": "HTTP_METHOD_GET"}),
        json.dumps({"method": "HTTP_METHOD_GET", "path": f"/slurm/{V}/ping", "extra": 1}),
        json.dumps({"method": "HTTP_METHOD_POST", "path": f"/slurm/{V}/job/submit", "body": "{}"}),
        '{"method": "HTTP_METHOD_GET", "path": ',
        "[1, 2]",
    ],
)
def test_invalid_requests_are_invalid_argument(client: Client, payload: str) -> None:
    resp = client.post_raw(payload)
    assert resp.status_code == 400
    assert _error(resp)["status"] == "INVALID_ARGUMENT"


def test_request_of_one_megabyte_or_more_is_refused(client: Client) -> None:
    def request_of(size: int) -> bytes:
        head = json.dumps(
            {
                "method": "HTTP_METHOD_POST",
                "path": f"/slurm/{V}/job/submit",
                "body": {"job": {"name": "big"}, "script": ""},
            }
        )
        pad = size - len(head)
        return head.replace('"script": ""', '"script": "' + "x" * pad + '"').encode()

    big = request_of(1_048_576 + 12)
    assert len(big) >= 1_048_576
    resp = client.post_raw(big)
    assert resp.status_code == 400
    assert "1048576" in str(_error(resp)["message"])
    assert client.emu.jobs() == []
    small = request_of(1_048_000)
    assert len(small) < 1_048_576
    assert client.post_raw(small).status_code == 200  # reaches Slurm (which rejects the empty job)


def test_reject_query_strings(make_emulator: Callable[..., EmulatorHandle]) -> None:
    client = Client(make_emulator(reject_query_strings=True))
    assert client.call("GET", f"/slurm/{V}/jobs/").http_status == 200
    resp = client.post_raw(json.dumps({"method": "HTTP_METHOD_GET", "path": f"/slurm/{V}/jobs/state/?job_id=1"}))
    assert resp.status_code == 400
    assert _error(resp)["status"] == "INVALID_ARGUMENT"


def test_unavailable_and_resource_exhausted_errors(client: Client, emu: EmulatorHandle) -> None:
    emu.add_fault("unavailable")
    emu.add_fault("429")
    resp = client.post_raw(json.dumps(PING))
    assert (resp.status_code, _error(resp)["status"]) == (503, "UNAVAILABLE")
    resp = client.post_raw(json.dumps(PING))
    assert (resp.status_code, _error(resp)["status"]) == (429, "RESOURCE_EXHAUSTED")
    assert client.post_raw(json.dumps(PING)).status_code == 200


def test_control_endpoints_with_the_control_token(client: Client, emu: EmulatorHandle) -> None:
    client.submit_id()
    client.call("GET", f"/slurm/{V}/jobs/")
    base = emu.url
    ctl = emu.control_headers()
    jobs = requests.get(f"{base}/_emulator/jobs", headers=ctl, timeout=10).json()["jobs"]
    assert [j["job_id"] for j in jobs] == [1]
    assert set(jobs[0]) >= {"job_id", "name", "comment", "state", "in_live_queue"}
    calls = requests.get(f"{base}/_emulator/calls", headers=ctl, timeout=10).json()
    assert calls["by_kind"]["submit"] == 1 and calls["by_kind"]["jobs"] == 1
    assert calls["last"][-1]["method"] == "GET" and calls["last"][-1]["path"] == f"/slurm/{V}/jobs/"
    assert requests.post(f"{base}/_emulator/calls/reset", headers=ctl, timeout=10).ok
    assert requests.get(f"{base}/_emulator/calls", headers=ctl, timeout=10).json()["total"] == 0
    resp = requests.post(f"{base}/_emulator/faults", json={"spec": "500-before@jobs*2"}, headers=ctl, timeout=10)
    assert resp.json()["faults"] == [
        {"spec": "500-before@jobs*2", "kind": "500-before", "match": "jobs", "remaining": 2}
    ]
    assert (
        requests.post(f"{base}/_emulator/faults", json={"spec": "nonsense"}, headers=ctl, timeout=10).status_code == 400
    )
    assert requests.get(f"{base}/_emulator/faults", headers=ctl, timeout=10).json()["faults"][0]["remaining"] == 2
    assert requests.delete(f"{base}/_emulator/faults", headers=ctl, timeout=10).json() == {"faults": []}
    assert requests.get(f"{base}/_emulator/health", headers=ctl, timeout=10).json()["ok"] is True


def test_calls_are_counted_by_kind(client: Client, emu: EmulatorHandle) -> None:
    job_id = client.submit_id()
    client.job(job_id)
    client.call("GET", f"/slurm/{V}/jobs/state/?job_id={job_id}")
    client.call("GET", f"/slurm/{V}/jobs/")
    client.history(job_id)
    client.cancel(job_id)
    client.call("GET", f"/slurm/{V}/ping")
    calls = emu.calls()
    assert calls["total"] == 7
    assert calls["by_kind"] == {
        "total": 7,
        "submit": 1,
        "job-get": 1,
        "jobs-state": 1,
        "jobs": 1,
        "slurmdb": 1,
        "job-delete": 1,
        "other": 1,
    }
    assert [c["path"] for c in calls["last"]][:2] == [f"/slurm/{V}/job/submit", f"/slurm/{V}/job/{job_id}"]
    assert calls["answer_bytes"] == sum(c["bytes"] for c in calls["last"]) > 0
    emu.reset_calls()
    assert emu.calls() == {"total": 0, "by_kind": {}, "answer_bytes": 0, "last": []}


def test_run_emulator_reports_start_errors_and_validates_config() -> None:
    with pytest.raises(ValueError):
        EmulatorConfig(envelope="xml").validate()  # type: ignore[arg-type]
    with run_emulator(EmulatorConfig(tokens=["a"])) as first, pytest.raises(OSError):  # noqa: SIM117
        with run_emulator(EmulatorConfig(tokens=["a"], port=first.port)):
            pass


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "slurmapi_emulator", *args]


def test_cli_help_explains_airflow_connection() -> None:
    out = subprocess.run(_cli("--help"), capture_output=True, text=True, timeout=30, check=True).stdout
    for needle in (
        "--write-credentials",
        "api_endpoint",
        "key_path",
        "--minute-seconds",
        "KIND[@MATCH][*COUNT]",
        "X-Emulator-Control-Token",
        "--allow-remote",
        "--slurmrestd",
        "--envelope",
    ):
        assert needle in out


def test_cli_bad_fault_spec_exits_2() -> None:
    proc = subprocess.run(_cli("--fault", "explode"), capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "unknown fault kind" in proc.stderr


def test_cli_prints_url_logs_calls_without_tokens_and_kills_jobs_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        _cli("--port", "0", "--token", "secret-cli-token", "--workdir", str(tmp_path), "--cpus", "1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        envelope = (
            f"{url}/v1beta1/projects/demo-project/locations/us-central1/modelDevelopmentClusters/c:callSlurmRestApi"
        )
        marker = tmp_path / "pid"
        body = {
            "job": {
                "name": "sleeper",
                "current_working_directory": str(tmp_path),
                "environment": ["PATH=/bin:/usr/bin"],
            },
            "script": f"#!/bin/bash\necho $$ > {marker}\nsleep 60\n",
        }
        headers = {"Authorization": "Bearer secret-cli-token"}
        resp = requests.post(
            envelope,
            json={"method": "HTTP_METHOD_POST", "path": f"/slurm/{V}/job/submit", "body": body},
            headers=headers,
            timeout=10,
        )
        assert json.loads(resp.json()["body"])["job_id"] == 1
        pid = int(wait_until(lambda: marker.exists() and marker.read_text().strip()))
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        assert proc.returncode == 0
        stderr = proc.stderr.read() if proc.stderr else ""
        assert f"POST /slurm/{V}/job/submit -> 200" in stderr
        assert "secret-cli-token" not in stderr
        wait_until(lambda: not _alive(pid), timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return False


def test_emulator_imports_neither_airflow_nor_the_provider() -> None:
    code = (
        "import importlib, json, pkgutil, sys, slurmapi_emulator as e\n"
        "modules = [m.name for m in pkgutil.walk_packages(e.__path__, 'slurmapi_emulator.')]\n"
        "for name in modules:\n"
        "    if name != 'slurmapi_emulator.__main__': importlib.import_module(name)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('airflow', 'airflow_provider_slurmapi')]\n"
        "print(json.dumps({'modules': modules, 'bad': bad}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    seen = json.loads(out.stdout)
    assert "slurmapi_emulator.server" in seen["modules"] and "slurmapi_emulator.gateway" in seen["modules"]
    assert seen["bad"] == []
