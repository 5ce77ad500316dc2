"""DAGs for hostile input: cluster arguments and job ids rendered from ``dag_run.conf``, and ``.sh`` names.

``DAGS["conf_submit"]`` and ``DAGS["conf_sensor"]`` take region, project, cluster and job id from the
run's conf, as a DAG whose runs anyone may trigger would. ``DAGS["sh_fields"]`` holds a job named like
a script file, an inline script whose last line runs ``run.sh``, a script file, and a mapped task
mixing both kinds of script.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
from airflow_provider_slurmapi.operators.slurm import SlurmCancelJobOperator, SlurmSubmitJobOperator
from airflow_provider_slurmapi.sensors.slurm import SlurmJobSensor

if AIRFLOW_V_3_0_PLUS:
    from airflow.sdk import DAG
else:  # pragma: no cover
    from airflow import DAG

CLUSTER_ID = os.environ.get("SLURMAPI_CLUSTER_ID", "demo-cluster")
FROM_CONF = {
    "region": "{{ dag_run.conf.get('region', 'us-central1') }}",
    "project_id": "{{ dag_run.conf.get('project_id', '') }}",
    "cluster_id": f"{{{{ dag_run.conf.get('cluster_id', '{CLUSTER_ID}') }}}}",
}
JOB = {
    "partition": os.environ.get("SLURMAPI_PARTITION", "debug"),
    "current_working_directory": os.environ.get("SLURMAPI_WORKDIR", "/tmp"),
    "environment": {"PATH": "/usr/local/bin:/usr/bin:/bin"},
    "time_limit": 5,
}
INLINE_ENDING_IN_SH = "#!/bin/bash\necho inline for {{ task.task_id }}\n: run.sh"
POLL = float(os.environ.get("SLURMAPI_POLL_INTERVAL", "1"))
ARGS = {"start_date": datetime(2026, 1, 1), "schedule": None, "catchup": False, "tags": ["slurm", "test"]}

DAGS = {}
with DAG(dag_id="slurm_hostile_conf_submit", **ARGS) as dag:
    SlurmSubmitJobOperator(
        task_id="submit",
        job={**JOB, "name": "from-conf"},
        script="#!/bin/bash\necho should never run\n",
        wait_for_completion=False,
        execution_timeout=timedelta(seconds=30),
        **FROM_CONF,
    )
DAGS["conf_submit"] = dag

with DAG(dag_id="slurm_hostile_conf_sensor", **ARGS) as dag:
    SlurmJobSensor(
        task_id="sensor",
        job_id="{{ dag_run.conf.get('job_id', '1') }}",
        mode="poke",
        poke_interval=POLL,
        timeout=20,
        execution_timeout=timedelta(seconds=30),
        **FROM_CONF,
    )
DAGS["conf_sensor"] = dag

with DAG(dag_id="slurm_hostile_sh_fields", **ARGS) as dag:
    SlurmSubmitJobOperator(
        task_id="named_like_a_file",
        job={**JOB, "name": "train_step.sh"},
        script=INLINE_ENDING_IN_SH,
        poll_interval=POLL,
        deferrable=False,
        execution_timeout=timedelta(minutes=2),
        cluster_id=CLUSTER_ID,
        region="us-central1",
    )
    SlurmSubmitJobOperator(
        task_id="script_file",
        job={**JOB, "name": "sh-script-file"},
        script="train_step.sh",
        poll_interval=POLL,
        deferrable=False,
        execution_timeout=timedelta(minutes=2),
        cluster_id=CLUSTER_ID,
        region="us-central1",
    )
    SlurmSubmitJobOperator.partial(
        task_id="mapped",
        job={**JOB, "name": "sh-mapped"},
        poll_interval=POLL,
        deferrable=False,
        execution_timeout=timedelta(minutes=2),
        cluster_id=CLUSTER_ID,
        region="us-central1",
    ).expand(script=["train_step.sh", INLINE_ENDING_IN_SH])
DAGS["sh_fields"] = dag

with DAG(dag_id="slurm_hostile_env_secret", **ARGS) as dag:
    SlurmSubmitJobOperator(
        task_id="submit",
        job={
            **JOB,
            "name": "env-secret",
            "environment": [
                "PATH=/bin",
                "API_TOKEN={{ dag_run.conf.get('token', '') }}",
                "{{ dag_run.conf.get('token', '') }}",
            ],
        },
        script="#!/bin/bash\necho should never run\n",
        execution_timeout=timedelta(seconds=30),
        cluster_id=CLUSTER_ID,
        region="us-central1",
    )
DAGS["env_secret"] = dag

with DAG(dag_id="slurm_hostile_signal", **ARGS) as dag:
    SlurmCancelJobOperator(
        task_id="signal",
        job_id="{{ dag_run.conf['job_id'] }}",
        signal="SIGUSR1",
        retries=2,
        retry_delay=timedelta(seconds=0),
        cluster_id=CLUSTER_ID,
        region="us-central1",
    )
DAGS["signal"] = dag
