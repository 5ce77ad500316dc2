"""Watcher DAGs for the tests: a sensor, a get and a cancel on a job id given by the environment."""

from __future__ import annotations

import os
from datetime import datetime

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
from airflow_provider_slurmapi.operators.slurm import (
    SlurmCancelJobOperator,
    SlurmGetJobOperator,
    SlurmListJobsOperator,
)
from airflow_provider_slurmapi.sensors.slurm import SlurmJobSensor

if AIRFLOW_V_3_0_PLUS:
    from airflow.sdk import DAG
else:  # pragma: no cover
    from airflow import DAG

CLUSTER = {
    "project_id": os.environ.get("SLURMAPI_PROJECT") or None,
    "region": os.environ.get("SLURMAPI_REGION", "us-central1"),
    "cluster_id": os.environ.get("SLURMAPI_CLUSTER_ID", "demo-cluster"),
}
JOB_ID = os.environ.get("SLURMAPI_WATCH_JOB_ID", "1")
DEFERRABLE = os.environ.get("SLURMAPI_DEFERRABLE", "true").lower() != "false"
SENSOR_MODE = os.environ.get("SLURMAPI_SENSOR_MODE", "poke")
SENSOR_TIMEOUT = float(os.environ.get("SLURMAPI_SENSOR_TIMEOUT", "120"))
# Only passed when set, so the DAGs also parse with providers that predate the argument.
OUTAGE = {"outage_tolerance_seconds": float(v)} if (v := os.environ.get("SLURMAPI_OUTAGE_TOLERANCE")) else {}

DAGS = {}
with DAG(dag_id="slurm_watch_sensor", start_date=datetime(2026, 1, 1), schedule=None) as dag:
    SlurmJobSensor(
        task_id="sense",
        job_id=JOB_ID,
        deferrable=DEFERRABLE,
        mode=SENSOR_MODE,
        poke_interval=0.5,
        timeout=SENSOR_TIMEOUT,
        missing_grace_seconds=2,
        **OUTAGE,
        **CLUSTER,
    )
DAGS["sensor"] = dag
with DAG(dag_id="slurm_watch_get", start_date=datetime(2026, 1, 1), schedule=None) as dag:
    SlurmGetJobOperator(task_id="get", job_id=JOB_ID, **CLUSTER)
DAGS["get"] = dag
with DAG(dag_id="slurm_watch_cancel", start_date=datetime(2026, 1, 1), schedule=None) as dag:
    SlurmCancelJobOperator(task_id="cancel", job_id=JOB_ID, termination_timeout=30, poll_interval=0.5, **CLUSTER)
DAGS["cancel"] = dag
with DAG(dag_id="slurm_watch_list_history", start_date=datetime(2026, 1, 1), schedule=None) as dag:
    SlurmListJobsOperator(task_id="list", history=True, filters={"job_name": "watched"}, **CLUSTER)
DAGS["list_history"] = dag
