"""The task tag: how a Slurm job names the Airflow task instance that submitted it, and how to find it.

The tag goes into the job's ``comment``. It is made here (an HMAC only this deployment can compute)
and matched here (an exact token of a job of the caller's own user; a send marker likewise), so that a
retry, a restarted worker or a lost submit answer finds the job already started instead of starting a second copy.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError

if TYPE_CHECKING:  # the type only: the submit side may read the job side, never the reverse
    from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob

TAG_PREFIX = "airflow-ti="


def task_tag(dag_id: str, task_id: str, run_id: str, map_index: int = -1, *, key: bytes) -> str:
    """A tag that names one Airflow task instance (all its tries) and that only this deployment can make.

    It goes into the job's ``comment`` so that a retry, a restarted worker or a lost submit answer
    can find the job this task instance already started, instead of starting a second copy. It is an
    HMAC keyed with a secret of the Airflow deployment: another cluster user, who sees the dag, task
    and run ids, can neither predict it nor pre-create a job that carries it.
    """
    if not key:
        raise ConfigurationError(
            "The key of the task tag is empty: a tag anyone can compute would let them steer tasks."
        )
    message = f"{dag_id}\x00{task_id}\x00{run_id}\x00{map_index}".encode()
    digest = hmac.new(key, message, hashlib.sha256).hexdigest()
    return f"{TAG_PREFIX}{digest[:32]}"


def carries_tag(comment: str | None, tag: str) -> bool:
    """Whether ``comment`` holds ``tag`` as a whole whitespace-separated token (never as a substring)."""
    return bool(comment) and tag in str(comment).split()


def task_comment(tag: str, dag_id: str, task_id: str, run_id: str, map_index: int = -1) -> str:
    """The readable comment that carries ``tag`` (what ``squeue -o %k`` and ``sacct`` show)."""
    where = f"airflow dag={dag_id} task={task_id} run={run_id}"
    if map_index >= 0:
        where += f" map={map_index}"
    return f"{where} {tag}"


@dataclass(frozen=True, slots=True)
class TaskIdentity:
    """The Airflow task instance a job is submitted for: what its tag and its comment name.

    ``map_index`` is -1 for a task that is not mapped. Plain values: the core knows nothing of Airflow.
    """

    dag_id: str
    task_id: str
    run_id: str
    map_index: int = -1

    def tag(self, key: bytes) -> str:
        """This task instance's tag (:func:`task_tag`) under this deployment's ``key``."""
        return task_tag(self.dag_id, self.task_id, self.run_id, self.map_index, key=key)

    def comment(self, tag: str) -> str:
        """The readable comment that carries ``tag`` (:func:`task_comment`)."""
        return task_comment(tag, self.dag_id, self.task_id, self.run_id, self.map_index)


def own_tagged(jobs: Iterable[SlurmJob], tag: str, *, user: str, since: int | None = None) -> list[SlurmJob]:
    """The jobs of ``user`` that carry ``tag`` as an exact token, oldest first, one record each.

    ``user`` is the caller's own Linux account, as the provider established it (see
    ``SlurmClient.our_jobs_plan``): the Slurm Job API runs every call as it, so every job this
    deployment submitted is owned by it. A job of anyone else is never ours, whatever its comment says:
    another cluster user can copy a tag from a visible comment. ``since`` (Unix time) drops jobs
    submitted before it (e.g. a failed job of an earlier try, when looking for a lost submit).
    """
    if not user:
        raise ValueError("own_tagged needs the caller's user: a tagged job is adopted only from its own user")
    by_id: dict[int, SlurmJob] = {}
    for job in jobs:
        if job.user != user or not carries_tag(job.comment, tag):
            continue
        if since is not None and job.submit_time is not None and job.submit_time < since:
            continue
        # Every task of an array carries the tag: the array is one job, known by the array's id.
        key = job.array_job_id or job.job_id
        if key != job.job_id:
            job = replace(job, job_id=key)
        by_id.setdefault(key, job)
    return [by_id[job_id] for job_id in sorted(by_id)]
