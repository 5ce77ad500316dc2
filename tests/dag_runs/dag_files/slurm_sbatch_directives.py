"""DAGs submitting a script that carries its own ``#SBATCH`` lines, as users bring them from ``sbatch``.

The cluster and the wait mode come from the environment at parse time (``SLURMAPI_*``), so the same
DAGs run against the emulator and, through the gateway, against real Slurm.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator
from tests.dag_runs.dag_env import DAG, read_dag_env

ENV = read_dag_env()
CLUSTER, PARTITION, WORKDIR = ENV.cluster, ENV.partition, ENV.workdir
DEFERRABLE, POLL = ENV.deferrable, ENV.poll

SCRIPT = f"""#!/bin/bash
# Train: the same file runs with `sbatch train.sh`.

#SBATCH --job-name=sbatch-directives
#SBATCH -p {PARTITION}
#SBATCH --time=0:45:00        # 45 minutes
#SBATCH -n 2 -c 1
#SBATCH --chdir={WORKDIR}
#SBATCH --output=%x-%j.out
#SBATCH --comment="nightly train"
#SBATCH --export=ALL,TRAIN_EPOCHS=3
echo "epochs=$TRAIN_EPOCHS"
#SBATCH --time=1              # after the first command: a plain comment, as for sbatch
"""

SCENARIOS: dict[str, dict[str, Any]] = {
    # The directives, and job={...} overriding one of them.
    "directives": {"job": {"time_limit": 20}},
    # sbatch_directives=False: the lines stay comments.
    "ignored": {"job": {"name": "sbatch-ignored", "current_working_directory": WORKDIR}, "sbatch_directives": False},
    # A line the REST API cannot express: the task fails before anything is sent.
    "refused": {"job": {"name": "sbatch-refused"}, "script": "#!/bin/bash\n#SBATCH -p debug\n#SBATCH --foo=1\ntrue\n"},
}

DAGS: dict[str, Any] = {}
for _name, _scenario in SCENARIOS.items():
    with DAG(
        dag_id=f"slurm_sbatch_{_name}",
        start_date=datetime(2026, 1, 1),
        schedule=None,
        catchup=False,
        tags=["slurm", "test"],
    ) as _dag:
        SlurmSubmitJobOperator(
            task_id="job",
            job=_scenario["job"],
            script=_scenario.get("script", SCRIPT),
            sbatch_directives=_scenario.get("sbatch_directives", True),
            deferrable=DEFERRABLE,
            poll_interval=POLL,
            retries=0,
            execution_timeout=timedelta(minutes=5),
            **CLUSTER,
        )
    DAGS[_name] = _dag
