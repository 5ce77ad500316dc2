"""JobWatch on the records real Slurm 24.11.5 gives for a requeued job, a job that can never start, and
a job pending too long (the sequences below are those the lab showed; see tests/live_slurm/test_long_jobs_live.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_slurmapi.slurm.api.errors import is_permanent
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob
from airflow_provider_slurmapi.slurm.jobs.states import FINAL_PENDING_REASONS, JobState, JobStateInfo, parse_job_state
from airflow_provider_slurmapi.slurm.jobs.watch import JobNeverStartsError, JobWatch, PendingTimeoutError


def job(state: list[str], reason: str | None = None, restarts: int | None = 0, **fields: Any) -> SlurmJob:
    return SlurmJob(
        job_id=7, state_info=parse_job_state(state), source=fields.pop("source", "live"), reason=reason,
        restart_count=restarts, **fields,
    )  # fmt: skip


def watch_over(records: list[SlurmJob], **kwargs: Any) -> tuple[JobWatch, list[str], list[bool]]:
    watch = JobWatch(7, **kwargs)
    messages, finished = [], []
    for record in records:
        step = watch.observe(record)
        messages.append(step.message or "")
        finished.append(step.finished)
    return watch, messages, finished


ADMIN_REQUEUE = [  # scontrol requeue of a running job, as the lab showed it
    job(["RUNNING"], None, 0),
    job(["PENDING", "COMPLETING"], None, 1),
    job(["PENDING"], "BeginTime", 1),
    job(["RUNNING"], None, 1),
    job(["COMPLETED"], None, 1),
]


def test_a_requeued_job_is_waited_for_to_its_last_run_and_the_requeue_is_logged_once() -> None:
    watch, messages, finished = watch_over(ADMIN_REQUEUE)
    assert finished == [False, False, False, False, True]
    requeued = [m for m in messages if "was requeued" in m]
    assert len(requeued) == 1 and "restart count 1" in requeued[0], messages
    assert watch.requeues == 1
    assert watch.last is not None and watch.last.restart_count == 1


def test_a_requeue_between_two_polls_is_counted_by_slurms_restart_count() -> None:
    watch, messages, _ = watch_over([job(["RUNNING"], None, 0), job(["RUNNING"], None, 1), job(["COMPLETED"], None, 1)])
    assert sum("was requeued" in m for m in messages) == 1 and watch.requeues == 1


def test_without_a_restart_count_a_return_to_pending_is_a_requeue() -> None:
    records = [job(["RUNNING"], restarts=None), job(["PENDING", "REQUEUED"], "BeginTime", None),
               job(["PENDING"], "BeginTime", None), job(["RUNNING"], restarts=None), job(["COMPLETED"], restarts=None)]  # fmt: skip
    watch, messages, _ = watch_over(records)
    assert sum("was requeued" in m for m in messages) == 1
    assert watch.requeues == 1 and watch.last is not None and watch.last.restart_count == 1  # for the XCom


def test_the_history_record_of_an_earlier_run_does_not_end_the_wait() -> None:
    """After a preemption the history holds the earlier run as PREEMPTED (a finished state)."""
    watch = JobWatch(7, missing_grace_seconds=60)
    watch.observe(job(["RUNNING"], None, 1))
    step = watch.observe(job(["PREEMPTED"], None, 0, source="history"))
    assert not step.finished and step.job is None
    step = watch.observe(job(["COMPLETED"], None, 1, source="history"))
    assert step.finished and step.job is not None and step.job.state is JobState.COMPLETED


@pytest.mark.parametrize("reason", sorted(FINAL_PENDING_REASONS))
def test_a_reason_only_an_admin_or_the_user_can_clear_gives_up_for_good(reason: str) -> None:
    watch = JobWatch(7)
    assert watch.observe(job(["PENDING"], "Dependency")).give_up is None
    step = watch.observe(job(["PENDING"], reason))
    assert isinstance(step.give_up, JobNeverStartsError) and is_permanent(step.give_up)
    assert reason in str(step.give_up) and FINAL_PENDING_REASONS[reason] in str(step.give_up)
    assert f"Slurm job 7: PENDING (Dependency) -> PENDING ({reason})" in (step.message or "")


@pytest.mark.parametrize("reason", ["JobHeldUser", "JobHeldAdmin", "Priority", "Resources", "BeginTime", "Dependency"])
def test_reasons_that_a_wait_or_a_deliberate_release_clears_keep_waiting(reason: str) -> None:
    assert JobWatch(7).observe(job(["PENDING"], reason)).give_up is None


def test_pending_timeout_gives_up_with_the_last_reason_and_restarts_after_a_requeue() -> None:
    now = [1000.0]
    watch = JobWatch(7, pending_timeout=30, pending_since=1000.0, wall_clock=lambda: now[0])
    assert watch.observe(job(["PENDING"], "Priority")).give_up is None
    now[0] = 1020.0
    assert watch.observe(job(["RUNNING"], None, 0)).give_up is None  # it started: the spell is over
    now[0] = 1100.0
    step = watch.observe(job(["PENDING"], "BeginTime", 1))  # requeued: a new spell begins now
    assert step.give_up is None and watch.pending_deadline == 1130.0
    now[0] = 1131.0
    assert watch.last is not None
    step = watch.observe(watch.last)
    assert isinstance(step.give_up, PendingTimeoutError) and not is_permanent(step.give_up)
    assert "PENDING (BeginTime)" in str(step.give_up) and "pending_timeout=30s" in str(step.give_up)


def test_the_requeues_and_the_pending_spell_survive_a_snapshot() -> None:
    watch, _, _ = watch_over(ADMIN_REQUEUE[:3], pending_timeout=600)
    restored = JobWatch.restore(watch.snapshot(), 7, pending_timeout=600)
    assert restored.requeues == 1 and restored.pending_deadline == watch.pending_deadline
    step = restored.observe(job(["RUNNING"], None, 1))
    assert "was requeued" not in (step.message or "")


def test_final_pending_reasons_apply_to_pending_jobs_only() -> None:
    from airflow_provider_slurmapi.slurm.jobs.states import final_pending_fix

    assert final_pending_fix(JobStateInfo(JobState.FAILED), "BadConstraints") is None
    assert final_pending_fix(JobStateInfo(JobState.PENDING), "BadConstraints") is not None


def test_a_requeue_before_the_first_look_is_said_once() -> None:
    watch, messages, _ = watch_over(
        [job(["PENDING"], "BeginTime", 1), job(["RUNNING"], None, 1), job(["COMPLETED"], None, 1)]
    )
    said = [m for m in messages if "requeued" in m]
    assert len(said) == 1 and said[0].startswith("Slurm job 7 has been requeued 1 time(s) (restart count 1)")
    assert watch.requeues == 1
