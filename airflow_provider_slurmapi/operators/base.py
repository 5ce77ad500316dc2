"""What the operators and the sensor of this provider share: the cluster arguments they take and the
hook built from them, how they fail for good, and how they read a job id.

Kept free of heavy imports: DAG files import operators at parse time, and the hook (Google
libraries, aiohttp) is only imported when a task runs.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from airflow_provider_slurmapi._compat import AirflowFailException, conf
from airflow_provider_slurmapi.slurm.api_versions import check_api_version
from airflow_provider_slurmapi.slurm.cluster import CLUSTER_ARG_NAMES, ClusterArgs, ClusterRef, cluster_ref
from airflow_provider_slurmapi.slurm.errors import is_permanent
from airflow_provider_slurmapi.slurm.validation import check_job_id

if TYPE_CHECKING:
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
    from airflow_provider_slurmapi.slurm.job import SlurmJob

_Method = TypeVar("_Method", bound=Callable[..., Any])


def fails_permanently(method: _Method) -> _Method:
    """Turn an error no retry can fix (:func:`~airflow_provider_slurmapi.slurm.errors.is_permanent`:
    a bad spec, a request of 1 MB or more, a missing script file, a partition, account, QoS or TRES
    Slurm refuses, permission denied, an unknown cluster) into ``AirflowFailException``, so the task
    fails without spending its retries. Every other error is raised unchanged and retried as usual."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except Exception as exc:
            if is_permanent(exc):
                raise AirflowFailException(permanent_message(str(exc))) from exc
            raise

    return wrapper  # type: ignore[return-value]


def permanent_message(message: str) -> str:
    """The message of a task failed for good: the error, and why its retries were not used."""
    return f"{message} (Not retried: no retry can fix this.)"


# How long a finished job's accounting record is waited for (slurmdbd records jobs a little after they end).
DEFAULT_ACCOUNTING_WAIT_SECONDS = 30.0

CLUSTER_TEMPLATE_FIELDS: tuple[str, ...] = ("region", "cluster_id", "project_id", "gcp_conn_id", "impersonation_chain")


class SlurmClusterMixin:
    """Holds ``region``, ``cluster_id``, ``project_id``, ``gcp_conn_id``, ``api_version``,
    ``impersonation_chain`` and ``api_endpoint`` (templated: rendered before ``execute``), and makes of
    them one :class:`~airflow_provider_slurmapi.slurm.cluster.ClusterRef` for the hook and the trigger."""

    region: str
    cluster_id: str
    project_id: str | None
    gcp_conn_id: str
    api_version: str
    impersonation_chain: str | Sequence[str] | None
    api_endpoint: str | None

    def _set_cluster_args(self, **args: Unpack[ClusterArgs]) -> None:
        """Keep the cluster arguments as attributes: templated, they are checked once rendered (:attr:`cluster`)."""
        for name in CLUSTER_ARG_NAMES:
            setattr(self, name, args.get(name))
        self.api_version = check_api_version(self.api_version)

    def check_cluster_args(self) -> None:
        """Refuse rendered cluster arguments that are not well formed (builds :attr:`cluster`).

        Called first thing in ``execute``: the values may come from ``dag_run.conf``, and they decide
        where the bearer token is sent, so nothing (not even a credential) is fetched before this.
        """
        _ = self.cluster

    @cached_property
    def cluster(self) -> ClusterRef:
        """The rendered cluster arguments as one checked value: what the hook and the trigger are given."""
        return cluster_ref(**{name: getattr(self, name) for name in CLUSTER_ARG_NAMES})

    def report_accounting(
        self, job_id: int, wait_seconds: float | None, *, array: bool = False
    ) -> dict[str, Any] | None:
        """Log the job's accounting summary in one line and return it for XCom (``None``: not asked for).

        Never fails the task: no record in time, an error, or an odd record only make the line say so.
        A job array is not summed up (each task has its own record): the line says so.
        """
        if wait_seconds is None:
            return None
        from airflow_provider_slurmapi.slurm.accounting import not_recorded

        if array:
            line, value = not_recorded(job_id, 0.0, f"a job array: each task has its own record (sacct -j {job_id})")
            self.log.info("%s", line)  # type: ignore[attr-defined]
            return value
        try:
            line, value = self.hook.wait_for_accounting(job_id, max(0.0, float(wait_seconds)))
        except Exception as exc:  # a summary is a courtesy: it must not fail a job's task
            line, value = not_recorded(job_id, 0.0, f"reading the history failed ({type(exc).__name__}: {exc})")
        self.log.info("%s", line)  # type: ignore[attr-defined]
        return value

    def slurm_job_lineage(self, job_id: int | None, job: SlurmJob | None = None) -> Any:
        """OpenLineage facets naming the cluster and the Slurm job; None without the OpenLineage provider."""
        from airflow_provider_slurmapi.lineage import operator_lineage

        project = self.project_id
        if not project:  # the connection's project, as the hook resolves it (no call to the API)
            with contextlib.suppress(Exception):
                project = self.hook.project_id
        return operator_lineage(
            project_id=project,
            region=self.region,
            cluster_id=self.cluster_id,
            job_id=job.job_id if job is not None else job_id,
            job_name=job.name if job is not None else None,
            state=job.state.value if job is not None else None,
        )

    def push_xcom(self, context: Any, key: str, value: Any) -> None:
        """Push ``value`` to XCom under ``key``, unless the task has ``do_xcom_push=False``: then nothing
        of the task's goes to XCom (its return value, the job id, the job and its accounting)."""
        if getattr(self, "do_xcom_push", True):
            context["ti"].xcom_push(key=key, value=value)

    @cached_property
    def hook(self) -> SlurmApiHook:
        from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook

        return SlurmApiHook(cluster=self.cluster)


def default_deferrable() -> bool:
    """``[operators] default_deferrable``, as the deferrable operators of Airflow's providers read it."""
    return conf.getboolean("operators", "default_deferrable", fallback=False)


XCOM_JOB_ID_HINT = "If it comes from XCom, check the template, e.g. \"{{ ti.xcom_pull(task_ids='submit') }}\"."


def parse_job_id(value: object) -> int:
    """A job id from an int or a rendered template; a clear error for anything else."""
    return check_job_id(value, hint=XCOM_JOB_ID_HINT)
