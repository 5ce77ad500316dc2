"""Odd and hostile answers, one by one: every reader answers or raises a SlurmApiError naming the field.

Each case below once made a reader raise RecursionError, OverflowError, AttributeError, KeyError,
TypeError or ValueError, which skipped the retry policy and the trigger's handler, and (through the
shared poller, which reads every user's jobs) failed every deferred task of the cluster.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
from airflow_provider_slurmapi.slurm.api.envelope import SlurmResponse, parse_envelope
from airflow_provider_slurmapi.slurm.api.errors import (
    MalformedRecordError,
    MalformedResponseError,
    SlurmApiError,
    SlurmError,
)
from airflow_provider_slurmapi.slurm.jobs import readers
from airflow_provider_slurmapi.slurm.jobs.job import ExitInfo, SlurmJob, slurm_number
from airflow_provider_slurmapi.slurm.jobs.readers import (
    SkippedRecords,
    read_cancel,
    read_history_job,
    read_job_states,
    read_jobs,
    read_jobs_by_id,
    read_live_job,
    read_submit,
)
from airflow_provider_slurmapi.slurm.jobs.states import JobState, parse_job_state
from tests.fixtures import fixture_body

CLUSTER = ClusterRef("demo-project", "us-central1", "demo-cluster")
LIVE_PATH = "/slurm/v0.0.42/job/{}"
HISTORY_PATH = "/slurmdb/v0.0.42/job/{}"

READERS: dict[str, Callable[[SlurmResponse], Any]] = {
    "read_submit": read_submit,
    "read_live_job": read_live_job,
    "read_history_job": read_history_job,
    "read_jobs(live)": lambda r: read_jobs(r, history=False),
    "read_jobs(history)": lambda r: read_jobs(r, history=True),
    "read_jobs_by_id": lambda r: read_jobs_by_id(r, [1, 2, 3]),
    "read_job_states": read_job_states,
    "read_cancel": read_cancel,
    "warning_messages": lambda r: r.warning_messages(),
    "error_summary": lambda r: r.error_summary(),
    "raise_for_errors": lambda r: r.raise_for_errors(),
}


def envelope(body: Any, *, structured: bool = False, status: Any = 200) -> bytes:
    if structured:
        return json.dumps({"status": status, "structuredBody": body}).encode()
    return json.dumps({"status": status, "body": body if isinstance(body, str) else json.dumps(body)}).encode()


def parse(content: bytes, path: str = "/slurm/v0.0.42/jobs/") -> SlurmResponse:
    return parse_envelope(200, content, method="GET", path=path, cluster=CLUSTER)


def live_record(job_id: int = 1) -> dict[str, Any]:
    raw = copy.deepcopy(fixture_body("09_job_A_running")["jobs"][0])
    raw["job_id"] = job_id
    return raw


def history_record(job_id: int = 1) -> dict[str, Any]:
    raw = copy.deepcopy(fixture_body("48_slurmdb_job_A")["jobs"][0])
    raw["job_id"] = job_id
    return raw


def every_reader_is_total(response: SlurmResponse) -> None:
    for name, reader in READERS.items():
        try:
            reader(response)
        except SlurmApiError:
            pass
        except Exception as exc:  # the old code's failure: name it
            pytest.fail(f"{name} raised {type(exc).__name__}: {exc!s:.200}")


# -- the envelope itself ------------------------------------------------------------------------------
DEEP = 100_000


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"status":200,"body":' + b"[" * DEEP + b"]" * DEEP + b"}", "not JSON"),
        (json.dumps({"status": 200, "body": '{"jobs":' + "[" * DEEP + "]" * DEEP + "}"}).encode(), "nested too deeply"),
        (b'{"status":200,"structuredBody":' + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}", "not JSON"),
        (b'{"status":1e400,"body":"{}"}', "'status'"),
        (b'{"status":"abc","body":"{}"}', "'status'"),
        (b'{"status":[200],"body":"{}"}', "'status'"),
        (b'{"status":200,"body":"{\\"jobs\\":[]}\xff\xfe"}', "not JSON"),
        (b"\xff\xfe\x00garbage", "not JSON"),
        (envelope([1, 2], structured=True), "'structuredBody'"),
        (envelope("x", structured=True), "'structuredBody'"),
        (b'{"status":200,"body":5}', "'body'"),
    ],
    ids=[
        "deep-envelope",
        "deep-body-string",
        "deep-structured",
        "status-1e400",
        "status-text",
        "status-list",
        "non-utf8-bytes",
        "non-utf8-garbage",
        "structuredBody-list",
        "structuredBody-string",
        "body-number",
    ],
)
def test_a_broken_envelope_is_a_malformed_response(content: bytes, says: str) -> None:
    with pytest.raises(MalformedResponseError, match=says):
        parse(content)


def test_a_number_of_thousands_of_digits_spoils_only_its_own_record() -> None:
    good = live_record(1)
    text = json.dumps({"jobs": [{**live_record(2), "job_id": "__HUGE__"}, good]}).replace('"__HUGE__"', "9" * 5000)
    jobs = read_jobs(parse(envelope(text)), history=False)
    assert [job.job_id for job in jobs] == [1]


# -- errors and warnings --------------------------------------------------------------------------------
@pytest.mark.parametrize("errors", ["boom", 5, [5], ["boom"], [None], {"error": "boom"}, [[{"x": 1}]], 1e308])
def test_odd_errors_still_raise_a_slurm_error(errors: Any) -> None:
    response = parse(envelope({"errors": errors, "jobs": [live_record()]}))
    every_reader_is_total(response)
    with pytest.raises(SlurmError):
        response.raise_for_errors()
    assert "boom" in response.error_summary() if "boom" in json.dumps(errors) else response.error_summary()


@pytest.mark.parametrize(
    ("warnings", "messages"),
    [
        ("watch out", ["watch out"]),
        (5, ["5"]),
        ([1, 2], ["1", "2"]),
        ([{"description": ["x"]}], ["['x']"]),
        ([{"description": "fine"}, "plain"], ["fine", "plain"]),
        ([], []),
    ],
)
def test_odd_warnings_become_messages(warnings: Any, messages: list[str]) -> None:
    response = parse(envelope({"warnings": warnings, "jobs": []}))
    assert response.warning_messages() == messages
    every_reader_is_total(response)


def test_messages_stay_short_whatever_slurm_sends() -> None:
    response = parse(envelope({"errors": [{"description": "x" * 100_000, "error_number": 10**30}]}))
    with pytest.raises(SlurmError) as caught:
        response.raise_for_errors()
    assert len(str(caught.value)) < 1000


# -- job records: one job asked for -> MalformedRecordError naming job and field --------------------------
BAD_LIVE_FIELDS = [
    ("job_id", None, "job_id"),
    ("job_id", "abc", "job_id"),
    ("job_id", True, "job_id"),
    ("job_id", -5, "job_id"),
    ("job_id", [7], "job_id"),
    ("job_state", 5, "job_state"),
    ("job_state", {"current": "RUNNING"}, "job_state"),
    ("job_state", [["RUNNING"]], "job_state"),
    ("exit_code", [1], "exit_code"),
    ("exit_code", {"status": 5}, "exit_code.status"),
    ("exit_code", {"return_code": "abc"}, "exit_code.return_code"),
    ("exit_code", {"return_code": {"set": True, "number": 1e308}}, "exit_code.return_code"),
    ("exit_code", {"signal": "KILL"}, "exit_code.signal"),
    ("end_time", "yesterday", "end_time"),
    ("start_time", {"set": True, "infinite": False, "number": [1]}, "start_time"),
    ("time_limit", {"set": True, "number": 2**70}, "time_limit"),
    ("state_reason", ["Priority"], "state_reason"),
    ("name", {"x": 1}, "name"),
    ("comment", ["tag"], "comment"),
]


@pytest.mark.parametrize(("key", "value", "field"), BAD_LIVE_FIELDS, ids=[f"{k}={v!r}" for k, v, _ in BAD_LIVE_FIELDS])
def test_a_bad_record_of_the_job_asked_for_names_the_job_and_the_field(key: str, value: Any, field: str) -> None:
    record = live_record(7)
    record[key] = value
    response = parse(envelope({"jobs": [record]}), LIVE_PATH.format(7))
    with pytest.raises(MalformedRecordError) as caught:
        read_live_job(response)
    message = str(caught.value)
    assert "job 7" in message and field in message, message
    assert caught.value.field == field and caught.value.job_id == 7
    assert isinstance(caught.value, MalformedResponseError)  # transient: retried like a garbled answer


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("time", "x", "time"),
        ("time", {"end": "late"}, "time.end"),
        ("time", {"start": 1e400}, "time.start"),
        ("state", 5, "state"),
        ("state", {"current": [{}]}, "state.current"),
        ("state", {"current": ["COMPLETED"], "reason": {"a": 1}}, "state.reason"),
        ("exit_code", "x:y", None),  # an unreadable "3:0" string is no exit code, not an error
        ("user", {"name": ["root"]}, "user.name"),
        ("comment", {"job": 5.5}, None),
        ("comment", {"job": ["t"]}, "comment.job"),
    ],
)
def test_a_bad_history_record_names_the_field(key: str, value: Any, field: str | None) -> None:
    record = history_record(9)
    record[key] = value
    response = parse(envelope({"jobs": [record]}), HISTORY_PATH.format(9))
    if field is None:
        job = read_history_job(response)
        assert job is not None and job.job_id == 9
        return
    with pytest.raises(MalformedRecordError, match=rf"job 9.*{field}"):
        read_history_job(response)


def test_the_asked_job_is_found_among_foreign_garbage() -> None:
    response = parse(envelope({"jobs": ["junk", {"job_id": None}, live_record(7)]}), LIVE_PATH.format(7))
    job = read_live_job(response)
    assert job is not None and job.job_id == 7
    history = parse(envelope({"jobs": [history_record(9), {"job_id": 9, "time": 1}]}), HISTORY_PATH.format(9))
    with pytest.raises(MalformedRecordError, match="job 9"):  # the newest record of job 9 is the bad one
        read_history_job(history)


# -- list answers: a bad record is skipped, the others are kept ----------------------------------------
POISON: list[Any] = [
    7,
    "job",
    None,
    [live_record(50)],
    {},
    {"job_id": None},
    {"job_id": "abc", "job_state": ["RUNNING"]},
    {"job_id": -4, "job_state": ["RUNNING"]},
    {"job_id": True},
    {"job_id": 2.5},
    {**live_record(51), "job_state": 5},
    {**live_record(52), "exit_code": [3]},
    {**live_record(53), "end_time": {"number": "x"}},
    {**live_record(54), "nodes": {"a": 1}},
]


@pytest.mark.parametrize("structured", [False, True], ids=["body", "structuredBody"])
def test_a_list_answer_keeps_the_good_jobs_around_bad_records(structured: bool) -> None:
    live = [POISON[0], live_record(1), *POISON[1:], live_record(2)]
    jobs = read_jobs(parse(envelope({"jobs": live}, structured=structured)), history=False)
    assert [job.job_id for job in jobs] == [1, 2]
    assert set(read_jobs_by_id(parse(envelope({"jobs": live}, structured=structured)), [2, 51])) == {2}

    history = [{**history_record(60), "time": "x"}, history_record(3), 5, {"job_id": {}}, history_record(4)]
    jobs = read_jobs(parse(envelope({"jobs": history}, structured=structured)), history=True)
    assert [job.job_id for job in jobs] == [3, 4]

    states = [
        {"job_id": "1", "state": ["RUNNING"]},
        {"job_id": "2", "state": 5},
        {"job_id": None, "state": ["RUNNING"]},
        "x",
        {"job_id": "1e400", "state": ["FAILED"]},
        {"job_id": "3", "state": ["COMPLETED"]},
        {"job_id": "4", "state": [["COMPLETED"]]},
    ]
    found = read_job_states(parse(envelope({"jobs": states}, structured=structured)))
    assert {job_id: str(state) for job_id, state in found.items()} == {1: "RUNNING", 3: "COMPLETED"}


@pytest.mark.parametrize("jobs", ["x", 5, {"job_id": 1}, True])
def test_jobs_that_is_not_a_list_is_a_malformed_answer(jobs: Any) -> None:
    response = parse(envelope({"jobs": jobs}), LIVE_PATH.format(1))
    every_reader_is_total(response)
    for reader in (read_live_job, read_history_job, read_job_states, lambda r: read_jobs(r, history=False)):
        with pytest.raises(MalformedResponseError, match="jobs="):
            reader(response)


def test_a_bad_record_is_logged_once_not_on_every_poll(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readers, "_skipped_records", SkippedRecords())  # forget what other tests reported
    answer = envelope({"jobs": [{**live_record(77), "job_state": 5}, live_record(1), {"job_id": None}]})
    with caplog.at_level(logging.WARNING, logger="airflow_provider_slurmapi.slurm.jobs.readers"):
        for _ in range(5):
            assert [job.job_id for job in read_jobs(parse(answer), history=False)] == [1]
    lines = [r.getMessage() for r in caplog.records if "Skipping a record" in r.getMessage()]
    assert len(lines) == 2, lines
    assert any("job 77" in line and "job_state=5" in line for line in lines)
    assert any("job_id=None" in line for line in lines)


def test_the_memory_of_reported_records_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    skipped = SkippedRecords(capacity=3)
    response = parse(envelope({"jobs": []}))
    with caplog.at_level(logging.WARNING, logger="airflow_provider_slurmapi.slurm.jobs.readers"):
        for job_id in range(1, 101):
            skipped.report(response, MalformedRecordError("bad", job_id=job_id, field="job_state"))
        skipped.report(response, MalformedRecordError("bad", job_id=100, field="job_state"))
    assert len(skipped._seen) == 3
    assert len([r for r in caplog.records if "Skipping" in r.getMessage()]) == 100


# -- submit and cancel -------------------------------------------------------------------------------------
@pytest.mark.parametrize("job_id", [None, "abc", True, -5, 0, 1e400, "\u0661\u0662", "\u00b2", [1], 2**70, "1" * 30])
def test_a_submit_answer_without_a_valid_job_id_is_malformed(job_id: Any) -> None:
    text = json.dumps({"job_id": "__ID__"}).replace('"__ID__"', "1e400" if job_id == 1e400 else json.dumps(job_id))
    with pytest.raises(MalformedResponseError, match="job_id"):
        read_submit(parse(envelope(text), "/slurm/v0.0.42/job/submit"))


def test_a_submit_answer_with_a_string_job_id_is_read() -> None:
    assert read_submit(parse(envelope({"job_id": "42"}), "/slurm/v0.0.42/job/submit")).job_id == 42


@pytest.mark.parametrize("status", [5, "x", {"error": {"code": 2017}}, True])
def test_a_cancel_answer_whose_status_is_not_a_list_is_malformed(status: Any) -> None:
    response = parse(envelope({"status": status}), "/slurm/v0.0.42/job/5")
    with pytest.raises(MalformedResponseError, match="status="):
        read_cancel(response)


@pytest.mark.parametrize(
    "item", [5, "x", None, {"error": "boom"}, {"error": {"code": "abc"}}, {"error": {"code": 1e308}}]
)
def test_odd_cancel_status_items_do_not_break_the_cancel(item: Any) -> None:
    response = parse(envelope({"status": [item]}), "/slurm/v0.0.42/job/5")
    assert read_cancel(response).value == "cancelled"


# -- the job model's own helpers ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value", [5, {"current": 1}, [{"a": 1}], [None, "RUNNING"], "RUNNING", ["PENDING", 5], 1e400, {}]
)
def test_parse_job_state_reads_anything(value: Any) -> None:
    state = parse_job_state(value)
    assert isinstance(state.state, JobState)


@pytest.mark.parametrize("value", [1e400, float("nan"), "9" * 5000, [1], {"number": 1e400}, True, "-"])
def test_slurm_number_and_exit_code_read_anything(value: Any) -> None:
    assert slurm_number(value) is None
    assert isinstance(ExitInfo.parse(value), ExitInfo)
    assert isinstance(ExitInfo.parse({"return_code": value, "signal": {"id": value}}), ExitInfo)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("job_id", None),
        ("job_id", "x"),
        ("state", "WHATEVER"),
        ("state", 5),
        ("flags", "REQUEUED"),
        ("flags", [1]),
        ("exit_code", "0"),
        ("exit_code", 1e400),
        ("name", ["x"]),
        ("source", "elsewhere"),
        ("exit_status", [None]),
    ],
)
def test_from_dict_of_a_tampered_event_is_a_malformed_record(key: str, value: Any) -> None:
    data = SlurmJob.from_live(live_record(3)).to_dict()
    data[key] = value
    with pytest.raises(MalformedRecordError, match=key):
        SlurmJob.from_dict(data)
    with pytest.raises(MalformedRecordError):
        SlurmJob.from_dict(["not", "a", "dict"])


def test_lone_surrogates_never_reach_a_log_or_xcom_as_invalid_utf8() -> None:
    record = {**live_record(3), "name": "\ud800train", "comment": "tag \udfff", "state_reason": "\ud83d"}
    job = read_live_job(parse(envelope({"jobs": [record]}), LIVE_PATH.format(3)))
    assert job is not None
    json.dumps(job.to_dict(), ensure_ascii=False).encode("utf-8")
    job.describe().encode("utf-8")
    job.failure_message().encode("utf-8")
    stored = {**job.to_dict(), "exit_status": ["\ud800"], "flags": ["X\udfff"], "stdout": "\ud83d"}
    json.dumps(SlurmJob.from_dict(stored).to_dict(), ensure_ascii=False).encode("utf-8")
