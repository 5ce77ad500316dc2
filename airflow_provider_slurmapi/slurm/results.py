"""What each Slurm call means, read from its :class:`SlurmResponse`.

Shared by the sync and the async hook, so that both read Slurm the same way: which answers mean
"not found", which cancel answers are harmless, where the job id is.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from airflow_provider_slurmapi.slurm.envelope import SlurmResponse
from airflow_provider_slurmapi.slurm.errors import MalformedResponseError, SlurmError
from airflow_provider_slurmapi.slurm.job import SlurmJob
from airflow_provider_slurmapi.slurm.spec import carries_tag
from airflow_provider_slurmapi.slurm.states import JobStateInfo, parse_job_state

ESLURM_INVALID_JOB_ID = 2017
ESLURM_ALREADY_DONE = 2021
ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE = 2014


@dataclass(frozen=True, slots=True)
class SubmitResult:
    job_id: int
    warnings: list[str] = field(default_factory=list)


class CancelOutcome(enum.StrEnum):
    """What a cancel did. All three are success for the caller: the job is not running any more."""

    CANCELLED = "cancelled"
    ALREADY_FINISHED = "already finished"
    UNKNOWN_JOB = "unknown job"


def read_submit(response: SlurmResponse) -> SubmitResult:
    try:
        response.raise_for_errors()
    except SlurmError as exc:
        if ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE in exc.error_numbers:
            exc.args = (
                f"{exc.args[0]}. The cluster has no node that fits the request (nodes, GPUs via "
                "tres_per_node, CPUs, memory): lower it or pick another partition. Slurm may list the "
                "refused job as FAILED (BadConstraints); it will not run.",
            )
        raise
    job_id = (response.body or {}).get("job_id")
    if isinstance(job_id, bool) or not isinstance(job_id, int | str) or not str(job_id).isdigit():
        raise MalformedResponseError(
            f"Slurm accepted the submit but its answer has no job_id ({response.body!r}); "
            "the job may exist: look for it with the list operator before submitting again."
        )
    return SubmitResult(job_id=int(job_id), warnings=response.warning_messages())


def read_live_job(response: SlurmResponse) -> SlurmJob | None:
    """The job of ``GET /slurm/{v}/job/{id}``; ``None`` when it has left the live queue (404/2017)."""
    gone = response.status == 404 or response.has_error(ESLURM_INVALID_JOB_ID)
    if gone and not (response.body or {}).get("jobs"):
        return None
    response.raise_for_errors()
    jobs = (response.body or {}).get("jobs") or []
    return SlurmJob.from_live(jobs[0]) if jobs else None


def read_history_job(response: SlurmResponse) -> SlurmJob | None:
    """The job of ``GET /slurmdb/{v}/job/{id}``; ``None`` when accounting knows nothing of it (yet).

    A job requeued several times has several records; the last one is the current one.
    """
    if response.has_error(ESLURM_INVALID_JOB_ID):
        return None
    response.raise_for_errors()
    jobs = (response.body or {}).get("jobs") or []
    return SlurmJob.from_history(jobs[-1]) if jobs else None


def read_jobs(response: SlurmResponse, *, history: bool) -> list[SlurmJob]:
    response.raise_for_errors()
    jobs = (response.body or {}).get("jobs") or []
    build = SlurmJob.from_history if history else SlurmJob.from_live
    return [build(job) for job in jobs]


def read_jobs_by_id(response: SlurmResponse, job_ids: Iterable[int]) -> dict[int, SlurmJob]:
    """From a ``GET /slurm/{v}/jobs/`` answer, the jobs among ``job_ids`` (those still in the live queue)."""
    wanted = set(job_ids)
    return {job.job_id: job for job in read_jobs(response, history=False) if job.job_id in wanted}


def read_job_states(response: SlurmResponse) -> dict[int, JobStateInfo]:
    """``GET /slurm/{v}/jobs/state/``: job id -> state, for the jobs still in the live queue."""
    response.raise_for_errors()
    states: dict[int, JobStateInfo] = {}
    for item in (response.body or {}).get("jobs") or []:
        try:
            states[int(item["job_id"])] = parse_job_state(item.get("state") or item.get("job_state"))
        except (KeyError, TypeError, ValueError):
            continue
    return states


def read_cancel(response: SlurmResponse) -> CancelOutcome:
    """``DELETE /slurm/{v}/job/{id}``: Slurm 24.11 answers 200 with ``status[].error.code``."""
    codes = {int(e.get("error_number") or 0) for e in response.errors}
    for item in (response.body or {}).get("status") or []:
        error = item.get("error") if isinstance(item, dict) else None
        if isinstance(error, dict) and error.get("code"):
            codes.add(int(error["code"]))
    if ESLURM_INVALID_JOB_ID in codes:
        return CancelOutcome.UNKNOWN_JOB
    if ESLURM_ALREADY_DONE in codes:
        return CancelOutcome.ALREADY_FINISHED
    if response.status == 404:
        return CancelOutcome.UNKNOWN_JOB
    response.raise_for_errors()
    return CancelOutcome.CANCELLED


def own_tagged(
    jobs: Iterable[SlurmJob], tag: str, *, user: str | None = None, since: int | None = None
) -> list[SlurmJob]:
    """The jobs of the submitting user that carry ``tag`` as an exact token, oldest first, one record each.

    ``user`` is the submitting user when known (e.g. the owner of the job an earlier try stored).
    Unknown, it is the owner of the oldest job carrying the tag: the tag is keyed with a secret of the
    Airflow deployment, so the first job to carry it was ours; anyone else can only have copied it
    from that job's visible comment later, onto a newer job of their own. ``since`` (Unix time) drops
    jobs submitted before it (e.g. a failed job of an earlier try, when looking for a lost submit).
    """
    by_id: dict[int, SlurmJob] = {}
    for job in jobs:
        if not carries_tag(job.comment, tag):
            continue
        if since is not None and job.submit_time is not None and job.submit_time < since:
            continue
        by_id.setdefault(job.job_id, job)
    tagged = [by_id[job_id] for job_id in sorted(by_id)]
    if not tagged:
        return []
    owner = user if user is not None else tagged[0].user
    return [job for job in tagged if job.user == owner]


def newest_tagged(
    jobs: Iterable[SlurmJob], tag: str, *, user: str | None = None, since: int | None = None
) -> SlurmJob | None:
    """The most recent job of the submitting user carrying ``tag`` (see :func:`own_tagged`)."""
    found = own_tagged(jobs, tag, user=user, since=since)
    return found[-1] if found else None
