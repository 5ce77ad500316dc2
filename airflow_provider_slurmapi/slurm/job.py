"""One normalized model of a Slurm job, whether it came from the live queue or the history.

The live queue (``/slurm/{v}/job/{id}``) and the accounting history (``/slurmdb/{v}/job/{id}``)
describe a job with different shapes: ``job_state`` list vs ``state.current``, time objects vs plain
integers, ``standard_output`` vs ``stdout``. Operators, sensors and triggers only ever see
:class:`SlurmJob`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

from airflow_provider_slurmapi.slurm.array import MAX_TASK_ID, ArrayView
from airflow_provider_slurmapi.slurm.errors import MalformedRecordError
from airflow_provider_slurmapi.slurm.job_output import read_extra
from airflow_provider_slurmapi.slurm.job_supervisor import strip_controls
from airflow_provider_slurmapi.slurm.states import JobState, JobStateInfo, is_job_state_shape, parse_job_state
from airflow_provider_slurmapi.slurm.values import NotText, as_int, clean_text, preview, read_text

# Slurm's NO_VAL (0xfffffffe) and INFINITE (0xffffffff) as plain integers, e.g. the history's
# ``time.start`` of a job cancelled while pending.
_NO_VAL = 0xFFFFFFFE
_INFINITE = 0xFFFFFFFF

JobSource = Literal["live", "history"]


def slurm_number(value: Any) -> int | None:
    """Read a Slurm number: a plain int or ``{"set", "infinite", "number"}``; ``None`` when unset or unreadable."""
    try:
        return _number(value)
    except _BadShape:
        return None


def _number(value: Any) -> int | None:
    """Like :func:`slurm_number`, but a value of the wrong shape raises :class:`_BadShape`."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
        if value is None:
            return None
    number = as_int(value)
    if number is None:
        raise _BadShape(value, "a number, or {set, infinite, number}")
    return None if number in (_NO_VAL, _INFINITE) else number


def _timestamp(value: Any) -> int | None:
    number = _number(value)
    return number if number else None


def _text(value: Any) -> str | None:
    """A text field (or a number Slurm printed as one); anything else is the wrong shape."""
    try:
        return read_text(value, strict=True)
    except NotText:
        raise _BadShape(value, "a string") from None


def _extra_text(value: Any) -> str | None:
    """``extra``: what a job wrote into its own record. Only read for the log: an odd shape reads as nothing."""
    return read_text(strip_controls(value)) if isinstance(value, str) else None


class _BadShape(Exception):
    """A field of a job record that is not what Slurm sends; turned into :class:`MalformedRecordError`."""

    def __init__(self, value: Any, expected: str, field: str = "") -> None:
        super().__init__(field)
        self.value = value
        self.expected = expected
        self.field = field

    def under(self, parent: str) -> _BadShape:
        self.field = f"{parent}.{self.field}" if self.field else parent
        return self


class _Fields:
    """The fields of one raw job record, each read strictly: a wrong shape names its field."""

    def __init__(self, raw: Mapping[str, Any], job_id: int = 0) -> None:
        self.raw = raw
        self.job_id = job_id

    def read(self, field: str, reader: Any) -> Any:
        try:
            return reader(self.raw.get(field))
        except _BadShape as bad:
            raise bad.under(field) from None

    def mapping(self, field: str) -> Mapping[str, Any]:
        value = self.raw.get(field)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise _BadShape(value, "an object", field)
        return value

    def state(self, value: Any, field: str) -> JobStateInfo:
        if not is_job_state_shape(value):
            raise _BadShape(value, "a list of state names", field)
        return parse_job_state(value)


def record_job_id(raw: Any) -> int | None:
    """The job id of a raw record when it is a positive integer (string form included); else ``None``."""
    if not isinstance(raw, Mapping):
        return None
    number = as_int(raw.get("job_id"))
    return number if number is not None and 0 < number < _NO_VAL else None


def _malformed(raw: Any, bad: _BadShape, source: str) -> MalformedRecordError:
    job_id = record_job_id(raw)
    who = f"job {job_id}" if job_id is not None else "a job"
    shown = preview(bad.value)
    return MalformedRecordError(
        f"Slurm's {source} record of {who} has {bad.field}={shown}, expected {bad.expected}.",
        job_id=job_id,
        field=bad.field,
        value=shown,
    )


def _record(raw: Any) -> _Fields:
    if not isinstance(raw, Mapping):
        raise _BadShape(raw, "a job object", "jobs[]")
    job_id = record_job_id(raw)
    if job_id is None:
        raise _BadShape(raw.get("job_id"), "a positive job id", "job_id")
    return _Fields(raw, job_id)


def format_duration(seconds: int | float | None) -> str:
    """``303`` -> ``5m03s``; ``3723`` -> ``1h02m03s``."""
    if seconds is None:
        return "?"
    total = max(int(seconds), 0)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


@dataclass(frozen=True, slots=True)
class ExitInfo:
    """Slurm's ``exit_code`` object: status words, return code and signal."""

    status: tuple[str, ...] = ()
    return_code: int | None = None
    signal: str | None = None
    signal_number: int | None = None

    @classmethod
    def parse(cls, raw: Any) -> ExitInfo:
        """Read any API version's ``exit_code``; an unreadable one gives "no exit code"."""
        try:
            return cls.read(raw)
        except _BadShape:
            return cls()

    @classmethod
    def read(cls, raw: Any) -> ExitInfo:
        """Like :meth:`parse`, but a value of the wrong shape raises (naming the sub-field)."""
        if raw is None:
            return cls()
        if isinstance(raw, int | str) and not isinstance(raw, bool):
            # v0.0.39-style plain integer, or "3:0".
            return cls(return_code=as_int(str(raw).split(":", 1)[0]) if isinstance(raw, str) else as_int(raw))
        if not isinstance(raw, Mapping):
            raise _BadShape(raw, "an object {status, return_code, signal}")
        status = raw.get("status")
        if status is None:
            status = []
        elif isinstance(status, str):
            status = [status]
        if not isinstance(status, list) or not all(isinstance(s, str) for s in status):
            raise _BadShape(status, "a list of strings", "status")
        signal = raw.get("signal")
        if signal is None:
            signal = {}
        if not isinstance(signal, Mapping):
            raise _BadShape(signal, "an object {id, name}", "signal")
        try:
            return_code = _number(raw.get("return_code"))
        except _BadShape as bad:
            raise bad.under("return_code") from None
        try:
            signal_number = _number(signal.get("id"))
            signal_name = _text(signal.get("name"))
        except _BadShape as bad:
            raise bad.under("signal") from None
        return cls(
            status=tuple(clean_text(s) for s in status),
            return_code=return_code,
            signal=signal_name or (str(signal_number) if signal_number else None),
            signal_number=signal_number,
        )

    def describe(self) -> str:
        if self.signal:
            return f"signal {self.signal}"
        if self.return_code is not None:
            return f"exit code {self.return_code}"
        return "no exit code"


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """What this provider knows of one Slurm job."""

    job_id: int
    state_info: JobStateInfo
    source: JobSource
    name: str | None = None
    reason: str | None = None
    exit: ExitInfo = field(default_factory=ExitInfo)
    submit_time: int | None = None
    start_time: int | None = None
    end_time: int | None = None
    time_limit_minutes: int | None = None
    nodes: str | None = None
    partition: str | None = None
    user: str | None = None
    account: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    comment: str | None = None
    # What the job wrote into its own record: its last output (wrapped scripts) or a progress message.
    extra: str | None = None
    # Job arrays: the array's id, this record's task id (None for the meta record of waiting tasks),
    # the waiting tasks the meta record lists, the %N throttle; and, for the array as a whole, its tasks.
    array_job_id: int | None = None
    array_task_id: int | None = None
    array_pending: str | None = None
    array_throttle: int | None = None
    array: ArrayView | None = None
    # How many times Slurm requeued the job (``restart_cnt``): it keeps its id and runs again.
    restart_count: int | None = None

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_live(cls, raw: Any) -> SlurmJob:
        """Build from one element of ``jobs[]`` of ``GET /slurm/{v}/job/{id}`` or ``/jobs/``.

        Raises :class:`MalformedRecordError`, naming the field, for a record of the wrong shape.
        """
        try:
            return cls._live(_record(raw))
        except _BadShape as bad:
            raise _malformed(raw, bad, "live") from None

    @classmethod
    def _live(cls, fields: _Fields) -> SlurmJob:
        raw = fields.raw
        state = fields.state(raw.get("job_state"), "job_state")
        end = fields.read("end_time", _timestamp)
        return cls(
            job_id=fields.job_id,
            state_info=state,
            source="live",
            name=fields.read("name", _text),
            reason=fields.read("state_reason", _reason),
            exit=fields.read("exit_code", ExitInfo.read),
            submit_time=fields.read("submit_time", _timestamp),
            start_time=fields.read("start_time", _timestamp),
            # While a job runs, end_time is the projected end, not a real one.
            end_time=end if state.state.is_finished else None,
            time_limit_minutes=fields.read("time_limit", _number),
            nodes=fields.read("nodes", _nodes),
            partition=fields.read("partition", _text),
            user=fields.read("user_name", _text),
            account=fields.read("account", _text),
            # From v0.0.43 standard_output is the pattern (slurm-%j.out); the path is stdout_expanded.
            stdout=fields.read("stdout_expanded", _text) or fields.read("standard_output", _text),
            stderr=fields.read("stderr_expanded", _text) or fields.read("standard_error", _text),
            comment=fields.read("comment", _text),
            extra=fields.read("extra", _extra_text),
            array_job_id=_positive(raw.get("array_job_id")),
            array_task_id=_task_id(raw.get("array_task_id")),
            array_pending=_loose_text(raw.get("array_task_string")),
            array_throttle=_positive(raw.get("array_max_tasks")),
            restart_count=fields.read("restart_cnt", _number),
        )

    @classmethod
    def from_history(cls, raw: Any) -> SlurmJob:
        """Build from one element of ``jobs[]`` of ``GET /slurmdb/{v}/job/{id}`` or ``/jobs/``.

        Raises :class:`MalformedRecordError`, naming the field, for a record of the wrong shape.
        """
        try:
            return cls._history(_record(raw))
        except _BadShape as bad:
            raise _malformed(raw, bad, "history") from None

    @classmethod
    def _history(cls, fields: _Fields) -> SlurmJob:
        raw = fields.raw
        state_raw = raw.get("state")
        if isinstance(state_raw, Mapping):
            state = fields.state(state_raw.get("current"), "state.current")
            reason = _read(state_raw.get("reason"), "state.reason", _reason)
        else:
            state, reason = fields.state(state_raw, "state"), None
        times = _Fields(fields.mapping("time"))
        comment = raw.get("comment")
        comment_field = "comment"
        if isinstance(comment, Mapping):
            comment, comment_field = comment.get("job"), "comment.job"
        user = raw.get("user")
        user_field = "user"
        if isinstance(user, Mapping):
            user, user_field = user.get("name"), "user.name"
        try:
            time_fields = {
                "submit_time": times.read("submission", _timestamp),
                "start_time": times.read("start", _timestamp),
                "end_time": times.read("end", _timestamp),
                "time_limit_minutes": times.read("limit", _number),
            }
        except _BadShape as bad:
            raise bad.under("time") from None
        return cls(
            job_id=fields.job_id,
            state_info=state,
            source="history",
            name=fields.read("name", _text),
            reason=reason,
            exit=fields.read("exit_code", ExitInfo.read),
            nodes=fields.read("nodes", _nodes),
            partition=fields.read("partition", _text),
            user=_read(user, user_field, _text),
            account=fields.read("account", _text),
            stdout=fields.read("stdout_expanded", _text) or fields.read("stdout", _text),
            stderr=fields.read("stderr_expanded", _text) or fields.read("stderr", _text),
            comment=_read(comment, comment_field, _text),
            extra=fields.read("extra", _extra_text),
            restart_count=fields.read("restart_cnt", _number),
            **_history_array(raw.get("array")),
            **time_fields,
        )

    # -- what callers ask ---------------------------------------------------------------------
    @classmethod
    def of_array(cls, array: ArrayView, records: list[SlurmJob]) -> SlurmJob:
        """The whole array as one job: its id, the state of all its tasks together, and the tasks."""
        mine = [job for job in records if job.array_job_id == array.array_job_id]
        meta = next((job for job in mine if job.job_id == array.array_job_id), mine[0] if mine else None)
        tasks = [job for job in mine if job.array_task_id is not None]
        first = min(tasks, key=lambda j: j.array_task_id or 0, default=meta)
        state = array.state_info()
        return cls(
            job_id=array.array_job_id,
            state_info=state,
            source=meta.source if meta is not None else "live",
            name=meta.name if meta is not None else None,
            reason=meta.reason if meta is not None and not array.is_finished else None,
            submit_time=min((j.submit_time for j in mine if j.submit_time), default=None),
            start_time=min((j.start_time for j in mine if j.start_time), default=None),
            end_time=max((j.end_time for j in mine if j.end_time), default=None) if array.is_finished else None,
            time_limit_minutes=meta.time_limit_minutes if meta is not None else None,
            partition=meta.partition if meta is not None else None,
            user=meta.user if meta is not None else None,
            account=meta.account if meta is not None else None,
            stdout=_task_path(first.stdout if first is not None else None),
            stderr=_task_path(first.stderr if first is not None else None),
            comment=meta.comment if meta is not None else None,
            array_job_id=array.array_job_id,
            array_throttle=array.throttle,
            array=array,
        )

    def with_array(self, array: ArrayView) -> SlurmJob:
        """This array's record with another view of its tasks (its state follows them)."""
        finished = array.is_finished
        return replace(
            self,
            array=array,
            state_info=array.state_info(),
            reason=self.reason if not finished else None,
            end_time=self.end_time if finished else None,
        )

    @property
    def state(self) -> JobState:
        return self.state_info.state

    @property
    def is_finished(self) -> bool:
        return self.state_info.is_finished

    @property
    def succeeded(self) -> bool:
        return self.is_finished and self.state is JobState.COMPLETED

    @property
    def elapsed_seconds(self) -> int | None:
        if self.start_time and self.end_time and self.end_time >= self.start_time:
            return self.end_time - self.start_time
        return None

    def describe(self) -> str:
        """One line for a task log: ``PENDING (Priority)``, ``RUNNING on gpu-1``, ``COMPLETED after 5m03s``."""
        if self.array is not None:
            return self.array.summary()
        text = str(self.state_info)
        if self.state is JobState.RUNNING and self.nodes:
            text += f" on {self.nodes}"
        if self.is_finished and self.elapsed_seconds is not None:
            text += f" after {format_duration(self.elapsed_seconds)}"
        if self.reason:
            text += f" ({self.reason})"
        return text

    @property
    def reported_output(self) -> str | None:
        """The last lines of output a wrapped script reported at its end; ``None`` if none was reported."""
        return read_extra(self.extra).output

    @property
    def progress(self) -> str | None:
        """The job's latest progress message (``slurm_progress`` or ``scontrol update ... Extra=``)."""
        return read_extra(self.extra).progress

    def output_report(self, *, expected: bool = False) -> str | None:
        """``Last output of job N:`` and its lines; with ``expected``, say so when the job reported none."""
        output = self.reported_output
        if output is not None:
            return f"Last output of job {self.job_id}:\n{output}" if output else f"Job {self.job_id} wrote no output."
        if expected:
            return (
                f"No output was reported by job {self.job_id} (the job never ran, or scontrol is missing on "
                "its node or its update failed)."
            )
        return None

    def failure_message(self, *, output_expected: bool = False) -> str:
        """Why the job did not succeed, with Slurm's own words, and its last output if it reported it."""
        if self.array is not None:
            return self.array.failure_message(self.name)
        head = f"Slurm job {self.job_id}" + (f" ({self.name})" if self.name else "")
        parts = [f"{head} ended {self.state_info}"]
        if self.reason:
            parts.append(f"reason {self.reason}")
        parts.append(self.exit.describe())
        message = ", ".join(parts)
        if self.stderr or self.stdout:
            message += f". Output: {self.stderr or self.stdout}"
        report = self.output_report(expected=output_expected)
        if report:
            message += f"\n{report}"
        return message

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable dict (for XCom and trigger events); :meth:`from_dict` reverses it."""
        return {
            "job_id": self.job_id,
            "name": self.name,
            "state": self.state.value,
            "flags": list(self.state_info.flags),
            "finished": self.is_finished,
            "reason": self.reason,
            "exit_code": self.exit.return_code,
            "exit_status": list(self.exit.status),
            "signal": self.exit.signal,
            "signal_number": self.exit.signal_number,
            "submit_time": self.submit_time,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "elapsed_seconds": self.elapsed_seconds,
            "time_limit_minutes": self.time_limit_minutes,
            "nodes": self.nodes,
            "partition": self.partition,
            "user": self.user,
            "account": self.account,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "comment": self.comment,
            "extra": self.extra,
            "source": self.source,
            "array_job_id": self.array_job_id,
            "array_task_id": self.array_task_id,
            "array_pending": self.array_pending,
            "array_throttle": self.array_throttle,
            "array": self.array.to_dict() if self.array is not None else None,
            "restart_count": self.restart_count,
        }

    @classmethod
    def from_dict(cls, data: Any) -> SlurmJob:
        """Rebuild from :meth:`to_dict`; a dict of the wrong shape raises :class:`MalformedRecordError`."""
        try:
            return cls._from_dict(data)
        except _BadShape as bad:
            job_id = as_int(data.get("job_id")) if isinstance(data, Mapping) else None
            shown = preview(bad.value)
            raise MalformedRecordError(
                f"The stored record of Slurm job {job_id if job_id is not None else '?'} has "
                f"{bad.field}={shown}, expected {bad.expected}.",
                job_id=job_id,
                field=bad.field,
                value=shown,
            ) from None

    @classmethod
    def _from_dict(cls, data: Any) -> SlurmJob:
        if not isinstance(data, Mapping):
            raise _BadShape(data, "an object", "job")
        job_id = as_int(data.get("job_id"))
        if job_id is None or job_id <= 0:
            raise _BadShape(data.get("job_id"), "a positive job id", "job_id")
        state = data.get("state")
        if not isinstance(state, str) or state not in _STATE_NAMES:
            raise _BadShape(state, "a Slurm base state name", "state")
        flags = data.get("flags") or []
        if not isinstance(flags, list | tuple) or not all(isinstance(f, str) for f in flags):
            raise _BadShape(flags, "a list of strings", "flags")
        exit_status = data.get("exit_status") or []
        if not isinstance(exit_status, list | tuple) or not all(isinstance(s, str) for s in exit_status):
            raise _BadShape(exit_status, "a list of strings", "exit_status")
        source = data.get("source", "live")
        if source not in ("live", "history"):
            raise _BadShape(source, "'live' or 'history'", "source")

        def text(name: str) -> str | None:
            return _read(data.get(name), name, _stored_text)

        def number(name: str) -> int | None:
            return _read(data.get(name), name, _stored_int)

        array = _stored_array(data.get("array"))
        return cls(
            job_id=job_id,
            state_info=JobStateInfo(JobState(state), tuple(clean_text(f) for f in flags)),
            source=source,
            name=text("name"),
            reason=text("reason"),
            exit=ExitInfo(
                status=tuple(clean_text(s) for s in exit_status),
                return_code=number("exit_code"),
                signal=text("signal"),
                signal_number=number("signal_number"),
            ),
            submit_time=number("submit_time"),
            start_time=number("start_time"),
            end_time=number("end_time"),
            time_limit_minutes=number("time_limit_minutes"),
            nodes=text("nodes"),
            partition=text("partition"),
            user=text("user"),
            account=text("account"),
            stdout=text("stdout"),
            stderr=text("stderr"),
            comment=text("comment"),
            extra=_read(data.get("extra"), "extra", _extra_text),
            array_job_id=number("array_job_id"),
            array_task_id=number("array_task_id"),
            array_pending=text("array_pending"),
            array_throttle=number("array_throttle"),
            array=array,
            restart_count=number("restart_count"),
        )


def _stored_array(value: Any) -> ArrayView | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _BadShape(value, "an object or null", "array")
    try:
        return ArrayView.from_dict(value)
    except (ValueError, TypeError) as exc:
        raise _BadShape(value, f"an array view ({exc})", "array") from None


def _task_path(path: str | None) -> str | None:
    """An output path of an array: the meta record's shows %a as NO_VAL (4294967294); say %a."""
    return path.replace("_4294967294", "_%a") if path else path


def _positive(value: Any) -> int | None:
    """A lenient positive number (array ids, the throttle): 0, unset or the wrong shape read as nothing."""
    number = slurm_number(value)
    return number if number is not None and number > 0 else None


def _task_id(value: Any) -> int | None:
    number = slurm_number(value)
    return number if number is not None and 0 <= number <= MAX_TASK_ID else None


def _loose_text(value: Any) -> str | None:
    return read_text(value, placeholders=False)


def _history_array(raw: Any) -> dict[str, Any]:
    """The history's ``array`` object: ``{job_id, task_id, task, limits.max.running.tasks}``."""
    if not isinstance(raw, Mapping):
        return {}
    limits = raw.get("limits")
    running = None
    if isinstance(limits, Mapping) and isinstance(limits.get("max"), Mapping):
        inner = limits["max"].get("running")
        running = inner.get("tasks") if isinstance(inner, Mapping) else None
    return {
        "array_job_id": _positive(raw.get("job_id")),
        "array_task_id": _task_id(raw.get("task_id")),
        "array_pending": _loose_text(raw.get("task")),
        "array_throttle": _positive(running),
    }


_STATE_NAMES = frozenset(state.value for state in JobState)


_T = TypeVar("_T")


def _read(value: Any, field: str, reader: Callable[[Any], _T]) -> _T:
    try:
        return reader(value)
    except _BadShape as bad:
        raise bad.under(field) from None


def _stored_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return None if value is None else clean_text(value)
    raise _BadShape(value, "a string or null")


def _stored_int(value: Any) -> int | None:
    if value is None:
        return None
    number = as_int(value) if isinstance(value, int) else None
    if number is None:
        raise _BadShape(value, "an integer or null")
    return number


def _reason(value: Any) -> str | None:
    text = _text(value)
    return None if text in (None, "None") else text


def _nodes(value: Any) -> str | None:
    return _text(value)  # Slurm's "None assigned" and "(null)" read as no nodes


def describe_transition(previous: SlurmJob | None, current: SlurmJob) -> str | None:
    """The log line for a change of state or reason, or ``None`` when nothing changed."""
    if current.array is not None:
        if previous is not None and previous.array is not None and previous.array.counts() == current.array.counts():
            return None
        return current.array.summary()
    if previous is not None and (previous.state_info, previous.reason, previous.nodes) == (
        current.state_info,
        current.reason,
        current.nodes,
    ):
        return None
    if previous is None:
        return f"Slurm job {current.job_id}: {current.describe()}"
    return f"Slurm job {current.job_id}: {previous.describe()} -> {current.describe()}"
