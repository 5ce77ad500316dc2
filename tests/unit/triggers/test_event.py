"""The trigger's event payload, read back by the task: every event the trigger sends passes, anything
else is refused with the field named, never with a KeyError or a TypeError."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob
from airflow_provider_slurmapi.slurm.jobs.readers import read_live_job
from airflow_provider_slurmapi.triggers.event import (
    JobErrorEvent,
    JobFinishedEvent,
    JobTimeoutEvent,
    MalformedEventError,
    event_job,
    read_event,
)
from tests.unit.recorded_slurm import API_VERSION, answer_of

RECORDED_JOBS = ["09_job_A_running", "16_job_A_completed", "21_job_B_after_cancel_2s", "66_job_failed_exit3_live"]


def recorded(fixture: str) -> SlurmJob:
    job = read_live_job(answer_of(fixture, f"/slurm/{API_VERSION}/job/1", job_id=1))
    assert job is not None
    return job


@pytest.mark.parametrize("fixture", RECORDED_JOBS)
def test_every_event_the_trigger_sends_reads_back_with_its_job(fixture: str) -> None:
    job = recorded(fixture)
    events: list[Any] = [
        JobFinishedEvent(
            status="success" if job.succeeded else "failed", job_id=1, message=job.describe(), job=job.to_dict()
        ),
        JobTimeoutEvent(status="timeout", job_id=1, message="the task's timeout passed", job=job.to_dict()),
    ]
    for event in events:
        read = read_event(event)
        assert read == event
        assert event_job(read) == SlurmJob.from_dict(job.to_dict())
    error = JobErrorEvent(status="error", job_id=1, message="PERMISSION_DENIED", permanent=True)
    assert read_event(error) == error and event_job(error) is None
    never_seen = JobTimeoutEvent(status="timeout", job_id=1, message="the task's timeout passed", job=None)
    assert read_event(never_seen) == never_seen and event_job(never_seen) is None


def test_keys_a_later_version_adds_are_ignored() -> None:
    event = {"status": "error", "job_id": 5, "message": "m", "permanent": False, "hint": "new"}
    assert read_event(event) == {"status": "error", "job_id": 5, "message": "m", "permanent": False}


def test_the_error_shows_no_text_of_the_event() -> None:
    """A message or a job record may hold a job's output: a refusal names the type, not the text."""
    with pytest.raises(MalformedEventError) as refused:
        read_event({"status": "success", "job_id": 5, "message": ["API_TOKEN=hunter2"]})
    assert "hunter2" not in str(refused.value) and "message is a list" in str(refused.value)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
NEAR_EVENTS = st.fixed_dictionaries(
    {},
    optional={
        "status": st.sampled_from(["success", "failed", "error", "timeout", "ok"]) | JSON,
        "job_id": st.integers(-2, 10) | JSON,
        "message": st.text(max_size=8) | JSON,
        "permanent": st.booleans() | JSON,
        "job": st.sampled_from([recorded(name).to_dict() for name in RECORDED_JOBS]) | JSON,
    },
)


@settings(max_examples=300, deadline=None)
@given(NEAR_EVENTS | JSON)
def test_any_payload_is_read_or_refused_with_its_field_named(event: Any) -> None:
    try:
        read = read_event(event)
    except MalformedEventError as exc:
        assert exc.field.split(".")[0] in {"event", "status", "job_id", "message", "permanent", "job"}
        assert exc.field in str(exc)
    else:
        assert read["status"] in ("success", "failed", "error", "timeout") and read["job_id"] > 0
        event_job(read)  # a job it lets through can be read
