"""Jobs as slurmrestd shows them: the live (slurmctld) record and the history (slurmdbd) record.

Key sets, nesting and value conventions follow the answers of a real Slurm 24.11.5 cluster
(fixtures 08-28 and 66-71 for live jobs, 48-51 and 72-75 for history), adjusted per data parser
version from Slurm's OpenAPI specs. Live records are cached as JSON text per job revision, so
polling thousands of jobs does not re-encode unchanged ones.
"""

from __future__ import annotations

from .model import Job, JobExit
from .slurm_json import NO_VAL_TIME, NODE_MEMORY_MB, NODE_NAME, JsonDict, dumps, exit_code, num, unset
from .versions import wire

_FLAGS = ["USING_DEFAULT_ACCOUNT", "USING_DEFAULT_QOS", "USING_DEFAULT_WCKEY"]
_YEAR = 365 * 24 * 3600


def _exit(info: JobExit) -> JsonDict:
    return exit_code(info.status, info.return_code, info.signal)


def _tres_req(job: Job) -> str:
    cpus, nodes = job.cpus, job.req.nodes
    text = f"cpu={cpus},mem={NODE_MEMORY_MB * nodes}M,node={nodes},billing={cpus}"
    return text + (f",gres/gpu={job.gpus}" if job.gpus else "")


def _tres_alloc(job: Job) -> str:
    text = f"cpu={job.cpus},node=1,billing={job.cpus}"
    return text + (f",gres/gpu={job.gpus}" if job.gpus else "")


def _job_resources(job: Job, node_cpus: int) -> JsonDict:
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
                        for i in range(node_cpus)
                    ],
                }
            ],
        },
        "cpus": job.cpus,
        "threads_per_core": unset(),
    }


def _ran(job: Job) -> bool:
    """True if the job got an allocation (a pending job cancelled never did)."""
    return job.start is not None and not job.bad_constraints and bool(job.step_state or job.state == "RUNNING")


def live_job(job: Job, version: str, cluster: str, node_cpus: int) -> JsonDict:
    """The job as GET /slurm/{v}/job/{id} shows it."""
    req = job.req
    submit = int(job.submit)
    started = _ran(job)
    held_or_bad = req.hold or job.bad_constraints
    start = int(job.start) if job.start is not None else 0
    if job.end is not None:
        end = int(job.end)
    elif job.state == "RUNNING" and job.start is not None:
        limit = req.time_limit
        end = start + (int(limit * job.minute_seconds) if limit is not None else _YEAR)
    else:
        end = 0
    flags = ["JOB_WAS_RUNNING", *_FLAGS] if job.state == "RUNNING" else list(_FLAGS)
    if req.hold:
        flags.append("DEPENDENT")
    time_limit = num(req.time_limit) if req.time_limit is not None else num(0, is_set=False, infinite=True)
    gres = f"gpu:{job.gpus}(IDX:{','.join(map(str, job.gpu_ids))})" if job.gpu_ids else None
    rec: JsonDict = {
        "account": "default",
        "accrue_time": num(0 if held_or_bad else submit),
        "admin_comment": "",
        "allocating_node": NODE_NAME,
        "array_job_id": num(job.array_job_id),
        "array_task_id": num(job.array_task_id) if job.array_task_id is not None else unset(),
        "array_max_tasks": num(job.array_throttle),
        "array_task_string": task_string(job),
        "association_id": 1,
        "batch_features": "",
        "batch_flag": True,
        "batch_host": NODE_NAME if started else "",
        "flags": flags,
        "burst_buffer": "",
        "burst_buffer_state": "",
        "cluster": cluster,
        "cluster_features": "",
        "command": "",
        "comment": req.comment,
        "container": "",
        "container_id": "",
        "contiguous": False,
        "core_spec": 0,
        "thread_spec": 32766,
        "cores_per_socket": unset(),
        "billable_tres": num(job.cpus) if started else unset(),
        "cpus_per_task": num(max(1, req.cpus_per_task or 1)),
        "cpu_frequency_minimum": unset(),
        "cpu_frequency_maximum": unset(),
        "cpu_frequency_governor": unset(),
        "cpus_per_tres": "",
        "cron": "",
        "deadline": num(0),
        "delay_boot": num(0),
        "dependency": "",
        "derived_exit_code": exit_code(),
        "eligible_time": num(0 if req.hold else submit),
        "end_time": num(end),
        "excluded_nodes": "",
        "exit_code": _exit(job.exit),
        "extra": job.extra,
        "failed_node": "",
        "features": "",
        "federation_origin": "",
        "federation_siblings_active": "",
        "federation_siblings_viable": "",
        "gres_detail": [gres] if gres else [],
        "group_id": job.gid,
        "group_name": job.group,
        "het_job_id": num(0),
        "het_job_id_set": "",
        "het_job_offset": num(0),
        "job_id": job.job_id,
        "job_resources": _job_resources(job, node_cpus) if started else None,
        "job_size_str": [],
        "job_state": job.job_state,
        "last_sched_evaluation": num(start if started else submit),
        "licenses": "",
        "mail_type": [],
        "mail_user": job.user,
        "max_cpus": num(0),
        "max_nodes": num(req.max_nodes or (req.nodes if held_or_bad else 0)),
        "mcs_label": "",
        "memory_per_tres": "",
        "name": req.name,
        "network": "",
        "nodes": NODE_NAME if started else "",
        "nice": 0,
        "tasks_per_core": num(0, is_set=False, infinite=True),
        "tasks_per_tres": num(0),
        "tasks_per_node": num(req.tasks_per_node or 0),
        "tasks_per_socket": num(0, is_set=False, infinite=True),
        "tasks_per_board": num(0),
        "cpus": num(job.cpus),
        "node_count": num(req.nodes),
        "tasks": unset() if job.bad_constraints or (req.hold and job.finished) else num(req.ntasks),
        "partition": job.partition,
        "prefer": "",
        "memory_per_cpu": unset(),
        "memory_per_node": num(0),
        "minimum_cpus_per_node": num(max(1, req.minimum_cpus_per_node or 1)),
        "minimum_tmp_disk_per_node": num(0),
        "power": {"flags": []},
        "preempt_time": num(0),
        "preemptable_time": num(0),
        "pre_sus_time": num(0),
        "hold": req.hold,
        "priority": num(0 if req.hold else 1),
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
        "start_time": num(start),
        "state_description": job.description,
        "state_reason": job.reason,
        "standard_error": job.stderr_path,
        "standard_input": job.stdin_path,
        "standard_output": job.stdout_path,
        "submit_time": num(submit),
        "suspend_time": num(0),
        "system_comment": "",
        "time_limit": time_limit,
        "time_minimum": num(0),
        "threads_per_core": unset(),
        "tres_bind": "",
        "tres_freq": "",
        "tres_per_job": req.tres_per_job,
        "tres_per_node": req.tres_per_node,
        "tres_per_socket": "",
        "tres_per_task": "",
        "tres_req_str": _tres_req(job),
        "tres_alloc_str": _tres_alloc(job) if started else "",
        "user_id": job.uid,
        "user_name": job.user,
        "maximum_switch_wait_time": 0,
        "wckey": "",
        "current_working_directory": job.cwd,
    }
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
def _tres(kind: str, count: int, *, name: str = "", tres_id: int = 0) -> JsonDict:
    ids = {"cpu": 1, "mem": 2, "energy": 3, "node": 4, "billing": 5, "gres": 1001}
    return {"type": kind, "name": name, "id": tres_id or ids[kind], "count": count}


def _step(job: Job, as_of: float) -> JsonDict:
    start = int(job.start or 0)
    ended = job.end is not None and job.end <= as_of and job.step_state
    end = int(job.end or 0) if ended else 0
    elapsed = (end if ended else int(as_of)) - start
    zero_time = {"seconds": 0, "microseconds": 0}
    energy = [_tres("energy", 0)] if ended else []  # a running step has no accounting totals yet
    allocated = [_tres("cpu", job.cpus), _tres("mem", 0), _tres("node", 1)]
    if job.gpus:
        allocated.append(_tres("gres", job.gpus, name="gpu"))
    usage: JsonDict = {"max": [], "min": [], "average": list(energy), "total": list(energy)}
    if ended and job.max_rss_bytes is not None:  # gathered (jobacct_gather/linux): MaxRSS, as fixture 74 shows
        gathered = [_tres("cpu", 0), _tres("mem", job.max_rss_bytes), _tres("energy", 0)]
        at = {"task": 0, "node": NODE_NAME}
        usage = {
            "max": [{**item, **at} for item in gathered],
            "min": [{**item, **at} for item in gathered],
            "average": [dict(item) for item in gathered],
            "total": [dict(item) for item in gathered],
        }
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
            "requested": usage,
            "consumed": {"max": [], "min": [], "average": list(energy), "total": list(energy)},
            "allocated": allocated,
        },
    }


def history_visible(job: Job, as_of: float) -> bool:
    """Whether slurmdbd already knows the job at time `as_of` (accounting lags the controller)."""
    return job.submit <= as_of


def history_job(job: Job, version: str, cluster: str, as_of: float, *, comments: bool = True) -> JsonDict:
    """The job as GET /slurmdb/{v}/job/{id} shows it, as slurmdbd knew it at `as_of`.

    ``comments=False``: the cluster does not set ``AccountingStoreFlags=job_comment`` (Slurm's default),
    so the history keeps no job comments."""
    req = job.req
    ended = job.end is not None and job.end <= as_of
    started = job.start is not None and job.start <= as_of and (_ran(job))
    state = job.state if ended else ("RUNNING" if started else "PENDING")
    submit = int(job.submit)
    eligible = 0 if req.hold else submit
    if started:
        start = int(job.start or 0)
    elif ended:
        start = NO_VAL_TIME
    else:
        start = 0
    end = int(job.end or 0) if ended else 0
    if started:
        elapsed = (end if ended else int(as_of)) - start
        planned = max(0, start - eligible) if eligible else 0
    else:
        elapsed = 0
        planned = max(0, int(as_of) - eligible) if (eligible and not ended) else 0
    limit = num(req.time_limit) if req.time_limit is not None else num(0, is_set=False, infinite=started)
    requested = [
        _tres("cpu", job.cpus),
        _tres("mem", NODE_MEMORY_MB * req.nodes),
        _tres("node", req.nodes),
        _tres("billing", job.cpus),
    ]
    if job.gpus:
        requested.append(_tres("gres", job.gpus, name="gpu"))
    allocated: list[JsonDict] = []
    if started:
        allocated = [_tres("cpu", job.cpus), _tres("energy", -2), _tres("node", 1), _tres("billing", job.cpus)]
        if job.gpus:
            allocated.append(_tres("gres", job.gpus, name="gpu"))
    if ended:
        flags = ["STARTED_ON_SCHEDULE", "START_RECEIVED"] if started else ["START_RECEIVED"]
    else:
        flags = ["STARTED_ON_SCHEDULE", "START_RECEIVED"] if started else []
    zero_time = {"seconds": 0, "microseconds": 0}
    rec: JsonDict = {
        "account": "default",
        "comment": {"administrator": "", "job": req.comment if comments else "", "system": ""},
        "allocation_nodes": 1 if started else 0,
        "array": {
            "job_id": job.array_job_id,
            "limits": {
                "max": {
                    "running": {
                        "tasks": job.array_throttle if job.is_array_meta or job.job_id == job.array_job_id else 0
                    }
                }
            },
            "task_id": num(job.array_task_id) if job.array_task_id is not None else unset(),
            "task": hex(sum(1 << i for i in job.array_pending)) if job.is_array_meta else "",
        },
        "association": {"account": "default", "cluster": cluster, "partition": "", "user": job.user, "id": 1},
        "block": "",
        "cluster": cluster,
        "constraints": "",
        "container": "",
        "derived_exit_code": exit_code(),
        "time": {
            "elapsed": max(0, elapsed),
            "eligible": eligible,
            "end": end,
            "planned": num(planned),
            "start": start,
            "submission": submit,
            "suspended": 0,
            "system": dict(zero_time),
            "limit": limit,
            "total": dict(zero_time),
            "user": dict(zero_time),
        },
        "exit_code": _exit(job.job_exit_history) if ended else exit_code(),
        "extra": "",
        "failed_node": "",
        "flags": flags,
        "group": job.group,
        "het": {"job_id": 0, "job_offset": unset()},
        "job_id": job.job_id,
        "name": req.name,
        "licenses": "",
        "mcs": {"label": ""},
        "nodes": NODE_NAME if started else "None assigned",
        "partition": job.partition,
        "hold": req.hold,
        "priority": num(0 if req.hold else 1),
        "qos": "normal",
        "qosreq": "",
        "required": {"CPUs": job.cpus, "memory_per_cpu": unset(), "memory_per_node": num(0)},
        "kill_request_user": job.kill_user if (ended and job.state == "CANCELLED") else "",
        "restart_cnt": 0,
        "reservation": {"id": 0, "name": ""},
        "script": "",
        "stdin_expanded": job.stdin_path if req.stdin else "",
        "stdout_expanded": job.stdout_path,
        "stderr_expanded": job.stderr_path if req.stderr else "",
        "stdout": job.stdout_pattern,
        "stderr": job.stderr_pattern,
        "stdin": job.stdin_path if req.stdin else "",
        "state": {"current": [state], "reason": job.reason if state == "PENDING" else "None"},
        "steps": [_step(job, as_of)] if started else [],
        "submit_line": "",
        "tres": {"allocated": allocated, "requested": requested},
        "used_gres": "",
        "user": job.user,
        "wckey": {"wckey": "", "flags": []},
        "working_directory": job.cwd,
    }
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
