"""DAGs of the deployment suite: run by a real scheduler, workers and triggerer, driven through the REST API.

The script, the job fields and the number of mapped tasks come from ``dag_run.conf``; the cluster and
the poll interval from the environment at parse time (``SLURMAPI_*``).
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta
from typing import Any

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator

if AIRFLOW_V_3_0_PLUS:
    from airflow.sdk import DAG, task
else:  # pragma: no cover - Airflow 2.11
    from airflow import DAG
    from airflow.decorators import task

CLUSTER = {
    "project_id": os.environ.get("SLURMAPI_PROJECT") or None,
    "region": os.environ.get("SLURMAPI_REGION", "us-central1"),
    "cluster_id": os.environ.get("SLURMAPI_CLUSTER_ID", "slurm-lab"),
    "api_version": os.environ.get("SLURMAPI_API_VERSION", "v0.0.42"),
}
POLL = float(os.environ.get("SLURMAPI_POLL_INTERVAL", "5"))
JOB = {
    "partition": os.environ.get("SLURMAPI_PARTITION", "debug"),
    "current_working_directory": "/tmp",
    "name": "{{ dag_run.conf.get('name', 'deploy') }}",
}
SCRIPT = "{{ dag_run.conf['script'] }}"
ARGS: dict[str, Any] = {"start_date": datetime(2026, 1, 1), "schedule": None, "catchup": False, "tags": ["deployment"]}

with DAG(dag_id="deploy_submit", **ARGS):
    # Deferrable: waits in the triggerer.
    SlurmSubmitJobOperator(task_id="job", job=JOB, script=SCRIPT, deferrable=True, poll_interval=POLL, **CLUSTER)

with DAG(dag_id="deploy_sync_retry", **ARGS):
    # Waits in the worker; its process may be killed, the retry reattaches.
    SlurmSubmitJobOperator(
        task_id="job",
        job=JOB,
        script=SCRIPT,
        deferrable=False,
        poll_interval=2,
        retries=1,
        retry_delay=timedelta(seconds=1),
        **CLUSTER,
    )

with DAG(dag_id="deploy_timeout", **ARGS):
    SlurmSubmitJobOperator(
        task_id="job",
        job=JOB,
        script=SCRIPT,
        deferrable=True,
        poll_interval=POLL,
        execution_timeout=timedelta(seconds=int(os.environ.get("SLURMAPI_DEPLOY_TIMEOUT", "25"))),
        **CLUSTER,
    )

with DAG(dag_id="deploy_mapped", max_active_tasks=256, **ARGS):

    @task
    def specs(**context: Any) -> list[dict[str, Any]]:
        conf = context["dag_run"].conf or {}
        return [{**JOB, "name": f"deploy-mapped-{i}", "hold": True} for i in range(int(conf["count"]))]

    SlurmSubmitJobOperator.partial(
        task_id="job", script="#!/bin/bash\ntrue\n", deferrable=True, poll_interval=POLL, **CLUSTER
    ).expand(job=specs())

with DAG(dag_id="deploy_busy", max_active_tasks=64, **ARGS):

    @task
    def slots(**context: Any) -> list[int]:
        return list(range(int((context["dag_run"].conf or {})["count"])))

    @task
    def hold_a_slot(index: int, **context: Any) -> None:
        """Keeps a worker slot busy for ``seconds``."""
        time.sleep(float((context["dag_run"].conf or {})["seconds"]))  # the scenario: a busy slot

    hold_a_slot.expand(index=slots())
