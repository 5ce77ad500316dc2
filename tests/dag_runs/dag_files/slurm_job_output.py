"""DAGs for seeing inside a job: its last output on failure and its progress lines in the task log.

The cluster and the wait mode come from the environment at parse time (``SLURMAPI_*``), so the same
DAGs run against the emulator and, through the gateway, against real Slurm. Progress messages are
spaced 4 s apart while the tests poll every second, so every message is seen by several polls.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator
from tests.dag_runs.dag_env import DAG, read_dag_env

ENV = read_dag_env()
CLUSTER, PARTITION, WORKDIR = ENV.cluster, ENV.partition, ENV.workdir
DEFERRABLE, POLL = ENV.deferrable, ENV.poll
SECRET = "hunter2-not-for-logs"


def _mask_secret(context: Any) -> None:
    if AIRFLOW_V_3_0_PLUS:
        from airflow.sdk.log import mask_secret
    else:  # pragma: no cover - Airflow 2.11
        from airflow.utils.log.secrets_masker import mask_secret

    mask_secret(SECRET)


UNSET = object()  # a scenario that passes no report_output at all

SCENARIOS: dict[str, dict[str, Any]] = {
    "bash_fails": {
        "script": "#!/bin/bash\necho 'step 1 ok'\necho 'loading data' >&2\necho 'ValueError: bad shard 7' >&2\nexit 2\n"
    },
    "python_fails": {
        "script": (
            "#!/usr/bin/env python3\nimport sys\nprint('python starting', flush=True)\n"
            "print('RuntimeError: CUDA out of memory (python)', file=sys.stderr)\nsys.exit(4)\n"
        )
    },
    "progress": {
        "script": (
            '#!/bin/bash\nfor epoch in 1 2 3; do\n  slurm_progress "epoch $epoch/3 loss=0.$((6 - epoch))"\n'
            "  sleep 4\ndone\necho trained\n"
        )
    },
    "python_progress": {
        "script": (
            "#!/usr/bin/env python3\nimport os, subprocess, time\nfor step in (1, 2):\n"
            "    subprocess.run(['scontrol', 'update', f\"JobId={os.environ['SLURM_JOB_ID']}\", "
            "f'Extra=python step {step}/2'])\n    time.sleep(4)\n"
        )
    },
    "long_output": {"script": '#!/bin/bash\nfor i in $(seq 1 400); do echo "output line $i" >&2; done\nexit 1\n'},
    "sbatch": {"script": "#!/bin/bash\n#SBATCH --comment=from-sbatch\n#SBATCH --time=3\necho sbatch job >&2\nexit 5\n"},
    "sbatch_untouched": {
        "script": "#!/bin/bash\n#SBATCH --comment=from-sbatch\n#SBATCH --time=3\necho sbatch job >&2\nexit 5\n",
        "report_output": False,
    },
    "untouched": {
        "script": '#!/bin/bash\ncat "$0" > "script-copy-$SLURM_JOB_ID"\necho \'not reported\' >&2\nexit 1',
        "report_output": False,
    },
    "secret": {"script": f"#!/bin/bash\necho 'token={SECRET}' >&2\nexit 1\n", "pre_execute": _mask_secret},
    # A value Airflow masks, passed in the job's environment under a name no masker finds sensitive.
    "env_secret": {
        "script": '#!/bin/bash\necho "connecting to $DB_URI failed; API_TOKEN=$API_TOKEN" >&2\nexit 1\n',
        "environment": ["PATH=/usr/local/bin:/usr/bin:/bin", f"DB_URI={SECRET}", "API_TOKEN=tok-by-name-only"],
        "pre_execute": _mask_secret,
    },
    # Nothing configured: no report_output argument at all (the default a user gets).
    "default": {
        "script": '#!/bin/bash\ncat "$0" > "script-copy-$SLURM_JOB_ID"\necho \'not reported\' >&2\nexit 1',
        "report_output": UNSET,
    },
    # A script that sets Extra= itself: its progress needs no wrapper.
    "python_progress_plain": {
        "script": (
            "#!/usr/bin/env python3\nimport os, subprocess, time\nfor step in (1, 2):\n"
            "    subprocess.run(['scontrol', 'update', f\"JobId={os.environ['SLURM_JOB_ID']}\", "
            "f'Extra=python step {step}/2'])\n    time.sleep(4)\n"
        ),
        "report_output": UNSET,
    },
    # report_output left to the deployment's [slurmapi] report_output.
    "by_config": {
        "script": '#!/bin/bash\ncat "$0" > "script-copy-$SLURM_JOB_ID"\nexit 0\n',
        "report_output": None,
    },
}

DAGS: dict[str, Any] = {}
for _name, _scenario in SCENARIOS.items():
    with DAG(
        dag_id=f"slurm_output_{_name}",
        start_date=datetime(2026, 1, 1),
        schedule=None,
        catchup=False,
        tags=["slurm", "test"],
    ) as _dag:
        _extra = {"pre_execute": _scenario["pre_execute"]} if "pre_execute" in _scenario else {}
        SlurmSubmitJobOperator(
            task_id="job",
            job={
                "name": f"output-{_name}",
                "partition": PARTITION,
                "current_working_directory": WORKDIR,
                "environment": _scenario.get("environment", ["PATH=/usr/local/bin:/usr/bin:/bin"]),
                "time_limit": 30,
            },
            script=_scenario["script"],
            # The scenarios here are about the wrapper: on unless a scenario says otherwise.
            **(
                {}
                if _scenario.get("report_output") is UNSET
                else {"report_output": _scenario.get("report_output", True)}
            ),
            deferrable=DEFERRABLE,
            poll_interval=POLL,
            execution_timeout=timedelta(minutes=10),
            **_extra,
            **CLUSTER,
        )
    DAGS[_name] = _dag
