"""Slurm job states, as one base state plus flags.

Since REST v0.0.40 ``job_state`` is a list, one base state and any flags (``["PENDING", "REQUEUED"]``);
v0.0.39 and older send one string. History answers carry ``state.current``. Everything is folded
into :class:`JobStateInfo` here, so no other module reads a raw state.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass


class JobState(enum.StrEnum):
    """Base states of a Slurm job (``job_state_string`` in Slurm's source)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUSPENDED = "SUSPENDED"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    UNKNOWN = "UNKNOWN"

    @property
    def is_finished(self) -> bool:
        return self in FINISHED_STATES


FINISHED_STATES = frozenset(
    {
        JobState.COMPLETED,
        JobState.CANCELLED,
        JobState.FAILED,
        JobState.TIMEOUT,
        JobState.NODE_FAIL,
        JobState.PREEMPTED,
        JobState.BOOT_FAIL,
        JobState.DEADLINE,
        JobState.OUT_OF_MEMORY,
    }
)

# Flags that mean the job is still on its way (back) somewhere: a finished base state with one of
# these is not over yet (COMPLETING: epilog still runs; REQUEUED...: the job goes back to PENDING).
# EXPEDITING (Slurm 25.11+, API v0.0.44+): a job with the EXPEDITED_REQUEUE flag that failed is being
# requeued at once.
_NOT_OVER_FLAGS = frozenset(
    {"COMPLETING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT", "RESIZING", "STAGE_OUT", "EXPEDITING"}
)
# Of those, the ones after which the job runs again (COMPLETING only means its epilog still runs).
_RUNS_AGAIN_FLAGS = _NOT_OVER_FLAGS - {"COMPLETING"}
_BASE_NAMES = {state.value for state in JobState}
# Old single-string names and CLI abbreviations seen in the wild.
_ALIASES = {"CANCELED": "CANCELLED", "OOM": "OUT_OF_MEMORY", "CD": "COMPLETED", "PD": "PENDING", "R": "RUNNING"}


@dataclass(frozen=True, slots=True)
class JobStateInfo:
    """A job's base state and flags, e.g. ``PENDING`` with ``("REQUEUED",)``."""

    state: JobState
    flags: tuple[str, ...] = ()

    @property
    def is_finished(self) -> bool:
        """True once the job is over for good: a finished base state and no COMPLETING/REQUEUE flag."""
        return self.state.is_finished and not (_NOT_OVER_FLAGS & set(self.flags))

    @property
    def has_ended(self) -> bool:
        """True once the job will not run again, though its epilog may still run (``CANCELLED+COMPLETING``).

        What a retry needs to know: such a job is not one to wait on, even before it is over for good.
        """
        return self.state.is_finished and not (_RUNS_AGAIN_FLAGS & set(self.flags))

    def __str__(self) -> str:
        return "+".join([self.state.value, *self.flags])


class HasJobState:
    """``state`` and ``is_finished`` of a record that carries its :class:`JobStateInfo` as ``state_info``.

    A job, a task of an array: each reads its state the same way, written once here.
    """

    __slots__ = ()
    state_info: JobStateInfo

    @property
    def state(self) -> JobState:
        return self.state_info.state

    @property
    def is_finished(self) -> bool:
        return self.state_info.is_finished


def parse_job_state(raw: object) -> JobStateInfo:
    """Fold a ``job_state`` / ``state.current`` value of any API version into :class:`JobStateInfo`.

    Accepts a list (v0.0.40+), a string (v0.0.39 and older, possibly ``"COMPLETED,COMPLETING"``),
    or nothing. A value that names no known base state gives ``UNKNOWN`` rather than an exception:
    the caller keeps polling and logs it, instead of hanging on a state it does not know. Anything
    that is not a string or a list of strings (``5``, an object, nested lists) is read as no state;
    :func:`is_job_state_shape` tells a reader that wants to refuse it.
    """
    if isinstance(raw, str):
        return state_of_names((raw,))
    if isinstance(raw, list | tuple):
        return state_of_names(tuple(item for item in raw if isinstance(item, str)))
    return state_of_names(())


@functools.lru_cache(maxsize=1024)
def state_of_name(name: str) -> JobStateInfo:
    """The state of a single name (``["PENDING"]``, most records), remembered like :func:`state_of_names`."""
    return state_of_names((name,))


@functools.lru_cache(maxsize=1024)
def state_of_names(items: tuple[str, ...]) -> JobStateInfo:
    """The state of these names, remembered: a poll of thousands of jobs meets a handful of distinct
    states, and :class:`JobStateInfo` is immutable, so each is folded once and shared."""
    names: list[str] = []
    for item in items:
        names.extend(part.strip().upper() for part in item.replace("+", ",").split(",") if part.strip())
    names = [_ALIASES.get(name, name) for name in names]
    base = next((name for name in names if name in _BASE_NAMES), None)
    flags = tuple(name for name in names if name != base)
    if base is None:
        # A lone COMPLETING means the job ended and its epilog still runs.
        return JobStateInfo(JobState.UNKNOWN, flags)
    return JobStateInfo(JobState(base), flags)


def is_job_state_shape(raw: object) -> bool:
    """True for what Slurm sends as a state: nothing, a string, or a list of strings."""
    return raw is None or isinstance(raw, str) or (isinstance(raw, list) and all(isinstance(i, str) for i in raw))


# Pending reasons that no wait clears: only an administrator, or the user changing the job, can. Read
# from Slurm's source (SchedMD/slurm at 284c3b9, August 2026; strings from src/common/job_state_reason.c).
# Holds a user or an administrator set on purpose (JobHeldUser, JobHeldAdmin) and reasons that a change
# of the cluster's state clears by itself (PartitionDown, ReqNodeNotAvail, ReservationInvalid, limits)
# are left out: waiting on those is what the user asked for. The value is the fix, for the task's error.
FINAL_PENDING_REASONS: dict[str, str] = {
    # job_mgr.c handle_invalid_dependency(): set when a dependency can never be met, then never tested
    # again ("If the dependency is already invalid there's no reason to keep checking it").
    "DependencyNeverSatisfied": (
        "a job it depends on ended in a way the dependency excludes (e.g. afterok on a failed job); "
        "fix or rerun that job and submit this one again, or change its dependency "
        "(scontrol update JobId=... Dependency=...)"
    ),
    # job_scheduler.c schedule(): "non-runnable": the request can never be met, the job is held with
    # priority 0 until the job is changed (job_mgr.c) or node features change.
    "BadConstraints": (
        "no node of the partition can ever satisfy the request (nodes, CPUs, memory, GRES, features); "
        "ask for less, or another partition"
    ),
    # job_scheduler.c / job_mgr.c: the job's association was removed or disabled after it was submitted.
    "InvalidAccount": "the job's account (association) is no longer valid; submit it under a valid account",
    # job_mgr.c: the job's QOS was removed or is no longer allowed for its association.
    "InvalidQOS": "the job's QOS is no longer valid; submit it with a valid QOS",
    # job_mgr.c _handle_requeue_limit(): launch failed more than MaxBatchRequeue times; held (REQUEUE_HOLD).
    "JobHoldMaxRequeue": (
        "its launch failed too many times (MaxBatchRequeue) and Slurm held it; look at the node and the "
        "script's working directory, then submit it again"
    ),
    # job_scheduler.c: a burst buffer operation failed; the job is held (priority 0).
    "BurstBufferOperation": "a burst buffer operation of the job failed; check its burst buffer request",
    # reservation.c: the reservation the job asked for was deleted; the job is held (priority 0).
    "ReservationDeleted": "the reservation it asked for was deleted; submit it without it, or to another one",
}


def final_pending_fix(state: JobStateInfo, reason: str | None) -> str | None:
    """The fix, when a job is PENDING for a reason only an administrator or the user can clear."""
    if state.state is not JobState.PENDING or not reason:
        return None
    return FINAL_PENDING_REASONS.get(reason)
