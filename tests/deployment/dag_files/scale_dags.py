"""The DAG of the at-scale scenarios (tests/deployment/test_celery_scale.py): many mapped deferrable
tasks, spread over several clusters.

``dag_run.conf``: ``count`` tasks; ``clusters``, how many of the deployment's clusters they spread over
(task ``i`` goes to cluster ``i % clusters``); ``hold`` (default true: the job waits held in Slurm's queue,
using no CPU of the lab, until the scenario releases or cancels it); ``script``. The clusters come from
``SLURMAPI_SCALE_CLUSTERS`` (``conn_id:cluster_id,...``), set by the suite's conftest.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator

if AIRFLOW_V_3_0_PLUS:
    from airflow.sdk import DAG, task
else:  # pragma: no cover - Airflow 2.11
    from airflow import DAG
    from airflow.decorators import task

CLUSTERS = [
    tuple(item.split(":", 1))
    for item in os.environ.get("SLURMAPI_SCALE_CLUSTERS", "google_cloud_default:slurm-lab").split(",")
]
POLL = float(os.environ.get("SLURMAPI_POLL_INTERVAL", "5"))

with DAG(
    dag_id="deploy_scale",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    catchup=False,
    max_active_tasks=512,
    tags=["deployment"],
):

    @task
    def specs(**context: Any) -> list[dict[str, Any]]:
        conf = context["dag_run"].conf or {}
        spread = int(conf.get("clusters", 1))
        if not 1 <= spread <= len(CLUSTERS):
            raise ValueError(
                f"conf clusters={spread}: the deployment has {len(CLUSTERS)} clusters (1..{len(CLUSTERS)})"
            )
        out = []
        for i in range(int(conf["count"])):
            conn_id, cluster_id = CLUSTERS[i % spread]
            job = {
                "partition": os.environ.get("SLURMAPI_PARTITION", "debug"),
                "current_working_directory": "/tmp",
                "name": f"deploy-scale-{i}",
                "hold": bool(conf.get("hold", True)),
            }
            out.append({"job": job, "cluster_id": cluster_id, "gcp_conn_id": conn_id})
        return out

    SlurmSubmitJobOperator.partial(
        task_id="job",
        script="{{ dag_run.conf.get('script', '#!/bin/bash\\ntrue\\n') }}",
        deferrable=True,
        poll_interval=POLL,
        project_id=os.environ.get("SLURMAPI_PROJECT") or None,
        region=os.environ.get("SLURMAPI_REGION", "us-central1"),
        api_version=os.environ.get("SLURMAPI_API_VERSION", "v0.0.42"),
    ).expand_kwargs(specs())
