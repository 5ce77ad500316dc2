"""Fault injection: every kind, and whether the Slurm action was done despite the failure."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import requests
from slurmapi_emulator import EmulatorHandle
from slurmapi_emulator.faults import FaultSpecError, parse_fault

from .conftest import Client, V, job_desc, wait_until

NOT_DONE = {
    "unavailable": (503, "UNAVAILABLE"),
    "429": (429, "RESOURCE_EXHAUSTED"),
    "500-before": (500, "INTERNAL"),
    "503-before": (503, "UNAVAILABLE"),
    "expire-token": (401, "UNAUTHENTICATED"),
}
DONE = {"500-after": (500, "INTERNAL"), "503-after": (503, "UNAVAILABLE")}


def _submit_raw(client: Client) -> requests.Response:
    body = {"job": job_desc(client.cwd, name="faulty"), "script": "#!/bin/bash\ntrue\n"}
    return client.post_raw(json.dumps({"method": "HTTP_METHOD_POST", "path": f"/slurm/{V}/job/submit", "body": body}))


@pytest.mark.parametrize("kind", sorted(NOT_DONE))
def test_error_faults_before_the_action(client: Client, emu: EmulatorHandle, kind: str) -> None:
    emu.add_fault(f"{kind}@submit")
    resp = _submit_raw(client)
    assert (resp.status_code, resp.json()["error"]["status"]) == NOT_DONE[kind]
    assert emu.jobs() == []  # not done
    assert _submit_raw(client).status_code == 200  # the fault is spent
    assert [j["job_id"] for j in emu.jobs()] == [1]


@pytest.mark.parametrize("kind", sorted(DONE))
def test_error_faults_after_the_action(client: Client, emu: EmulatorHandle, kind: str) -> None:
    emu.add_fault(f"{kind}@submit")
    resp = _submit_raw(client)
    assert (resp.status_code, resp.json()["error"]["status"]) == DONE[kind]
    assert [j["name"] for j in emu.jobs()] == ["faulty"]  # done, although the caller saw an error


@pytest.mark.parametrize("when", ["before", "after"])
def test_502_is_an_html_page(client: Client, emu: EmulatorHandle, when: str) -> None:
    emu.add_fault(f"502-{when}@submit")
    resp = _submit_raw(client)
    assert resp.status_code == 502
    assert resp.headers["Content-Type"].startswith("text/html")
    assert len(emu.jobs()) == (1 if when == "after" else 0)


@pytest.mark.parametrize("when", ["before", "after"])
def test_reset_drops_the_connection(client: Client, emu: EmulatorHandle, when: str) -> None:
    emu.add_fault(f"reset-{when}@submit")
    with pytest.raises(requests.ConnectionError):
        _submit_raw(client)
    assert len(emu.jobs()) == (1 if when == "after" else 0)
    assert emu.calls()["last"][-1]["http_status"] == "reset"
    assert _submit_raw(client).status_code == 200


def test_done_later_answers_unavailable_at_once_and_carries_the_call_out_later(
    client: Client, emu: EmulatorHandle
) -> None:
    """A front end that queued the call: the caller hears 503 UNAVAILABLE, the job appears afterwards."""
    emu.add_fault("done-later=1@submit")
    resp = _submit_raw(client)
    assert (resp.status_code, resp.json()["error"]["status"]) == (503, "UNAVAILABLE")
    assert emu.jobs() == []  # not yet
    wait_until(emu.jobs, "the queued submit carried out")
    assert [j["name"] for j in emu.jobs()] == ["faulty"]
    assert parse_fault("done-later=6@submit").delay == 6


def test_slow_answers_late_but_does_the_action(client: Client, emu: EmulatorHandle) -> None:
    emu.add_fault("slow=0.6@submit")
    resp = _submit_raw(client)
    assert resp.status_code == 200
    # late: a client that gives up before the answer comes still created the job
    emu.add_fault("slow=1@submit")
    with pytest.raises(requests.Timeout):
        client.post_raw(
            json.dumps(
                {
                    "method": "HTTP_METHOD_POST",
                    "path": f"/slurm/{V}/job/submit",
                    "body": {"job": job_desc(client.cwd), "script": "#!/bin/bash\ntrue\n"},
                }
            ),
            timeout=0.3,
        )
    wait_until(lambda: len(emu.jobs()) == 2)  # carried out once its 1 s is up
    assert [j["job_id"] for j in emu.jobs()] == [1, 2]


def test_malformed_envelope_and_non_json_body(client: Client, emu: EmulatorHandle) -> None:
    emu.add_fault("malformed-envelope@submit")
    resp = _submit_raw(client)
    assert resp.status_code == 200
    assert "status" not in resp.json() and "body" not in resp.json()
    emu.add_fault("non-json-body@submit")
    resp = _submit_raw(client)
    envelope = resp.json()
    assert envelope["status"] == 200
    with pytest.raises(ValueError):
        json.loads(envelope["body"])
    assert len(emu.jobs()) == 2  # both done


@pytest.mark.parametrize(
    ("match", "method", "path"),
    [
        ("job-get", "GET", f"/slurm/{V}/job/1"),
        ("job-delete", "DELETE", f"/slurm/{V}/job/1"),
        ("jobs", "GET", f"/slurm/{V}/jobs/"),
        ("jobs-state", "GET", f"/slurm/{V}/jobs/state/?job_id=1"),
        ("slurmdb", "GET", f"/slurmdb/{V}/job/1"),
        ("any", "GET", f"/slurm/{V}/ping"),
    ],
)
def test_match_selects_the_calls(client: Client, emu: EmulatorHandle, match: str, method: str, path: str) -> None:
    emu.add_fault(f"503-before@{match}")
    if match != "any":
        assert client.call("GET", f"/slurm/{V}/ping").http_status == 200  # other kinds unaffected
    assert client.call(method, path).http_status == 503
    assert client.call(method, path).http_status != 503


def test_delete_fault_after_still_cancels(client: Client, emu: EmulatorHandle) -> None:
    job_id = client.submit_id(script="#!/bin/bash\nsleep 30\n")
    emu.wait_for_state(job_id, "RUNNING")
    emu.add_fault("500-after@job-delete")
    assert client.cancel(job_id).http_status == 500
    emu.wait_for_state(job_id, "CANCELLED")
    emu.add_fault("500-before@job-delete")
    other = client.submit_id(script="#!/bin/bash\nsleep 30\n")
    assert client.cancel(other).http_status == 500
    assert [c["slurm_status"] for c in emu.calls()["last"] if c["kind"] == "job-delete"][-1] is None  # not done
    assert client.state(other) != ["CANCELLED"]
    client.cancel(other)


def test_counts_and_infinite_faults(client: Client, emu: EmulatorHandle) -> None:
    emu.add_fault("429@jobs*2")
    assert [client.call("GET", f"/slurm/{V}/jobs/").http_status for _ in range(3)] == [429, 429, 200]
    emu.add_fault("unavailable@jobs*inf")
    assert all(client.call("GET", f"/slurm/{V}/jobs/").http_status == 503 for _ in range(5))
    assert emu.faults()[0]["remaining"] == "inf"
    emu.clear_faults()
    assert client.call("GET", f"/slurm/{V}/jobs/").http_status == 200


def test_faults_from_config(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(faults=["500-after@submit", "unavailable@jobs-state*2"])
    client = Client(emu)
    assert _submit_raw(client).status_code == 500
    assert len(emu.jobs()) == 1
    assert client.call("GET", f"/slurm/{V}/jobs/state/").http_status == 503
    assert emu.faults() == [
        {"spec": "unavailable@jobs-state*2", "kind": "unavailable", "match": "jobs-state", "remaining": 1}
    ]


@pytest.mark.parametrize("spec", ["boom", "500-after@nowhere", "slow=@submit", "429*0", "429*-1", "503@submit"])
def test_bad_specs_are_refused(spec: str, emu: EmulatorHandle) -> None:
    with pytest.raises(FaultSpecError):
        parse_fault(spec)
    with pytest.raises(ValueError):
        emu.add_fault(spec)


def test_fault_grammar() -> None:
    fault = parse_fault("slow=2.5@jobs-state*3")
    assert (fault.kind, fault.delay, fault.match, fault.remaining) == ("slow", 2.5, "jobs-state", 3)
    assert parse_fault("expire-token").match == "any"
