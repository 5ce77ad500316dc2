"""A job array as one thing to wait for: its tasks, their states, counts and failures.

Slurm 24.11 shows an array as several records sharing ``array_job_id``: one per task that started
(its own job id, ``array_task_id`` set) and, while some tasks still wait, one *meta* record (job id
= the array's id, ``array_task_id`` unset) whose ``array_task_string`` (live, ``"2-3%2"``) or
``array.task`` (history, a hex bitmap ``"0xC"``) lists the waiting tasks. The last task to start
takes over the meta record. ``jobs/state`` answers one entry per task, ``"<job id>_<task id>"``,
the waiting ones under the array's id. Finished tasks leave the live queue one by one, so a view
is merged with what was seen before (:meth:`ArrayView.merged`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from airflow_provider_slurmapi.slurm.api.values import as_int, clean_text
from airflow_provider_slurmapi.slurm.jobs.states import (
    FINISHED_STATES,
    HasJobState,
    JobState,
    JobStateInfo,
    parse_job_state,
)

if TYPE_CHECKING:
    from airflow_provider_slurmapi.slurm.jobs.job import ExitInfo, SlurmJob

# At most this many failed tasks are spelled out in a failure message; the rest are counted.
MAX_FAILED_NAMED = 20
# Slurm's limit on array task ids (MaxArraySize is at most 4,000,001): guards the parsers below.
MAX_TASK_ID = 4_000_000
# The order of counts in the log line: done first, then what is still to come.
_COUNT_ORDER = [JobState.COMPLETED, *sorted(FINISHED_STATES - {JobState.COMPLETED}), JobState.RUNNING]
_COUNT_ORDER += [JobState.SUSPENDED, JobState.PENDING, JobState.UNKNOWN]
# Which failed state names an array that did not succeed (the first present wins).
_FAILED_ORDER = [
    JobState.FAILED,
    JobState.OUT_OF_MEMORY,
    JobState.TIMEOUT,
    JobState.NODE_FAIL,
    JobState.BOOT_FAIL,
    JobState.DEADLINE,
    JobState.PREEMPTED,
    JobState.CANCELLED,
]
_RANGE = re.compile(r"^(\d{1,7})(?:-(\d{1,7})(?::(\d{1,7}))?)?$")


def parse_task_ids(text: object) -> list[int]:
    """Task ids of an ``array_task_string`` (``"0-9:2,15%4"``) or a history bitmap (``"0xC"``); [] if unreadable."""
    if not isinstance(text, str) or not text.strip():
        return []
    text = text.strip()
    if text.lower().startswith("0x"):
        try:
            bits = int(text, 16)
        except ValueError:
            return []
        if bits.bit_length() > MAX_TASK_ID + 1:
            return []
        return [i for i in range(bits.bit_length()) if bits >> i & 1]
    ids: list[int] = []
    for part in text.split("%", 1)[0].strip("[]").split(","):
        match = _RANGE.match(part.strip())
        if not match:
            return []
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) else first
        step = int(match.group(3)) if match.group(3) else 1
        if step < 1 or last < first or last > MAX_TASK_ID:
            return []
        ids.extend(range(first, last + 1, step))
    return ids


def parse_state_entry_id(raw: object) -> tuple[int, int | None] | None:
    """``jobs/state``'s ``job_id``: ``"123"`` -> (123, None), ``"125_4"`` -> (125, 4); else ``None``."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return (raw, None) if raw > 0 else None
    if not isinstance(raw, str):
        return None
    job, sep, task = raw.strip().partition("_")
    job_id = as_int(job) if job.isdigit() else None
    if job_id is None or job_id <= 0:
        return None
    if not sep:
        return job_id, None
    task_id = int(task) if task.isdigit() and len(task) <= 7 else None
    return (job_id, task_id) if task_id is not None else None


@dataclass(frozen=True, slots=True)
class ArrayTask(HasJobState):
    """One task of an array: its id, its own job id once it started, its state and how it ended."""

    task_id: int
    job_id: int | None
    state_info: JobStateInfo
    reason: str | None = None
    exit_code: int | None = None
    signal: str | None = None

    @property
    def failed(self) -> bool:
        return self.is_finished and self.state is not JobState.COMPLETED

    def describe(self) -> str:
        """``task 3 (job 8905) FAILED, reason NonZeroExitCode, exit code 3``."""
        text = f"task {self.task_id}" + (f" (job {self.job_id})" if self.job_id else "") + f" {self.state_info}"
        if self.reason:
            text += f", reason {self.reason}"
        if self.signal:
            text += f", signal {self.signal}"
        elif self.exit_code is not None:
            text += f", exit code {self.exit_code}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "job_id": self.job_id,
            "state": self.state.value,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "signal": self.signal,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ArrayTask:
        task_id = as_int(data.get("task_id"))
        if task_id is None or task_id < 0:
            raise ValueError(f"task_id={data.get('task_id')!r}")
        job_id = as_int(data.get("job_id")) if data.get("job_id") is not None else None
        reason, signal = data.get("reason"), data.get("signal")
        exit_code = data.get("exit_code")
        return cls(
            task_id=task_id,
            job_id=job_id,
            state_info=parse_job_state(data.get("state")),
            reason=clean_text(reason) if isinstance(reason, str) else None,
            exit_code=as_int(exit_code) if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
            signal=clean_text(signal) if isinstance(signal, str) else None,
        )


@dataclass(frozen=True, slots=True)
class ArrayView:
    """Every known task of one array, by task id."""

    array_job_id: int
    tasks: Mapping[int, ArrayTask] = field(default_factory=dict)
    throttle: int | None = None

    # -- building ---------------------------------------------------------------------------------
    @classmethod
    def from_jobs(cls, array_job_id: int, jobs: Iterable[SlurmJob]) -> ArrayView:
        """From the records of the array (live or history); the meta record counts for its waiting tasks."""
        tasks: dict[int, ArrayTask] = {}
        throttle = None
        for job in jobs:
            if job.array_job_id != array_job_id:
                continue
            throttle = throttle or job.array_throttle
            if job.array_task_id is not None:
                tasks[job.array_task_id] = _task_of(job, job.array_task_id)
            else:  # the meta record: every task it lists still waits, under the array's id
                for task_id in parse_task_ids(job.array_pending):
                    tasks.setdefault(task_id, _task_of(job, task_id, own_id=False))
        return cls(array_job_id, dict(sorted(tasks.items())), throttle)

    def merged(self, earlier: ArrayView | None) -> ArrayView:
        """This view plus the tasks only ``earlier`` knew (finished ones leave the live queue)."""
        if earlier is None or earlier.array_job_id != self.array_job_id:
            return self
        tasks = dict(earlier.tasks)
        for task_id, task in self.tasks.items():
            before = tasks.get(task_id)
            # A state-only update keeps what an earlier full record said of how the task ended.
            if before is not None and before.state_info == task.state_info:
                task = replace(
                    task,
                    job_id=task.job_id or before.job_id,
                    reason=task.reason or before.reason,
                    exit_code=task.exit_code if task.exit_code is not None else before.exit_code,
                    signal=task.signal or before.signal,
                )
            tasks[task_id] = task
        return ArrayView(self.array_job_id, dict(sorted(tasks.items())), self.throttle or earlier.throttle)

    def with_states(self, states: Mapping[int, tuple[int, JobStateInfo]]) -> ArrayView:
        """This view with the task states of a ``jobs/state`` answer (task id -> (job id, state))."""
        tasks = dict(self.tasks)
        for task_id, (job_id, state) in states.items():
            before = tasks.get(task_id)
            if before is not None and before.state_info == state:
                continue
            tasks[task_id] = ArrayTask(task_id, None if state.state is JobState.PENDING else job_id, state)
        return ArrayView(self.array_job_id, dict(sorted(tasks.items())), self.throttle)

    # -- what callers ask -------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        found: dict[JobState, int] = {}
        for task in self.tasks.values():
            found[task.state] = found.get(task.state, 0) + 1
        return {state.value: found[state] for state in _COUNT_ORDER if state in found}

    def summary(self) -> str:
        """``array 123: 6 COMPLETED, 2 RUNNING, 2 PENDING``."""
        counts = ", ".join(f"{n} {state}" for state, n in self.counts().items()) or "no tasks known yet"
        return f"array {self.array_job_id}: {counts}"

    @property
    def failed(self) -> list[ArrayTask]:
        return [task for task in self.tasks.values() if task.failed]

    @property
    def is_finished(self) -> bool:
        return bool(self.tasks) and all(task.is_finished for task in self.tasks.values())

    @property
    def succeeded(self) -> bool:
        return self.is_finished and not self.failed

    def state_info(self) -> JobStateInfo:
        """One state for the whole array: active while any task is, then COMPLETED or the worst failure."""
        states = {task.state for task in self.tasks.values()}
        if not states:
            return JobStateInfo(JobState.PENDING)
        if not self.is_finished:
            if JobState.RUNNING in states:
                return JobStateInfo(JobState.RUNNING)
            return JobStateInfo(JobState.PENDING if JobState.PENDING in states else JobState.UNKNOWN)
        worst = next((s for s in _FAILED_ORDER if s in states), JobState.COMPLETED)
        return JobStateInfo(worst)

    def failure_message(self, name: str | None = None) -> str:
        """Which tasks did not complete, with Slurm's state, reason and exit code for each."""
        failed = self.failed
        head = f"Slurm array {self.array_job_id}" + (f" ({name})" if name else "")
        named = "; ".join(task.describe() for task in failed[:MAX_FAILED_NAMED])
        more = f"; and {len(failed) - MAX_FAILED_NAMED} more" if len(failed) > MAX_FAILED_NAMED else ""
        ids = ",".join(str(task.task_id) for task in failed)
        return (
            f"{head}: {len(failed)} of {len(self.tasks)} tasks did not complete "
            f"(task ids {ids}): {named}{more}. {self.summary()}."
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "array_job_id": self.array_job_id,
            "throttle": self.throttle,
            "counts": self.counts(),
            "failed_task_ids": [task.task_id for task in self.failed],
            "tasks": [task.to_dict() for task in self.tasks.values()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ArrayView:
        array_job_id = as_int(data.get("array_job_id"))
        if array_job_id is None or array_job_id <= 0:
            raise ValueError(f"array_job_id={data.get('array_job_id')!r}")
        raw_tasks = data.get("tasks") or []
        if not isinstance(raw_tasks, list) or not all(isinstance(t, Mapping) for t in raw_tasks):
            raise ValueError("tasks is not a list of objects")
        tasks = {task.task_id: task for task in (ArrayTask.from_dict(t) for t in raw_tasks)}
        throttle = data.get("throttle")
        return cls(array_job_id, dict(sorted(tasks.items())), throttle if isinstance(throttle, int) else None)


def _task_of(job: SlurmJob, task_id: int, *, own_id: bool = True) -> ArrayTask:
    exit_info: ExitInfo = job.exit
    return ArrayTask(
        task_id=task_id,
        job_id=job.job_id if own_id else None,
        state_info=job.state_info,
        reason=job.reason if job.state is not JobState.COMPLETED else None,
        exit_code=exit_info.return_code if job.is_finished else None,
        signal=exit_info.signal if job.is_finished else None,
    )


def complete_array(live: SlurmJob | None, history: SlurmJob | None) -> SlurmJob | None:
    """An array's live view completed by the history: finished tasks leave the live queue one by one."""
    if live is None or live.array is None:
        return live if live is not None else history
    if history is None or history.array is None:
        return live
    return live.with_array(live.array.merged(history.array))


__all__ = ["ArrayTask", "ArrayView", "complete_array", "parse_state_entry_id", "parse_task_ids"]
