"""Scenario DAGs for the tests: one DAG per way a Slurm job can end.

The cluster and the wait mode come from the environment at parse time (``SLURMAPI_*``), so the same
DAGs run against the emulator and, through the gateway, against real Slurm.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator
from tests.dag_runs.dag_env import DAG, read_dag_env

ENV = read_dag_env()
CLUSTER, PARTITION, WORKDIR = ENV.cluster, ENV.partition, ENV.workdir
DEFERRABLE, POLL = ENV.deferrable, ENV.poll
GRACE = float(os.environ.get("SLURMAPI_MISSING_GRACE", "60"))
# Only passed when set, so the DAGs also parse with providers that predate the argument.
OUTAGE = {"outage_tolerance_seconds": float(v)} if (v := os.environ.get("SLURMAPI_OUTAGE_TOLERANCE")) else {}

SCENARIOS: dict[str, dict[str, Any]] = {
    "completes": {"script": "#!/bin/bash\necho hello from $SLURM_JOB_ID\nsleep 1\n"},
    "exit3": {"script": "#!/bin/bash\necho failing\nexit 3\n"},
    "sigkill": {"script": "#!/bin/bash\nkill -9 $$\n"},
    "timeout": {"script": "#!/bin/bash\nsleep 600\n", "job": {"time_limit": 1}},
    "held": {"script": "#!/bin/bash\necho held\n", "job": {"hold": True}},
    "bad_partition": {"script": "#!/bin/bash\necho x\n", "job": {"partition": "no-such-partition"}},
    "defaults_filled": {
        "script": "#!/bin/bash\necho x\n",
        "job": {"current_working_directory": None, "environment": None},
    },
    "long": {"script": "#!/bin/bash\nsleep 600\n"},
    "script_file": {"script": "train_step.sh"},
    "completes_slowly": {"script": "#!/bin/bash\necho working\nsleep 6\necho done\n"},
    # Runs until a file named "release" appears in its working directory (the test creates it).
    "until_released": {"script": "#!/bin/bash\nwhile [ ! -e release ]; do sleep 0.2; done\necho released\n"},
}

DAGS: dict[str, Any] = {}
for _name, _scenario in SCENARIOS.items():
    with DAG(
        dag_id=f"slurm_scenario_{_name}",
        start_date=datetime(2026, 1, 1),
        schedule=None,
        catchup=False,
        tags=["slurm", "test"],
    ) as _dag:
        SlurmSubmitJobOperator(
            task_id="job",
            job={
                "name": f"scenario-{_name}",
                "partition": PARTITION,
                "current_working_directory": WORKDIR,
                "environment": ["PATH=/usr/local/bin:/usr/bin:/bin"],
                "time_limit": 5,
                **_scenario.get("job", {}),
            },
            script=_scenario["script"],
            deferrable=DEFERRABLE,
            poll_interval=POLL,
            missing_grace_seconds=GRACE,
            **OUTAGE,
            execution_timeout=timedelta(minutes=10),
            **CLUSTER,
        )
    DAGS[_name] = _dag
