"""What each answer means (cancel outcomes, not-found, submit ids), and following a job across polls."""

from __future__ import annotations

import pytest

from airflow_provider_slurmapi.slurm.api.envelope import SlurmResponse
from airflow_provider_slurmapi.slurm.api.errors import JobNotFoundError, SlurmError
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob
from airflow_provider_slurmapi.slurm.jobs.readers import (
    CancelOutcome,
    read_cancel,
    read_history_job,
    read_job_states,
    read_jobs,
    read_live_job,
    read_submit,
)
from airflow_provider_slurmapi.slurm.jobs.watch import JobWatch
from airflow_provider_slurmapi.slurm.submit.tag import own_tagged
from tests.fixtures import fixture_body, fixture_job_id, fixture_status


def answer(name: str, method: str = "GET") -> SlurmResponse:
    return SlurmResponse(method=method, path="/x", status=fixture_status(name), body=fixture_body(name))


@pytest.mark.parametrize(
    ("name", "outcome"),
    [
        ("19_cancel_running_B", CancelOutcome.CANCELLED),
        ("29_cancel_pending_held", CancelOutcome.CANCELLED),
        ("22_cancel_completed_A", CancelOutcome.ALREADY_FINISHED),
        ("23_cancel_already_cancelled_B", CancelOutcome.ALREADY_FINISHED),
        ("30_cancel_with_signal_query", CancelOutcome.ALREADY_FINISHED),
        ("24_cancel_unknown_999999", CancelOutcome.UNKNOWN_JOB),
    ],
)
def test_cancel_outcomes(name: str, outcome: CancelOutcome) -> None:
    assert read_cancel(answer(name, "DELETE")) is outcome


def test_submit_answers() -> None:
    assert read_submit(answer("07_submit_script_toplevel", "POST")).job_id == fixture_job_id(
        "08_job_A_immediately_after_submit"
    )
    held = read_submit(answer("27_submit_held", "POST"))
    assert held.job_id == fixture_job_id("28_job_held_pending") and any("held" in w for w in held.warnings)
    assert read_submit(answer("37_submit_unknown_field", "POST")).warnings
    with pytest.raises(SlurmError, match="no node that fits"):
        read_submit(answer("38_submit_too_many_nodes", "POST"))
    with pytest.raises(SlurmError, match="2019"):
        read_submit(answer("35_submit_no_environment", "POST"))
    with pytest.raises(SlurmError, match="9000"):
        read_submit(answer("34_submit_no_script", "POST"))


def test_gone_jobs_are_none_not_errors() -> None:
    assert read_live_job(answer("25_job_unknown_999999")) is None
    assert read_live_job(answer("46_job_A_after_purge_from_live_queue")) is None
    assert read_history_job(answer("52_slurmdb_job_unknown_999999")) is None
    with pytest.raises(SlurmError, match="9000"):
        read_live_job(answer("26_job_nonnumeric_abc"))
    with pytest.raises(SlurmError, match="1007"):
        read_live_job(answer("61_job_get_bad_token"))
    with pytest.raises(SlurmError, match="7000"):
        read_history_job(answer("64_slurmdb_job_bad_token"))


def test_lists_and_states() -> None:
    jobs = read_jobs(answer("47_jobs_all_after_purge"), history=False)
    assert jobs and all(isinstance(j, SlurmJob) for j in jobs)
    history = read_jobs(answer("54_slurmdb_jobs_all"), history=True)
    assert {j.source for j in history} == {"history"}
    states = read_job_states(
        SlurmResponse("GET", "/x", 200, {"jobs": [{"job_id": "5", "state": ["RUNNING"]}], "errors": []})
    )
    assert states[5].state.value == "RUNNING"


def test_own_tagged_matches_the_tag_as_a_whole_token_oldest_first() -> None:
    base = SlurmJob.from_live(fixture_body("16_job_A_completed")["jobs"][0])
    import dataclasses

    a = dataclasses.replace(base, job_id=3, comment="x airflow-ti=abc")
    b = dataclasses.replace(base, job_id=9, comment="airflow-ti=abc")
    c = dataclasses.replace(base, job_id=12, comment="airflow-ti=other")
    d = dataclasses.replace(base, job_id=15, comment="xairflow-ti=abcdef")
    assert own_tagged([b, c, d, a], "airflow-ti=abc", user=str(base.user)) == [a, b]
    assert own_tagged([c, d], "airflow-ti=abc", user=str(base.user)) == []


def test_only_jobs_of_the_submitting_user_are_candidates() -> None:
    """A job of another user never counts, even with our tag copied into its comment after ours appeared."""
    base = SlurmJob.from_live(fixture_body("16_job_A_completed")["jobs"][0])
    import dataclasses

    ours = dataclasses.replace(base, job_id=3, comment="airflow-ti=abc", user="tester")
    copy = dataclasses.replace(base, job_id=7, comment="airflow-ti=abc", user="mallory")
    assert own_tagged([copy, ours], "airflow-ti=abc", user="tester") == [ours]
    assert own_tagged([copy], "airflow-ti=abc", user="tester") == []
    # The copy is older than anything of ours the answer shows (ours left the queue): still not ours.
    older_copy = dataclasses.replace(copy, job_id=1)
    assert own_tagged([older_copy], "airflow-ti=abc", user="tester") == []
    assert own_tagged([copy, ours, ours], "airflow-ti=abc", user="tester") == [ours]
    assert own_tagged([ours], "airflow-ti=abc", user="tester", since=(ours.submit_time or 0) + 1) == []
    with pytest.raises(ValueError, match="caller's user"):
        own_tagged([ours], "airflow-ti=abc", user="")


def test_watch_logs_changes_once_and_gives_up_after_the_grace() -> None:
    now = [0.0]
    watch = JobWatch(1, missing_grace_seconds=10, clock=lambda: now[0])
    pending = SlurmJob.from_live(fixture_body("08_job_A_immediately_after_submit")["jobs"][0])
    done = SlurmJob.from_live(fixture_body("16_job_A_completed")["jobs"][0])
    first = watch.observe(pending)
    assert first.message and "stdout" in first.message and not first.finished
    assert watch.observe(pending).message is None
    assert watch.observe(None).message  # in neither place: said once
    now[0] = 5
    assert watch.observe(None).message is None
    last = watch.observe(done)
    assert last.finished and last.message and "COMPLETED" in last.message
    now[0] = 100
    watch.observe(None)
    now[0] = 111
    with pytest.raises(JobNotFoundError, match="grace"):
        watch.observe(None)
