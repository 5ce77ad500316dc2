"""DAGs for the conventions users expect of an Airflow provider.

``DAGS["script_files"]``: a script read from a file ending in ``.sbatch``, ``.slurm`` or ``.bash``, one
named by ``script_path=``, and a mapped task mixing a file and an inline script.
``DAGS["script_from_conf"]``: a script rendered from ``dag_run.conf``, never read as a file.
``DAGS["list_jobs"]``: a job submitted, then the caller's own jobs (live and history), everyone's, and a limit.
``DAGS["no_xcom"]``: every operator and the sensor with ``do_xcom_push=False``; the job to watch, get
and cancel is given in the run's conf (``job_id``).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
from airflow_provider_slurmapi.operators.slurm import (
    SlurmCancelJobOperator,
    SlurmGetJobOperator,
    SlurmListJobsOperator,
    SlurmSubmitJobOperator,
)
from airflow_provider_slurmapi.sensors.slurm import SlurmJobSensor

if AIRFLOW_V_3_0_PLUS:
    from airflow.sdk import DAG
else:  # pragma: no cover
    from airflow import DAG

CLUSTER = {
    "region": os.environ.get("SLURMAPI_REGION", "us-central1"),
    "cluster_id": os.environ.get("SLURMAPI_CLUSTER_ID", "demo-cluster"),
}
JOB = {
    "partition": os.environ.get("SLURMAPI_PARTITION", "debug"),
    "current_working_directory": os.environ.get("SLURMAPI_WORKDIR", "/tmp"),
    "environment": {"PATH": "/usr/local/bin:/usr/bin:/bin"},
    "time_limit": 5,
}
POLL = float(os.environ.get("SLURMAPI_POLL_INTERVAL", "1"))
WAIT = {"poll_interval": POLL, "execution_timeout": timedelta(minutes=2), "accounting_wait_seconds": None}
ARGS = {"start_date": datetime(2026, 1, 1), "schedule": None, "catchup": False, "tags": ["slurm", "test"]}
INLINE = "#!/bin/bash\necho inline for {{ task.task_id }}\n"

DAGS = {}
with DAG(dag_id="slurm_surface_script_files", **ARGS) as dag:
    for suffix in ("sbatch", "slurm", "bash"):
        SlurmSubmitJobOperator(
            task_id=f"file_{suffix}",
            job={**JOB, "name": f"surface-{suffix}"},
            script=f"train_step.{suffix}",
            deferrable=False,
            **WAIT,
            **CLUSTER,
        )
    SlurmSubmitJobOperator(
        task_id="explicit_path",
        job={**JOB, "name": "surface-script-path"},
        script_path="train_step_script.tmpl",
        deferrable=False,
        **WAIT,
        **CLUSTER,
    )
    SlurmSubmitJobOperator.partial(
        task_id="mapped",
        job={**JOB, "name": "surface-mapped"},
        deferrable=False,
        **WAIT,
        **CLUSTER,
    ).expand(script=["train_step.sbatch", INLINE])
DAGS["script_files"] = dag

with DAG(dag_id="slurm_surface_script_from_conf", **ARGS) as dag:
    SlurmSubmitJobOperator(
        task_id="from_conf",
        job={**JOB, "name": "surface-from-conf"},
        script="{{ dag_run.conf.get('script', '') }}",
        deferrable=False,
        retries=0,
        **WAIT,
        **CLUSTER,
    )
DAGS["script_from_conf"] = dag

JOB_ID = "{{ dag_run.conf['job_id'] }}"
with DAG(dag_id="slurm_surface_no_xcom", default_args={"do_xcom_push": False}, **ARGS) as dag:
    SlurmSubmitJobOperator(
        task_id="submit_sync",
        job={**JOB, "name": "no-xcom-sync"},
        script=INLINE,
        deferrable=False,
        **{**WAIT, "accounting_wait_seconds": 5},
        **CLUSTER,
    )
    SlurmSubmitJobOperator(
        task_id="submit_deferred",
        job={**JOB, "name": "no-xcom-deferred"},
        script=INLINE,
        deferrable=True,
        **WAIT,
        **CLUSTER,
    )
    submit_only = SlurmSubmitJobOperator(
        task_id="submit_only",
        job={**JOB, "name": "no-xcom-submit-only"},
        script=INLINE,
        wait_for_completion=False,
        **CLUSTER,
    )
    SlurmJobSensor(task_id="sensor_poke", job_id=JOB_ID, poke_interval=POLL, timeout=120, **CLUSTER)
    SlurmJobSensor(
        task_id="sensor_deferred", job_id=JOB_ID, poke_interval=POLL, timeout=120, deferrable=True, **CLUSTER
    )
    SlurmGetJobOperator(task_id="get", job_id=JOB_ID, **CLUSTER)
    # Its own jobs: the account the calls run as is learned from a job submitted through the connection.
    submit_only >> SlurmListJobsOperator(task_id="list", **CLUSTER)
    SlurmCancelJobOperator(task_id="cancel", job_id=JOB_ID, **CLUSTER)
DAGS["no_xcom"] = dag

with DAG(dag_id="slurm_surface_list_jobs", **ARGS) as dag:
    # As a user would: nothing configured (no slurm_user), a job submitted, then the listings.
    mine = SlurmSubmitJobOperator(
        task_id="submit",
        job={**JOB, "name": "mine", "hold": True},
        script="#!/bin/bash\necho mine\n",
        wait_for_completion=False,
        **CLUSTER,
    )
    mine >> [
        SlurmListJobsOperator(task_id="own", **CLUSTER),
        SlurmListJobsOperator(task_id="own_history", history=True, **CLUSTER),
        SlurmListJobsOperator(task_id="everyone", all_users=True, **CLUSTER),
        SlurmListJobsOperator(task_id="everyone_limited", all_users=True, limit="{{ 2 }}", **CLUSTER),
    ]
DAGS["list_jobs"] = dag
