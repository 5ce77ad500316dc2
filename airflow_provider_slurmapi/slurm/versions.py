"""Slurm REST API versions and the paths this provider calls.

Paths are built here and nowhere else, so that a version bump or a new endpoint is one change.
Lists in query strings are repeated parameters (``job_id=1&job_id=2``): slurmrestd answers a raw
comma with 400 "Unable to parse query." and reads ``%2C`` as one value.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import urlencode

from airflow_provider_slurmapi.slurm.cluster import check_job_id
from airflow_provider_slurmapi.slurm.errors import UnsupportedApiVersionError

SUPPORTED_API_VERSIONS: tuple[str, ...] = ("v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44")
DEFAULT_API_VERSION = "v0.0.42"
# These versions refuse a Unix time in /slurmdb time filters (422, error 9202) but take "now-Nseconds".
_RELATIVE_TIME_ONLY = frozenset({"v0.0.40", "v0.0.41"})
_TIME_FILTERS = ("start_time", "end_time")

_VERSION_RE = re.compile(r"^v0\.0\.(\d+)$")


def check_api_version(version: str) -> str:
    """Return ``version`` if supported, else raise an error that lists what is."""
    if version not in SUPPORTED_API_VERSIONS:
        hint = ""
        match = _VERSION_RE.match(version or "")
        if match and int(match.group(1)) < 40:
            hint = " Slurm 24.05 and later serve v0.0.40 or newer; upgrade the cluster or pick one of those."
        raise UnsupportedApiVersionError(
            f"api_version={version!r} is not supported. Use one of {', '.join(SUPPORTED_API_VERSIONS)} "
            f"(the versions your cluster's Slurm serves: 24.11 serves v0.0.40-v0.0.42).{hint}"
        )
    return version


def _job_segment(job_id: int | str) -> str:
    """A checked job id: ``5_3`` or ``1.2`` would name an array task or a step, not the job."""
    return str(check_job_id(job_id))


def _query(params: Mapping[str, str | int | Sequence[str | int] | None]) -> str:
    pairs: list[tuple[str, str]] = []
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, str | int):
            pairs.append((key, str(value)))
        else:
            pairs.extend((key, str(item)) for item in value)
    return ("?" + urlencode(pairs)) if pairs else ""


class SlurmPaths:
    """The Slurm REST paths of one API version."""

    def __init__(self, version: str = DEFAULT_API_VERSION) -> None:
        self.version = check_api_version(version)

    def partitions(self) -> str:
        return f"/slurm/{self.version}/partitions/"

    def ping(self) -> str:
        return f"/slurm/{self.version}/ping/"

    def submit(self) -> str:
        return f"/slurm/{self.version}/job/submit"

    def job(self, job_id: int | str) -> str:
        return f"/slurm/{self.version}/job/{_job_segment(job_id)}"

    def cancel(self, job_id: int | str, signal: str | None = None) -> str:
        return self.job(job_id) + _query({"signal": signal})

    def jobs(self, update_time: int | None = None) -> str:
        return f"/slurm/{self.version}/jobs/" + _query({"update_time": update_time})

    def jobs_state(self, job_ids: Iterable[int | str]) -> str:
        return f"/slurm/{self.version}/jobs/state/" + _query({"job_id": [_job_segment(j) for j in job_ids]})

    def history_job(self, job_id: int | str) -> str:
        return f"/slurmdb/{self.version}/job/{_job_segment(job_id)}"

    def history_jobs(self, **filters: str | int | Sequence[str | int] | None) -> str:
        """``/slurmdb/{v}/jobs/`` with filters; Unix times become ``now-Nseconds`` where a version needs it."""
        if self.version in _RELATIVE_TIME_ONLY:
            now = int(time.time())
            for key in _TIME_FILTERS:
                value = filters.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    filters[key] = f"now-{max(now - value, 0)}seconds"
        return f"/slurmdb/{self.version}/jobs/" + _query(filters)
