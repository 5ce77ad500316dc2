"""Bad input gets a 4xx answer with a message from the emulator, never an HTTP 500 and a traceback.

The emulator stands for the Google front end and slurmrestd, so a client's worst request must
meet what those answer: the front end's 400 ``INVALID_ARGUMENT`` for an envelope it cannot read,
and slurmrestd's own error (measured on real Slurm 24.11, see below) for a Slurm path or body it
cannot parse. Hypothesis fuzzes the envelope, the Slurm paths and the submit body a little; every
answer must be a JSON document with a status below 500 and a message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from slurmapi_emulator import EmulatorConfig, EmulatorHandle, run_emulator

from tests.emulator.conftest import TOKEN, Client, V

_SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorHandle]:
    workdir: Path = tmp_path_factory.mktemp("hostile")
    with run_emulator(EmulatorConfig(tokens=[TOKEN], workdir=str(workdir), cpus=4)) as handle:
        yield handle


@pytest.fixture(scope="module")
def client(emu: EmulatorHandle) -> Client:
    return Client(emu)


def _post(client: Client, data: bytes | str) -> requests.Response:
    return client.post_raw(data)


def _assert_clean_refusal(resp: requests.Response) -> dict[str, Any]:
    """A 4xx front-end error with a message, or a 200 envelope whose Slurm answer is a 4xx with errors."""
    assert resp.status_code < 500, (resp.status_code, resp.text[:500])
    assert "Traceback" not in resp.text
    envelope = resp.json()
    if resp.status_code != 200:
        assert envelope["error"]["message"], envelope
        return dict(envelope)
    status, slurm = _slurm_answer(resp)
    assert status < 500 or slurm["errors"], slurm  # Slurm's own 500s (a refused submit) carry errors[]
    assert "Traceback" not in str(slurm)
    return dict(envelope)


def _slurm_answer(resp: requests.Response) -> tuple[int, Any]:
    envelope = resp.json()
    text = envelope["body"]
    try:
        return envelope["status"], json.loads(text)
    except ValueError:
        return envelope["status"], text


# -- the two inputs of issue 16 ---------------------------------------------------------------------------
@pytest.mark.parametrize("opening", ["[", '{"a":'])
def test_a_100000_deep_envelope_gets_400_invalid_argument(client: Client, opening: str) -> None:
    closing = "]" if opening == "[" else "}"
    resp = _post(client, opening * 100_000 + "1" + closing * 100_000)
    assert resp.status_code == 400, resp.text[:300]
    assert resp.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "nest" in resp.json()["error"]["message"]


@pytest.mark.parametrize("depth", [101, 5000])
def test_a_deep_submit_body_gets_400_invalid_argument(client: Client, depth: int) -> None:
    """Deeper than the front end's 100 levels, whether Python's own parser could read it or not."""
    job = '{"name": "deep", "x": ' + "[" * depth + "]" * depth + "}"
    envelope = f'{{"method": "HTTP_METHOD_POST", "path": "/slurm/{V}/job/submit", "body": {{"job": {job}}}}}'
    resp = _post(client, envelope)
    assert resp.status_code == 400, resp.text[:300]
    assert resp.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_a_body_within_the_nesting_limit_still_reaches_slurm(client: Client) -> None:
    answer = client.submit({"x": [[[[["fine"]]]]], "hold": True})
    assert answer.slurm_status == 200, answer.raw_text[:300]


@pytest.mark.parametrize("job_id", ["9" * 5000, "9" * 20, "4294967293", "0", "\u0661\u0662"])
def test_a_job_id_slurm_cannot_parse_gets_slurmrestd_s_422(client: Client, job_id: str) -> None:
    """Real slurmrestd 24.11 answers 422 "Failure parsing parameters" for 0 and ids from 4294967293 up."""
    for method in ("GET", "DELETE"):
        answer = client.call(method, f"/slurm/{V}/job/{job_id}")
        assert answer.http_status == 200 and answer.slurm_status == 422, answer.raw_text[:300]
        assert answer.body["errors"][0]["description"] == "Rejecting request. Failure parsing parameters"


def test_a_job_id_slurm_parses_but_does_not_know_gets_404(client: Client) -> None:
    answer = client.call("GET", f"/slurm/{V}/job/4000000000")
    assert answer.slurm_status == 404
    assert answer.body["errors"][0]["description"] == "Invalid JobID=4000000000 rejected"


@pytest.mark.parametrize(
    "query",
    ["?update_time=" + "9" * 5000, "?update_time=\u00b2", "?update_time=99999999999999999999999"],
)
def test_odd_numbers_in_queries_are_refused_not_crashed_on(client: Client, query: str) -> None:
    resp = client.post_raw(json.dumps({"method": "HTTP_METHOD_GET", "path": f"/slurm/{V}/jobs{query}"}))
    _assert_clean_refusal(resp)
    assert _slurm_answer(resp)[0] == 422


@pytest.mark.parametrize(
    "path",
    [
        f"/slurm/{V}/job/1?signal=" + "9" * 5000,
        f"/slurm/{V}/job/1?signal=\u00b2",
        f"/slurmdb/{V}/jobs?start_time=" + "9" * 5000,
        f"/slurmdb/{V}/jobs?end_time=\u00b2",
        f"/slurmdb/{V}/jobs?start_time=now-" + "9" * 5000,
    ],
)
def test_odd_numbers_in_other_queries_are_refused(client: Client, path: str) -> None:
    method = "HTTP_METHOD_DELETE" if "signal" in path else "HTTP_METHOD_GET"
    resp = client.post_raw(json.dumps({"method": method, "path": path}))
    _assert_clean_refusal(resp)
    assert 400 <= _slurm_answer(resp)[0] < 500


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("tasks", "9" * 5000),
        ("tasks", 10**30),
        ("time_limit", {"set": True, "number": 10**30}),
        ("time_limit", 1e300),
        ("minimum_nodes", "\u0661"),
        ("cpus_per_task", -(10**30)),
    ],
)
def test_numbers_no_slurm_field_holds_get_slurm_s_type_error(client: Client, name: str, value: Any) -> None:
    answer = client.submit({name: value, "hold": True})
    assert answer.http_status == 200 and answer.slurm_status is not None and answer.slurm_status >= 400
    assert answer.body["errors"][0]["error_number"] == 9202, answer.body


# -- fuzzing ----------------------------------------------------------------------------------------------
_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**40), 10**40),
    st.floats(allow_nan=False),
    st.text(max_size=30),
    st.sampled_from(["9" * 5000, "\u00b2", "-1", "1e400", "UNLIMITED", "gres/gpu:" + "9" * 30]),
)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_path_piece = st.one_of(
    st.sampled_from(
        [
            "job",
            "jobs",
            "jobs/state",
            "job/submit",
            "ping",
            "partitions",
            "job/1",
            "job/1_2",
            "job/1.batch",
            "job/" + "9" * 5000,
            "job/\u00b2",
            "jobs?update_time=" + "9" * 5000,
        ]
    ),
    st.from_regex(r"job/[0-9\u0660-\u0669\u00b2._+a-z]{0,30}", fullmatch=True),
    st.text(max_size=20),
)
_query = st.one_of(
    st.just(""),
    st.builds(
        lambda key, value: f"?{key}={value}",
        st.sampled_from(["update_time", "signal", "flags", "start_time", "end_time", "job_name", "users", "x"]),
        st.one_of(st.text(max_size=12), st.sampled_from(["9" * 5000, "\u00b2", "now-" + "9" * 60, "now-5days"])),
    ),
)


@_SETTINGS
@given(
    method=st.sampled_from(["HTTP_METHOD_GET", "HTTP_METHOD_POST", "HTTP_METHOD_DELETE"]),
    service=st.sampled_from(["slurm", "slurmdb"]),
    version=st.sampled_from([V, "v0.0.40", "v0.0.41", "v9.9.9"]),
    piece=_path_piece,
    query=_query,
)
def test_fuzzed_paths_never_get_a_500(
    client: Client, method: str, service: str, version: str, piece: str, query: str
) -> None:
    path = f"/{service}/{version}/{piece}{query}"
    resp = client.post_raw(json.dumps({"method": method, "path": path}))
    _assert_clean_refusal(resp)


@_SETTINGS
@given(
    job=st.dictionaries(
        st.sampled_from(
            sorted(
                _FIELDS := [
                    "name",
                    "partition",
                    "time_limit",
                    "tasks",
                    "tasks_per_node",
                    "cpus_per_task",
                    "minimum_nodes",
                    "maximum_nodes",
                    "minimum_cpus",
                    "environment",
                    "tres_per_node",
                    "tres_per_job",
                    "array",
                    "nice",
                    "priority",
                    "memory_per_node",
                    "memory_per_cpu",
                    "open_mode",
                    "argv",
                    "comment",
                    "standard_output",
                    "current_working_directory",
                    "script",
                    "x",
                ]
            )
        ),
        _json,
        max_size=6,
    ),
    script=st.one_of(st.just("#!/bin/bash\ntrue\n"), _json),
)
def test_fuzzed_submit_bodies_never_get_a_500(client: Client, job: dict[str, Any], script: Any) -> None:
    job = {**job, "hold": True}  # nothing fuzzed ever runs
    resp = client.post_raw(
        json.dumps(
            {"method": "HTTP_METHOD_POST", "path": f"/slurm/{V}/job/submit", "body": {"job": job, "script": script}}
        )
    )
    _assert_clean_refusal(resp)
    status, answer = _slurm_answer(resp)
    if status >= 400:
        assert answer["errors"], answer


@_SETTINGS
@given(envelope=_json)
def test_fuzzed_envelopes_never_get_a_500(client: Client, envelope: Any) -> None:
    resp = client.post_raw(json.dumps(envelope))
    _assert_clean_refusal(resp)


# -- query parameters, percent-encoded (issue 23) ---------------------------------------------------------
_QUERY_ENDPOINTS = [
    ("HTTP_METHOD_GET", f"/slurm/{V}/jobs"),
    ("HTTP_METHOD_GET", f"/slurm/{V}/jobs/state"),
    ("HTTP_METHOD_GET", f"/slurm/{V}/job/1"),
    ("HTTP_METHOD_DELETE", f"/slurm/{V}/job/1"),
    ("HTTP_METHOD_GET", f"/slurmdb/{V}/jobs"),
    ("HTTP_METHOD_GET", f"/slurmdb/{V}/job/1"),
]
_QUERY_KEYS = [
    "update_time", "signal", "flags", "start_time", "end_time", "job_name", "users", "job_id", "state",
    "partition", "account", "node", "x",
]  # fmt: skip
_HOSTILE_VALUES = [
    "%00", "a%00b", "%FF", "%C0%80", "%ED%A0%80", "%", "%zz", "%2", "%E2%80%AE", "-1", "1e400", "0x10",
    "9" * 400, "\u00b2", "%C2%B2", "now-", "now-5weeks", "now+5days", "2026-13-45", "2026-02-30T25:61:61",
    "1970-01-01T00:00:00", "%2C", "%3D", "%26", "NaN", "inf", "",
]  # fmt: skip
_query_value = st.one_of(
    st.sampled_from(_HOSTILE_VALUES),
    st.text(max_size=12).map(lambda text: "".join(f"%{byte:02X}" for byte in text.encode("utf-8", "surrogatepass"))),
    st.binary(max_size=8).map(lambda data: "".join(f"%{byte:02X}" for byte in data)),
)


@pytest.mark.parametrize(("method", "path"), _QUERY_ENDPOINTS)
@pytest.mark.parametrize(
    "query",
    ["users=%00", "users=a%00b", "job_name=%FF", "start_time=2026-13-45", "end_time=now-5weeks", "signal=%00",
     "update_time=%00", "flags=%00", "users=x&users=%00", "start_time=1&start_time=2"],
)  # fmt: skip
def test_a_malformed_query_parameter_gets_a_4xx_with_a_message(
    client: Client, method: str, path: str, query: str
) -> None:
    resp = client.post_raw(json.dumps({"method": method, "path": f"{path}?{query}"}))
    _assert_clean_refusal(resp)
    status, slurm = _slurm_answer(resp)
    assert status < 500, (path, query, status, slurm)
    if "%00" in query or "%FF" in query:  # never a value Slurm could hold: refused, with a message
        assert 400 <= status < 500, (path, query, status, slurm)
        assert slurm["errors"] if isinstance(slurm, dict) else slurm, slurm


@_SETTINGS
@given(
    endpoint=st.sampled_from(_QUERY_ENDPOINTS),
    params=st.lists(st.tuples(st.sampled_from(_QUERY_KEYS), _query_value), min_size=1, max_size=4),
)
def test_fuzzed_query_parameters_never_get_a_500(
    client: Client, endpoint: tuple[str, str], params: list[tuple[str, str]]
) -> None:
    method, path = endpoint
    query = "&".join(f"{key}={value}" for key, value in params)
    resp = client.post_raw(json.dumps({"method": method, "path": f"{path}?{query}"}))
    _assert_clean_refusal(resp)
    status, slurm = _slurm_answer(resp)
    # slurmdbd's own answer to an unknown state= is a 500 with errors[] (recorded from Slurm 24.11:
    # fixtures/slurm-24.11/81_slurmdb_jobs_state_csv_pct2C.json); every other refusal is a 4xx.
    assert status < 500 or ("state" in dict(params) and slurm["errors"]), (query, status, slurm)
    if status >= 400:
        assert slurm, (query, status)
