"""Job array DAGs for the tests: every task completes, one task fails, fail-fast, and a sensor.

The cluster and the wait mode come from the environment at parse time (``SLURMAPI_*``), so the same
DAGs run against the emulator and, through the gateway, against real Slurm.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator
from airflow_provider_slurmapi.sensors.slurm import SlurmJobSensor
from tests.dag_runs.dag_env import DAG, read_dag_env

ENV = read_dag_env()
CLUSTER, PARTITION, WORKDIR = ENV.cluster, ENV.partition, ENV.workdir
DEFERRABLE, POLL = ENV.deferrable, ENV.poll
WATCH_JOB_ID = os.environ.get("SLURMAPI_WATCH_JOB_ID", "1")

# Task 2 fails with exit code 3; task 0 of "fail_fast" fails at once while the others would run long.
SCENARIOS: dict[str, dict[str, Any]] = {
    "completes": {"array": "0-3%2", "script": "#!/bin/bash\necho task $SLURM_ARRAY_TASK_ID\nsleep 1\n"},
    "one_fails": {
        "array": "0-3%2",
        "script": '#!/bin/bash\nsleep 1\nif [ "$SLURM_ARRAY_TASK_ID" = 2 ]; then exit 3; fi\n',
    },
    "sbatch": {  # the array comes from the script's own #SBATCH line
        "array": None,
        "script": "#!/bin/bash\n#SBATCH --array=0-2%2\necho task $SLURM_ARRAY_TASK_ID\nsleep 1\n",
    },
    "fail_fast": {
        "array": "0-5%2",
        "fail_fast": True,
        "script": '#!/bin/bash\nif [ "$SLURM_ARRAY_TASK_ID" = 0 ]; then sleep 1; exit 4; fi\nsleep 120\n',
    },
}

DAGS: dict[str, Any] = {}
for _name, _scenario in SCENARIOS.items():
    with DAG(dag_id=f"slurm_array_{_name}", start_date=datetime(2026, 1, 1), schedule=None, catchup=False) as _dag:
        SlurmSubmitJobOperator(
            task_id="job",
            job={
                "name": f"array-{_name}",
                "partition": PARTITION,
                "current_working_directory": WORKDIR,
                "environment": ["PATH=/usr/local/bin:/usr/bin:/bin"],
                "standard_output": f"{WORKDIR}/array-{_name}-%A_%a.out",
                "time_limit": 5,
                **({"array": _scenario["array"]} if _scenario["array"] else {}),
            },
            script=_scenario["script"],
            deferrable=DEFERRABLE,
            poll_interval=POLL,
            array_fail_fast=_scenario.get("fail_fast", False),
            execution_timeout=timedelta(minutes=5),
            **CLUSTER,
        )
    DAGS[_name] = _dag

with DAG(dag_id="slurm_array_sensor", start_date=datetime(2026, 1, 1), schedule=None, catchup=False) as _dag:
    SlurmJobSensor(
        task_id="sense",
        job_id=WATCH_JOB_ID,
        deferrable=DEFERRABLE,
        poke_interval=POLL,
        timeout=300,
        array_fail_fast=os.environ.get("SLURMAPI_ARRAY_FAIL_FAST", "false") == "true",
        **CLUSTER,
    )
DAGS["sensor"] = _dag
