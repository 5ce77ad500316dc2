"""One normalized model of a Slurm job, whether it came from the live queue or the history.

The live queue (``/slurm/{v}/job/{id}``) and the accounting history (``/slurmdb/{v}/job/{id}``)
describe a job with different shapes: ``job_state`` list vs ``state.current``, time objects vs plain
integers, ``standard_output`` vs ``stdout``. Operators, sensors and triggers only ever see
:class:`SlurmJob`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, TypeVar

from airflow_provider_slurmapi.slurm.api.errors import MalformedRecordError
from airflow_provider_slurmapi.slurm.api.values import NotText, as_int, clean_text, preview, read_text
from airflow_provider_slurmapi.slurm.jobs.array import MAX_TASK_ID, ArrayView
from airflow_provider_slurmapi.slurm.jobs.controls import strip_controls
from airflow_provider_slurmapi.slurm.jobs.extra import read_extra
from airflow_provider_slurmapi.slurm.jobs.states import (
    HasJobState,
    JobState,
    JobStateInfo,
    is_job_state_shape,
    parse_job_state,
)

# Slurm's NO_VAL (0xfffffffe) and INFINITE (0xffffffff) as plain integers, e.g. the history's
# ``time.start`` of a job cancelled while pending.
_NO_VAL = 0xFFFFFFFE
_INFINITE = 0xFFFFFFFF

JobSource = Literal["live", "history"]


# One line for a failure message when the script was submitted as given (report_output off).
REPORT_OUTPUT_HINT = (
    "Its last lines of output are not shown: report_output=True (on the task, or [slurmapi] report_output "
    "for the deployment) would publish them, with sensitive values redacted, in the job's Extra field, "
    "which every user of the cluster can read unless Slurm's PrivateData hides jobs; its node needs python3."
)


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


def _record(raw: Any) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise _BadShape(raw, "a job object", "jobs[]")
    if record_job_id(raw) is None:
        raise _BadShape(raw.get("job_id"), "a positive job id", "job_id")
    return raw


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


# -- the job record's fields: one row each ---------------------------------------------------------------
# Every field of :class:`SlurmJob` carries, in its metadata, a :class:`_Row`: where it stands in a live
# and in a history record and how it is read there, how the array-as-one-job takes it from its records,
# and how it is stored (``to_dict``/``from_dict``). A new field is one line in the class, nothing else.
_Reader = Callable[[Mapping[str, Any]], Any]


def _key(name: str, read: Callable[[Any], Any]) -> _Reader:
    """The value under ``name``; a wrong shape names ``name`` (and the sub-field the reader names)."""
    return lambda raw: _read(raw.get(name), name, read)


def _either(first: _Reader, second: _Reader) -> _Reader:
    """The first reader's value, else the second's (read only when the first gives nothing)."""
    return lambda raw: first(raw) or second(raw)


def _within(parent: str, name: str, read: Callable[[Any], Any]) -> _Reader:
    """``parent.name`` where ``parent`` must be an object (or absent): the history's ``time``."""

    def reader(raw: Mapping[str, Any]) -> Any:
        outer = raw.get(parent)
        if outer is not None and not isinstance(outer, Mapping):
            raise _BadShape(outer, "an object", parent)
        return _read(outer.get(name) if outer is not None else None, f"{parent}.{name}", read)

    return reader


def _at(path: str, read: Callable[[Any], Any]) -> _Reader:
    """The value at a dotted path; a step that is not an object reads as nothing (no error)."""
    steps = path.split(".")

    def reader(raw: Mapping[str, Any]) -> Any:
        value: Any = raw
        for step in steps:
            value = value.get(step) if isinstance(value, Mapping) else None
        return _read(value, path, read)

    return reader


def _unwrap(name: str, inner: str, read: Callable[[Any], Any]) -> _Reader:
    """``name`` itself, or ``name.inner`` when it is an object: the history's ``state``, ``user``, ``comment``."""

    def reader(raw: Mapping[str, Any]) -> Any:
        value = raw.get(name)
        if isinstance(value, Mapping):
            return _read(value.get(inner), f"{name}.{inner}", read)
        return _read(value, name, read)

    return reader


def _always(value: Any) -> _Reader:
    return lambda raw: value


def _state(value: Any) -> JobStateInfo:
    if not is_job_state_shape(value):
        raise _BadShape(value, "a list of state names")
    return parse_job_state(value)


def _reason(value: Any) -> str | None:
    text = _text(value)
    return None if text in (None, "None") else text


def _nodes(value: Any) -> str | None:
    return _text(value)  # Slurm's "None assigned" and "(null)" read as no nodes


def _positive(value: Any) -> int | None:
    """A lenient positive number (array ids, the throttle): 0, unset or the wrong shape read as nothing."""
    number = slurm_number(value)
    return number if number is not None and number > 0 else None


def _task_id(value: Any) -> int | None:
    number = slurm_number(value)
    return number if number is not None and 0 <= number <= MAX_TASK_ID else None


def _loose_text(value: Any) -> str | None:
    return read_text(value, placeholders=False)


def _live_end(raw: Mapping[str, Any]) -> int | None:
    """While a job runs, the live ``end_time`` is the projected end, not a real one."""
    end = _read(raw.get("end_time"), "end_time", _timestamp)
    return end if _state(raw.get("job_state")).is_finished else None


@dataclass(frozen=True, slots=True)
class _ArrayParts:
    """What the array-as-one-job is made of: the view of its tasks, its meta record, its first task."""

    array: ArrayView
    records: list[SlurmJob]
    meta: SlurmJob | None
    first: SlurmJob | None


_ArrayRule = Callable[[_ArrayParts, str], Any]


def _of_meta(parts: _ArrayParts, name: str) -> Any:
    return getattr(parts.meta, name) if parts.meta is not None else None


def _of_meta_while_running(parts: _ArrayParts, name: str) -> Any:
    return _of_meta(parts, name) if not parts.array.is_finished else None


def _earliest(parts: _ArrayParts, name: str) -> Any:
    return min((value for job in parts.records if (value := getattr(job, name))), default=None)


def _latest_once_finished(parts: _ArrayParts, name: str) -> Any:
    if not parts.array.is_finished:
        return None
    return max((value for job in parts.records if (value := getattr(job, name))), default=None)


def _first_task_path(parts: _ArrayParts, name: str) -> Any:
    """An output path of an array: the meta record's shows %a as NO_VAL (4294967294); say %a."""
    path = getattr(parts.first, name) if parts.first is not None else None
    return path.replace("_4294967294", "_%a") if path else path


@dataclass(frozen=True, slots=True)
class _Stored:
    """How a field is written by ``to_dict`` (one or more keys) and read back by ``from_dict``."""

    dump: Callable[[str, Any, SlurmJob], dict[str, Any]]
    load: Callable[[Mapping[str, Any], str], Any]


def _dump_plain(name: str, value: Any, job: SlurmJob) -> dict[str, Any]:
    return {name: value}


def _load_text(data: Mapping[str, Any], name: str) -> str | None:
    return _read(data.get(name), name, _stored_text)


def _load_int(data: Mapping[str, Any], name: str) -> int | None:
    return _read(data.get(name), name, _stored_int)


def _load_job_id(data: Mapping[str, Any], name: str) -> int:
    job_id = as_int(data.get(name))
    if job_id is None or job_id <= 0:
        raise _BadShape(data.get(name), "a positive job id", name)
    return job_id


def _dump_state(name: str, state: JobStateInfo, job: SlurmJob) -> dict[str, Any]:
    return {"state": state.state.value, "flags": list(state.flags), "finished": state.is_finished}


def _load_state(data: Mapping[str, Any], name: str) -> JobStateInfo:
    state = data.get("state")
    if not isinstance(state, str) or state not in _STATE_NAMES:
        raise _BadShape(state, "a Slurm base state name", "state")
    flags = _stored_strings(data, "flags")
    return JobStateInfo(JobState(state), flags)


def _dump_exit(name: str, exit: ExitInfo, job: SlurmJob) -> dict[str, Any]:
    return {
        "exit_code": exit.return_code,
        "exit_status": list(exit.status),
        "signal": exit.signal,
        "signal_number": exit.signal_number,
    }


def _load_exit(data: Mapping[str, Any], name: str) -> ExitInfo:
    status = _stored_strings(data, "exit_status")
    return ExitInfo(
        status=status,
        return_code=_load_int(data, "exit_code"),
        signal=_load_text(data, "signal"),
        signal_number=_load_int(data, "signal_number"),
    )


def _dump_end(name: str, end: int | None, job: SlurmJob) -> dict[str, Any]:
    """The end, and how long the job ran (for whoever reads the stored record; not read back)."""
    return {name: end, "elapsed_seconds": job.elapsed_seconds}


def _load_source(data: Mapping[str, Any], name: str) -> JobSource:
    source = data.get(name, "live")
    if source not in ("live", "history"):
        raise _BadShape(source, "'live' or 'history'", name)
    return "history" if source == "history" else "live"


def _dump_array(name: str, array: ArrayView | None, job: SlurmJob) -> dict[str, Any]:
    return {name: array.to_dict() if array is not None else None}


def _load_array(data: Mapping[str, Any], name: str) -> ArrayView | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _BadShape(value, "an object or null", name)
    try:
        return ArrayView.from_dict(value)
    except (ValueError, TypeError) as exc:
        raise _BadShape(value, f"an array view ({exc})", name) from None


def _load_extra(data: Mapping[str, Any], name: str) -> str | None:
    return _extra_text(data.get(name))


_TEXT = _Stored(_dump_plain, _load_text)
_INT = _Stored(_dump_plain, _load_int)


@dataclass(frozen=True, slots=True)
class _Row:
    """One field of the job record: how each kind of record gives it, and how it is stored.

    ``live``/``history``: its reader in that record (``None``: not there, the field keeps its default).
    ``array``: how the array-as-one-job takes it from the array's records (``None``: its default).
    """

    live: _Reader | None
    history: _Reader | None
    array: _ArrayRule | None
    stored: _Stored


def _row(
    live: _Reader | None, history: _Reader | None, array: _ArrayRule | None = None, stored: _Stored = _TEXT
) -> dict[str, _Row]:
    """A field's metadata: its :class:`_Row`."""
    return {"row": _Row(live, history, array, stored)}


def _optional(
    live: _Reader | None, history: _Reader | None, array: _ArrayRule | None = None, stored: _Stored = _TEXT
) -> Any:
    """A field that is ``None`` unless a record gives it."""
    return field(default=None, metadata=_row(live, history, array, stored))


def _output(kind: str, pattern_key: str) -> _Reader:
    """An output path: ``{kind}_expanded`` when Slurm gives it, else the older key."""
    return _either(_key(f"{kind}_expanded", _text), _key(pattern_key, _text))


def _array_id(parts: _ArrayParts, name: str) -> int:
    return parts.array.array_job_id


def _array_state(parts: _ArrayParts, name: str) -> JobStateInfo:
    return parts.array.state_info()


def _array_throttle(parts: _ArrayParts, name: str) -> int | None:
    return parts.array.throttle


def _array_view(parts: _ArrayParts, name: str) -> ArrayView:
    return parts.array


def _meta_source(parts: _ArrayParts, name: str) -> JobSource:
    return parts.meta.source if parts.meta is not None else "live"


_EXIT_CODE = _key("exit_code", ExitInfo.read)
_STATE = _Stored(_dump_state, _load_state)
_EXIT = _Stored(_dump_exit, _load_exit)
_END = _Stored(_dump_end, _load_int)
_EXTRA = _Stored(_dump_plain, _load_extra)
_SOURCE = _Stored(_dump_plain, _load_source)
_ARRAY = _Stored(_dump_array, _load_array)


@dataclass(frozen=True, slots=True, kw_only=True)
class SlurmJob(HasJobState):
    """What this provider knows of one Slurm job.

    Each field's metadata (:func:`_row`) says where it is in a live and a history record, how an
    array's record takes it, and how it is stored: the readers, ``of_array``, ``to_dict`` and
    ``from_dict`` all follow these rows, in this order (also the order of ``to_dict``'s keys).
    """

    job_id: int = field(
        metadata=_row(record_job_id, record_job_id, _array_id, _Stored(_dump_plain, _load_job_id)),
    )
    name: str | None = _optional(_key("name", _text), _key("name", _text), _of_meta)
    state_info: JobStateInfo = field(
        metadata=_row(_key("job_state", _state), _unwrap("state", "current", _state), _array_state, _STATE),
    )
    reason: str | None = _optional(_key("state_reason", _reason), _at("state.reason", _reason), _of_meta_while_running)
    exit: ExitInfo = field(default_factory=ExitInfo, metadata=_row(_EXIT_CODE, _EXIT_CODE, None, _EXIT))
    submit_time: int | None = _optional(
        _key("submit_time", _timestamp), _within("time", "submission", _timestamp), _earliest, _INT
    )
    start_time: int | None = _optional(
        _key("start_time", _timestamp), _within("time", "start", _timestamp), _earliest, _INT
    )
    end_time: int | None = _optional(_live_end, _within("time", "end", _timestamp), _latest_once_finished, _END)
    time_limit_minutes: int | None = _optional(
        _key("time_limit", _number), _within("time", "limit", _number), _of_meta, _INT
    )
    nodes: str | None = _optional(_key("nodes", _nodes), _key("nodes", _nodes))
    partition: str | None = _optional(_key("partition", _text), _key("partition", _text), _of_meta)
    user: str | None = _optional(_key("user_name", _text), _unwrap("user", "name", _text), _of_meta)
    account: str | None = _optional(_key("account", _text), _key("account", _text), _of_meta)
    # From v0.0.43 the live standard_output is the pattern (slurm-%j.out); the path is stdout_expanded.
    stdout: str | None = _optional(_output("stdout", "standard_output"), _output("stdout", "stdout"), _first_task_path)
    stderr: str | None = _optional(_output("stderr", "standard_error"), _output("stderr", "stderr"), _first_task_path)
    comment: str | None = _optional(_key("comment", _text), _unwrap("comment", "job", _text), _of_meta)
    # What the job wrote into its own record: its last output (wrapped scripts) or a progress message.
    extra: str | None = _optional(_key("extra", _extra_text), _key("extra", _extra_text), None, _EXTRA)
    source: JobSource = field(metadata=_row(_always("live"), _always("history"), _meta_source, _SOURCE))
    # Job arrays: the array's id, this record's task id (None for the meta record of waiting tasks),
    # the waiting tasks the meta record lists, the %N throttle; and, for the array as a whole, its tasks.
    # Read leniently: an odd value there reads as nothing rather than failing the job.
    array_job_id: int | None = _optional(
        _key("array_job_id", _positive), _at("array.job_id", _positive), _array_id, _INT
    )
    array_task_id: int | None = _optional(_key("array_task_id", _task_id), _at("array.task_id", _task_id), None, _INT)
    array_pending: str | None = _optional(_key("array_task_string", _loose_text), _at("array.task", _loose_text))
    array_throttle: int | None = _optional(
        _key("array_max_tasks", _positive), _at("array.limits.max.running.tasks", _positive), _array_throttle, _INT
    )
    array: ArrayView | None = field(default=None, metadata=_row(None, None, _array_view, _ARRAY))
    # How many times Slurm requeued the job (``restart_cnt``): it keeps its id and runs again.
    restart_count: int | None = _optional(_key("restart_cnt", _number), _key("restart_cnt", _number), None, _INT)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_live(cls, raw: Any) -> SlurmJob:
        """Build from one element of ``jobs[]`` of ``GET /slurm/{v}/job/{id}`` or ``/jobs/``.

        Raises :class:`MalformedRecordError`, naming the field, for a record of the wrong shape.
        """
        return cls._from_record(raw, "live")

    @classmethod
    def from_history(cls, raw: Any) -> SlurmJob:
        """Build from one element of ``jobs[]`` of ``GET /slurmdb/{v}/job/{id}`` or ``/jobs/``.

        Raises :class:`MalformedRecordError`, naming the field, for a record of the wrong shape.
        """
        return cls._from_record(raw, "history")

    @classmethod
    def _from_record(cls, raw: Any, source: JobSource) -> SlurmJob:
        try:
            record = _record(raw)
            return cls(**{name: reader(record) for name, reader in _READERS[source]})
        except _BadShape as bad:
            raise _malformed(raw, bad, source) from None

    # -- what callers ask ---------------------------------------------------------------------
    @classmethod
    def of_array(cls, array: ArrayView, records: list[SlurmJob]) -> SlurmJob:
        """The whole array as one job: its id, the state of all its tasks together, and the tasks."""
        mine = [job for job in records if job.array_job_id == array.array_job_id]
        meta = next((job for job in mine if job.job_id == array.array_job_id), mine[0] if mine else None)
        tasks = [job for job in mine if job.array_task_id is not None]
        first = min(tasks, key=lambda j: j.array_task_id or 0, default=meta)
        parts = _ArrayParts(array, mine, meta, first)
        return cls(**{name: rule(parts, name) for name, rule in _ARRAY_RULES})

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

    def output_report(self, *, expected: bool | None = None) -> str | None:
        """``Last output of job N:`` and its lines, if the job reported them.

        Otherwise ``expected`` says why not: ``True`` (the script was wrapped) names what can stop the
        report, ``False`` (it was submitted as given) says in one line how to turn reporting on and
        what that publishes to whom; ``None`` (not known, e.g. a sensor's job) says nothing.
        """
        output = self.reported_output
        if output is not None:
            return f"Last output of job {self.job_id}:\n{output}" if output else f"Job {self.job_id} wrote no output."
        if expected:
            return (
                f"No output was reported by job {self.job_id} (the job never ran, or its node has no python3 "
                "at a system path or no scontrol, or the update of its Extra failed)."
            )
        if expected is False:
            return REPORT_OUTPUT_HINT
        return None

    def failure_message(self, *, output_expected: bool | None = None) -> str:
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
        data: dict[str, Any] = {}
        for name, row in _ROWS:
            data.update(row.stored.dump(name, getattr(self, name), self))
        return data

    @classmethod
    def from_dict(cls, data: Any) -> SlurmJob:
        """Rebuild from :meth:`to_dict`; a dict of the wrong shape raises :class:`MalformedRecordError`."""
        try:
            if not isinstance(data, Mapping):
                raise _BadShape(data, "an object", "job")
            return cls(**{name: row.stored.load(data, name) for name, row in _ROWS})
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


# The rows of SlurmJob's fields, in order, and what each reader of records takes from them.
_ROWS: tuple[tuple[str, _Row], ...] = tuple((f.name, f.metadata["row"]) for f in fields(SlurmJob))
_READERS: dict[JobSource, tuple[tuple[str, _Reader], ...]] = {
    "live": tuple((name, row.live) for name, row in _ROWS if row.live is not None),
    "history": tuple((name, row.history) for name, row in _ROWS if row.history is not None),
}
_ARRAY_RULES: tuple[tuple[str, _ArrayRule], ...] = tuple(
    (name, row.array) for name, row in _ROWS if row.array is not None
)
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


def _stored_strings(data: Mapping[str, Any], name: str) -> tuple[str, ...]:
    """A stored list of words (state flags, exit status): ``null`` for none."""
    value = data.get(name) or []
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise _BadShape(value, "a list of strings", name)
    return tuple(clean_text(item) for item in value)


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
