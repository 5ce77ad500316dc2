"""``@task.slurm``: a TaskFlow function returns the batch script; Slurm runs it and the task waits.

The function gets its arguments like any TaskFlow task (here a value from an upstream task and a
param), so the script is plain Python string building. The decorator takes the submit operator's
keyword arguments (``job``, ``deferrable``, ``poll_interval``...). The cluster comes from the
environment (defaults suit the local ``slurmapi-emulator``), as in ``example_slurm_submit``.
"""

from __future__ import annotations

import os
from datetime import datetime

try:  # Airflow 3: the Task SDK
    from airflow.sdk import DAG, task
except ImportError:  # Airflow 2.10 and 2.11
    from airflow import DAG
    from airflow.decorators import task

CLUSTER = {
    "project_id": os.environ.get("SLURMAPI_PROJECT") or None,
    "region": os.environ.get("SLURMAPI_REGION", "us-central1"),
    "cluster_id": os.environ.get("SLURMAPI_CLUSTER_ID", "demo-cluster"),
}
PARTITION = os.environ.get("SLURMAPI_PARTITION", "a3")
DEFERRABLE = os.environ.get("SLURMAPI_DEFERRABLE", "true").lower() != "false"

with DAG(
    dag_id="example_slurm_taskflow",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    catchup=False,
    params={"model": "llama-mini", "epochs": 3},
    tags=["slurm", "example"],
) as dag:

    @task
    def pick_learning_rate() -> float:
        return 3e-4

    # [START howto_decorator_slurm]
    @task.slurm(
        job={
            "partition": PARTITION,
            "tres_per_node": "gres/gpu:8",
            "time_limit": "12:00:00",
            "current_working_directory": os.environ.get("SLURMAPI_WORKDIR", "/tmp"),
            "environment": {"PATH": "/usr/local/bin:/usr/bin:/bin"},
        },
        deferrable=DEFERRABLE,
        poll_interval=float(os.environ.get("SLURMAPI_POLL_INTERVAL", "2")),
        # Training code that emits OpenLineage events finds this task's run in OPENLINEAGE_PARENT_ID.
        openlineage_inject_parent_job_info=True,
        **CLUSTER,
    )
    def train(model: str, epochs: int, learning_rate: float) -> str:
        lines = [
            "#!/bin/bash",
            f'echo "training {model} for {epochs} epochs at lr={learning_rate} as Slurm job $SLURM_JOB_ID"',
            'echo "lineage parent: ${OPENLINEAGE_PARENT_ID:-none}"',
            *(f'echo "epoch {epoch}"; sleep 1' for epoch in range(1, int(epochs) + 1)),
            'echo "done"',
        ]
        return "\n".join(lines) + "\n"

    train(model="{{ params.model }}", epochs="{{ params.epochs }}", learning_rate=pick_learning_rate())
    # [END howto_decorator_slurm]


if __name__ == "__main__":
    raise SystemExit(0 if dag.test().state == "success" else 1)
