"""A DAG whose region is a templated param with a typo (``us-centrl1``), as a user writes one.

Without an ``api_endpoint`` its host is ``us-centrl1-aiplatform.googleapis.com``, which does not exist;
with a typo'd ``api_endpoint`` in the connection, that endpoint's host. Nothing can be sent either way.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator
from tests.dag_runs.dag_env import DAG, read_dag_env

ENV = read_dag_env()

with DAG(
    dag_id="slurm_wrong_endpoint",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    catchup=False,
    params={"region": "us-centrl1"},
    tags=["slurm", "test"],
) as dag:
    SlurmSubmitJobOperator(
        task_id="job",
        job={
            "name": "wrong-endpoint",
            "partition": ENV.partition,
            "current_working_directory": ENV.workdir,
            "environment": ["PATH=/usr/local/bin:/usr/bin:/bin"],
            "time_limit": 5,
        },
        script="#!/bin/bash\necho never sent\n",
        deferrable=ENV.deferrable,
        poll_interval=ENV.poll,
        retries=2,
        retry_delay=timedelta(seconds=0),
        execution_timeout=timedelta(minutes=10),
        **{**ENV.cluster, "region": "{{ params.region }}"},
    )
