"""A watch rides out an API outage for its own budget, fails at once on a permanent error, and can be
saved and restored between processes (a rescheduled sensor) without forgetting what it saw."""

from __future__ import annotations

import json
import time

import pytest

from airflow_provider_slurmapi.slurm.api.errors import (
    ApiConnectionError,
    JobNotFoundError,
    PermissionDeniedError,
    RequestNotSentError,
    TransientApiError,
    WrongEndpointError,
)
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob
from airflow_provider_slurmapi.slurm.jobs.watch import DEFAULT_OUTAGE_TOLERANCE_SECONDS, JobWatch, WatchOutageError
from tests.fixtures import fixture_body

UNAVAILABLE = TransientApiError("The service is currently unavailable.", http_status=503, status="UNAVAILABLE")


def running_job() -> SlurmJob:
    return SlurmJob.from_live(fixture_body("08_job_A_immediately_after_submit")["jobs"][0])


def test_the_default_outage_budget_is_at_least_an_hour() -> None:
    assert DEFAULT_OUTAGE_TOLERANCE_SECONDS >= 3600
    assert JobWatch(1).settings.outage_tolerance_seconds == DEFAULT_OUTAGE_TOLERANCE_SECONDS


def test_an_outage_is_ridden_out_with_a_warning_every_few_minutes_then_fails_naming_the_job() -> None:
    now = [0.0]
    watch = JobWatch(42, outage_tolerance_seconds=3600, outage_warning_interval=300, clock=lambda: now[0])
    watch.observe(running_job())
    warnings = []
    for second in range(30, 3600, 30):  # an error every 30 s for an hour
        now[0] = second
        step = watch.observe_error(UNAVAILABLE if second % 60 else ApiConnectionError("connection refused"))
        assert step.warning and not step.finished and step.job is None
        if step.message:
            warnings.append(second)
    assert warnings == list(range(30, 3600, 300)), "a warning at once, then every 300 s"
    now[0] = 3601
    with pytest.raises(WatchOutageError) as failure:
        watch.observe_error(UNAVAILABLE)
    message = str(failure.value)
    assert failure.value.job_id == 42
    assert "Slurm job 42" in message and "outage_tolerance_seconds=3600" in message
    assert "a retry of this task reattaches to Slurm job 42" in message


def test_an_answer_ends_the_outage_and_the_budget_starts_again() -> None:
    now = [0.0]
    watch = JobWatch(7, outage_tolerance_seconds=100, clock=lambda: now[0])
    now[0] = 90
    assert watch.observe_error(UNAVAILABLE).message  # down since the watch began
    now[0] = 95
    step = watch.observe(running_job())
    assert step.message and "answers again, after 95s" in step.message
    now[0] = 190  # 95 s into a second outage: within the budget again
    assert not watch.observe_error(UNAVAILABLE).finished
    now[0] = 196
    with pytest.raises(WatchOutageError):
        watch.observe_error(UNAVAILABLE)


def test_a_permanent_error_fails_at_once() -> None:
    watch = JobWatch(7, clock=lambda: 0.0)
    denied = PermissionDeniedError("Permission denied on the cluster.", http_status=403)
    with pytest.raises(PermissionDeniedError):
        watch.observe_error(denied)


def test_a_saved_watch_goes_on_in_another_process() -> None:
    now = [1000.0]
    first = JobWatch(5, missing_grace_seconds=10, clock=lambda: now[0])
    assert first.observe(running_job()).message
    saved = json.loads(json.dumps(first.snapshot()))  # what the task state store keeps
    # Another process, another monotonic clock: the job's state is not logged again...
    later = [50.0]
    second = JobWatch.restore(saved, 5, missing_grace_seconds=10, clock=lambda: later[0])
    assert second.observe(running_job()).message is None
    assert second.observe(None).message  # ...and the grace starts here
    third = JobWatch.restore(second.snapshot(), 5, missing_grace_seconds=10, clock=lambda: later[0])
    later[0] = 61
    with pytest.raises(JobNotFoundError, match="grace"):
        third.observe(None)


def test_a_saved_outage_goes_on_in_another_process() -> None:
    first = JobWatch(5, outage_tolerance_seconds=60, clock=lambda: 0.0)
    first.observe_error(UNAVAILABLE)
    saved = first.snapshot()
    saved["saved_at"] = time.time() - 61  # saved a minute ago
    with pytest.raises(WatchOutageError):
        JobWatch.restore(saved, 5, outage_tolerance_seconds=60).observe_error(UNAVAILABLE)


@pytest.mark.parametrize(
    "saved",
    [None, "junk", [], {"job_id": 6}, {"job_id": 5, "saved_at": "x"}, {"job_id": 5, "saved_at": 1, "last": {}}],
)
def test_an_unreadable_or_foreign_snapshot_gives_a_fresh_watch(saved: object) -> None:
    watch = JobWatch.restore(saved, 5)
    assert watch.last is None
    assert watch.observe(running_job()).message


def unresolvable_host_error() -> RequestNotSentError:
    """What the client raises at its first contact with a host that does not resolve: the resolver's own
    error for a name under .invalid (RFC 6761), as the core reads it."""
    import socket

    from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
    from airflow_provider_slurmapi.slurm.client import not_sent, wrong_endpoint

    cluster = ClusterRef("demo-project", "us-central1", "demo", api_endpoint="https://slurm-gateway.invalid")
    with pytest.raises(socket.gaierror) as failed:
        socket.getaddrinfo("slurm-gateway.invalid", 443)
    return wrong_endpoint(not_sent(cluster, failed.value))


def test_a_host_that_does_not_resolve_fails_a_watch_that_never_saw_its_job() -> None:
    """A sensor pointed at a typo'd endpoint: a configuration mistake, not an outage to wait out."""
    watch = JobWatch(7, clock=lambda: 0.0)
    error = unresolvable_host_error()
    with pytest.raises(WrongEndpointError):
        watch.observe_error(error)


def test_a_host_that_stops_resolving_is_an_outage_for_a_watch_that_saw_its_job_even_in_another_process() -> None:
    """The job was reached through this endpoint (by this watch, or by the process that saved it): a name or
    a certificate that fails now is DNS or TLS down, ridden out for the outage budget like any outage."""
    now = [0.0]
    first = JobWatch(9, outage_tolerance_seconds=600, clock=lambda: now[0], wall_clock=lambda: 5000 + now[0])
    first.observe(running_job())
    error = unresolvable_host_error()
    now[0] = 30
    assert first.observe_error(error).warning
    saved = json.loads(json.dumps(first.snapshot()))  # what a rescheduled sensor's next poke starts from
    restored = JobWatch.restore(
        saved, 9, outage_tolerance_seconds=600, clock=lambda: now[0], wall_clock=lambda: 5000 + now[0]
    )
    now[0] = 60
    step = restored.observe_error(error)
    assert step.warning and not step.finished and step.message is None  # warned at 30 s already
    now[0] = 601
    with pytest.raises(WatchOutageError):
        restored.observe_error(error)
