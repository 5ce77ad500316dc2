"""A hyper-parameter sweep as one Slurm job array: four tasks, two at a time, wait for all of them.

The task log shows the counts as they change (``array 123: 2 COMPLETED, 2 RUNNING``); the task
fails naming any task that did not complete, and ``array_fail_fast`` cancels the rest at the first
failure. XCom ``slurm_job["array"]`` holds each task's id, state and exit code.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator

try:  # Airflow 3: the Task SDK
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.10 and 2.11
    from airflow import DAG

CLUSTER = {
    "project_id": os.environ.get("SLURMAPI_PROJECT") or None,
    "region": os.environ.get("SLURMAPI_REGION", "us-central1"),
    "cluster_id": os.environ.get("SLURMAPI_CLUSTER_ID", "demo-cluster"),
}
DEFERRABLE = os.environ.get("SLURMAPI_DEFERRABLE", "true").lower() != "false"
POLL = float(os.environ.get("SLURMAPI_POLL_INTERVAL", "2"))
WORKDIR = os.environ.get("SLURMAPI_WORKDIR", "/tmp")

SWEEP = """#!/bin/bash
LEARNING_RATES=(0.1 0.03 0.01 0.003)
LR=${LEARNING_RATES[$SLURM_ARRAY_TASK_ID]}
echo "task $SLURM_ARRAY_TASK_ID of array $SLURM_ARRAY_JOB_ID: learning rate $LR"
sleep 1
"""

with DAG(
    dag_id="example_slurm_array",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    catchup=False,
    tags=["slurm", "example"],
) as dag:
    # [START howto_operator_slurm_submit_array]
    SlurmSubmitJobOperator(
        task_id="sweep",
        job={
            "name": "lr-sweep",
            "partition": os.environ.get("SLURMAPI_PARTITION", "a3"),
            "time_limit": 30,
            "array": "0-3%2",  # four tasks, at most two at a time
            "standard_output": f"{WORKDIR}/lr-sweep-%A_%a.out",
        },
        script=SWEEP,
        array_fail_fast=True,
        deferrable=DEFERRABLE,
        poll_interval=POLL,
        **CLUSTER,
    )
    # [END howto_operator_slurm_submit_array]


if __name__ == "__main__":
    # Exit non-zero unless the run succeeded, so scripts (make demo) can tell.
    raise SystemExit(0 if dag.test().state == "success" else 1)
