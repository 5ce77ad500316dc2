"""Watch a job you did not wait for: submit, sense it (deferred), then read it back from the history.

``SlurmJobSensor`` follows the job from the live queue into the accounting history (``/slurmdb``),
so it also works for a job that finished long before the sensor started.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow_provider_slurmapi.operators.slurm import SlurmGetJobOperator, SlurmSubmitJobOperator
from airflow_provider_slurmapi.sensors.slurm import SlurmJobSensor

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

with DAG(
    dag_id="example_slurm_sensor",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    catchup=False,
    tags=["slurm", "example"],
) as dag:
    submit = SlurmSubmitJobOperator(
        task_id="submit",
        job={"name": "preprocess", "partition": os.environ.get("SLURMAPI_PARTITION", "a3"), "time_limit": 30},
        script="#!/bin/bash\necho preprocessing\nsleep 2\necho ok\n",
        wait_for_completion=False,
        **CLUSTER,
    )
    # [START howto_sensor_slurm_job]
    wait = SlurmJobSensor(
        task_id="wait",
        job_id="{{ ti.xcom_pull(task_ids='submit') }}",
        deferrable=DEFERRABLE,
        poke_interval=POLL,
        timeout=600,
        **CLUSTER,
    )
    # [END howto_sensor_slurm_job]
    # [START howto_operator_slurm_get_job_history]
    report = SlurmGetJobOperator(
        task_id="report",
        job_id="{{ ti.xcom_pull(task_ids='submit') }}",
        **CLUSTER,
    )
    # [END howto_operator_slurm_get_job_history]
    submit >> wait >> report


if __name__ == "__main__":
    # Exit non-zero unless the run succeeded, so scripts (make demo) can tell.
    raise SystemExit(0 if dag.test().state == "success" else 1)
