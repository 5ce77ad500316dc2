"""What each Slurm call means, read from its :class:`SlurmResponse`.

Shared by the sync and the async hook, so that both read Slurm the same way: which answers mean
"not found", which cancel answers are harmless, where the job id is.

Every reader is total: it returns a result or raises a :class:`SlurmApiError` subclass. A list
answer (``jobs/``, ``slurmdb jobs``, ``jobs/state``) holds every user's jobs, so a record of the
wrong shape there is skipped and logged once, never failing the other jobs; a bad record of the one
job asked for (``job/{id}``) is a :class:`MalformedRecordError` that names the job and the field.
"""

from __future__ import annotations

import enum
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_slurmapi.slurm.api.envelope import SlurmResponse
from airflow_provider_slurmapi.slurm.api.errors import (
    MalformedRecordError,
    MalformedResponseError,
    SlurmError,
    refused_submit,
)
from airflow_provider_slurmapi.slurm.api.values import as_int, clean_text, preview
from airflow_provider_slurmapi.slurm.jobs.array import ArrayView, parse_state_entry_id
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob, record_job_id, slurm_number
from airflow_provider_slurmapi.slurm.jobs.states import (
    JobStateInfo,
    is_job_state_shape,
    parse_job_state,
    state_of_name,
    state_of_names,
)

log = logging.getLogger(__name__)

# A job id as jobs/state writes it, short enough to be below Slurm's NO_VAL whatever its digits.

ESLURM_INVALID_JOB_ID = 2017
ESLURM_ALREADY_DONE = 2021


@dataclass(frozen=True, slots=True)
class SubmitResult:
    """``resent``: the submit was sent more than once (a lost answer), so an earlier send may still be
    carried out late by the front end: a watch of this job then looks for such a copy, by the submit's
    ``send_marker`` (in the job's comment, beside the task's tag), and cancels it."""

    job_id: int
    warnings: list[str] = field(default_factory=list)
    resent: bool = False
    send_marker: str | None = None


class CancelOutcome(enum.StrEnum):
    """What a cancel did. All three are success for the caller: the job is not running any more."""

    CANCELLED = "cancelled"
    ALREADY_FINISHED = "already finished"
    UNKNOWN_JOB = "unknown job"


def read_submit(response: SlurmResponse) -> SubmitResult:
    """The job id of a ``job/submit`` answer; a refusal no retry can fix is a :class:`SubmitRejectedError`."""
    try:
        response.raise_for_errors()
    except SlurmError as exc:
        raise refused_submit(exc) from None
    job_id = record_job_id(response.body)
    if job_id is None:
        raise MalformedResponseError(
            f"Slurm accepted the submit but its answer has no valid job_id ({preview(response.body, 300)}); "
            "the job may exist: look for it with the list operator before submitting again."
        )
    return SubmitResult(job_id=job_id, warnings=response.warning_messages())


def read_partition_names(response: SlurmResponse) -> list[str]:
    """The partition names of ``GET /slurm/{v}/partitions/``; entries of an odd shape are left out."""
    response.raise_for_errors()
    partitions = _body(response).get("partitions")
    if not isinstance(partitions, list):
        raise MalformedResponseError(
            f"Slurm's answer to {response.method} {response.path} has partitions={preview(partitions)}, "
            "expected a list."
        )
    names: list[str] = []
    for item in partitions[:1000]:
        name = item.get("name") if isinstance(item, Mapping) else None
        if isinstance(name, str) and name.strip() and len(name) <= 200:
            names.append(clean_text(name.strip()))
    return names


def read_live_job(response: SlurmResponse) -> SlurmJob | None:
    """The job of ``GET /slurm/{v}/job/{id}``; ``None`` when it has left the live queue (404/2017)."""
    gone = response.status == 404 or response.has_error(ESLURM_INVALID_JOB_ID)
    if gone and not _body(response).get("jobs"):
        return None
    response.raise_for_errors()
    return _one_job(response, SlurmJob.from_live, newest_last=False)


def read_history_job(response: SlurmResponse) -> SlurmJob | None:
    """The job of ``GET /slurmdb/{v}/job/{id}``; ``None`` when accounting knows nothing of it (yet).

    A job requeued several times has several records; the last one is the current one.
    """
    if response.has_error(ESLURM_INVALID_JOB_ID):
        return None
    response.raise_for_errors()
    return _one_job(response, SlurmJob.from_history, newest_last=True)


def read_jobs(response: SlurmResponse, *, history: bool) -> list[SlurmJob]:
    """Every readable job of a list answer; records of the wrong shape are skipped and logged once."""
    response.raise_for_errors()
    build = SlurmJob.from_history if history else SlurmJob.from_live
    jobs: list[SlurmJob] = []
    for raw in _job_records(response):
        try:
            jobs.append(build(raw))
        except MalformedRecordError as exc:
            _skipped_records.report(response, exc)
    return jobs


def read_jobs_by_id(response: SlurmResponse, job_ids: Iterable[int]) -> dict[int, SlurmJob]:
    """From a ``GET /slurm/{v}/jobs/`` answer, the jobs among ``job_ids`` (those still in the live queue)."""
    wanted = set(job_ids)
    jobs = read_jobs(response, history=False)
    found = {job.job_id: job for job in jobs if job.job_id in wanted}
    for array_id in wanted & {job.array_job_id for job in jobs if job.array_job_id is not None}:
        found[array_id] = SlurmJob.of_array(ArrayView.from_jobs(array_id, jobs), jobs)
    return found


def read_job_states(response: SlurmResponse) -> dict[int, JobStateInfo]:
    """``GET /slurm/{v}/jobs/state/``: job id -> state, for the jobs still in the live queue."""
    return read_state_entries(response)[0]


def read_state_entries(response: SlurmResponse) -> tuple[dict[int, JobStateInfo], list[tuple[int, int, JobStateInfo]]]:
    """A ``jobs/state`` answer read in one pass: job id -> state, and the array task entries
    ``(job id, task id, state)`` (``"125_4"`` style ids) that :func:`read_array_task_states` gives alone.

    Thousands of entries a round (a poller's whole fan-in): the common entry (``{"job_id": "123",
    "state": ["PENDING"]}``) is read with plain string and dict operations, its state shared.
    """
    response.raise_for_errors()
    states: dict[int, JobStateInfo] = {}
    tasks: list[tuple[int, int, JobStateInfo]] = []
    for item in _job_records(response):
        if type(item) is dict:
            raw_id, raw_state = item.get("job_id"), item.get("state")
            # A short ASCII digit string ([0-9]{1,9}), checked without a regex.
            if (
                type(raw_id) is str
                and type(raw_state) is list
                and len(raw_id) <= 9
                and raw_id.isascii()
                and raw_id.isdigit()
                and (number := int(raw_id)) > 0
            ):
                if len(raw_state) == 1 and type(name := raw_state[0]) is str:
                    states[number] = state_of_name(name)  # remembered: a handful of states, shared
                    continue
                if all(type(name) is str for name in raw_state):
                    states[number] = state_of_names(tuple(raw_state))
                    continue
        job_id = record_job_id(item)
        if job_id is None and isinstance(item, Mapping):
            task = _task_entry(item)
            if task is not None:
                tasks.append(task)
                continue
            if _is_task_entry(item.get("job_id")):
                continue  # an array task entry without a readable state: as read_array_task_states skips it
        if job_id is None:
            shown = item.get("job_id") if isinstance(item, Mapping) else item
            field_name = "job_id" if isinstance(item, Mapping) else "jobs[]"
            _skipped_records.report(response, _state_record_error(None, field_name, shown, "a positive job id"))
            continue
        assert isinstance(item, Mapping)
        raw_state = item.get("state") if "state" in item else item.get("job_state")
        if raw_state is None or not is_job_state_shape(raw_state):
            _skipped_records.report(response, _state_record_error(job_id, "state", raw_state, "a list of state names"))
            continue
        states[job_id] = parse_job_state(raw_state)
    return states, tasks


def _is_task_entry(raw: Any) -> bool:
    parsed = parse_state_entry_id(raw)
    return parsed is not None and parsed[1] is not None


def read_cancel(response: SlurmResponse) -> CancelOutcome:
    """``DELETE /slurm/{v}/job/{id}``: Slurm 24.11 answers 200 with ``status[].error.code``."""
    codes = {as_int(e.get("error_number")) for e in response.errors}
    status = _body(response).get("status")
    if status is not None and not isinstance(status, list):
        raise MalformedResponseError(
            f"Slurm's answer to {response.method} {response.path} has status={preview(status)}, expected a list "
            "of per-job results: the outcome of the cancel is unknown; look at the job before trying again."
        )
    for item in status or []:
        if isinstance(item, Mapping) and "_" in str(item.get("step_id") or ""):
            continue  # an array task that had already ended: the cancel of the array's other tasks went on
        error = item.get("error") if isinstance(item, Mapping) else None
        if isinstance(error, Mapping):
            codes.add(as_int(error.get("code")))
    if ESLURM_INVALID_JOB_ID in codes:
        return CancelOutcome.UNKNOWN_JOB
    if ESLURM_ALREADY_DONE in codes:
        return CancelOutcome.ALREADY_FINISHED
    if response.status == 404:
        return CancelOutcome.UNKNOWN_JOB
    response.raise_for_errors()
    return CancelOutcome.CANCELLED


def caller_user(response: SlurmResponse) -> str | None:
    """What an answer says of its caller: ``meta.client.user`` of a slurmctld answer. Never trusted to tell
    the caller's jobs (a real slurmrestd with ``rest_auth/jwt`` says ``root``): only compared, at debug level.

    slurmdbd answers (``/slurmdb/...``) leave it empty (seen on Slurm 24.11), so this is ``None`` there.
    """
    meta = _body(response).get("meta")
    client = meta.get("client") if isinstance(meta, Mapping) else None
    user = client.get("user") if isinstance(client, Mapping) else None
    return user.strip() if isinstance(user, str) and user.strip() else None


# -- reading the job records of an answer ----------------------------------------------------------
_JOB_PATH = re.compile(r"/job/(\d{1,20})(?:[/?]|$)")


def _body(response: SlurmResponse) -> Mapping[str, Any]:
    return response.body if isinstance(response.body, Mapping) else {}


def _job_records(response: SlurmResponse) -> list[Any]:
    """``jobs[]`` of the answer: a list (of anything), or no list at all, which is a broken answer."""
    jobs = _body(response).get("jobs")
    if jobs is None:
        return []
    if not isinstance(jobs, list):
        raise MalformedResponseError(
            f"Slurm's answer to {response.method} {response.path} has jobs={preview(jobs)}, expected a list of "
            "job objects."
        )
    return jobs


def _one_job(response: SlurmResponse, build: Callable[[Any], SlurmJob], *, newest_last: bool) -> SlurmJob | None:
    """The record of the job named in the path (the first, or for history the last, if none matches).

    A record of the wrong shape here is the asked job's own: it raises, naming the job and the field.
    """
    records = _job_records(response)
    if not records:
        return None
    match = _JOB_PATH.search(response.path)
    asked = int(match.group(1)) if match else None
    if asked is not None and any(_array_id_of(r) == asked for r in records):
        return _array_job(response, build, asked, [r for r in records if _array_id_of(r) == asked])
    ordered: Iterator[Any] = reversed(records) if newest_last else iter(records)
    chosen = next((r for r in ordered if asked is not None and record_job_id(r) == asked), None)
    if chosen is None:
        chosen = records[-1] if newest_last else records[0]
    try:
        return build(chosen)
    except MalformedRecordError as exc:
        who = f"job {asked}" if asked is not None else f"job {exc.job_id}" if exc.job_id is not None else "the job"
        raise MalformedRecordError(
            f"Slurm's answer to {response.method} {response.path} about {who} is unreadable: {exc} "
            "Retried as a garbled answer; if it persists, look at the job with scontrol/sacct.",
            job_id=asked if asked is not None else exc.job_id,
            field=exc.field,
            value=exc.value,
        ) from None


def _array_id_of(raw: Any) -> int | None:
    """The array id a raw record belongs to (live ``array_job_id``, history ``array.job_id``), if any."""
    if not isinstance(raw, Mapping):
        return None
    value = raw.get("array_job_id")
    if value is None and isinstance(raw.get("array"), Mapping):
        value = raw["array"].get("job_id")
    number = slurm_number(value)
    return number if number is not None and number > 0 else None


def _array_job(
    response: SlurmResponse, build: Callable[[Any], SlurmJob], array_job_id: int, records: list[Any]
) -> SlurmJob:
    """The whole array asked for by its id: every task record of the answer, in one view."""
    jobs: list[SlurmJob] = []
    for raw in records:
        try:
            jobs.append(build(raw))
        except MalformedRecordError as exc:
            raise MalformedRecordError(
                f"Slurm's answer to {response.method} {response.path} about array {array_job_id} is unreadable: "
                f"{exc} Retried as a garbled answer; if it persists, look at the array with scontrol/sacct.",
                job_id=array_job_id,
                field=exc.field,
                value=exc.value,
            ) from None
    return SlurmJob.of_array(ArrayView.from_jobs(array_job_id, jobs), jobs)


def read_array_task_states(response: SlurmResponse) -> list[tuple[int, int, JobStateInfo]]:
    """The array task entries of a ``jobs/state`` answer: (job id, task id, state), ``"125_4"`` style ids."""
    found: list[tuple[int, int, JobStateInfo]] = []
    for item in _job_records(response):
        if isinstance(item, Mapping):
            task = _task_entry(item)
            if task is not None:
                found.append(task)
    return found


def _task_entry(item: Mapping[str, Any]) -> tuple[int, int, JobStateInfo] | None:
    """An array task's entry of a ``jobs/state`` answer as (job id, task id, state); ``None`` for a
    job's entry (most of a round) or an entry that cannot be read."""
    raw_id = item.get("job_id")
    if type(raw_id) is int or (type(raw_id) is str and "_" not in raw_id):
        return None
    parsed = parse_state_entry_id(raw_id)
    raw_state = item.get("state") if "state" in item else item.get("job_state")
    if parsed is None or parsed[1] is None or raw_state is None or not is_job_state_shape(raw_state):
        return None
    return parsed[0], parsed[1], parse_job_state(raw_state)


def _state_record_error(job_id: int | None, field_name: str, value: Any, expected: str) -> MalformedRecordError:
    shown = preview(value)
    who = f"job {job_id}" if job_id is not None else "a job"
    return MalformedRecordError(
        f"Slurm's state record of {who} has {field_name}={shown}, expected {expected}.",
        job_id=job_id,
        field=field_name,
        value=shown,
    )


class SkippedRecords:
    """Logs each bad record of a list answer once, not on every poll, in bounded memory.

    A record is known by its job id (or, without one, by a preview of it) and the bad field; the
    most recent ``capacity`` of them are remembered.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._seen: OrderedDict[tuple[Any, ...], None] = OrderedDict()
        self._lock = threading.Lock()

    def report(self, response: SlurmResponse, error: MalformedRecordError) -> None:
        key = (error.job_id, error.field, error.value if error.job_id is None else "")
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
                return
            self._seen[key] = None
            while len(self._seen) > self.capacity:
                self._seen.popitem(last=False)
        log.warning(
            "Skipping a record of Slurm's answer to %s %s that cannot be read: %s "
            "Other jobs are not affected; this record is reported once.",
            response.method,
            _path_only(response.path),
            error,
        )


def _path_only(path: str) -> str:
    return path.split("?", 1)[0]


_skipped_records = SkippedRecords()
