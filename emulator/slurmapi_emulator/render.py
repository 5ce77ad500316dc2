"""Jobs as slurmrestd shows them: the live (slurmctld) record and the history (slurmdbd) record.

Key sets, nesting and value conventions follow the answers of a real Slurm 24.11.5 cluster
(fixtures 08-28 and 66-71 for live jobs, 48-51 and 72-75 for history), adjusted per data parser
version from Slurm's OpenAPI specs. Each record is a template in Slurm's key order: what is the same
for every job is written here, and each key marked :data:`FILL` is filled by its row of the job's
fields (``job_fields.py``); a row whose key no template holds yet comes at the end of the record.
Live records are cached as JSON text per job revision, so polling thousands of jobs does not
re-encode unchanged ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar

from .job_fields import HISTORY_FIELDS, LIVE_FIELDS, HistoryView, LiveView
from .model import Job
from .slurm_json import NODE_MEMORY_MB, NODE_NAME, JsonDict, dumps, exit_code, num, unset
from .versions import wire

FILL: Final[Any] = "<filled from job_fields.py>"
"""A template's place for a field of the job: the row of ``job_fields.py`` with that key fills it."""

_View = TypeVar("_View")
_Placed = tuple[tuple[str, ...], str, Callable[[_View], Any]]


def _placed(rows: Iterable[tuple[str, Callable[[_View], Any]]]) -> tuple[_Placed[_View], ...]:
    """The rows with their dotted paths split once: (parent keys, key, value)."""
    return tuple((tuple(path.split(".")[:-1]), path.rsplit(".", 1)[-1], value) for path, value in rows)


def _filled(template: JsonDict, rows: tuple[_Placed[_View], ...], view: _View) -> JsonDict:
    """The template (a fresh dict) with each row's value at its place."""
    for parents, key, value in rows:
        node = template
        for parent in parents:
            node = node.setdefault(parent, {})
        node[key] = value(view)
    return template


def _live_template() -> JsonDict:
    """A live record as every job shows it, with :data:`FILL` where the job's own values go."""
    return {
        "account": "default",
        "accrue_time": FILL,
        "admin_comment": "",
        "allocating_node": NODE_NAME,
        "array_job_id": FILL,
        "array_task_id": FILL,
        "array_max_tasks": FILL,
        "array_task_string": FILL,
        "association_id": 1,
        "batch_features": "",
        "batch_flag": True,
        "batch_host": FILL,
        "flags": FILL,
        "burst_buffer": "",
        "burst_buffer_state": "",
        "cluster": FILL,
        "cluster_features": "",
        "command": "",
        "comment": FILL,
        "container": "",
        "container_id": "",
        "contiguous": False,
        "core_spec": 0,
        "thread_spec": 32766,
        "cores_per_socket": unset(),
        "billable_tres": FILL,
        "cpus_per_task": FILL,
        "cpu_frequency_minimum": unset(),
        "cpu_frequency_maximum": unset(),
        "cpu_frequency_governor": unset(),
        "cpus_per_tres": "",
        "cron": "",
        "deadline": num(0),
        "delay_boot": num(0),
        "dependency": "",
        "derived_exit_code": exit_code(),
        "eligible_time": FILL,
        "end_time": FILL,
        "excluded_nodes": "",
        "exit_code": FILL,
        "extra": FILL,
        "failed_node": "",
        "features": "",
        "federation_origin": "",
        "federation_siblings_active": "",
        "federation_siblings_viable": "",
        "gres_detail": FILL,
        "group_id": FILL,
        "group_name": FILL,
        "het_job_id": num(0),
        "het_job_id_set": "",
        "het_job_offset": num(0),
        "job_id": FILL,
        "job_resources": FILL,
        "job_size_str": [],
        "job_state": FILL,
        "last_sched_evaluation": FILL,
        "licenses": "",
        "mail_type": [],
        "mail_user": FILL,
        "max_cpus": num(0),
        "max_nodes": FILL,
        "mcs_label": "",
        "memory_per_tres": "",
        "name": FILL,
        "network": "",
        "nodes": FILL,
        "nice": 0,
        "tasks_per_core": num(0, is_set=False, infinite=True),
        "tasks_per_tres": num(0),
        "tasks_per_node": FILL,
        "tasks_per_socket": num(0, is_set=False, infinite=True),
        "tasks_per_board": num(0),
        "cpus": FILL,
        "node_count": FILL,
        "tasks": FILL,
        "partition": FILL,
        "prefer": "",
        "memory_per_cpu": unset(),
        "memory_per_node": num(0),
        "minimum_cpus_per_node": FILL,
        "minimum_tmp_disk_per_node": num(0),
        "power": {"flags": []},
        "preempt_time": num(0),
        "preemptable_time": num(0),
        "pre_sus_time": num(0),
        "hold": FILL,
        "priority": FILL,
        "priority_by_partition": [],
        "profile": ["NOT_SET"],
        "qos": "normal",
        "reboot": False,
        "required_nodes": "",
        "required_switches": 0,
        "requeue": True,
        "resize_time": num(0),
        "restart_cnt": 0,
        "resv_name": "",
        "scheduled_nodes": "",
        "selinux_context": "",
        "shared": [],
        "sockets_per_board": 0,
        "sockets_per_node": unset(),
        "start_time": FILL,
        "state_description": FILL,
        "state_reason": FILL,
        "standard_error": FILL,
        "standard_input": FILL,
        "standard_output": FILL,
        "submit_time": FILL,
        "suspend_time": num(0),
        "system_comment": "",
        "time_limit": FILL,
        "time_minimum": num(0),
        "threads_per_core": unset(),
        "tres_bind": "",
        "tres_freq": "",
        "tres_per_job": FILL,
        "tres_per_node": FILL,
        "tres_per_socket": "",
        "tres_per_task": "",
        "tres_req_str": FILL,
        "tres_alloc_str": FILL,
        "user_id": FILL,
        "user_name": FILL,
        "maximum_switch_wait_time": 0,
        "wckey": "",
        "current_working_directory": FILL,
    }


_LIVE_ROWS = _placed(LIVE_FIELDS)
_HISTORY_ROWS = _placed(HISTORY_FIELDS)


def live_job(job: Job, version: str, cluster: str, node_cpus: int) -> JsonDict:
    """The job as GET /slurm/{v}/job/{id} shows it."""
    rec = _filled(_live_template(), _LIVE_ROWS, LiveView.of(job, cluster, node_cpus))
    return _adapt_live(rec, job, version)


def _adapt_live(rec: JsonDict, job: Job, version: str) -> JsonDict:
    """The 24.11 (v0.0.42) record in the shape of ``version``, trait by trait (versions.py)."""
    shape = wire(version)
    if shape.old_live_shape:
        del rec["priority_by_partition"], rec["required_switches"]
        rec.update(exclusive=[], minimum_switches=0, oversubscribe=False, show_flags=["DETAIL", "LOCAL"])
        if shape.flat_job_resources and rec["job_resources"] is None:  # real v0.0.40: {} for a job that never ran
            rec["job_resources"] = {}
        elif shape.flat_job_resources:  # the flat v0.0.40 job_res
            rec["job_resources"] = {
                "nodes": NODE_NAME,
                "allocated_cores": job.cpus,
                "allocated_cpus": job.cpus,
                "allocated_hosts": 1,
                "allocated_nodes": [
                    {"nodename": NODE_NAME, "cpus_used": job.cpus, "memory_used": 0, "memory_allocated": 0}
                ],
            }
    if shape.has_expanded_output:
        rec["standard_output"] = job.stdout_pattern
        rec["standard_error"] = job.stderr_pattern or job.stdout_pattern
        rec.update(
            licenses_allocated="",
            segment_size=0,
            stdout_expanded=job.stdout_path,
            stderr_expanded=job.stderr_path,
            stdin_expanded=job.stdin_path,
        )
    if shape.live_has_step_id:
        rec["step_id"] = {"sluid": "", "job_id": num(job.job_id), "step_het_component": unset(), "step_id": "batch"}
        rec["submit_line"] = ""
    if not shape.live_has_power:  # v0.0.45: no power; container type and memory update settings
        del rec["power"]
        rec.update(container_type="", memory_update_delay=0, memory_update_margin=0)
        if rec["job_resources"]:  # and the select type with its CR_ prefix, as slurm.conf spells it
            resources = rec["job_resources"] = dict(rec["job_resources"])
            resources["select_type"] = [f"CR_{kind}" for kind in resources["select_type"]]
    return rec


def live_job_json(job: Job, version: str, cluster: str, node_cpus: int) -> str:
    """The live record as JSON text, re-encoded only when the job changed."""
    job.refresh_record()
    cached = job.cache.get(version)
    if cached is not None and cached[0] == job.rev:
        return cached[1]
    text = dumps(live_job(job, version, cluster, node_cpus))
    job.cache[version] = (job.rev, text)
    return text


# ------------------------------------------------------------------------------- history
def _history_template() -> JsonDict:
    """A history record as every job shows it, with :data:`FILL` where the job's own values go."""
    zero_time = {"seconds": 0, "microseconds": 0}
    return {
        "account": "default",
        "comment": {"administrator": "", "job": FILL, "system": ""},
        "allocation_nodes": FILL,
        "array": {
            "job_id": FILL,
            "limits": {"max": {"running": {"tasks": FILL}}},
            "task_id": FILL,
            "task": FILL,
        },
        "association": {"account": "default", "cluster": FILL, "partition": "", "user": FILL, "id": 1},
        "block": "",
        "cluster": FILL,
        "constraints": "",
        "container": "",
        "derived_exit_code": exit_code(),
        "time": {
            "elapsed": FILL,
            "eligible": FILL,
            "end": FILL,
            "planned": FILL,
            "start": FILL,
            "submission": FILL,
            "suspended": 0,
            "system": dict(zero_time),
            "limit": FILL,
            "total": dict(zero_time),
            "user": dict(zero_time),
        },
        "exit_code": FILL,
        "extra": FILL,
        "failed_node": "",
        "flags": FILL,
        "group": FILL,
        "het": {"job_id": 0, "job_offset": unset()},
        "job_id": FILL,
        "name": FILL,
        "licenses": "",
        "mcs": {"label": ""},
        "nodes": FILL,
        "partition": FILL,
        "hold": FILL,
        "priority": FILL,
        "qos": "normal",
        "qosreq": "",
        "required": {"CPUs": FILL, "memory_per_cpu": unset(), "memory_per_node": num(0)},
        "kill_request_user": FILL,
        "restart_cnt": 0,
        "reservation": {"id": 0, "name": ""},
        "script": "",
        "stdin_expanded": FILL,
        "stdout_expanded": FILL,
        "stderr_expanded": FILL,
        "stdout": FILL,
        "stderr": FILL,
        "stdin": FILL,
        "state": {"current": FILL, "reason": FILL},
        "steps": FILL,
        "submit_line": "",
        "tres": {"allocated": FILL, "requested": FILL},
        "used_gres": "",
        "user": FILL,
        "wckey": {"wckey": "", "flags": []},
        "working_directory": FILL,
    }


def history_visible(job: Job, as_of: float) -> bool:
    """Whether slurmdbd already knows the job at time `as_of` (accounting lags the controller)."""
    return job.submit <= as_of


def history_job(job: Job, version: str, cluster: str, as_of: float, *, comments: bool = True) -> JsonDict:
    """The job as GET /slurmdb/{v}/job/{id} shows it, as slurmdbd knew it at `as_of`.

    ``comments=False``: the cluster does not set ``AccountingStoreFlags=job_comment`` (Slurm's default),
    so the history keeps no job comments."""
    rec = _filled(_history_template(), _HISTORY_ROWS, HistoryView.of(job, cluster, as_of, comments))
    return _adapt_history(rec, job, version)


def _adapt_history(rec: JsonDict, job: Job, version: str) -> JsonDict:
    """The 24.11 (v0.0.42) record in the shape of ``version``, trait by trait (versions.py)."""
    shape = wire(version)
    if not shape.history_has_restart_cnt:
        del rec["qosreq"], rec["restart_cnt"]
    if not shape.history_has_output_paths:
        for key in ("stderr", "stderr_expanded", "stdin", "stdin_expanded", "stdout", "stdout_expanded"):
            del rec[key]
    if shape.has_segment_size:
        rec["segment_size"] = 0
    if shape.history_has_sluid:  # v0.0.45: the job's Slurm-unique id; steps drop pid for submit_line
        sluid = f"s{job.job_id:013d}"  # real ones are 14 sortable characters, e.g. s501M8TN7NQD00
        rec.update(sluid=sluid, original_sluid=sluid, exclusive="NO", oversubscribe="NO")
        for step in rec["steps"]:
            del step["pid"]
            step["submit_line"] = ""
    return rec


def partition_record(name: str, *, cpus: int, gpus: int) -> JsonDict:
    """One element of GET /slurm/{v}/partitions/, shaped as a real 24.11 answer (fixture 05)."""
    unset_num = unset()
    infinite = num(0, is_set=False, infinite=True)
    configured = f"cpu={cpus},mem={NODE_MEMORY_MB}M,node=1,billing={cpus}" + (f",gres/gpu={gpus}" if gpus else "")
    return {
        "nodes": {"allowed_allocation": "", "configured": NODE_NAME, "total": 1},
        "accounts": {"allowed": "", "deny": ""},
        "groups": {"allowed": ""},
        "qos": {"allowed": "", "deny": "", "assigned": ""},
        "alternate": "",
        "tres": {"billing_weights": "", "configured": configured},
        "cluster": "",
        "select_type": [],
        "cpus": {"task_binding": 0, "total": cpus},
        "defaults": {
            "memory_per_cpu": 0,
            "partition_memory_per_cpu": dict(unset_num),
            "partition_memory_per_node": num(0),
            "time": dict(unset_num),
            "job": "",
        },
        "grace_time": 0,
        "maximums": {
            "cpus_per_node": dict(infinite),
            "cpus_per_socket": dict(infinite),
            "memory_per_cpu": 0,
            "partition_memory_per_cpu": dict(unset_num),
            "partition_memory_per_node": num(0),
            "nodes": dict(infinite),
            "shares": 1,
            "oversubscribe": {"jobs": 1, "flags": []},
            "time": dict(infinite),
            "over_time_limit": dict(unset_num),
        },
        "minimums": {"nodes": 0},
        "name": name,
        "node_sets": "ALL",
        "priority": {"job_factor": 1, "tier": 1},
        "timeouts": {"resume": dict(unset_num), "suspend": dict(unset_num)},
        "partition": {"state": ["UP"]},  # real 24.11 shows no DEFAULT flag here, even for the default
        "suspend_time": dict(unset_num),
    }


def state_entry_json(job: Job) -> str:
    """One element of /jobs/state/: job id as a string and the state list; for an array task
    ``"<job id>_<task id>"``, and one element per task the meta record still stands for."""
    state = dumps(job.job_state)
    if job.is_array_meta:
        return ",".join(f'{{"job_id":"{job.job_id}_{task}","state":{state}}}' for task in job.array_pending)
    if job.array_job_id:
        return f'{{"job_id":"{job.job_id}_{job.array_task_id}","state":{state}}}'
    return f'{{"job_id":"{job.job_id}","state":{state}}}'
