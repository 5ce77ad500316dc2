"""The script as the user wrote it, in each form, reaches Slurm byte for byte: every job writes the
SHA-256 of the script its node runs (``$0``, the copy Slurm stored) to ``bytes-<job id>.txt`` in its
working directory, and the tests compare it with the bytes they expect (:func:`expected`).

The cluster and the wait mode come from the environment at parse time (``SLURMAPI_*``). The two
``crlf_*`` tasks read files the tests write (a file with DOS line breaks would not survive git's
line-ending settings): parsed without them, the tasks fail when they run, as a missing file does.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator

if AIRFLOW_V_3_0_PLUS:
    from airflow.sdk import DAG, task
else:  # pragma: no cover
    from airflow import DAG
    from airflow.decorators import task

CLUSTER = {
    "project_id": os.environ.get("SLURMAPI_PROJECT") or None,
    "region": os.environ.get("SLURMAPI_REGION", "us-central1"),
    "cluster_id": os.environ.get("SLURMAPI_CLUSTER_ID", "demo-cluster"),
}
WORKDIR = os.environ.get("SLURMAPI_WORKDIR", "/tmp")
DEFERRABLE = os.environ.get("SLURMAPI_DEFERRABLE", "false").lower() != "false"
POLL = float(os.environ.get("SLURMAPI_POLL_INTERVAL", "1"))
JOB = {"partition": "debug", "current_working_directory": WORKDIR, "environment": {"PATH": "/usr/bin:/bin"}}
RECORD = 'sha256sum < "$0" > "bytes-$SLURM_JOB_ID.txt"\n'

# The scripts as users write them, each ending as an editor saves it.
LITERAL = "#!/bin/bash\n# A literal script, with its final newline.\n" + RECORD
TEMPLATED = "#!/bin/bash\n# epochs={{ params.epochs }} for {{ task.task_id }}\n" + RECORD
BLANK_LINE = "#!/bin/bash\n# Ends with a blank line.\n" + RECORD + "\n"
RETURNED = "#!/bin/bash\n# Returned by a @task.slurm function: {{ not rendered }}\n" + RECORD
MAPPED = "#!/bin/bash\n# One of a mapped task's scripts: {{ task.task_id }}\n" + RECORD
FILE = "script_bytes.sh"
CRLF_FILE = "script_bytes_crlf.sh"  # written by the tests
# A value with DOS line breaks rendered into a script (e.g. pasted into a param from Windows).
FROM_PARAM = "#!/bin/bash\n{{ params.command }}\n" + RECORD

DAGS: dict[str, Any] = {}

with DAG(
    dag_id="slurm_script_bytes",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    catchup=False,
    params={"epochs": 3, "command": "echo one\r\necho two"},
) as dag:
    common: dict[str, Any] = {"deferrable": DEFERRABLE, "poll_interval": POLL, "retries": 0, **CLUSTER}
    SlurmSubmitJobOperator(task_id="literal", script=LITERAL, job={**JOB, "name": "bytes-literal"}, **common)
    SlurmSubmitJobOperator(task_id="templated", script=TEMPLATED, job={**JOB, "name": "bytes-templated"}, **common)
    SlurmSubmitJobOperator(task_id="blank_line", script=BLANK_LINE, job={**JOB, "name": "bytes-blank"}, **common)
    SlurmSubmitJobOperator(task_id="file", script=FILE, job={**JOB, "name": "bytes-file"}, **common)
    SlurmSubmitJobOperator.partial(task_id="mapped", job={**JOB, "name": "bytes-mapped"}, **common).expand(
        script=[MAPPED]
    )
    SlurmSubmitJobOperator(task_id="crlf_file", script=CRLF_FILE, job={**JOB, "name": "bytes-crlf"}, **common)
    SlurmSubmitJobOperator(task_id="crlf_param", script=FROM_PARAM, job={**JOB, "name": "bytes-crlf-param"}, **common)

    @task.slurm(job={**JOB, "name": "bytes-returned"}, **common)
    def returned() -> str:
        return RETURNED

    @task.slurm(job={**JOB, "name": "bytes-returned-file"}, **common)
    def returned_file() -> str:
        return FILE

    @task
    def other_operator(value: str) -> str:
        """Another operator of the DAG: Airflow's rendering, which drops the final newline, stays its own."""
        return value

    returned()
    returned_file()
    other_operator("epochs={{ params.epochs }}\n")
DAGS["script_bytes"] = dag

# What each job's node must run, by task id (the emulator and real Slurm alike).
SUBMITTED = {
    "literal": LITERAL,
    "templated": TEMPLATED.replace("{{ params.epochs }}", "3").replace("{{ task.task_id }}", "templated"),
    "blank_line": BLANK_LINE,
    "mapped": MAPPED.replace("{{ task.task_id }}", "mapped"),
    "returned": RETURNED,
}
SUCCEEDS = [*SUBMITTED, "file", "returned_file"]  # and other_operator, which runs no job
