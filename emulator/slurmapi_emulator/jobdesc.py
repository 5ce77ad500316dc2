"""Reading a `job/submit` body the way slurmrestd's data parser does.

The checks and their error numbers are those a real 24.11 cluster answered (fixtures 31-38), so a
client meets the same refusals here as in production: wrong types give 9202, a missing script 422,
unknown fields only a warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .slurm_json import JOB_DESC_FIELDS, JsonDict, data_type_name, error_entry, warning_entry


class SubmitRejected(Exception):
    """A submission refused before any job id is used; carries the HTTP status and errors[]."""

    def __init__(self, status: int, errors: list[JsonDict], warnings: list[JsonDict] | None = None):
        super().__init__(errors[0]["description"] if errors else "rejected")
        self.status = status
        self.errors = errors
        self.warnings = warnings or []


@dataclass
class JobRequest:
    """The parts of a job description the emulator acts on (plus the raw dict, for echoing)."""

    script: str
    name: str = ""
    comment: str = ""
    partition: str | None = None
    cwd: str | None = None
    environment: list[str] | None = None
    stdout: str | None = None
    stderr: str | None = None
    stdin: str | None = None
    open_mode: str = "truncate"
    time_limit: int | None = None  # minutes; None means the partition default (infinite)
    min_nodes: int | None = None
    max_nodes: int | None = None
    tasks: int | None = None
    tasks_per_node: int | None = None
    cpus_per_task: int | None = None
    minimum_cpus: int | None = None
    minimum_cpus_per_node: int | None = None
    tres_per_node: str = ""
    tres_per_job: str = ""
    gpus: int = 0
    hold: bool = False
    array: str | None = None  # a job array: "0-9%2"
    argv: list[str] = field(default_factory=list)
    raw: JsonDict = field(default_factory=dict)

    @property
    def ntasks(self) -> int:
        """Number of tasks, derived like slurmctld does from tasks / tasks_per_node / nodes."""
        if self.tasks:
            return self.tasks
        if self.tasks_per_node:
            return self.tasks_per_node * max(1, self.min_nodes or 1)
        return 1

    @property
    def cpus(self) -> int:
        """CPUs the job needs on its node."""
        return max(
            self.minimum_cpus or 0,
            (self.minimum_cpus_per_node or 0) * self.nodes,
            self.ntasks * max(1, self.cpus_per_task or 1),
            self.nodes,  # at least one CPU on every node
        )

    @property
    def nodes(self) -> int:
        """Nodes the job asks for (the emulated cluster has exactly one)."""
        return max(1, self.min_nodes or 1)


def _conv_error(fieldname: str, expected: str, value: Any) -> SubmitRejected:
    got = f'"{value}"' if isinstance(value, str) else data_type_name(value)
    return SubmitRejected(500, [error_entry(9202, f"Expected {expected} but got {got}", f"#/job/{fieldname}/")])


# Slurm's data parser reads integers into at most 64 bits; ASCII digits only (str.isdigit takes "²").
_INTEGER_RE = re.compile(r"\s*[-+]?[0-9]+\s*")
_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1


def _int(job: JsonDict, name: str) -> int | None:
    """A plain integer field; strings of digits are converted like Slurm's data parser does."""
    value = job.get(name)
    if value is None:
        return None
    if isinstance(value, bool):
        raise _conv_error(name, "integer", value)
    number: int | None = None
    if isinstance(value, int):
        number = value
    elif (isinstance(value, float) and value.is_integer()) or (
        isinstance(value, str) and _INTEGER_RE.fullmatch(value) and len(value.strip().lstrip("+-0")) <= 20
    ):
        number = int(value)
    if number is None or not _INT64_MIN <= number <= _UINT64_MAX:
        raise _conv_error(name, "integer", value if not isinstance(value, str) else value[:40])
    return number


def _no_val_int(job: JsonDict, name: str) -> tuple[int | None, bool]:
    """A `{"set","infinite","number"}` field (or a plain integer): (number or None, infinite)."""
    value = job.get(name)
    if isinstance(value, dict):
        if value.get("infinite") is True:
            return None, True
        if value.get("set") is False:
            return None, False
        number = _int({name: value.get("number")}, name)
        return number, False
    return _int(job, name), False


def _str(job: JsonDict, name: str) -> str | None:
    value = job.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise _conv_error(name, "string", value)


def _str_list(job: JsonDict, name: str) -> list[str] | None:
    value = job.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [f"{k}={v}" for k, v in value.items()]
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return [str(v) for v in value]
    raise _conv_error(name, "string list", value)


_GPU_RE = re.compile(r"^gres[/:]gpu(?::(?!\d+$)[A-Za-z0-9_.-]+)?(?:[:=](\d+))?$")


def parse_gpus(tres: str) -> int:
    """GPUs in a TRES string such as "gres/gpu:8" or "gres/gpu:h100:4,cpu=2"."""
    total = 0
    for item in filter(None, (part.strip() for part in tres.split(","))):
        if "gpu" not in item:
            continue
        match = _GPU_RE.match(item)
        if not match:
            raise SubmitRejected(500, [error_entry(2072, "Batch job submission failed", "slurm_submit_batch_job()")])
        total += int(match.group(1)) if match.group(1) else 1
    return total


def _open_mode(job: JsonDict) -> str:
    """``open_mode``: Slurm's flag list (``["APPEND"]``) or a single name."""
    modes = _str_list(job, "open_mode") or ["truncate"]
    return "append" if any(mode.lower() == "append" for mode in modes) else "truncate"


def c_strings(value: Any) -> Any:
    """``value`` with every string (object keys too) cut at its first NUL, as slurmrestd reads JSON.

    slurmrestd hands each JSON string to Slurm as a C string, which ends at the first NUL: a real
    24.11.5 answered ``"standard_output": "/tmp/out\\u0000.log"`` with 200 and kept ``/tmp/out``. Read so,
    no NUL reaches a path, an environment or an argv (where Python's ``open``/``exec`` would raise).
    """
    if isinstance(value, str):
        return value.split("\x00", 1)[0]
    if isinstance(value, dict):
        return {c_strings(key): c_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [c_strings(item) for item in value]
    return value


def parse_submit(body: Any, version: str) -> tuple[JobRequest, list[JsonDict]]:
    """Validate a submit body; returns the request and the parser's warnings or raises SubmitRejected."""
    warnings: list[JsonDict] = []
    body = c_strings(body)
    if not isinstance(body, dict):
        raise SubmitRejected(422, [error_entry(9000, "unexpected empty query for job", "_job_post")])
    for key, value in body.items():
        if key not in ("job", "jobs", "script"):
            warnings.append(
                warning_entry(
                    f'Ignoring unknown field "{key}" of type {data_type_name(value)} in DATA_PARSER_JOB_SUBMIT_REQ',
                    f"#/{key}/",
                )
            )
    if "jobs" in body and "job" not in body:
        raise SubmitRejected(
            422,
            [error_entry(9000, 'HetJob submission ("jobs") is not supported by the emulator', "_job_post")],
        )
    job = body.get("job")
    if not isinstance(job, dict):
        raise SubmitRejected(
            422,
            [error_entry(9000, 'Specifing either "job" or "jobs" fields are required to submit job', "_job_post")],
        )
    known = JOB_DESC_FIELDS.get(version, JOB_DESC_FIELDS["v0.0.42"])
    for key, value in job.items():
        if key not in known:
            warnings.append(
                warning_entry(
                    f'Ignoring unknown field "{key}" of type {data_type_name(value)} in DATA_PARSER_JOB_DESC_MSG',
                    f"#/job/{key}/",
                )
            )

    time_limit, _infinite = _no_val_int(job, "time_limit")
    hold = job.get("hold", False)
    if not isinstance(hold, bool):
        if isinstance(hold, int):
            hold = bool(hold)
        else:
            raise _conv_error("hold", "boolean", hold)
    req = JobRequest(
        script="",
        name=_str(job, "name") or "",
        comment=_str(job, "comment") or "",
        partition=_str(job, "partition") or None,
        cwd=_str(job, "current_working_directory") or None,
        environment=_str_list(job, "environment"),
        stdout=_str(job, "standard_output") or None,
        stderr=_str(job, "standard_error") or None,
        stdin=_str(job, "standard_input") or None,
        open_mode=_open_mode(job),
        time_limit=time_limit,
        min_nodes=_int(job, "minimum_nodes"),
        max_nodes=_int(job, "maximum_nodes"),
        tasks=_int(job, "tasks"),
        tasks_per_node=_int(job, "tasks_per_node"),
        cpus_per_task=_int(job, "cpus_per_task"),
        minimum_cpus=_int(job, "minimum_cpus"),
        minimum_cpus_per_node=_int(job, "minimum_cpus_per_node"),
        tres_per_node=_str(job, "tres_per_node") or "",
        tres_per_job=_str(job, "tres_per_job") or "",
        hold=hold,
        array=_str(job, "array") or None,
        argv=_str_list(job, "argv") or [],
        raw=job,
    )
    _int(job, "nice")
    _no_val_int(job, "priority")
    _no_val_int(job, "memory_per_node")
    _no_val_int(job, "memory_per_cpu")

    script: Any = body["script"] if body.get("script") is not None else job.get("script")
    if script is not None and not isinstance(script, str):
        raise SubmitRejected(500, [error_entry(9202, f"Expected string but got {data_type_name(script)}", "#/script/")])
    if not script:
        raise SubmitRejected(
            422,
            [error_entry(9000, 'Populated "script" field is required for job submission', "_job_post")],
            warnings,
        )
    req.script = script
    req.gpus = parse_gpus(req.tres_per_node) + parse_gpus(req.tres_per_job)
    return req, warnings
