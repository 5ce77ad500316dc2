"""The DAG whose deferred task instances the triggerer benchmark puts in front of Airflow's triggerer.

``wait`` is a mapped deferrable ``SlurmJobSensor`` (one map index a Slurm job); ``probe`` defers to the
benchmark's event-loop probe. The benchmark creates the run and the deferred rows itself (bench/triggerer.py).
"""

from __future__ import annotations

import datetime

from airflow import DAG
from airflow.providers.standard.operators.empty import EmptyOperator

from airflow_provider_slurmapi.sensors.slurm import SlurmJobSensor

with DAG("bench_triggerer", schedule=None, start_date=datetime.datetime(2026, 1, 1), catchup=False):
    SlurmJobSensor.partial(
        task_id="wait",
        region="us-central1",
        cluster_id="bench-cluster",
        project_id="bench-project",
        deferrable=True,
        poke_interval=10,
    ).expand(job_id=[1])
    EmptyOperator(task_id="probe")
