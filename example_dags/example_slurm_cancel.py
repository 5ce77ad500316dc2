"""Cancel a job: start a long one, list what runs, cancel it, and check it ended CANCELLED."""

from __future__ import annotations

import os
from datetime import datetime

from airflow_provider_slurmapi.operators.slurm import (
    SlurmCancelJobOperator,
    SlurmGetJobOperator,
    SlurmListJobsOperator,
    SlurmSubmitJobOperator,
)

try:  # Airflow 3: the Task SDK
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.10 and 2.11
    from airflow import DAG

CLUSTER = {
    "project_id": os.environ.get("SLURMAPI_PROJECT") or None,
    "region": os.environ.get("SLURMAPI_REGION", "us-central1"),
    "cluster_id": os.environ.get("SLURMAPI_CLUSTER_ID", "demo-cluster"),
}

with DAG(
    dag_id="example_slurm_cancel",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    catchup=False,
    tags=["slurm", "example"],
) as dag:
    # [START howto_operator_slurm_submit_no_wait]
    start = SlurmSubmitJobOperator(
        task_id="start_long_job",
        job={"name": "long-sweep", "partition": os.environ.get("SLURMAPI_PARTITION", "a3"), "time_limit": 60},
        script="#!/bin/bash\nsleep 600\n",
        wait_for_completion=False,
        **CLUSTER,
    )
    # [END howto_operator_slurm_submit_no_wait]
    # [START howto_operator_slurm_list_jobs]
    running = SlurmListJobsOperator(task_id="list_running", states=["PENDING", "RUNNING"], name="long-sweep", **CLUSTER)
    # [END howto_operator_slurm_list_jobs]
    # [START howto_operator_slurm_cancel_job]
    cancel = SlurmCancelJobOperator(
        task_id="cancel", job_id="{{ ti.xcom_pull(task_ids='start_long_job') }}", termination_timeout=60, **CLUSTER
    )
    # [END howto_operator_slurm_cancel_job]
    # [START howto_operator_slurm_get_job]
    check = SlurmGetJobOperator(task_id="check", job_id="{{ ti.xcom_pull(task_ids='start_long_job') }}", **CLUSTER)
    # [END howto_operator_slurm_get_job]
    start >> running >> cancel >> check


if __name__ == "__main__":
    # Exit non-zero unless the run succeeded, so scripts (make demo) can tell.
    raise SystemExit(0 if dag.test().state == "success" else 1)
