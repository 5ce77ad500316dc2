"""One normalized model of a Slurm job, whether it came from the live queue or the history.

The live queue (``/slurm/{v}/job/{id}``) and the accounting history (``/slurmdb/{v}/job/{id}``)
describe a job with different shapes: ``job_state`` list vs ``state.current``, time objects vs plain
integers, ``standard_output`` vs ``stdout``. Operators, sensors and triggers only ever see
:class:`SlurmJob`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_provider_slurmapi.slurm.job_output import read_extra
from airflow_provider_slurmapi.slurm.states import JobState, JobStateInfo, parse_job_state

# Slurm's NO_VAL (0xfffffffe) and INFINITE (0xffffffff) as plain integers, e.g. the history's
# ``time.start`` of a job cancelled while pending.
_NO_VAL = 0xFFFFFFFE
_INFINITE = 0xFFFFFFFF

JobSource = Literal["live", "history"]


def slurm_number(value: Any) -> int | None:
    """Read a Slurm number: a plain int or ``{"set", "infinite", "number"}``; ``None`` when unset."""
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return None if number in (_NO_VAL, _INFINITE) else number


def _timestamp(value: Any) -> int | None:
    number = slurm_number(value)
    return number if number else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


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
        if isinstance(raw, int | str) and not isinstance(raw, bool):
            # v0.0.39-style plain integer, or "3:0".
            code = str(raw).split(":", 1)[0]
            return cls(return_code=int(code) if code.lstrip("-").isdigit() else None)
        if not isinstance(raw, Mapping):
            return cls()
        status = raw.get("status") or ()
        signal = raw.get("signal") or {}
        signal_number = slurm_number(signal.get("id")) if isinstance(signal, Mapping) else None
        signal_name = _text(signal.get("name")) if isinstance(signal, Mapping) else None
        return cls(
            status=tuple(str(s) for s in ([status] if isinstance(status, str) else status)),
            return_code=slurm_number(raw.get("return_code")),
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

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_live(cls, raw: Mapping[str, Any]) -> SlurmJob:
        """Build from one element of ``jobs[]`` of ``GET /slurm/{v}/job/{id}`` or ``/jobs/``."""
        state = parse_job_state(raw.get("job_state"))
        end = _timestamp(raw.get("end_time"))
        return cls(
            job_id=int(raw["job_id"]),
            state_info=state,
            source="live",
            name=_text(raw.get("name")),
            reason=_reason(raw.get("state_reason")),
            exit=ExitInfo.parse(raw.get("exit_code")),
            submit_time=_timestamp(raw.get("submit_time")),
            start_time=_timestamp(raw.get("start_time")),
            # While a job runs, end_time is the projected end, not a real one.
            end_time=end if state.state.is_finished else None,
            time_limit_minutes=slurm_number(raw.get("time_limit")),
            nodes=_nodes(raw.get("nodes")),
            partition=_text(raw.get("partition")),
            user=_text(raw.get("user_name")),
            account=_text(raw.get("account")),
            stdout=_text(raw.get("standard_output")),
            stderr=_text(raw.get("standard_error")),
            comment=_text(raw.get("comment")),
            extra=_text(raw.get("extra")),
        )

    @classmethod
    def from_history(cls, raw: Mapping[str, Any]) -> SlurmJob:
        """Build from one element of ``jobs[]`` of ``GET /slurmdb/{v}/job/{id}`` or ``/jobs/``."""
        state_raw = raw.get("state") or {}
        times = raw.get("time") or {}
        comment = raw.get("comment")
        if isinstance(comment, Mapping):
            comment = comment.get("job")
        user = raw.get("user")
        return cls(
            job_id=int(raw["job_id"]),
            state_info=parse_job_state(state_raw.get("current") if isinstance(state_raw, Mapping) else state_raw),
            source="history",
            name=_text(raw.get("name")),
            reason=_reason(state_raw.get("reason") if isinstance(state_raw, Mapping) else None),
            exit=ExitInfo.parse(raw.get("exit_code")),
            submit_time=_timestamp(times.get("submission")),
            start_time=_timestamp(times.get("start")),
            end_time=_timestamp(times.get("end")),
            time_limit_minutes=slurm_number(times.get("limit")),
            nodes=_nodes(raw.get("nodes")),
            partition=_text(raw.get("partition")),
            user=_text(user.get("name") if isinstance(user, Mapping) else user),
            account=_text(raw.get("account")),
            stdout=_text(raw.get("stdout_expanded")) or _text(raw.get("stdout")),
            stderr=_text(raw.get("stderr_expanded")) or _text(raw.get("stderr")),
            comment=_text(comment),
            extra=_text(raw.get("extra")),
        )

    # -- what callers ask ---------------------------------------------------------------------
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
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SlurmJob:
        return cls(
            job_id=int(data["job_id"]),
            state_info=JobStateInfo(JobState(data["state"]), tuple(data.get("flags") or ())),
            source=data.get("source", "live"),
            name=data.get("name"),
            reason=data.get("reason"),
            exit=ExitInfo(
                status=tuple(data.get("exit_status") or ()),
                return_code=data.get("exit_code"),
                signal=data.get("signal"),
                signal_number=data.get("signal_number"),
            ),
            submit_time=data.get("submit_time"),
            start_time=data.get("start_time"),
            end_time=data.get("end_time"),
            time_limit_minutes=data.get("time_limit_minutes"),
            nodes=data.get("nodes"),
            partition=data.get("partition"),
            user=data.get("user"),
            account=data.get("account"),
            stdout=data.get("stdout"),
            stderr=data.get("stderr"),
            comment=data.get("comment"),
            extra=data.get("extra"),
        )


def _reason(value: Any) -> str | None:
    text = _text(value)
    return None if text in (None, "None") else text


def _nodes(value: Any) -> str | None:
    text = _text(value)
    return None if text in (None, "None assigned", "(null)") else text


def describe_transition(previous: SlurmJob | None, current: SlurmJob) -> str | None:
    """The log line for a change of state or reason, or ``None`` when nothing changed."""
    if previous is not None and (previous.state_info, previous.reason, previous.nodes) == (
        current.state_info,
        current.reason,
        current.nodes,
    ):
        return None
    if previous is None:
        return f"Slurm job {current.job_id}: {current.describe()}"
    return f"Slurm job {current.job_id}: {previous.describe()} -> {current.describe()}"
