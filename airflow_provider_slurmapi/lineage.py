"""OpenLineage for Slurm jobs: a run facet naming the cluster and the job, and the parent run handed to the job.

Everything here is optional: without ``apache-airflow-providers-openlineage`` the functions answer
``None`` and cost nothing. Only the operators' lineage methods import this module, and only when
they are called (by the OpenLineage listener, or when a job is submitted with parent info on).

The parent run goes into the job's environment under the names OpenLineage integrations already
read: ``OPENLINEAGE_PARENT_ID`` and ``OPENLINEAGE_ROOT_PARENT_ID`` (``namespace/job_name/run_id``, as
``dbt-ol`` and ``openlineage-integration-common`` read them), and each part on its own, named after
the Spark integration's ``spark.openlineage.parentJobNamespace``... properties that the Dataproc and
Spark operators inject (``OPENLINEAGE_PARENT_JOB_NAMESPACE``, ``OPENLINEAGE_PARENT_JOB_NAME``,
``OPENLINEAGE_PARENT_RUN_ID`` and the same with ``ROOT_PARENT``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_provider_slurmapi import __version__

if TYPE_CHECKING:
    from airflow_provider_slurmapi._compat import Context

log = logging.getLogger(__name__)

# The run facet's key in an event's ``run.facets``.
SLURM_JOB_FACET = "slurmJob"
PARENT_ENV_PREFIXES = ("OPENLINEAGE_PARENT_", "OPENLINEAGE_ROOT_PARENT_")
PRODUCER = f"https://pypi.org/project/airflow-provider-slurmapi/{__version__}"

try:
    from attrs import define, field

    try:
        from openlineage.client.generated.base import RunFacet
    except ImportError:  # an OpenLineage client older than 1.x's generated facets
        from openlineage.client.facet import BaseFacet as RunFacet  # type: ignore[assignment,no-redef]

    @define
    class SlurmJobRunFacet(RunFacet):  # type: ignore[misc]
        """The Slurm job a task ran or watched, and where: enough to find it with ``sacct`` or the API.

        :param projectId: Google Cloud project of the training cluster.
        :param region: its region.
        :param clusterId: the training cluster's id.
        :param jobId: the Slurm job id (absent when the task failed before a job existed).
        :param jobName: the Slurm job name, when known.
        :param state: the job's last base state seen (``COMPLETED``, ``FAILED``...), when known.
        """

        projectId: str | None = field(default=None)
        region: str | None = field(default=None)
        clusterId: str | None = field(default=None)
        jobId: int | None = field(default=None)
        jobName: str | None = field(default=None)
        state: str | None = field(default=None)

        @staticmethod
        def _get_schema() -> str:
            return f"{PRODUCER}#SlurmJobRunFacet"

except ImportError:  # no OpenLineage client: nothing asks for lineage
    SlurmJobRunFacet = None  # type: ignore[assignment,misc]


def operator_lineage(
    *,
    project_id: str | None,
    region: str | None,
    cluster_id: str | None,
    job_id: int | None,
    job_name: str | None = None,
    state: str | None = None,
) -> Any:
    """An ``OperatorLineage`` whose run carries the Slurm job facet, or None without OpenLineage."""
    if SlurmJobRunFacet is None:
        return None
    try:
        from airflow.providers.openlineage.extractors import OperatorLineage
    except ImportError:
        return None
    facet = SlurmJobRunFacet(
        projectId=project_id,
        region=region,
        clusterId=cluster_id,
        jobId=job_id,
        jobName=job_name,
        state=state,
    )
    return OperatorLineage(run_facets={SLURM_JOB_FACET: facet})


def parent_run_environment(context: Context) -> dict[str, str] | None:
    """The parent (this task's run) and root (the DAG run) as environment variables, or None without
    the OpenLineage provider (said once in the task log by the caller)."""
    try:
        from airflow.providers.openlineage.plugins.macros import (
            lineage_job_name,
            lineage_job_namespace,
            lineage_run_id,
        )
    except ImportError:
        return None
    ti = context["ti"]
    namespace = str(lineage_job_namespace())
    job_name = str(lineage_job_name(ti))  # type: ignore[arg-type]
    run_id = str(lineage_run_id(ti))  # type: ignore[arg-type]
    try:
        from airflow.providers.openlineage.plugins.macros import lineage_root_job_name, lineage_root_run_id
    except ImportError:  # an older provider: the task is its own root, as the readers assume
        root_namespace, root_name, root_run = namespace, job_name, run_id
    else:
        root_name = str(lineage_root_job_name(ti))  # type: ignore[arg-type]
        root_run = str(lineage_root_run_id(ti))  # type: ignore[arg-type]
        try:
            from airflow.providers.openlineage.plugins.macros import lineage_root_job_namespace
        except ImportError:
            root_namespace = namespace
        else:
            root_namespace = str(lineage_root_job_namespace(ti))  # type: ignore[arg-type]
    return {
        "OPENLINEAGE_PARENT_ID": f"{namespace}/{job_name}/{run_id}",
        "OPENLINEAGE_PARENT_JOB_NAMESPACE": namespace,
        "OPENLINEAGE_PARENT_JOB_NAME": job_name,
        "OPENLINEAGE_PARENT_RUN_ID": run_id,
        "OPENLINEAGE_ROOT_PARENT_ID": f"{root_namespace}/{root_name}/{root_run}",
        "OPENLINEAGE_ROOT_PARENT_JOB_NAMESPACE": root_namespace,
        "OPENLINEAGE_ROOT_PARENT_JOB_NAME": root_name,
        "OPENLINEAGE_ROOT_PARENT_RUN_ID": root_run,
    }
