"""DAGs of the ``slurm`` suite beyond the submit scenarios: cancel, get, sensor.

Like ``tests/dag_runs/dag_files/slurm_scenarios.py``, everything comes from the environment at parse time
(``SLURMAPI_*``), so the suite points them at the real cluster. ``SLURMAPI_LIVE_JOB_ID`` is the job the
get and sensor DAGs look at; ``SLURMAPI_LIVE_GRACE`` their ``missing_grace_seconds``.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta
from typing import Any

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
from airflow_provider_slurmapi.operators.slurm import (
    SlurmCancelJobOperator,
    SlurmGetJobOperator,
    SlurmListJobsOperator,
    SlurmSubmitJobOperator,
)
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
    "api_version": os.environ.get("SLURMAPI_API_VERSION", "v0.0.42"),
}
PARTITION = os.environ.get("SLURMAPI_PARTITION", "debug")
WORKDIR = os.environ.get("SLURMAPI_WORKDIR", "/tmp")
DEFERRABLE = os.environ.get("SLURMAPI_DEFERRABLE", "true").lower() != "false"
POLL = float(os.environ.get("SLURMAPI_POLL_INTERVAL", "1"))
LIVE_JOB_ID = os.environ.get("SLURMAPI_LIVE_JOB_ID", "1")
GRACE = float(os.environ.get("SLURMAPI_LIVE_GRACE", "60"))
JOB_ID = "{{ ti.xcom_pull(task_ids='submit') }}"
DEFAULTS = {"start_date": datetime(2026, 1, 1), "schedule": None, "catchup": False, "tags": ["slurm", "test"]}


def _job(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "partition": PARTITION,
        "current_working_directory": WORKDIR,
        "environment": ["PATH=/usr/local/bin:/usr/bin:/bin"],
        "time_limit": 5,
        **fields,
    }


@task(task_id="wait_running")
def wait_running(job_id: str) -> str:
    """Hold the DAG until Slurm runs the job, so the cancel that follows hits a RUNNING job."""
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook

    hook = SlurmApiHook(**CLUSTER)
    deadline = time.monotonic() + 120
    while True:
        job = hook.get_job(int(job_id))
        state = job.state.value if job is not None else "unknown"
        if state == "RUNNING":
            print(f"Slurm job {job_id} is RUNNING on {job.nodes if job else '?'}")
            return state
        if state not in ("PENDING", "unknown") or time.monotonic() > deadline:
            raise RuntimeError(f"Slurm job {job_id} did not start: {state}")
        time.sleep(0.5)


DAGS: dict[str, Any] = {}

# Cancel a RUNNING job with the cancel operator; the sensor then fails with Slurm's CANCELLED.
with DAG(dag_id="slurm_live_cancel_running", **DEFAULTS) as _dag:
    _submit = SlurmSubmitJobOperator(
        task_id="submit",
        job=_job("live-cancel-running"),
        script="#!/bin/bash\necho started\nsleep 600\n",
        wait_for_completion=False,
        **CLUSTER,
    )
    _cancel = SlurmCancelJobOperator(
        task_id="cancel", job_id=JOB_ID, poll_interval=0.5, termination_timeout=60, **CLUSTER
    )
    _watch = SlurmJobSensor(
        task_id="watch", job_id=JOB_ID, deferrable=DEFERRABLE, poke_interval=POLL, timeout=120, **CLUSTER
    )
    _submit >> wait_running(_submit.output) >> _cancel >> _watch
DAGS["cancel_running"] = _dag

# Cancel a PENDING (held) job with the cancel operator.
with DAG(dag_id="slurm_live_cancel_pending", **DEFAULTS) as _dag:
    _submit = SlurmSubmitJobOperator(
        task_id="submit",
        job=_job("live-cancel-pending", hold=True),
        script="#!/bin/bash\necho never\n",
        wait_for_completion=False,
        **CLUSTER,
    )
    _cancel = SlurmCancelJobOperator(
        task_id="cancel", job_id=JOB_ID, poll_interval=0.5, termination_timeout=60, **CLUSTER
    )
    _watch = SlurmJobSensor(
        task_id="watch", job_id=JOB_ID, deferrable=DEFERRABLE, poke_interval=POLL, timeout=120, **CLUSTER
    )
    _submit >> _cancel >> _watch
DAGS["cancel_pending"] = _dag

# A sync wait killed by execution_timeout: on_kill cancels the job (running, or held and pending).
for _key, _fields, _script in (
    ("on_kill_running", {}, "#!/bin/bash\necho started\nsleep 600\n"),
    ("on_kill_pending", {"hold": True}, "#!/bin/bash\necho never\n"),
):
    with DAG(dag_id=f"slurm_live_{_key}", **DEFAULTS) as _dag:
        SlurmSubmitJobOperator(
            task_id="submit",
            job=_job(f"live-{_key.replace('_', '-')}", **_fields),
            script=_script,
            deferrable=False,
            poll_interval=POLL,
            execution_timeout=timedelta(seconds=float(os.environ.get("SLURMAPI_LIVE_KILL_AFTER", "8"))),
            **CLUSTER,
        )
    DAGS[_key] = _dag

# One job by id, from the live queue or the history.
with DAG(dag_id="slurm_live_get_job", **DEFAULTS) as _dag:
    SlurmGetJobOperator(task_id="get", job_id=LIVE_JOB_ID, **CLUSTER)
DAGS["get_job"] = _dag

# Wait for a job by id (poke or deferrable).
with DAG(dag_id="slurm_live_sensor", **DEFAULTS) as _dag:
    SlurmJobSensor(
        task_id="watch",
        job_id=LIVE_JOB_ID,
        deferrable=DEFERRABLE,
        poke_interval=POLL,
        timeout=180,
        missing_grace_seconds=GRACE,
        **CLUSTER,
    )
DAGS["sensor"] = _dag

# A dead try: try 1 dies while its job runs on (the API is out longer than outage_tolerance_seconds, and
# cancel_on_kill is off); the retry must reattach to that job, never submit a second one. Before Airflow 3.3
# there is no task state store and Airflow clears try 1's XCom: the retry finds the job by its tag only.
with DAG(dag_id="slurm_live_dead_try", **DEFAULTS) as _dag:
    SlurmSubmitJobOperator(
        task_id="job",
        job=_job("dead-try"),
        script="#!/bin/bash\nsleep 20\necho done\n",
        deferrable=False,
        poll_interval=POLL,
        outage_tolerance_seconds=4,
        cancel_on_kill=False,  # the job runs on after its try died
        accounting_wait_seconds=None,
        retries=1,
        retry_delay=timedelta(seconds=2),
        **CLUSTER,
    )
DAGS["dead_try"] = _dag

# The default listing right after a submit, as a user gets it (no slurm_user): the caller's own jobs.
with DAG(dag_id="slurm_live_list_own", **DEFAULTS) as _dag:
    _held = SlurmSubmitJobOperator(
        task_id="submit",
        job=_job("list-own", hold=True),
        script="#!/bin/bash\ntrue\n",
        wait_for_completion=False,
        **CLUSTER,
    )
    _held >> SlurmListJobsOperator(task_id="own", **CLUSTER)
DAGS["list_own"] = _dag
