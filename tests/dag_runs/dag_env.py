"""What the test DAG files read from the environment at parse time (``SLURMAPI_*``).

The same DAGs run against the emulator and, through the gateway, against real Slurm: the tests set
the cluster and the wait mode in the environment and parse the file again. So the values are read
on each call, never cached in this module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS

if AIRFLOW_V_3_0_PLUS:
    from airflow.sdk import DAG
else:  # pragma: no cover
    from airflow import DAG

__all__ = ["DAG", "DagEnv", "read_dag_env"]


@dataclass(frozen=True)
class DagEnv:
    cluster: dict[str, Any]
    partition: str
    workdir: str
    deferrable: bool
    poll: float


def read_dag_env() -> DagEnv:
    return DagEnv(
        cluster={
            "project_id": os.environ.get("SLURMAPI_PROJECT") or None,
            "region": os.environ.get("SLURMAPI_REGION", "us-central1"),
            "cluster_id": os.environ.get("SLURMAPI_CLUSTER_ID", "demo-cluster"),
            "api_version": os.environ.get("SLURMAPI_API_VERSION", "v0.0.42"),
        },
        partition=os.environ.get("SLURMAPI_PARTITION", "debug"),
        workdir=os.environ.get("SLURMAPI_WORKDIR", "/tmp"),
        deferrable=os.environ.get("SLURMAPI_DEFERRABLE", "true").lower() != "false",
        poll=float(os.environ.get("SLURMAPI_POLL_INTERVAL", "1")),
    )
