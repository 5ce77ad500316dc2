"""What each field of a job is in the live (slurmctld) and the history (slurmdbd) record: one row each.

The emulator is its own distribution and does not import the provider, so it keeps this table of
its own (the provider's is the field metadata of ``SlurmJob`` in ``slurm/jobs/job.py``). A row names a
field's key in the live record and its dotted path in the history record, and how each is worked
out from the job: from a :class:`LiveView` (the job as the controller shows it now) or a
:class:`HistoryView` (the job as slurmdbd knew it at a moment). ``render.py`` lays the rows into
its templates of the two records, in Slurm's key order; a field it does not place yet comes last.

To add a field of a job: add one row here, with its live key, its history path, or both.
Values follow the answers of a real Slurm 24.11.5 cluster (fixtures 08-28 and 66-71 for live jobs,
48-51 and 72-75 for history).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .model import Job, JobExit
from .slurm_json import NO_VAL_TIME, NODE_MEMORY_MB, NODE_NAME, JsonDict, exit_code, num, unset

_FLAGS = ["USING_DEFAULT_ACCOUNT", "USING_DEFAULT_QOS", "USING_DEFAULT_WCKEY"]
_YEAR = 365 * 24 * 3600


def ran(job: Job) -> bool:
    """True if the job got an allocation (a pending job cancelled never did)."""
    return job.start is not None and not job.bad_constraints and bool(job.step_state or job.state == "RUNNING")


@dataclass(frozen=True, slots=True)
class LiveView:
    """A job as the controller shows it now (``GET /slurm/{v}/job/{id}``): the facts several fields use."""

    job: Job
    cluster: str
    node_cpus: int
    started: bool
    held_or_bad: bool
    submit: int
    start: int
    end: int

    @classmethod
    def of(cls, job: Job, cluster: str, node_cpus: int) -> LiveView:
        start = int(job.start) if job.start is not None else 0
        held_or_bad = job.req.hold or job.bad_constraints
        return cls(job, cluster, node_cpus, ran(job), held_or_bad, int(job.submit), start, _live_end(job, start))


def _live_end(job: Job, start: int) -> int:
    """The end, or while the job runs the end its time limit projects (a year for none)."""
    if job.end is not None:
        return int(job.end)
    if job.state != "RUNNING" or job.start is None:
        return 0
    limit = job.req.time_limit
    return start + (int(limit * job.minute_seconds) if limit is not None else _YEAR)


@dataclass(frozen=True, slots=True)
class HistoryView:
    """A job as slurmdbd knew it at ``as_of`` (accounting lags the controller): the facts several fields use.

    ``comments=False``: the cluster does not set ``AccountingStoreFlags=job_comment`` (Slurm's default),
    so the history keeps no job comments."""

    job: Job
    cluster: str
    as_of: float
    comments: bool
    ended: bool
    started: bool
    state: str
    submit: int
    eligible: int
    start: int
    end: int

    @classmethod
    def of(cls, job: Job, cluster: str, as_of: float, comments: bool) -> HistoryView:
        ended = job.end is not None and job.end <= as_of
        started = job.start is not None and job.start <= as_of and ran(job)
        state = job.state if ended else ("RUNNING" if started else "PENDING")
        submit = int(job.submit)
        # A job that ended without starting shows NO_VAL as its start.
        start = int(job.start or 0) if started else (NO_VAL_TIME if ended else 0)
        end = int(job.end or 0) if ended else 0
        eligible = 0 if job.req.hold else submit
        return cls(job, cluster, as_of, comments, ended, started, state, submit, eligible, start, end)

    @property
    def elapsed(self) -> int:
        if not self.started:
            return 0
        return max(0, (self.end if self.ended else int(self.as_of)) - self.start)

    @property
    def planned(self) -> int:
        """How long the job waited (or has waited so far) once eligible."""
        if not self.eligible:
            return 0
        if self.started:
            return max(0, self.start - self.eligible)
        return 0 if self.ended else max(0, int(self.as_of) - self.eligible)


Live = Callable[[LiveView], Any]
History = Callable[[HistoryView], Any]


@dataclass(frozen=True, slots=True)
class JobField:
    """One field of a job: its key and value in the live record, its path and value in the history."""

    name: str
    live: tuple[str, Live] | None = None
    history: tuple[str, History] | None = None


# -- values worked out of a job ----------------------------------------------------------------------
def _exit(info: JobExit) -> JsonDict:
    return exit_code(info.status, info.return_code, info.signal)


def _tres(kind: str, count: int, *, name: str = "", tres_id: int = 0) -> JsonDict:
    ids = {"cpu": 1, "mem": 2, "energy": 3, "node": 4, "billing": 5, "gres": 1001}
    return {"type": kind, "name": name, "id": tres_id or ids[kind], "count": count}


def _gres(job: Job) -> list[JsonDict]:
    return [_tres("gres", job.gpus, name="gpu")] if job.gpus else []


def _tres_req(job: Job) -> str:
    cpus, nodes = job.cpus, job.req.nodes
    text = f"cpu={cpus},mem={NODE_MEMORY_MB * nodes}M,node={nodes},billing={cpus}"
    return text + (f",gres/gpu={job.gpus}" if job.gpus else "")


def _tres_alloc(view: LiveView) -> str:
    if not view.started:
        return ""
    job = view.job
    text = f"cpu={job.cpus},node=1,billing={job.cpus}"
    return text + (f",gres/gpu={job.gpus}" if job.gpus else "")


def _gres_detail(job: Job) -> list[str]:
    return [f"gpu:{job.gpus}(IDX:{','.join(map(str, job.gpu_ids))})"] if job.gpu_ids else []


def _job_resources(view: LiveView) -> JsonDict | None:
    if not view.started:
        return None
    job = view.job
    allocated = set(job.cpu_ids) if job.cpu_ids else set(range(job.cpus))
    return {
        "select_type": ["CORE"],
        "nodes": {
            "count": 1,
            "select_type": ["ONE_ROW"],
            "list": NODE_NAME,
            "whole": False,
            "allocation": [
                {
                    "index": 0,
                    "name": NODE_NAME,
                    "cpus": {"count": job.cpus, "used": 0},
                    "memory": {"used": 0, "allocated": 0},
                    "sockets": [
                        {
                            "index": i,
                            "cores": [{"index": 0, "status": ["ALLOCATED" if i in allocated else "UNALLOCATED"]}],
                        }
                        for i in range(view.node_cpus)
                    ],
                }
            ],
        },
        "cpus": job.cpus,
        "threads_per_core": unset(),
    }


def _live_flags(view: LiveView) -> list[str]:
    job = view.job
    flags = ["JOB_WAS_RUNNING", *_FLAGS] if job.state == "RUNNING" else list(_FLAGS)
    return [*flags, "DEPENDENT"] if job.req.hold else flags


def _live_tasks(view: LiveView) -> JsonDict:
    job = view.job
    return unset() if job.bad_constraints or (job.req.hold and job.finished) else num(job.req.ntasks)


def _history_flags(view: HistoryView) -> list[str]:
    scheduled = ["STARTED_ON_SCHEDULE"] if view.started else []
    return [*scheduled, "START_RECEIVED"] if view.started or view.ended else scheduled


def _requested(view: HistoryView) -> list[JsonDict]:
    job = view.job
    nodes = job.req.nodes
    cpus = [_tres("cpu", job.cpus), _tres("mem", NODE_MEMORY_MB * nodes), _tres("node", nodes)]
    return [*cpus, _tres("billing", job.cpus), *_gres(job)]


def _allocated(view: HistoryView) -> list[JsonDict]:
    if not view.started:
        return []
    job = view.job
    return [_tres("cpu", job.cpus), _tres("energy", -2), _tres("node", 1), _tres("billing", job.cpus), *_gres(job)]


def _usage(job: Job, ended: bool) -> JsonDict:
    """What a step's ``tres.requested`` holds: energy once it ended, and MaxRSS where it was gathered."""
    energy = [_tres("energy", 0)] if ended else []  # a running step has no accounting totals yet
    if not (ended and job.max_rss_bytes is not None):
        return {"max": [], "min": [], "average": list(energy), "total": list(energy)}
    # gathered (jobacct_gather/linux): MaxRSS, as fixture 74 shows
    gathered = [_tres("cpu", 0), _tres("mem", job.max_rss_bytes), _tres("energy", 0)]
    at = {"task": 0, "node": NODE_NAME}
    return {
        "max": [{**item, **at} for item in gathered],
        "min": [{**item, **at} for item in gathered],
        "average": [dict(item) for item in gathered],
        "total": [dict(item) for item in gathered],
    }


def _step(view: HistoryView) -> JsonDict:
    """The batch step of a job that started."""
    job, as_of = view.job, view.as_of
    start = int(job.start or 0)
    ended = job.end is not None and job.end <= as_of and bool(job.step_state)
    end = int(job.end or 0) if ended else 0
    elapsed = (end if ended else int(as_of)) - start
    zero_time = {"seconds": 0, "microseconds": 0}
    energy = [_tres("energy", 0)] if ended else []
    return {
        "time": {
            "elapsed": max(0, elapsed),
            "end": num(end),
            "start": num(start),
            "suspended": 0,
            "system": dict(zero_time),
            "total": dict(zero_time),
            "user": dict(zero_time),
        },
        "exit_code": _exit(job.step_exit) if ended else exit_code(),
        "nodes": {"count": 1, "range": NODE_NAME, "list": [NODE_NAME]},
        "tasks": {"count": 1},
        "pid": "",
        "CPU": {"requested_frequency": {"min": num(0), "max": num(0)}, "governor": "0"},
        "kill_request_user": "",
        "state": [job.step_state if ended else "RUNNING"],
        "statistics": {"CPU": {"actual_frequency": 0}, "energy": {"consumed": num(0)}},
        "step": {"id": f"{job.job_id}.batch", "name": "batch"},
        "task": {"distribution": "Unknown"},
        "tres": {
            "requested": _usage(job, ended),
            "consumed": {"max": [], "min": [], "average": list(energy), "total": list(energy)},
            "allocated": [_tres("cpu", job.cpus), _tres("mem", 0), _tres("node", 1), *_gres(job)],
        },
    }


def task_string(job: Job) -> str:
    """``array_task_string`` of a meta record: its waiting tasks as ranges, and the throttle (``2-3%2``)."""
    if not job.is_array_meta:
        return ""
    ranges: list[str] = []
    ids = job.array_pending
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[i - 1] + 1:
            first, last = ids[start], ids[i - 1]
            ranges.append(str(first) if first == last else f"{first}-{last}")
            start = i
    text = ",".join(ranges)
    return f"{text}%{job.array_throttle}" if job.array_throttle else text


def _task_id(job: Job) -> JsonDict:
    return num(job.array_task_id) if job.array_task_id is not None else unset()


def _history_throttle(job: Job) -> int:
    """The history shows the throttle on the array's own record only."""
    return job.array_throttle if job.is_array_meta or job.job_id == job.array_job_id else 0


def _time_limit(limit: int | None, *, infinite: bool) -> JsonDict:
    return num(limit) if limit is not None else num(0, is_set=False, infinite=infinite)


def _if_requested(path: str, requested: str | None) -> str:
    return path if requested else ""


# -- the table --------------------------------------------------------------------------------------
JOB_FIELDS: tuple[JobField, ...] = (
    JobField("job_id", ("job_id", lambda v: v.job.job_id), ("job_id", lambda h: h.job.job_id)),
    JobField("name", ("name", lambda v: v.job.req.name), ("name", lambda h: h.job.req.name)),
    JobField(
        "comment",
        ("comment", lambda v: v.job.req.comment),
        ("comment.job", lambda h: h.job.req.comment if h.comments else ""),
    ),
    JobField("cluster", ("cluster", lambda v: v.cluster), ("cluster", lambda h: h.cluster)),
    JobField("association cluster", history=("association.cluster", lambda h: h.cluster)),
    JobField("user", ("user_name", lambda v: v.job.user), ("user", lambda h: h.job.user)),
    JobField("association user", history=("association.user", lambda h: h.job.user)),
    JobField("mail user", ("mail_user", lambda v: v.job.user)),
    JobField("user id", ("user_id", lambda v: v.job.uid)),
    JobField("group", ("group_name", lambda v: v.job.group), ("group", lambda h: h.job.group)),
    JobField("group id", ("group_id", lambda v: v.job.gid)),
    JobField("partition", ("partition", lambda v: v.job.partition), ("partition", lambda h: h.job.partition)),
    JobField("state", ("job_state", lambda v: v.job.job_state), ("state.current", lambda h: [h.state])),
    JobField(
        "reason",
        ("state_reason", lambda v: v.job.reason),
        ("state.reason", lambda h: h.job.reason if h.state == "PENDING" else "None"),
    ),
    JobField("description", ("state_description", lambda v: v.job.description)),
    JobField("flags", ("flags", _live_flags), ("flags", _history_flags)),
    JobField("hold", ("hold", lambda v: v.job.req.hold), ("hold", lambda h: h.job.req.hold)),
    JobField(
        "priority",
        ("priority", lambda v: num(0 if v.job.req.hold else 1)),
        ("priority", lambda h: num(0 if h.job.req.hold else 1)),
    ),
    JobField("accrue time", ("accrue_time", lambda v: num(0 if v.held_or_bad else v.submit))),
    JobField("submit time", ("submit_time", lambda v: num(v.submit)), ("time.submission", lambda h: h.submit)),
    JobField(
        "eligible time",
        ("eligible_time", lambda v: num(0 if v.job.req.hold else v.submit)),
        ("time.eligible", lambda h: h.eligible),
    ),
    JobField("start time", ("start_time", lambda v: num(v.start)), ("time.start", lambda h: h.start)),
    JobField("end time", ("end_time", lambda v: num(v.end)), ("time.end", lambda h: h.end)),
    JobField("elapsed", history=("time.elapsed", lambda h: h.elapsed)),
    JobField("planned", history=("time.planned", lambda h: num(h.planned))),
    JobField(
        "last scheduling",
        ("last_sched_evaluation", lambda v: num(v.start if v.started else v.submit)),
    ),
    JobField(
        "time limit",
        ("time_limit", lambda v: _time_limit(v.job.req.time_limit, infinite=True)),
        ("time.limit", lambda h: _time_limit(h.job.req.time_limit, infinite=h.started)),
    ),
    JobField(
        "exit code",
        ("exit_code", lambda v: _exit(v.job.exit)),
        ("exit_code", lambda h: _exit(h.job.job_exit_history) if h.ended else exit_code()),
    ),
    JobField(
        "kill request user",
        history=("kill_request_user", lambda h: h.job.kill_user if h.ended and h.job.state == "CANCELLED" else ""),
    ),
    JobField(
        "nodes",
        ("nodes", lambda v: NODE_NAME if v.started else ""),
        ("nodes", lambda h: NODE_NAME if h.started else "None assigned"),
    ),
    JobField("batch host", ("batch_host", lambda v: NODE_NAME if v.started else "")),
    JobField("allocation nodes", history=("allocation_nodes", lambda h: 1 if h.started else 0)),
    JobField("node count", ("node_count", lambda v: num(v.job.req.nodes))),
    JobField(
        "max nodes",
        ("max_nodes", lambda v: num(v.job.req.max_nodes or (v.job.req.nodes if v.held_or_bad else 0))),
    ),
    JobField("cpus", ("cpus", lambda v: num(v.job.cpus)), ("required.CPUs", lambda h: h.job.cpus)),
    JobField("billable tres", ("billable_tres", lambda v: num(v.job.cpus) if v.started else unset())),
    JobField("cpus per task", ("cpus_per_task", lambda v: num(max(1, v.job.req.cpus_per_task or 1)))),
    JobField(
        "minimum cpus per node",
        ("minimum_cpus_per_node", lambda v: num(max(1, v.job.req.minimum_cpus_per_node or 1))),
    ),
    JobField("tasks per node", ("tasks_per_node", lambda v: num(v.job.req.tasks_per_node or 0))),
    JobField("tasks", ("tasks", _live_tasks)),
    JobField("gres detail", ("gres_detail", lambda v: _gres_detail(v.job))),
    JobField("job resources", ("job_resources", _job_resources)),
    JobField("tres per job", ("tres_per_job", lambda v: v.job.req.tres_per_job)),
    JobField("tres per node", ("tres_per_node", lambda v: v.job.req.tres_per_node)),
    JobField("tres requested", ("tres_req_str", lambda v: _tres_req(v.job)), ("tres.requested", _requested)),
    JobField("tres allocated", ("tres_alloc_str", _tres_alloc), ("tres.allocated", _allocated)),
    JobField("steps", history=("steps", lambda h: [_step(h)] if h.started else [])),
    # Output paths: live v0.0.43+ shows the patterns here and the paths in *_expanded (render's version traits).
    JobField(
        "stdout",
        ("standard_output", lambda v: v.job.stdout_path),
        ("stdout", lambda h: h.job.stdout_pattern),
    ),
    JobField("stdout path", history=("stdout_expanded", lambda h: h.job.stdout_path)),
    JobField(
        "stderr",
        ("standard_error", lambda v: v.job.stderr_path),
        ("stderr", lambda h: h.job.stderr_pattern),
    ),
    JobField("stderr path", history=("stderr_expanded", lambda h: _if_requested(h.job.stderr_path, h.job.req.stderr))),
    JobField(
        "stdin",
        ("standard_input", lambda v: v.job.stdin_path),
        ("stdin", lambda h: _if_requested(h.job.stdin_path, h.job.req.stdin)),
    ),
    JobField("stdin path", history=("stdin_expanded", lambda h: _if_requested(h.job.stdin_path, h.job.req.stdin))),
    JobField(
        "working directory",
        ("current_working_directory", lambda v: v.job.cwd),
        ("working_directory", lambda h: h.job.cwd),
    ),
    # What the job wrote into its own record (scontrol update Extra=): slurmdbd keeps none of it.
    JobField("extra", ("extra", lambda v: v.job.extra), ("extra", lambda h: "")),
    JobField(
        "array job id",
        ("array_job_id", lambda v: num(v.job.array_job_id)),
        ("array.job_id", lambda h: h.job.array_job_id),
    ),
    JobField(
        "array task id",
        ("array_task_id", lambda v: _task_id(v.job)),
        ("array.task_id", lambda h: _task_id(h.job)),
    ),
    JobField(
        "array waiting tasks",
        ("array_task_string", lambda v: task_string(v.job)),
        ("array.task", lambda h: hex(sum(1 << i for i in h.job.array_pending)) if h.job.is_array_meta else ""),
    ),
    JobField(
        "array throttle",
        ("array_max_tasks", lambda v: num(v.job.array_throttle)),
        ("array.limits.max.running.tasks", lambda h: _history_throttle(h.job)),
    ),
)


LIVE_FIELDS: tuple[tuple[str, Live], ...] = tuple(row.live for row in JOB_FIELDS if row.live is not None)
HISTORY_FIELDS: tuple[tuple[str, History], ...] = tuple(row.history for row in JOB_FIELDS if row.history is not None)
