"""Small building blocks of slurmrestd's JSON answers.

Every shape here was copied from the answers of a real Slurm 24.11.5 cluster, so that a client
tested against the emulator meets the same keys, nesting and types as in production.
"""

from __future__ import annotations

import json
import time
from typing import Any

from .versions import DEFAULT_RELEASE

JsonDict = dict[str, Any]

NOT_FOUND_TEXT = "Unable find requested URL. Please view /openapi/v3 for API reference."
PARSE_ERROR_TEXT = "Unable to parse query."
NODE_NAME = "localhost"
NODE_MEMORY_MB = 1000
NO_VAL_TIME = 4294967294  # what slurmdbd reports as start time of a job that never started

# slurm_strerror() texts of the error numbers the emulator produces.
ERROR_TEXT = {
    1007: "Protocol authentication error",
    2000: "Invalid partition name specified",
    2014: "Requested node configuration is not available",
    2017: "Invalid job id specified",
    2019: "I/O error writing script/environment to file",
    2021: "Job/step already completing or completed",
    2072: "Invalid generic resource (gres) specification",
    2166: "Unable to resolve user ID to user name",
    9000: "Query empty or not RFC7320 compliant",
    9202: "Unable to convert Data type",
    9207: "Data parser unable to parse invalid flag",
}

SIGNAL_NAMES = {
    1: "HUP",
    2: "INT",
    3: "QUIT",
    4: "ILL",
    5: "TRAP",
    6: "ABRT",
    7: "BUS",
    8: "FPE",
    9: "KILL",
    10: "USR1",
    11: "SEGV",
    12: "USR2",
    13: "PIPE",
    14: "ALRM",
    15: "TERM",
    18: "CONT",
    19: "STOP",
    20: "TSTP",
    24: "XCPU",
    25: "XFSZ",
}

BASE_STATES = (
    "PENDING",
    "RUNNING",
    "SUSPENDED",
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
)


def num(number: int = 0, *, is_set: bool = True, infinite: bool = False) -> JsonDict:
    """A Slurm "number with flags" object, as every optional number is sent since v0.0.40."""
    return {"set": is_set, "infinite": infinite, "number": number}


def unset() -> JsonDict:
    """The number object of a value that was never set."""
    return {"set": False, "infinite": False, "number": 0}


def exit_code(status: str = "SUCCESS", return_code: int | None = 0, signal: int | None = None) -> JsonDict:
    """Slurm's verbose process exit code: status list, return code and signal."""
    return {
        "status": [status],
        "return_code": num(return_code) if return_code is not None else unset(),
        "signal": {
            "id": num(signal) if signal else unset(),
            "name": SIGNAL_NAMES.get(signal, str(signal)) if signal else "",
        },
    }


def error_entry(number: int, description: str, source: str) -> JsonDict:
    """One element of a body's errors[] list."""
    return {
        "description": description,
        "error_number": number,
        "error": ERROR_TEXT.get(number, "Unspecified error"),
        "source": source,
    }


def warning_entry(description: str, source: str) -> JsonDict:
    """One element of a body's warnings[] list."""
    return {"description": description, "source": source}


def meta(
    version: str, *, slurmdb: bool, user: str, group: str, cluster: str, release: str = DEFAULT_RELEASE
) -> JsonDict:
    """The meta block that opens every answer (plugin, client, Slurm release)."""
    major, minor, micro = release.split(".")
    kind = "slurmdbd" if slurmdb else "slurmctld"
    return {
        "plugin": {
            "type": f"openapi/{kind}",
            "name": f"Slurm OpenAPI {kind}",
            "data_parser": f"data_parser/{version}",
            "accounting_storage": "accounting_storage/slurmdbd",
        },
        "client": {
            "source": "[localhost]:6820(fd:9)",
            "user": "" if slurmdb else user,
            "group": "" if slurmdb else group,
        },
        "command": [],
        "slurm": {
            "version": {"major": major, "micro": micro, "minor": minor},
            "release": release,
            "cluster": cluster,
        },
    }


def dumps(obj: Any) -> str:
    """Compact JSON, the one encoder used for every Slurm body."""
    return json.dumps(obj, separators=(",", ":"))


def local_iso(epoch: int) -> str:
    """Local time as slurmrestd prints it inside warning texts."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


# Field names of job_desc_msg per data parser version (from Slurm's OpenAPI specs): anything
# else in a submitted "job" is ignored with a warning, as slurmrestd does.
_JOB_DESC_V42_NAMES = """account account_gather_frequency admin_comment allocation_node_list allocation_node_port argv
    array batch_features begin_time burst_buffer cluster_constraint clusters comment constraints
    container container_id contiguous core_specification cpu_binding cpu_binding_flags cpu_frequency
    cpus_per_task cpus_per_tres crontab current_working_directory deadline delay_boot dependency
    distribution distribution_plane_size end_time environment excluded_nodes extra flags group_id
    hetjob_group hold immediate job_id kill_on_node_fail kill_warning_delay kill_warning_flags
    kill_warning_signal licenses mail_type mail_user maximum_cpus maximum_nodes mcs_label
    memory_binding memory_binding_type memory_per_cpu memory_per_node memory_per_tres
    minimum_boards_per_node minimum_cpus minimum_cpus_per_node minimum_nodes
    minimum_sockets_per_board name network nice nodes ntasks_per_tres oom_kill_step open_mode
    overcommit partition power_flags prefer priority profile qos reboot requeue required_nodes
    required_switches reservation reserve_ports rlimits script segment_size selinux_context shared
    site_factor sockets_per_node spank_environment standard_error standard_input standard_output
    tasks tasks_per_board tasks_per_core tasks_per_node tasks_per_socket temporary_disk_per_node
    thread_specification threads_per_core time_limit time_minimum tres_bind tres_freq tres_per_job
    tres_per_node tres_per_socket tres_per_task user_id wait_all_nodes wait_for_switch wckey x11
    x11_magic_cookie x11_target_host x11_target_port"""
_JOB_DESC_V42 = frozenset(_JOB_DESC_V42_NAMES.split())
JOB_DESC_FIELDS = {
    "v0.0.40": (_JOB_DESC_V42 | {"cores_per_socket", "exclusive", "oversubscribe"}) - {"oom_kill_step", "segment_size"},
    "v0.0.41": (_JOB_DESC_V42 | {"exclusive", "oversubscribe", "resv_mpi_ports"}) - {"oom_kill_step"},
    "v0.0.42": _JOB_DESC_V42,
    "v0.0.43": _JOB_DESC_V42,
    "v0.0.44": _JOB_DESC_V42 | {"step_id"},
    "v0.0.45": (
        _JOB_DESC_V42 | {"step_id", "container_type", "cores_per_socket", "memory_update_delay", "memory_update_margin"}
    )
    - {"power_flags"},
}


def data_type_name(value: Any) -> str:
    """Slurm's data_get_type_string() for a JSON value, used in parser messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "64 bit integer"
    if isinstance(value, float):
        return "floating point number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "dictionary"
