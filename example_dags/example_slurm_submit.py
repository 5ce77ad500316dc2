"""Submit a training job to a Slurm training cluster and wait for it without holding a worker slot.

The cluster comes from the environment (defaults suit the local ``slurmapi-emulator``):
``SLURMAPI_PROJECT``, ``SLURMAPI_REGION``, ``SLURMAPI_CLUSTER_ID``, ``SLURMAPI_PARTITION``, and the
Airflow connection ``google_cloud_default`` (its extra ``api_endpoint`` points at the emulator).

Run it end to end: ``python example_dags/example_slurm_submit.py`` (see the README's ``make demo``).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator

try:  # Airflow 3: the Task SDK
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.10 and 2.11
    from airflow import DAG

# [START howto_cluster_arguments]
CLUSTER = {
    "project_id": os.environ.get("SLURMAPI_PROJECT") or None,
    "region": os.environ.get("SLURMAPI_REGION", "us-central1"),
    "cluster_id": os.environ.get("SLURMAPI_CLUSTER_ID", "demo-cluster"),
}
PARTITION = os.environ.get("SLURMAPI_PARTITION", "a3")
# [END howto_cluster_arguments]
DEFERRABLE = os.environ.get("SLURMAPI_DEFERRABLE", "true").lower() != "false"

# The #SBATCH lines are read as sbatch reads them (sbatch_directives=True, the default); a field also
# set in job= keeps the job= value.
TRAIN_SCRIPT = """#!/bin/bash
#SBATCH --gpus-per-node=8
#SBATCH --time=12:00:00
# A stand-in for `srun python train.py`: prints what Slurm gave the job.
echo "training {{ params.model }} as Slurm job $SLURM_JOB_ID on $(hostname)"
for epoch in 1 2 3; do echo "epoch $epoch"; sleep {{ params.epoch_seconds }}; done
echo "done"
"""

with DAG(
    dag_id="example_slurm_submit",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    catchup=False,
    params={"model": "llama-mini", "epoch_seconds": 1},
    tags=["slurm", "example"],
) as dag:
    # [START howto_operator_slurm_submit]
    train = SlurmSubmitJobOperator(
        task_id="train",
        job={
            "name": "train-{{ params.model }}",
            "partition": PARTITION,
            "current_working_directory": os.environ.get("SLURMAPI_WORKDIR", "/tmp"),
            "environment": {"PATH": "/usr/local/bin:/usr/bin:/bin", "MODEL": "{{ params.model }}"},
        },
        script=TRAIN_SCRIPT,
        deferrable=DEFERRABLE,
        poll_interval=float(os.environ.get("SLURMAPI_POLL_INTERVAL", "2")),
        execution_timeout=timedelta(hours=13),
        **CLUSTER,
    )
    # [END howto_operator_slurm_submit]


if __name__ == "__main__":
    # Exit non-zero unless the run succeeded, so scripts (make demo) can tell.
    raise SystemExit(0 if dag.test().state == "success" else 1)
