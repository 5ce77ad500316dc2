"""Property tests: every reader of answers is total on mutated real answers of every API version.

Generators start from real Slurm 24.11 answers (``tests/fixtures/slurm-24.11``, v0.0.40-42 shapes)
and from typical answers built from the OpenAPI documents of v0.0.40-44, then mutate them: any
subtree replaced by arbitrary JSON, keys deleted, values nested up to 100,000 deep, numbers such as
``1e400``, ``NaN`` or 5,000 digits, lone surrogates, non-UTF-8 bytes, an odd envelope ``status``.
Each answer is sent in both envelope shapes (``body`` JSON string and ``structuredBody`` object).
Every reader must return a valid result or raise a ``SlurmApiError``.

The ``ci`` profile (default) keeps the run to seconds; ``SLURMAPI_HYPOTHESIS_PROFILE=dev`` runs
many more examples. Each test prints how many generated examples each reader survived
(``pytest -s`` or ``-rP`` shows it).
"""

from __future__ import annotations

import copy
import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
from airflow_provider_slurmapi.slurm.api.envelope import SlurmResponse, parse_envelope
from airflow_provider_slurmapi.slurm.api.errors import SlurmApiError, SlurmError
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob, describe_transition, record_job_id
from airflow_provider_slurmapi.slurm.jobs.readers import (
    CancelOutcome,
    SubmitResult,
    read_array_task_states,
    read_cancel,
    read_history_job,
    read_job_states,
    read_jobs,
    read_jobs_by_id,
    read_live_job,
    read_state_entries,
    read_submit,
)
from airflow_provider_slurmapi.slurm.jobs.states import JobStateInfo
from tests.fixtures import OPENAPI_FILES, fixture_body, fixture_status, schema_example

_COMMON = {
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
}
settings.register_profile("ci", max_examples=250, **_COMMON)
settings.register_profile("dev", max_examples=5000, **_COMMON)
PROFILE = settings.get_profile(os.environ.get("SLURMAPI_HYPOTHESIS_PROFILE", "ci"))

CLUSTER = ClusterRef("demo-project", "us-central1", "demo-cluster")
VERSIONS = list(OPENAPI_FILES)


# -- seeds: real answers and answers built from the OpenAPI documents ---------------------------------
@dataclass(frozen=True)
class Seed:
    name: str
    kind: str  # submit | live | jobs | history | slurmdb_jobs | states | cancel
    method: str
    path: str
    status: int
    body: Any


def _path(kind: str, version: str, job_id: int) -> str:
    return {
        "submit": f"/slurm/{version}/job/submit",
        "live": f"/slurm/{version}/job/{job_id}",
        "cancel": f"/slurm/{version}/job/{job_id}",
        "jobs": f"/slurm/{version}/jobs/",
        "history": f"/slurmdb/{version}/job/{job_id}",
        "slurmdb_jobs": f"/slurmdb/{version}/jobs/?start_time=1",
        "states": f"/slurm/{version}/jobs/state/?job_id=1&job_id=2",
    }[kind]


_METHODS = {"submit": "POST", "cancel": "DELETE"}
REAL = {
    "submit": [
        "07_submit_script_toplevel",
        "27_submit_held",
        "33_submit_unknown_partition",
        "38_submit_too_many_nodes",
    ],
    "live": [
        "08_job_A_immediately_after_submit",
        "16_job_A_completed",
        "25_job_unknown_999999",
        "66_job_failed_exit3_live",
        "67_job_sigkill_live",
        "71_job_timeout_live",
    ],
    "jobs": ["10_jobs_all_while_A_running", "47_jobs_all_after_purge"],
    "history": [
        "48_slurmdb_job_A",
        "50_slurmdb_job_F_failed",
        "51_slurmdb_job_H_cancelled_pending",
        "52_slurmdb_job_unknown_999999",
        "73_slurmdb_job_sigkill",
    ],
    "slurmdb_jobs": ["54_slurmdb_jobs_all"],
    "cancel": ["19_cancel_running_B", "22_cancel_completed_A", "24_cancel_unknown_999999"],
}
SCHEMAS = {
    "submit": "openapi_job_submit_response",
    "live": "openapi_job_info_resp",
    "jobs": "openapi_job_info_resp",
    "history": "openapi_slurmdbd_jobs_resp",
    "slurmdb_jobs": "openapi_slurmdbd_jobs_resp",
    "cancel": "openapi_kill_job_resp",
}


def _first_job_id(body: Any) -> int:
    jobs = body.get("jobs") if isinstance(body, dict) else None
    found = record_job_id(jobs[0]) if jobs else None
    return found or 999999


def _state_answer(version: str) -> dict[str, Any]:
    """``/jobs/state/`` (no schema of its own in the documents): job ids as strings, states as lists."""
    state = schema_example(version, "openapi_job_info_resp")["jobs"][0]["job_state"]
    base = schema_example(version, "openapi_resp")
    return {
        **base,
        "errors": [],
        "jobs": [{"job_id": "1", "state": state}, {"job_id": "2", "state": ["RUNNING", "COMPLETING"]}],
    }


def build_seeds() -> list[Seed]:
    seeds = []
    for kind, names in REAL.items():
        for name in names:
            body = fixture_body(name)
            path = _path(kind, "v0.0.42", _first_job_id(body))
            seeds.append(Seed(name, kind, _METHODS.get(kind, "GET"), path, fixture_status(name), body))
    for version in VERSIONS:
        for kind, schema in SCHEMAS.items():
            if kind == "cancel" and version in ("v0.0.40", "v0.0.41"):
                schema = "openapi_resp"  # these versions answer a cancel with the plain response
            body = {**schema_example(version, schema), "errors": []}  # a clean answer; mutations add errors
            path = _path(kind, version, _first_job_id(body))
            seeds.append(Seed(f"{version}:{schema}", kind, _METHODS.get(kind, "GET"), path, 200, body))
        seeds.append(
            Seed(f"{version}:jobs/state", "states", "GET", _path("states", version, 1), 200, _state_answer(version))
        )
    return seeds


SEEDS = build_seeds()
LIST_SEEDS = [s for s in SEEDS if s.kind in ("jobs", "slurmdb_jobs", "states")]


# -- mutations ---------------------------------------------------------------------------------------------
KEYS = [
    "job_id", "job_state", "state", "current", "reason", "state_reason", "time", "start", "end", "submission",
    "limit", "exit_code", "status", "return_code", "signal", "id", "name", "number", "set", "infinite", "errors",
    "warnings", "error", "error_number", "description", "code", "jobs", "comment", "job", "user", "nodes",
]  # fmt: skip
ODD_NUMBERS = [
    "1e400", "-1e400", "1e-400", "NaN", "Infinity", "-Infinity", "9" * 5000, "-" + "9" * 5000, "18446744073709551616",
    "4294967294", "4294967295", "-1", "0", "-0", "1.5", "1E2", "0.0",
]  # fmt: skip
ODD_TEXT = ["\ud800", "x\udfffy", "\x00", "PENDING,\ud83d", "1:\ud800", "", " ", "None", "(null)", "٣", "²"]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.sampled_from([0, 1, -1, 2**32 - 2, 2**32 - 1, 2**63, 2**64])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(ODD_TEXT)
    | st.sampled_from(["RUNNING", "COMPLETED", "PENDING", "FAILED", "COMPLETING", "REQUEUED"])
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(_paths(child, (*prefix, index)))
    return found


def _set(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = root
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return root


def _delete(root: Any, path: tuple[Any, ...]) -> Any:
    if not path:
        return root
    parent = root
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return root


def _get(root: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        root = root[key]
    return root


def mutate(draw: Any, value: Any, raw_texts: dict[str, str], *, max_depth: int = 100_000) -> Any:
    """One mutation at a random place: replace, delete, nest, odd number, odd text, or wrap."""
    path = draw(st.sampled_from(_paths(value)))
    operation = draw(st.sampled_from(["replace", "replace", "delete", "nest", "number", "wrap"]))
    if operation == "replace":
        return _set(value, path, draw(json_values))
    if operation == "delete":
        return _delete(value, path)
    if operation == "wrap":
        inner = _get(value, path)
        return _set(value, path, draw(st.sampled_from([[inner], {"number": inner}, {"current": inner}, [[inner]]])))
    token = f"__RAW{len(raw_texts)}__"
    depths = [d for d in (3, 60, 1500, 100_000) if d <= max_depth]
    if operation == "nest" and depths:
        depth = draw(st.sampled_from(depths))
        raw_texts[token] = draw(st.sampled_from(["[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth]))
    else:
        raw_texts[token] = draw(st.sampled_from(ODD_NUMBERS))
    return _set(value, path, token)


def render(body: Any, raw_texts: dict[str, str]) -> str:
    text = json.dumps(body)
    for token, raw in raw_texts.items():
        text = text.replace(json.dumps(token), raw)
    return text


ODD_STATUS = ['"200"', "1e400", "null", "true", "-1", '"abc"', "200.0", "[200]", "99999999999999999999999"]


@st.composite
def hostile_answers(draw: Any, seeds: list[Seed] = SEEDS) -> tuple[Seed, int, bytes]:
    """``(seed, HTTP status of the envelope call, envelope bytes)`` of a mutated answer."""
    seed = draw(st.sampled_from(seeds))
    body = copy.deepcopy(seed.body)
    raw_texts: dict[str, str] = {}
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        body = mutate(draw, body, raw_texts)
    body_text = render(body, raw_texts)
    status = str(seed.status) if draw(st.integers(0, 9)) else draw(st.sampled_from(ODD_STATUS))
    if draw(st.booleans()):
        content = f'{{"status":{status},"structuredBody":{body_text}}}'.encode("utf-8", "surrogatepass")
    else:
        content = f'{{"status":{status},"body":{json.dumps(body_text)}}}'.encode()
    damage = draw(st.integers(0, 19))
    if damage == 0:  # non-UTF-8 bytes somewhere
        at = draw(st.integers(0, len(content)))
        content = content[:at] + draw(st.sampled_from([b"\xff", b"\xfe\xff", b"\xc3", b"\xed\xa0\x80"])) + content[at:]
    elif damage == 1:  # cut short
        content = content[: draw(st.integers(0, len(content)))]
    http_status = 200 if draw(st.integers(0, 9)) else draw(st.sampled_from([400, 401, 403, 404, 429, 500, 503]))
    return seed, http_status, content


# -- what a valid result is -------------------------------------------------------------------------------
_TEXT_FIELDS = ("name", "reason", "nodes", "partition", "user", "account", "stdout", "stderr", "comment")
_INT_FIELDS = ("submit_time", "start_time", "end_time", "time_limit_minutes")


def check_job(job: Any) -> None:
    assert isinstance(job, SlurmJob)
    assert isinstance(job.job_id, int) and 0 < job.job_id < 2**32
    assert isinstance(job.state_info, JobStateInfo)
    assert all(isinstance(flag, str) for flag in job.state_info.flags)
    for name in _TEXT_FIELDS:
        assert getattr(job, name) is None or isinstance(getattr(job, name), str), name
    for name in _INT_FIELDS:
        value = getattr(job, name)
        assert value is None or (isinstance(value, int) and not isinstance(value, bool)), name
    data = job.to_dict()
    json.dumps(data, allow_nan=False, ensure_ascii=False).encode("utf-8")
    assert SlurmJob.from_dict(json.loads(json.dumps(data))) == job
    for text in (job.describe(), job.failure_message(), describe_transition(None, job) or ""):
        text.encode("utf-8")


def check_result(name: str, result: Any, response: SlurmResponse) -> None:
    if name == "read_submit":
        assert isinstance(result, SubmitResult) and 0 < result.job_id < 2**32
        assert all(isinstance(w, str) for w in result.warnings)
    elif name in ("read_live_job", "read_history_job"):
        if result is not None:
            check_job(result)
    elif name.startswith("read_jobs("):
        assert isinstance(result, list)
        for job in result:
            check_job(job)
    elif name == "read_jobs_by_id":
        assert isinstance(result, dict)
        for job_id, job in result.items():
            check_job(job)
            assert job.job_id == job_id
    elif name == "read_job_states":
        assert isinstance(result, dict)
        assert all(isinstance(k, int) and k > 0 and isinstance(v, JobStateInfo) for k, v in result.items())
    elif name == "read_state_entries":  # the poller's one pass agrees with the two readers it replaces
        states, tasks = result
        assert states == read_job_states(response)
        assert tasks == read_array_task_states(response)
    elif name == "read_cancel":
        assert isinstance(result, CancelOutcome)
    elif name == "warning_messages":
        assert all(isinstance(w, str) for w in result)
        "\n".join(result).encode("utf-8")
    elif name == "error_summary":
        assert isinstance(result, str)
        result.encode("utf-8")
    elif name == "raise_for_errors":
        assert result is response


READERS: dict[str, Callable[[SlurmResponse], Any]] = {
    "read_submit": read_submit,
    "read_live_job": read_live_job,
    "read_history_job": read_history_job,
    "read_jobs(live)": lambda r: read_jobs(r, history=False),
    "read_jobs(history)": lambda r: read_jobs(r, history=True),
    "read_jobs_by_id": lambda r: read_jobs_by_id(r, [1, 2, 3, 4, 5, 10, 11, 12, 13, 999999]),
    "read_job_states": read_job_states,
    "read_state_entries": read_state_entries,
    "read_cancel": read_cancel,
    "warning_messages": lambda r: r.warning_messages(),
    "error_summary": lambda r: r.error_summary(),
    "raise_for_errors": lambda r: r.raise_for_errors(),
}


def run_reader(name: str, response: SlurmResponse, survived: Counter[str]) -> Any:
    try:
        result = READERS[name](response)
    except SlurmApiError as exc:
        str(exc).encode("utf-8")
        assert len(str(exc)) < 4000, f"{name}: a message of {len(str(exc))} characters"
        if name == "raise_for_errors":
            assert isinstance(exc, SlurmError)
        survived[name] += 1
        return exc
    check_result(name, result, response)
    survived[name] += 1
    return result


def report(title: str, survived: Counter[str]) -> None:
    lines = [f"{title} ({PROFILE.max_examples} examples per property):"]
    lines += [f"  {name}: survived {count} generated examples" for name, count in sorted(survived.items())]
    print("\n".join(lines))


# -- the properties -----------------------------------------------------------------------------------------
def test_every_reader_is_total_on_mutated_answers_of_every_version() -> None:
    survived: Counter[str] = Counter()

    @settings(PROFILE)
    @given(hostile_answers())
    def check(answer: tuple[Seed, int, bytes]) -> None:
        seed, http_status, content = answer
        try:
            response = parse_envelope(http_status, content, method=seed.method, path=seed.path, cluster=CLUSTER)
        except SlurmApiError as exc:
            str(exc).encode("utf-8")
            survived["parse_envelope"] += 1
            return
        survived["parse_envelope"] += 1
        for name in READERS:
            run_reader(name, response, survived)

    check()
    report("Every reader on mutated answers of v0.0.40-44", survived)
    assert survived["parse_envelope"] >= PROFILE.max_examples
    assert min(survived[name] for name in READERS) > 0


def test_unmutated_seeds_read_cleanly() -> None:
    """The generators start from answers the readers fully understand (else the mutations prove little)."""
    for seed in SEEDS:
        for shape in ("body", "structuredBody"):
            text = json.dumps(seed.body)
            content = (
                json.dumps({"status": seed.status, "body": text})
                if shape == "body"
                else f'{{"status":{seed.status},"structuredBody":{text}}}'
            ).encode()
            response = parse_envelope(200, content, method=seed.method, path=seed.path, cluster=CLUSTER)
            if seed.kind in ("jobs", "slurmdb_jobs"):
                jobs = read_jobs(response, history=seed.kind == "slurmdb_jobs")
                assert len(jobs) == len(seed.body["jobs"]), seed.name
            elif seed.kind == "live" and seed.status == 200:
                assert read_live_job(response) is not None, seed.name
            elif seed.kind == "history" and seed.body["jobs"]:
                assert read_history_job(response) is not None, seed.name
            elif seed.kind == "states":
                assert len(read_job_states(response)) == 2, seed.name
            elif seed.kind == "submit" and seed.status == 200:
                assert read_submit(response).job_id > 0, seed.name
            elif seed.kind == "cancel":
                assert isinstance(read_cancel(response), CancelOutcome), seed.name


def _with_three_jobs(seed: Seed) -> dict[str, Any]:
    body = copy.deepcopy(seed.body)
    template = body["jobs"][0]
    jobs = []
    for job_id in (101, 102, 103):
        record = copy.deepcopy(template)
        record["job_id"] = str(job_id) if seed.kind == "states" else job_id
        jobs.append(record)
    body["jobs"] = jobs
    return body


def test_a_poisoned_foreign_record_never_hides_the_other_jobs() -> None:
    """One record of a list answer mutated at will: every other job is still read, unchanged."""
    survived: Counter[str] = Counter()

    @settings(PROFILE)
    @given(st.data())
    def check(data: Any) -> None:
        seed = data.draw(st.sampled_from(LIST_SEEDS))
        body = _with_three_jobs(seed)
        victim = data.draw(st.integers(0, 2))
        clean = parse_envelope(
            200,
            json.dumps({"status": 200, "body": json.dumps(body)}).encode(),
            method="GET",
            path=seed.path,
            cluster=CLUSTER,
        )
        raw_texts: dict[str, str] = {}
        record = body["jobs"][victim]
        for _ in range(data.draw(st.integers(1, 3))):
            record = mutate(data.draw, record, raw_texts, max_depth=60)
        body["jobs"][victim] = record
        others = {101, 102, 103} - {101 + victim}
        # A poisoned record that now claims another job's id is a different question (duplicates).
        assume(not isinstance(record, dict) or str(record.get("job_id")) not in {str(o) for o in others})
        text = render(body, raw_texts)
        if data.draw(st.booleans()):
            content = f'{{"status":200,"structuredBody":{text}}}'.encode("utf-8", "surrogatepass")
        else:
            content = json.dumps({"status": 200, "body": text}).encode()
        poisoned = parse_envelope(200, content, method="GET", path=seed.path, cluster=CLUSTER)
        if seed.kind == "states":
            expected_states = {k: v for k, v in read_job_states(clean).items() if k in others}
            got = read_job_states(poisoned)
            assert {k: got.get(k) for k in others} == expected_states
            survived["read_job_states"] += 1
            return
        history = seed.kind == "slurmdb_jobs"
        expected = [job for job in read_jobs(clean, history=history) if job.job_id in others]
        got_jobs = read_jobs(poisoned, history=history)
        for job in expected:
            assert job in got_jobs
        survived["read_jobs(history)" if history else "read_jobs(live)"] += 1
        if not history:
            by_id = read_jobs_by_id(poisoned, others)
            assert sorted(by_id) == sorted(others)
            survived["read_jobs_by_id"] += 1

    check()
    report("Lists with one poisoned foreign record", survived)
    assert sum(survived.values()) > 0


def test_from_dict_is_total_on_mutated_events() -> None:
    """Trigger events and XCom come back through ``SlurmJob.from_dict``: any tampering is a SlurmApiError."""
    survived: Counter[str] = Counter()
    jobs = [SlurmJob.from_live(fixture_body(n)["jobs"][0]) for n in REAL["live"] if n != "25_job_unknown_999999"]

    @settings(PROFILE)
    @given(st.data())
    def check(data: Any) -> None:
        payload = data.draw(st.sampled_from(jobs)).to_dict()
        for _ in range(data.draw(st.integers(1, 3))):
            payload = mutate(data.draw, payload, {}, max_depth=0) if data.draw(st.booleans()) else payload
            path = data.draw(st.sampled_from(_paths(payload)))
            payload = _set(payload, path, data.draw(json_values))
        try:
            job = SlurmJob.from_dict(payload)
        except SlurmApiError:
            survived["SlurmJob.from_dict"] += 1
            return
        check_job(job)
        survived["SlurmJob.from_dict"] += 1

    check()
    report("SlurmJob.from_dict on tampered events", survived)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_has_seeds_of_every_kind(version: str) -> None:
    kinds = {seed.kind for seed in SEEDS if seed.name.startswith(version)}
    assert kinds == {"submit", "live", "jobs", "history", "slurmdb_jobs", "states", "cancel"}
