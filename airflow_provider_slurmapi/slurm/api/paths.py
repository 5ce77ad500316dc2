"""The Slurm REST paths this provider calls, for one API version (what each version does: api_versions).

Paths are built here and nowhere else, so that a version bump or a new endpoint is one change.
Lists in query strings are repeated parameters (``job_id=1&job_id=2``): slurmrestd answers a raw
comma with 400 "Unable to parse query." and reads ``%2C`` as one value.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from urllib.parse import parse_qsl, urlencode

from airflow_provider_slurmapi.slurm.api.api_versions import (
    NEGOTIATE,
    SUPPORTED_API_VERSIONS,
    ApiVersionTraits,
    check_api_version,
    traits,
)
from airflow_provider_slurmapi.slurm.api.validation import check_job_id

# The default: negotiate (see api_versions.NEGOTIATE); kept under its old name for callers.
DEFAULT_API_VERSION = NEGOTIATE
_TIME_FILTERS = ("start_time", "end_time")
# How many jobs/state queries (id lists) a SlurmPaths keeps: a poll round asks one per 10,000 jobs.
_KEPT_STATE_QUERIES = 4


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


def ping_path(version: str) -> str:
    """``/slurm/{v}/ping``: the cheapest call of a version, used to negotiate one."""
    return f"/slurm/{traits(version).name}/ping"


# The version segment of a path built before the version is negotiated ("auto"): the client puts
# the negotiated version in its place (resolve_path) just before sending, after every argument
# of the path (a job id) has been checked, so a bad argument never costs a call.
VERSION_PLACEHOLDER = "{api_version}"


def resolve_path(path: str, version: str, *, now: float) -> str:
    """``path`` with :data:`VERSION_PLACEHOLDER` replaced by ``version`` and its filters in that version's form.

    ``now``: the wall-clock time (epoch seconds) a relative filter (``now-Nseconds``) counts back from, read
    from the caller's clock (the client's, so a test's fake clock holds here too).
    """
    if VERSION_PLACEHOLDER not in path:
        return path
    row = traits(version)
    path = path.replace(VERSION_PLACEHOLDER, row.name, 1)
    if row.history_time_filter == "relative" and path.startswith(f"/slurmdb/{row.name}/jobs/") and "?" in path:
        base, query = path.split("?", 1)
        pairs = [
            (key, f"now-{max(int(now) - int(value), 0)}seconds" if key in _TIME_FILTERS and value.isdigit() else value)
            for key, value in parse_qsl(query, keep_blank_values=True)
        ]
        path = f"{base}?{urlencode(pairs)}"
    return path


class SlurmPaths:
    """The Slurm REST paths of one API version, or of the one still to negotiate (:data:`NEGOTIATE`)."""

    def __init__(self, version: str, *, wall: Callable[[], float] = time.time) -> None:
        # The wall clock a relative history filter counts back from: the client hands its own clock's.
        self.wall = wall
        self.traits: ApiVersionTraits | None = None if check_api_version(version) == NEGOTIATE else traits(version)
        self.version = self.traits.name if self.traits else VERSION_PLACEHOLDER
        self._state_queries: dict[tuple[int | str, ...], str] = {}

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
        # Thousands of ids a round, the same ones round after round (a poller's): the query of the last
        # few id lists is kept. A checked id is digits only, so it needs no quoting.
        ids = tuple(job_ids)
        query = self._state_queries.get(ids)
        if query is None:
            query = "&".join(["job_id=" + _job_segment(j) for j in ids])
            if len(self._state_queries) >= _KEPT_STATE_QUERIES:
                self._state_queries.pop(next(iter(self._state_queries)))
            self._state_queries[ids] = query
        return f"/slurm/{self.version}/jobs/state/" + ("?" + query if query else "")

    def history_job(self, job_id: int | str) -> str:
        return f"/slurmdb/{self.version}/job/{_job_segment(job_id)}"

    def history_jobs(self, **filters: str | int | Sequence[str | int] | None) -> str:
        """``/slurmdb/{v}/jobs/`` with filters; Unix times become ``now-Nseconds`` where a version needs it."""
        path = f"/slurmdb/{VERSION_PLACEHOLDER}/jobs/" + _query(filters)
        return path if self.traits is None else resolve_path(path, self.traits.name, now=self.wall())


__all__ = [
    "DEFAULT_API_VERSION",
    "NEGOTIATE",
    "SUPPORTED_API_VERSIONS",
    "VERSION_PLACEHOLDER",
    "SlurmPaths",
    "check_api_version",
    "ping_path",
    "resolve_path",
]
