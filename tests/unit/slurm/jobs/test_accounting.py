"""The accounting summary, read from real Slurm 24.11 history records and from hostile ones."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_slurmapi.slurm.jobs.accounting import (
    Accounting,
    format_bytes,
    not_recorded,
    pick_record,
    read_accounting,
)
from tests.fixtures import fixture_body, fixture_job_id


def real(name: str) -> Accounting | None:
    job_id = fixture_job_id(name)
    return read_accounting(pick_record(fixture_body(name), job_id), job_id)


def test_a_completed_job_of_the_real_history() -> None:
    summary = real("48_slurmdb_job_A")
    job_id, elapsed = fixture_job_id("48_slurmdb_job_A"), fixture_body("48_slurmdb_job_A")["jobs"][0]["time"]["elapsed"]
    assert summary is not None and elapsed in (5, 6)  # ``sleep 5``
    assert (summary.state, summary.elapsed_seconds, summary.nodes, summary.node_list) == (
        "COMPLETED",
        elapsed,
        1,
        "localhost",
    )
    assert summary.tres_allocated == {"cpu": 1, "node": 1, "billing": 1}  # energy -2 is not a count
    assert (summary.cpus, summary.memory_mb, summary.gpus) == (1, None, 0)
    assert (summary.node_hours, summary.gpu_hours) == (round(elapsed / 3600, 4), 0.0)
    assert (summary.exit_code, summary.signal, summary.requeues) == (0, None, 0)
    assert summary.max_rss_bytes is None  # the lab gathers nothing for it (jobacct_gather/none)
    assert summary.describe() == (
        f"Slurm job {job_id} accounting: COMPLETED after {elapsed}s on 1 node (localhost); allocated cpu=1, "
        "billing=1; 0.00 node-hours, 0.00 GPU-hours; MaxRSS not accounted; exit code 0; requeued 0 times."
    )


def test_maxrss_signal_and_timeout_of_the_real_history() -> None:
    timeout = real("74_slurmdb_job_timeout")
    assert timeout is not None and timeout.state == "TIMEOUT"
    # MaxRSS is the batch step's ``tres.requested.max`` mem: in the first recording, not in the lab's today
    # (jobacct_gather/none).
    record = fixture_body("74_slurmdb_job_timeout")["jobs"][0]
    peaks = [
        (t["count"], s["step"]["id"])
        for s in record["steps"]
        for t in s["tres"]["requested"]["max"]
        if t["type"] == "mem"
    ]
    if peaks:
        assert (timeout.max_rss_bytes, timeout.max_rss_step) == max(peaks)
        assert f"MaxRSS {format_bytes(max(peaks)[0])} (step {max(peaks)[1]})" in timeout.describe()
    else:
        assert timeout.max_rss_bytes is None and "MaxRSS not accounted" in timeout.describe()
    killed = real("73_slurmdb_job_sigkill")
    assert killed is not None and killed.signal == "KILL" and "signal KILL" in killed.describe()


def test_a_record_not_finished_yet_is_no_summary() -> None:
    """slurmdbd lags: right after the end it may still hold the job as RUNNING."""
    assert real("68_slurmdb_job_running") is None
    assert pick_record(fixture_body("52_slurmdb_job_unknown_999999"), 999999) is None


def test_gpus_memory_and_the_newest_record_of_a_requeued_job() -> None:
    record = copy.deepcopy(fixture_body("48_slurmdb_job_A")["jobs"][0])
    record["tres"]["allocated"] += [
        {"type": "mem", "name": "", "id": 2, "count": 65536},
        {"type": "gres", "name": "gpu", "id": 1001, "count": 8},
    ]
    record["allocation_nodes"] = 2
    record["time"]["elapsed"] = 3600
    record["restart_cnt"] = 2
    older = {**copy.deepcopy(record), "restart_cnt": 1}
    job_id = record["job_id"]
    summary = read_accounting(pick_record({"jobs": [older, record]}, job_id), job_id)
    assert summary is not None
    assert (summary.memory_mb, summary.gpus, summary.gpu_hours, summary.node_hours) == (65536, 8, 8.0, 1.0)
    assert summary.requeues == 2
    assert "mem=64G" in summary.describe() and "gres/gpu=8" in summary.describe()
    assert "requeued 2 times" in summary.describe()
    json.dumps(summary.to_dict())


def test_without_a_record_the_line_says_so() -> None:
    line, value = not_recorded(42, 30.4)
    assert line.startswith("Slurm job 42 accounting: no summary: the history (slurmdbd) has no finished record")
    assert "after 30s" in line and "sacct -j 42" in line
    assert value["recorded"] is False


def test_format_bytes() -> None:
    assert [format_bytes(n) for n in (0, 1536, 12 * 1024**3, 2**70)] == [
        "0 B",
        "1.5 KiB",
        "12.0 GiB",
        "1073741824.0 TiB",
    ]


ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
PATHS = [
    ("time",),
    ("time", "elapsed"),
    ("tres",),
    ("tres", "allocated"),
    ("steps",),
    ("exit_code",),
    ("restart_cnt",),
    ("allocation_nodes",),
    ("nodes",),
    ("state",),
    ("state", "current"),
]


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    changes=st.lists(st.tuples(st.sampled_from(PATHS), ODD), max_size=4),
    entry=st.dictionaries(st.sampled_from(["type", "name", "count", "id"]), ODD, max_size=4),
)
def test_odd_records_never_break_the_summary(changes: list[tuple[tuple[str, ...], Any]], entry: Any) -> None:
    record: Any = copy.deepcopy(fixture_body("74_slurmdb_job_timeout")["jobs"][0])
    record["tres"]["allocated"].append(entry)
    record["steps"].append({"tres": {"requested": {"max": [entry]}}, "step": {"id": entry.get("name")}})
    for path, value in changes:
        target = record
        for key in path[:-1]:
            target = target.get(key) if isinstance(target, dict) else None
        if isinstance(target, dict):
            target[path[-1]] = value
    summary = read_accounting(record, 13)
    if summary is not None:
        json.dumps(summary.to_dict())
        assert summary.describe().startswith("Slurm job 13 accounting: ")
        for count in (summary.elapsed_seconds, summary.nodes, summary.max_rss_bytes, summary.requeues):
            assert count is None or 0 <= count <= 2**53


@pytest.mark.parametrize("record", [None, 5, "x", [], {"job_id": "13"}, {"job_id": 13, "state": {"current": 5}}])
def test_records_of_the_wrong_shape_are_no_summary(record: Any) -> None:
    assert read_accounting(record, 13) is None
