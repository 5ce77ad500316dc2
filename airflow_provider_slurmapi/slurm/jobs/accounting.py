"""What the accounting history (slurmdbd) knows of a finished job: its resource summary.

Read from one record of ``GET /slurmdb/{v}/job/{id}``: elapsed time, nodes, allocated TRES (cpu,
memory, gres/gpu...), node-hours and GPU-hours, the largest MaxRSS of its steps (only when the
cluster gathers it: ``JobAcctGatherType`` other than ``jobacct_gather/none``), the exit code or
signal, and how many times it was requeued (``restart_cnt``, v0.0.42 and later).

The record passes through untrusted hands (and other users' odd records sit beside it), so the
reader is total: a field that is missing, of the wrong type or absurdly large reads as unknown, and
the summary says less instead of failing the task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_slurmapi.slurm.api.values import as_int, clean_text, read_text
from airflow_provider_slurmapi.slurm.jobs.job import ExitInfo, format_duration, slurm_number
from airflow_provider_slurmapi.slurm.jobs.states import FINISHED_STATES, JobState, is_job_state_shape, parse_job_state

# Larger than any real count (2**53: beyond it a float loses units); a bigger value is not Slurm's.
_MAX_COUNT = 2**53
_MAX_TRES = 64
_MAX_STEPS = 10_000
_MAX_NAME = 64


@dataclass(frozen=True, slots=True)
class Accounting:
    """The history's summary of one finished job; ``None`` fields are unknown to the history."""

    job_id: int
    state: str | None = None
    elapsed_seconds: int | None = None
    nodes: int | None = None
    node_list: str | None = None
    tres_allocated: dict[str, int] = field(default_factory=dict)
    max_rss_bytes: int | None = None
    max_rss_step: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    requeues: int | None = None

    @property
    def cpus(self) -> int | None:
        return self.tres_allocated.get("cpu")

    @property
    def memory_mb(self) -> int | None:
        return self.tres_allocated.get("mem")

    @property
    def gpus(self) -> int:
        """GPUs allocated: ``gres/gpu`` (typed ``gres/gpu:h100`` entries are counted in it by Slurm)."""
        return self.tres_allocated.get("gres/gpu", 0)

    @property
    def node_hours(self) -> float | None:
        if self.nodes is None or self.elapsed_seconds is None:
            return None
        return round(self.nodes * self.elapsed_seconds / 3600, 4)

    @property
    def gpu_hours(self) -> float | None:
        if self.elapsed_seconds is None:
            return None
        return round(self.gpus * self.elapsed_seconds / 3600, 4)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for XCom (``slurm_job["accounting"]``)."""
        return {
            "recorded": True,
            "state": self.state,
            "elapsed_seconds": self.elapsed_seconds,
            "nodes": self.nodes,
            "node_list": self.node_list,
            "tres_allocated": dict(self.tres_allocated),
            "cpus": self.cpus,
            "memory_mb": self.memory_mb,
            "gpus": self.gpus,
            "node_hours": self.node_hours,
            "gpu_hours": self.gpu_hours,
            "max_rss_bytes": self.max_rss_bytes,
            "max_rss_step": self.max_rss_step,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "requeues": self.requeues,
        }

    def describe(self) -> str:
        """The one log line: ``Slurm job 42 accounting: COMPLETED after 1h02m03s on 2 nodes (a3-[1-2]); ...``."""
        ran = f"{self.state or '?'} after {format_duration(self.elapsed_seconds)}"
        parts = [ran + _on_nodes(self.nodes, self.node_list)]
        shown = [f"{key}={_tres_value(key, count)}" for key, count in self.tres_allocated.items() if key != "node"]
        parts.append("allocated " + (", ".join(shown) if shown else "nothing recorded"))
        parts.append(f"{_hours(self.node_hours)} node-hours, {_hours(self.gpu_hours)} GPU-hours")
        if self.max_rss_bytes is not None:
            step = f" (step {self.max_rss_step})" if self.max_rss_step else ""
            parts.append(f"MaxRSS {format_bytes(self.max_rss_bytes)}{step}")
        else:
            parts.append("MaxRSS not accounted")
        parts.append(f"signal {self.signal}" if self.signal else f"exit code {_known(self.exit_code)}")
        parts.append(_requeued(self.requeues))
        return f"Slurm job {self.job_id} accounting: " + "; ".join(parts) + "."


def not_recorded(job_id: int, waited_seconds: float, why: str | None = None) -> tuple[str, dict[str, Any]]:
    """The log line and XCom value when the history has no finished record of the job (in time)."""
    reason = why or (
        f"the history (slurmdbd) has no finished record of it after {waited_seconds:.0f}s; slurmdbd records "
        f"jobs a little after they end (sacct -j {job_id} shows it later)"
    )
    return (
        f"Slurm job {job_id} accounting: no summary: {reason}.",
        {"recorded": False, "reason": reason},
    )


def read_accounting(record: Any, job_id: int) -> Accounting | None:
    """The summary of a *finished* history record of ``job_id``; ``None`` when it is not one yet.

    Never raises: an unreadable field is an unknown value.
    """
    if not isinstance(record, Mapping) or as_int(record.get("job_id")) != job_id:
        return None
    state = _finished_state(record.get("state"))
    if state is None:
        return None  # not in the history as finished yet (slurmdbd lags the controller)
    times = _mapping(record.get("time"))
    tres = _tres_counts(_mapping(record.get("tres")).get("allocated"))
    nodes = tres.get("node")
    if nodes is None:
        nodes = _count(record.get("allocation_nodes"))
    max_rss, max_rss_step = _max_rss(record.get("steps"))
    exit_info = ExitInfo.parse(record.get("exit_code"))
    return Accounting(
        job_id=job_id,
        state=state.value,
        elapsed_seconds=_count(times.get("elapsed")),
        nodes=nodes or None,
        node_list=read_text(record.get("nodes"), limit=200),
        tres_allocated=tres,
        max_rss_bytes=max_rss,
        max_rss_step=max_rss_step,
        exit_code=exit_info.return_code if exit_info.return_code is None or exit_info.return_code >= 0 else None,
        signal=exit_info.signal,
        requeues=_count(record.get("restart_cnt")),
    )


def pick_record(body: Any, job_id: int) -> Any:
    """The newest record of ``job_id`` in a history answer (a requeued job has one per run)."""
    jobs = body.get("jobs") if isinstance(body, Mapping) else None
    if not isinstance(jobs, list):
        return None
    for record in reversed(jobs[:_MAX_STEPS]):
        if isinstance(record, Mapping) and as_int(record.get("job_id")) == job_id:
            return record
    return None


# -- readers that never raise -----------------------------------------------------------------------
def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _count(value: Any) -> int | None:
    """A non-negative count from a plain or ``{set, number}`` number; unknown when odd or absurd."""
    number = slurm_number(value)
    if number is None or number < 0 or number > _MAX_COUNT:
        return None
    return number


def _finished_state(value: Any) -> JobState | None:
    current = value.get("current") if isinstance(value, Mapping) else value
    if not is_job_state_shape(current):
        return None
    info = parse_job_state(current)
    return info.state if info.state in FINISHED_STATES and info.is_finished else None


def _tres_counts(value: Any) -> dict[str, int]:
    """``[{type, name, count}]`` as ``{"cpu": 2, "mem": 1000, "node": 1, "gres/gpu": 8}``; odd entries left out."""
    counts: dict[str, int] = {}
    if not isinstance(value, list):
        return counts
    for entry in value[:_MAX_TRES]:
        if not isinstance(entry, Mapping):
            continue
        kind, name = entry.get("type"), entry.get("name") or ""
        if not isinstance(kind, str) or not isinstance(name, str) or not kind or len(kind + name) > _MAX_NAME:
            continue
        count = _count(entry.get("count"))
        if count is None or kind in ("energy", "fs", "ic", "pages", "vmem"):
            continue
        key = clean_text(f"{kind}/{name}" if name else kind)
        counts[key] = count
    return counts


def _max_rss(steps: Any) -> tuple[int | None, str | None]:
    """The largest MaxRSS (bytes) of the steps, and that step's id; ``None`` when not gathered.

    slurmdbd keeps it as the ``mem`` entry of the step's ``tres.requested.max`` (sacct's MaxRSS).
    """
    best: tuple[int | None, str | None] = (None, None)
    if not isinstance(steps, list):
        return best
    for step in steps[:_MAX_STEPS]:
        if not isinstance(step, Mapping):
            continue
        requested = _mapping(_mapping(step.get("tres")).get("requested"))
        rss = _tres_counts(requested.get("max")).get("mem")
        if rss is not None and (best[0] is None or rss > best[0]):
            step_id = _mapping(step.get("step")).get("id")
            best = (rss, read_text(step_id, limit=200))
    return best


def format_bytes(count: int) -> str:
    """``1536`` -> ``1.5 KiB``; ``12884901888`` -> ``12.0 GiB``."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"  # pragma: no cover - the loop returns


def _tres_value(key: str, count: int) -> str:
    if key == "mem":
        return f"{count}M" if count < 1024 or count % 1024 else f"{count // 1024}G"
    return str(count)


def _on_nodes(nodes: int | None, node_list: str | None) -> str:
    if nodes is None:
        return f" on {node_list}" if node_list else ""
    text = f" on {nodes} node" + ("s" if nodes != 1 else "")
    return text + (f" ({node_list})" if node_list else "")


def _hours(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"


def _known(value: int | None) -> str:
    return "?" if value is None else str(value)


def _requeued(requeues: int | None) -> str:
    if requeues is None:
        return "requeues not recorded"
    return f"requeued {requeues} time" + ("" if requeues == 1 else "s")


__all__ = ["Accounting", "format_bytes", "not_recorded", "pick_record", "read_accounting"]
