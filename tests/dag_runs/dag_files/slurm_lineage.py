"""DAGs for the lineage and ``@task.slurm`` tests: each job writes its environment to a file of its
working directory (``env-<job id>.txt``), so a test can read what the job was given.

The cluster and the wait mode come from the environment at parse time (``SLURMAPI_*``).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator
from airflow_provider_slurmapi.sensors.slurm import SlurmJobSensor

if AIRFLOW_V_3_0_PLUS:
    from airflow.sdk import DAG, task
else:  # pragma: no cover
    from airflow import DAG
    from airflow.decorators import task

CLUSTER = {
    "project_id": os.environ.get("SLURMAPI_PROJECT") or None,
    "region": os.environ.get("SLURMAPI_REGION", "us-central1"),
    "cluster_id": os.environ.get("SLURMAPI_CLUSTER_ID", "demo-cluster"),
}
WORKDIR = os.environ.get("SLURMAPI_WORKDIR", "/tmp")
DEFERRABLE = os.environ.get("SLURMAPI_DEFERRABLE", "true").lower() != "false"
POLL = float(os.environ.get("SLURMAPI_POLL_INTERVAL", "1"))
JOB = {
    "partition": "debug",
    "current_working_directory": WORKDIR,
    "environment": {"PATH": "/usr/bin:/bin", "OWN": "kept"},
}
DUMP_ENV = '#!/bin/bash\nprintenv > "env-$SLURM_JOB_ID.txt"\n'

DAGS: dict[str, Any] = {}

with DAG(dag_id="slurm_lineage", start_date=datetime(2026, 1, 1), schedule=None, catchup=False) as dag:
    submit_sync = SlurmSubmitJobOperator(
        task_id="submit_sync",
        job={**JOB, "name": "lineage-sync"},
        script=DUMP_ENV,
        deferrable=False,
        poll_interval=POLL,
        openlineage_inject_parent_job_info=True,
        **CLUSTER,
    )
    submit_deferred = SlurmSubmitJobOperator(
        task_id="submit_deferred",
        job={**JOB, "name": "lineage-deferred"},
        script=DUMP_ENV + "sleep 1\n",
        deferrable=True,
        poll_interval=POLL,
        openlineage_inject_parent_job_info=True,
        **CLUSTER,
    )
    # Parent variables the job sets itself are kept: none of this task's run is added.
    submit_own_parent = SlurmSubmitJobOperator(
        task_id="submit_own_parent",
        job={**JOB, "name": "lineage-own", "environment": {"PATH": "/usr/bin:/bin", "OPENLINEAGE_PARENT_ID": "a/b/c"}},
        script=DUMP_ENV,
        deferrable=False,
        poll_interval=POLL,
        openlineage_inject_parent_job_info=True,
        **CLUSTER,
    )
    submit_failing = SlurmSubmitJobOperator(
        task_id="submit_failing",
        job={**JOB, "name": "lineage-failing"},
        script=DUMP_ENV + "exit 3\n",
        deferrable=False,
        poll_interval=POLL,
        openlineage_inject_parent_job_info=True,
        **CLUSTER,
    )
    watch = SlurmJobSensor(
        task_id="watch",
        job_id="{{ ti.xcom_pull(task_ids='submit_sync') }}",
        deferrable=DEFERRABLE,
        poke_interval=POLL,
        **CLUSTER,
    )
    submit_sync >> watch
DAGS["lineage"] = dag

with DAG(
    dag_id="slurm_taskflow",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    catchup=False,
    # A value that looks like a template stays text: the returned script is not rendered.
    params={"model": "tiny{{ 7 * 7 }}"},
) as dag:

    @task
    def learning_rate() -> float:
        return 0.125

    @task.slurm(job={**JOB, "name": "taskflow-train"}, deferrable=DEFERRABLE, poll_interval=POLL, **CLUSTER)
    def train(model: str, rate: float, ds: str | None = None) -> str:
        return (
            f"#!/bin/bash\n"
            f'echo "model={model} rate={rate} ds={ds} task={{{{ ti.task_id }}}}" > "train-$SLURM_JOB_ID.txt"\n'
            # Still running at the task's first look after the submit, so a deferrable task defers.
            "sleep 3\n"
        )

    @task.slurm(job={**JOB, "name": "taskflow-file"}, deferrable=DEFERRABLE, poll_interval=POLL, **CLUSTER)
    def from_file() -> str:
        return "train_step.sh"

    train(model="{{ params.model }}", rate=learning_rate())
    from_file()
DAGS["taskflow"] = dag

with DAG(
    dag_id="slurm_taskflow_bad",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    catchup=False,
) as dag:

    @task.slurm(job={**JOB, "name": "taskflow-none"}, deferrable=DEFERRABLE, poll_interval=POLL, retries=0, **CLUSTER)
    def returns_none() -> Any:
        return None

    @task.slurm(job={**JOB, "name": "taskflow-empty"}, deferrable=DEFERRABLE, poll_interval=POLL, retries=0, **CLUSTER)
    def returns_blank() -> str:
        return "  \n"

    returns_none()
    returns_blank()
DAGS["taskflow_bad"] = dag
