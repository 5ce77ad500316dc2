"""The watch as a core plan, driven whole on a fake clock: no real sleeping.

The worker and the sensor drive it with :func:`run_watch`, the trigger with :func:`arun_watch`; both
are given here what the hook or the trigger's poller would answer (the records real Slurm gives, as in
test_watch_long_jobs.py), so each decision (give up, array cancel, pending timeout, copy sweep,
deadline) is seen as the effects the plan asks for, once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_slurmapi.slurm.api.errors import ApiConnectionError, SlurmApiError
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob
from airflow_provider_slurmapi.slurm.jobs.states import parse_job_state
from airflow_provider_slurmapi.slurm.jobs.watch import (
    NO_ANSWER,
    JobNeverStartsError,
    NoAnswer,
    PendingTimeoutError,
    WatchOutageError,
    WatchSettings,
    arun_watch,
    run_watch,
    watch_plan,
)
from tests.unit.hooks.fake_clock import AsyncFakeClock, FakeClock

JOB = 7


def job(state: list[str], reason: str | None = None) -> SlurmJob:
    return SlurmJob(job_id=JOB, state_info=parse_job_state(state), source="live", reason=reason, restart_count=0)


class Port:
    """What the hook answers: one scripted answer a look (the last one again once they run out)."""

    def __init__(self, answers: list[SlurmJob | SlurmApiError | None]) -> None:
        self._answers: Iterator[SlurmJob | SlurmApiError | None] = iter(answers)
        self._last: SlurmJob | SlurmApiError | None = None
        self.looks = 0
        self.cancels: list[int] = []
        self.sweeps: list[tuple[str, int]] = []

    def get_job(self, job_id: int) -> SlurmJob | None:
        self.looks += 1
        self._last = next(self._answers, self._last)
        if isinstance(self._last, SlurmApiError):
            raise self._last
        return self._last

    def cancel_job(self, job_id: int) -> str:
        self.cancels.append(job_id)
        return "cancelled"

    def cancel_later_copies(self, marker: str, keep_job_id: int) -> list[int]:
        self.sweeps.append((marker, keep_job_id))
        return []


def test_pending_beyond_its_timeout_is_cancelled_once_and_given_up_on_the_fake_clock(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, port = FakeClock(), Port([job(["PENDING"], "Resources")])
    watch = WatchSettings(pending_timeout=95).new_watch(JOB, clock=clock, pending_since=clock.wall())
    with caplog.at_level(logging.INFO):
        end = run_watch(watch_plan(watch, interval=30, cancel_on_kill=True), port, clock, logging.getLogger("t"))
    assert isinstance(end.gave_up, PendingTimeoutError) and "pending_timeout=95s" in str(end.gave_up)
    # Three intervals, then the rest up to the pending deadline: the look at 95 s gives up.
    assert clock.sleeps == [30, 30, 30, 5] and port.looks == 5 and port.cancels == [JOB]
    assert "Cancelling Slurm job 7: PendingTimeoutError." in caplog.text and "cancel answered cancelled" in caplog.text


def test_a_job_that_can_never_start_is_given_up_at_the_first_look_and_left_alone_without_cancel_on_kill() -> None:
    clock, port = FakeClock(), Port([job(["PENDING"], "DependencyNeverSatisfied")])
    watch = WatchSettings().new_watch(JOB, clock=clock)
    end = run_watch(watch_plan(watch, interval=30, cancel_on_kill=False), port, clock, logging.getLogger("t"))
    assert isinstance(end.gave_up, JobNeverStartsError) and port.cancels == [] and clock.sleeps == []


def test_an_outage_is_ridden_out_on_the_clock_then_fails_past_its_tolerance() -> None:
    clock = FakeClock()
    port = Port([job(["RUNNING"]), ApiConnectionError("no connection")])
    watch = WatchSettings(outage_tolerance_seconds=100).new_watch(JOB, clock=clock)
    with pytest.raises(WatchOutageError, match="outage_tolerance_seconds=100"):
        run_watch(watch_plan(watch, interval=30, cancel_on_kill=True), port, clock, logging.getLogger("t"))
    assert clock.sleeps == [30, 30, 30, 30] and port.cancels == []  # an outage never cancels the job


def test_a_resent_submits_copies_are_swept_at_each_look_until_the_job_is_over() -> None:
    clock = FakeClock()
    port = Port([job(["PENDING"]), job(["RUNNING"]), job(["COMPLETED"])])
    watch = WatchSettings().new_watch(JOB, clock=clock)
    plan = watch_plan(watch, interval=5, cancel_on_kill=True, copies_of="send-1")
    end = run_watch(plan, port, clock, logging.getLogger("t"))
    assert end.finished and end.job is not None and end.job.succeeded
    assert port.sweeps == [("send-1", JOB), ("send-1", JOB)] and clock.sleeps == [5, 5]


def test_a_pause_hands_back_after_the_look_it_asks_for() -> None:
    clock, port = FakeClock(), Port([job(["RUNNING"])])
    watch = WatchSettings().new_watch(JOB, clock=clock)
    end = run_watch(
        watch_plan(watch, interval=5, cancel_on_kill=True, pause=lambda step, outage: True),
        port,
        clock,
        logging.getLogger("t"),
    )
    assert not end.finished and end.job is not None and port.looks == 1 and clock.sleeps == []


class PollerPort:
    """What the trigger's shared poller answers: a job that never changes, so every look times out."""

    def __init__(self, clock: AsyncFakeClock, seen: SlurmJob) -> None:
        self.clock = clock
        self.seen = seen
        self.first = True
        self.cancels: list[int] = []
        self.sweeps = 0

    async def poll(self, job_id: int, within: float | None) -> SlurmJob | NoAnswer | None:
        if self.first:
            self.first = False
            return self.seen
        assert within is not None, "a trigger with a deadline never waits without a bound"
        await self.clock.sleep(within)  # nothing new until the bound: the plan acts on its own
        return NO_ANSWER

    async def cancel_job(self, job_id: int) -> None:
        self.cancels.append(job_id)

    async def cancel_later_copies(self, marker: str, keep_job_id: int) -> None:
        self.sweeps += 1


@pytest.mark.parametrize("cancel_on_kill", [True, False])
def test_the_trigger_side_reaches_its_deadline_on_the_fake_clock(cancel_on_kill: bool) -> None:
    clock = AsyncFakeClock()
    port = PollerPort(clock, job(["RUNNING"]))
    watch = WatchSettings().new_watch(JOB, clock=clock)
    plan = watch_plan(
        watch,
        interval=30,
        paced_by_poller=True,
        cancel_on_kill=cancel_on_kill,
        copies_of="send-1",
        deadline=clock.wall() + 100,
    )
    end = asyncio.run(arun_watch(plan, port, clock, logging.getLogger("t")))
    assert end.timed_out is not None and end.job is not None
    assert port.cancels == ([JOB] if cancel_on_kill else [])
    assert ("cancelled" in end.timed_out) is cancel_on_kill
    # The sweeps come each interval although the poller had nothing new; the deadline bounds the last wait.
    assert clock.sleeps == [30, 30, 30, 10] and port.sweeps == 4


def test_the_trigger_side_gives_up_at_the_pending_deadline_without_a_new_answer() -> None:
    clock = AsyncFakeClock()
    port = PollerPort(clock, job(["PENDING"], "Priority"))
    watch = WatchSettings(pending_timeout=60).new_watch(JOB, clock=clock, pending_since=clock.wall())
    plan = watch_plan(watch, interval=30, paced_by_poller=True, cancel_on_kill=True)
    end = asyncio.run(arun_watch(plan, port, clock, logging.getLogger("t")))
    assert isinstance(end.gave_up, PendingTimeoutError) and port.cancels == [JOB] and clock.sleeps == [60]


def test_a_watch_saved_and_restored_keeps_its_time_on_the_clock() -> None:
    clock = FakeClock()
    first = WatchSettings(missing_grace_seconds=10).new_watch(JOB, clock=clock)
    first.observe(None)
    clock.sleep(6)
    later = WatchSettings(missing_grace_seconds=10).new_watch(JOB, clock=clock, saved=first.snapshot())
    clock.sleep(6)  # 12 s missing in all, across the two: past the grace
    with pytest.raises(SlurmApiError, match="grace 10s"):
        later.observe(None)


def test_every_watch_setting_has_one_declaration_that_jobwatch_takes_by_name() -> None:
    settings: dict[str, Any] = {"missing_grace_seconds": 1.0, "outage_tolerance_seconds": 2.0,
                                "log_progress": False, "array_fail_fast": True, "pending_timeout": 3.0}  # fmt: skip
    assert set(settings) == set(WatchSettings.names())
    assert WatchSettings.from_kwargs({**settings, "other": 1}).as_kwargs() == settings
