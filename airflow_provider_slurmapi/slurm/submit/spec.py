"""Turning what a DAG author writes into a valid Slurm ``job/submit`` body.

Users write Slurm's own field names (``partition``, ``tres_per_node``, ``time_limit``...). This
module refuses a key Slurm's job description does not have (``job_fields``: Slurm would only warn and
drop it), checks the few things that fail late and obscurely on the cluster, converts the friendly
forms Slurm does not take (``time_limit="12:00:00"``), and fills the two fields slurmctld needs but
users forget, saying so in :attr:`PreparedSubmission.notes` so nothing happens silently.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError
from airflow_provider_slurmapi.slurm.api.values import preview
from airflow_provider_slurmapi.slurm.submit.job_fields import check_job_keys
from airflow_provider_slurmapi.slurm.submit.slurm_time import SlurmTimeError, time_limit_field
from airflow_provider_slurmapi.slurm.submit.tag import TaskIdentity, carries_tag

DEFAULT_WORKING_DIRECTORY = "/tmp"
DEFAULT_ENVIRONMENT: tuple[str, ...] = ("PATH=/usr/local/bin:/usr/bin:/bin",)
# Clocks of Airflow and slurmctld may differ by this much when submit times are compared.
CLOCK_SKEW_SECONDS = 60


@dataclass(slots=True)
class PreparedSubmission:
    """The body to POST to ``job/submit``, and what was filled in or converted to get there."""

    payload: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    tag: str | None = None

    @property
    def job(self) -> dict[str, Any]:
        job: dict[str, Any] = self.payload["job"]
        return job


def parse_time_limit(value: Any) -> dict[str, Any]:
    """Read a time limit into Slurm's ``{"set", "infinite", "number"}`` form.

    Accepts an int (minutes), a ``timedelta`` (seconds round up), the ``{"set": true, "number": N}``
    form itself, and any string ``sbatch --time`` takes, read by the same reader as ``#SBATCH --time``
    (:mod:`~airflow_provider_slurmapi.slurm.submit.slurm_time`): ``"90"``, ``"1:30:00"``, ``"0-5:30"``,
    ``"2-00:00:00"``, and ``"0"``, ``"-1"``, ``"UNLIMITED"``, ``"infinite"`` for no limit.
    """
    fix = (
        "Give minutes as an int (720), a timedelta, a Slurm time string ('12:00:00', '0-12', '2-00:00:00', "
        "'UNLIMITED') or {'set': True, 'number': 720}."
    )
    if isinstance(value, bool):
        raise ConfigurationError(f"job.time_limit={value!r} is not a time limit. {fix}")
    if isinstance(value, int):
        minutes = value
    elif isinstance(value, datetime.timedelta):
        minutes = int(-(-value.total_seconds() // 60))
    elif isinstance(value, Mapping):
        if value.get("infinite"):
            return {"set": True, "infinite": True, "number": 0}
        number = value.get("number")
        if isinstance(number, bool) or not isinstance(number, int):
            raise ConfigurationError(f"job.time_limit={preview(dict(value))} has no integer 'number'. {fix}")
        minutes = number
    elif isinstance(value, str):
        try:
            return time_limit_field(value)
        except SlurmTimeError as exc:
            raise ConfigurationError(f"job.time_limit={preview(value)} is not a Slurm time: {exc}. {fix}") from None
    else:
        raise ConfigurationError(f"job.time_limit={preview(value)} ({type(value).__name__}) is not a time limit. {fix}")
    if minutes <= 0:
        raise ConfigurationError(
            f"job.time_limit={preview(value)} must be at least 1 minute (for no limit, give 'UNLIMITED'). {fix}"
        )
    return {"set": True, "infinite": False, "number": minutes}


def _environment(value: Any) -> list[str]:
    """``environment`` as Slurm's ``NAME=value`` list, from that list or from a dict of names to values.

    Environments hold secrets, so an error names only the bad entries' names or positions, never a value.
    """
    fix = "Give a dict of names to values, e.g. {'PATH': '/usr/bin:/bin'}, or a list of 'NAME=value' strings."
    if isinstance(value, Mapping):
        bad = [
            _env_name(key)
            for key, item in value.items()
            if not isinstance(key, str) or not key or "=" in key or "\0" in key or not _env_value_ok(item)
        ]
        if bad:
            raise ConfigurationError(
                f"job.environment: the entries {', '.join(bad)} are not valid: names must be non-empty strings "
                f"without '=', values strings, numbers or booleans (values are not shown here). {fix}"
            )
        return [f"{key}={item}" for key, item in value.items()]
    if isinstance(value, list | tuple):
        bad = [
            _env_entry_name(index, entry)
            for index, entry in enumerate(value)
            if not isinstance(entry, str) or entry.partition("=")[0] == "" or "=" not in entry or "\0" in entry
        ]
        if bad:
            raise ConfigurationError(
                f"job.environment: the entries {', '.join(bad)} are not 'NAME=value' strings (values are not "
                f"shown here). {fix}"
            )
        return list(value)
    raise ConfigurationError(
        f"job.environment is a {type(value).__name__}, not a dict or a list (its content is not shown here). {fix}"
    )


def environment_names(job: Mapping[str, Any]) -> set[str]:
    """The names of the variables ``job`` sets (none when it sets no environment)."""
    current = job.get("environment")
    if current in (None, [], {}, ()):
        return set()
    return {entry.partition("=")[0] for entry in _environment(current)}


def add_environment(job: Mapping[str, Any], variables: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``job`` whose environment also holds ``variables``; a name the job sets keeps its value.

    A job without an environment gets the documented default (``PATH``) plus ``variables``, so adding
    a few variables never leaves the job without a ``PATH``.
    """
    desc = dict(job)
    current = desc.get("environment")
    entries = list(DEFAULT_ENVIRONMENT) if current in (None, [], {}, ()) else _environment(current)
    names = {entry.partition("=")[0] for entry in entries}
    desc["environment"] = [*entries, *(f"{name}={value}" for name, value in variables.items() if name not in names)]
    return desc


def _env_value_ok(item: Any) -> bool:
    return isinstance(item, int | float) or (isinstance(item, str) and "\0" not in item)


def _env_name(key: Any) -> str:
    """How a bad dict key is named in an error: the text before any '=', or only its type."""
    if not isinstance(key, str):
        return f"<a key of type {type(key).__name__}>"
    name, equals, _ = key.partition("=")
    return repr(name[:60]) + (" (with '=' and more)" if equals else "")


def _env_entry_name(index: int, entry: Any) -> str:
    """How a bad list entry is named in an error: its position and the name before '=', never a value."""
    name = entry.partition("=")[0] if isinstance(entry, str) and "=" in entry else ""
    if name:
        return f"#{index} ({name[:60]!r})"
    return (
        f"#{index} (a string with no NAME= before its value)"
        if isinstance(entry, str)
        else f"#{index} (a {type(entry).__name__})"
    )


def prepare_submission(
    job: Mapping[str, Any] | None,
    script: str | None,
    *,
    tag: str | None = None,
    comment: str | None = None,
    wrap: Callable[[str], str] | None = None,
    api_version: str | None = None,
) -> PreparedSubmission:
    """Check and complete a job description and script into a ``job/submit`` body.

    ``tag``/``comment`` (from :func:`task_tag`/:func:`task_comment`) are added to the job's
    ``comment``; a comment the user set is kept, the tag appended to it. ``wrap``: what is sent in
    place of the checked script (e.g. :func:`~airflow_provider_slurmapi.slurm.submit.job_output.wrap_script`).
    ``api_version``: the version whose job description the keys are checked against; ``None`` or
    ``"auto"`` (not negotiated yet): only keys no version knows are refused here, and the client checks
    the job again against the version spoken before it sends it.
    """
    if job is None:
        job = {}
    if not isinstance(job, Mapping):
        raise ConfigurationError(
            f"job={job!r} must be a dict of Slurm job description fields, e.g. "
            "{'name': 'train', 'partition': 'a3', 'tres_per_node': 'gres/gpu:8', 'time_limit': 720}."
        )
    check_job_keys(job, api_version)  # a misspelt key would be dropped by Slurm with only a warning
    desc = copy.deepcopy(dict(job))
    notes: list[str] = []
    inner_script = desc.pop("script", None)
    if script and inner_script and script != inner_script:
        raise ConfigurationError(
            "The script is given twice, as script= and as job['script'], with different contents: keep one."
        )
    script = script or inner_script
    if not isinstance(script, str) or not script.strip():
        raise ConfigurationError(
            f"script={script!r}: a non-empty batch script is required, e.g. '#!/bin/bash\\nsrun python train.py\\n' "
            "(or a path ending in .sh, read from the DAG folder)."
        )
    if not script.lstrip().startswith("#!"):
        raise ConfigurationError(
            f"The script starts with {script.lstrip()[:30]!r}; a Slurm batch script must start with an "
            "interpreter line such as '#!/bin/bash'."
        )
    if "time_limit" in desc and desc["time_limit"] is not None:
        desc["time_limit"] = parse_time_limit(desc["time_limit"])
    if desc.get("environment") in (None, [], {}, ()):
        desc["environment"] = list(DEFAULT_ENVIRONMENT)
        notes.append(
            f"job.environment was not set; using {list(DEFAULT_ENVIRONMENT)} (slurmctld refuses a job "
            "without an environment). Set job['environment'] to choose."
        )
    else:
        desc["environment"] = _environment(desc["environment"])
    if not desc.get("current_working_directory"):
        desc["current_working_directory"] = DEFAULT_WORKING_DIRECTORY
        notes.append(
            f"job.current_working_directory was not set; using {DEFAULT_WORKING_DIRECTORY!r} (slurmctld "
            "needs one; stdout goes there as slurm-<jobid>.out). Set it to your home or project directory."
        )
    elif not str(desc["current_working_directory"]).startswith("/"):
        raise ConfigurationError(
            f"job.current_working_directory={desc['current_working_directory']!r} must be an absolute path "
            "on the cluster, e.g. '/home/USERNAME'."
        )
    if tag:
        mark = comment or tag
        user_comment = str(desc.get("comment") or "").strip()
        if not carries_tag(user_comment, tag):
            desc["comment"] = f"{user_comment} | {mark}" if user_comment else mark
    sent = wrap(script) if wrap is not None else script
    return PreparedSubmission(payload={"job": desc, "script": sent}, notes=notes, tag=tag)


def prepare_task_submission(
    job: Mapping[str, Any],
    script: str | None,
    task: TaskIdentity,
    *,
    key: bytes,
    add_variables: Callable[[set[str]], Mapping[str, str] | None] | None = None,
    wrap: Callable[[str, Mapping[str, Any]], str] | None = None,
    api_version: str | None = None,
) -> PreparedSubmission:
    """The submission of the task instance ``task``, as sent: what an operator asks of the core, in one call.

    The job is tagged with ``task``'s tag under this deployment's ``key`` and commented with its
    identity (a comment the user set is kept, the tag appended). ``add_variables`` is given the names
    the job's environment sets and returns the variables to add to it (a name the job sets keeps its
    value); it is not called when the environment is not valid (:func:`prepare_submission` then says
    why). ``wrap`` is given the script and the job as sent, and returns what is sent in its place.
    ``api_version``: see :func:`prepare_submission`.
    """
    tag = task.tag(key)
    desc = dict(job)
    if add_variables is not None:
        try:
            names = environment_names(desc)
        except ConfigurationError:
            names = None  # prepare_submission says what is wrong with the environment
        variables = add_variables(names) if names is not None else None
        if variables:
            desc = add_environment(desc, variables)
    sent = (lambda text: wrap(text, desc)) if wrap is not None else None
    return prepare_submission(desc, script, tag=tag, comment=task.comment(tag), wrap=sent, api_version=api_version)
