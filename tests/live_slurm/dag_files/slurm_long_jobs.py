"""DAGs of the ``slurm`` suite for long jobs: requeue, preemption, jobs that can never start, pending_timeout.

Everything comes from the environment at parse time (``SLURMAPI_*``, as in ``slurm_live_dags.py``);
``SLURMAPI_LONG_NAME`` names the job (the test finds it by that name to requeue or preempt it),
``SLURMAPI_LONG_PARTITION`` its partition, ``SLURMAPI_LONG_REQUEUE`` its ``requeue`` flag.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator

if AIRFLOW_V_3_0_PLUS:
    from airflow.sdk import DAG
else:  # pragma: no cover
    from airflow import DAG

CLUSTER = {
    "project_id": os.environ.get("SLURMAPI_PROJECT") or None,
    "region": os.environ.get("SLURMAPI_REGION", "us-central1"),
    "cluster_id": os.environ.get("SLURMAPI_CLUSTER_ID", "demo-cluster"),
    "api_version": os.environ.get("SLURMAPI_API_VERSION", "v0.0.42"),
}
WORKDIR = os.environ.get("SLURMAPI_WORKDIR", "/tmp")
DEFERRABLE = os.environ.get("SLURMAPI_DEFERRABLE", "true").lower() != "false"
POLL = float(os.environ.get("SLURMAPI_POLL_INTERVAL", "1"))
NAME = os.environ.get("SLURMAPI_LONG_NAME", "long-job")
PARTITION = os.environ.get("SLURMAPI_LONG_PARTITION", "debug")
REQUEUE = os.environ.get("SLURMAPI_LONG_REQUEUE", "true").lower() != "false"
SECONDS = int(os.environ.get("SLURMAPI_LONG_SECONDS", "20"))
DEFAULTS = {"start_date": datetime(2026, 1, 1), "schedule": None, "catchup": False, "tags": ["slurm", "test"]}
COMMON = {**CLUSTER, "deferrable": DEFERRABLE, "poll_interval": POLL, "accounting_wait_seconds": None}


def _job(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "partition": PARTITION,
        "current_working_directory": WORKDIR,
        "environment": ["PATH=/usr/local/bin:/usr/bin:/bin"],
        "time_limit": 10,
        **fields,
    }


DAGS: dict[str, Any] = {}

# A job that runs SECONDS, to be requeued (by an admin, a preemption, a node failure) while it runs.
with DAG(dag_id="slurm_long_requeue", **DEFAULTS) as _dag:
    SlurmSubmitJobOperator(
        task_id="job",
        job=_job(NAME, requeue=REQUEUE, minimum_cpus=2 if PARTITION == "low" else 1),
        script=f"#!/bin/bash\necho run $SLURM_RESTART_COUNT\nsleep {SECONDS}\n",
        **COMMON,
    )
DAGS["requeue"] = _dag

# "first" fails; "job" depends on it with afterok, so it can never start (DependencyNeverSatisfied).
with DAG(dag_id="slurm_long_never_starts", **DEFAULTS) as _dag:
    _first = SlurmSubmitJobOperator(
        task_id="first",
        job=_job(f"{NAME}-first"),
        script="#!/bin/bash\nsleep 3\nexit 1\n",
        wait_for_completion=False,
        **COMMON,
    )
    _after = SlurmSubmitJobOperator(
        task_id="job",
        job=_job(NAME, dependency="afterok:{{ ti.xcom_pull(task_ids='first') }}"),
        script="#!/bin/bash\ntrue\n",
        # Only a bound for a provider that would wait for ever: the task fails long before.
        execution_timeout=timedelta(minutes=6),
        **COMMON,
    )
    _first >> _after
DAGS["never_starts"] = _dag

# A held job (JobHeldUser) never leaves PENDING: pending_timeout cancels it and fails the try.
with DAG(dag_id="slurm_long_pending_timeout", **DEFAULTS) as _dag:
    SlurmSubmitJobOperator(
        task_id="job",
        job=_job(NAME, hold=True),
        script="#!/bin/bash\ntrue\n",
        pending_timeout=float(os.environ.get("SLURMAPI_LONG_PENDING_TIMEOUT", "15")),
        **COMMON,
    )
DAGS["pending_timeout"] = _dag
