"""What ``SlurmJobTrigger`` sends the task it resumes, typed, and how the task reads it back.

The payload crosses processes and Airflow's database (the triggerer writes it, a worker hands it to
``execute_complete`` as ``event``), maybe across an upgrade, or from a triggerer that runs another
version of this provider. The task reads it through :func:`read_event`, which names the field that is
wrong and the fix, rather than failing on a ``KeyError`` or acting on a half-understood event.

Free of Airflow: the trigger, the operator and the sensor import it, the operator at DAG parse time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict, get_args

from airflow_provider_slurmapi.slurm.api.errors import MalformedRecordError
from airflow_provider_slurmapi.slurm.api.values import preview
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob

EventStatus = Literal["success", "failed", "error", "timeout"]
EVENT_STATUSES: tuple[str, ...] = get_args(EventStatus)


class JobFinishedEvent(TypedDict):
    """The job is over: ``success`` for COMPLETED, ``failed`` for any other finished state."""

    status: Literal["success", "failed"]
    job_id: int
    message: str
    job: dict[str, Any]  # the finished job, as ``SlurmJob.to_dict`` writes it


class JobErrorEvent(TypedDict):
    """The job could not be watched (``message`` says why); ``permanent``: no retry can fix it."""

    status: Literal["error"]
    job_id: int
    message: str
    permanent: bool


class JobTimeoutEvent(TypedDict):
    """The task's timeout passed: the trigger cancelled the job (with ``cancel_on_kill``) or left it running."""

    status: Literal["timeout"]
    job_id: int
    message: str
    job: dict[str, Any] | None  # the job as last seen, if it was ever seen


SlurmJobEvent = JobFinishedEvent | JobErrorEvent | JobTimeoutEvent


class MalformedEventError(ValueError):
    """An event that ``SlurmJobTrigger`` would not send: a key missing, of the wrong type, or unknown."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(
            f"The trigger event that resumed this task is not one SlurmJobTrigger sends: {field} {problem}. "
            "Check that the triggerer runs the same airflow-provider-slurmapi version as the workers, "
            "then clear the task to watch its Slurm job again."
        )
        self.field = field


def read_event(event: object) -> SlurmJobEvent:
    """``event`` as :data:`SlurmJobEvent`, once every key the task reads is there with its type.

    Raises :class:`MalformedEventError` naming the first field that is wrong. Keys it does not know
    are ignored (a later version may add some).
    """
    if not isinstance(event, Mapping):
        raise MalformedEventError("event", f"is a {type(event).__name__}, expected an object")
    status = _field(event, "status", str, "one of " + ", ".join(EVENT_STATUSES))
    if status not in EVENT_STATUSES:
        raise MalformedEventError("status", f"is {preview(status, 60)}, expected one of {', '.join(EVENT_STATUSES)}")
    job_id = _field(event, "job_id", int, "a positive Slurm job id")
    if isinstance(job_id, bool) or job_id <= 0:
        raise MalformedEventError("job_id", f"is {preview(job_id, 60)}, expected a positive Slurm job id")
    message = _field(event, "message", str, "text")
    if status == "error":
        permanent = _field(event, "permanent", bool, "true or false")
        return JobErrorEvent(status="error", job_id=job_id, message=message, permanent=permanent)
    if status == "timeout":
        last = _job(event, optional=True)
        return JobTimeoutEvent(status="timeout", job_id=job_id, message=message, job=last)
    job = _job(event, optional=False)
    assert job is not None
    return JobFinishedEvent(
        status="success" if status == "success" else "failed", job_id=job_id, message=message, job=job
    )


def event_job(event: SlurmJobEvent) -> SlurmJob | None:
    """The job an event carries (checked by :func:`read_event`); ``None`` for an error, or a job never seen."""
    record = event.get("job")
    return SlurmJob.from_dict(record) if isinstance(record, dict) else None


def _field(event: Mapping[Any, Any], name: str, kind: type, expected: str) -> Any:
    if name not in event:
        keys = preview(sorted(map(str, event)), 120)
        raise MalformedEventError(name, f"is missing (the event has {keys}), expected {expected}")
    value = event[name]
    if not isinstance(value, kind):
        # Only the type: the text of another field may be a job's output.
        raise MalformedEventError(name, f"is a {type(value).__name__}, expected {expected}")
    return value


def _job(event: Mapping[Any, Any], *, optional: bool) -> dict[str, Any] | None:
    """The event's ``job``, once :meth:`SlurmJob.from_dict` can read it."""
    expected = "the job as an object (SlurmJob.to_dict)" + (", or null" if optional else "")
    if optional and event.get("job", ...) is None:
        return None
    record = _field(event, "job", dict, expected)
    try:
        SlurmJob.from_dict(record)
    except MalformedRecordError as exc:
        raise MalformedEventError(f"job.{exc.field}", f"cannot be read ({exc})") from None
    return dict(record)
