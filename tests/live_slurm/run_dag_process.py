"""Run one DAG of a DAG file with ``dag.test()`` in this process and print its outcome as one JSON line.

Used by the ``slurm`` suite to run a long scenario (the 1-minute time limit) in the background, in
its own Airflow home and a copy of the migrated database, while the other tests run:

    python -m tests.live_slurm.run_dag_process DAG_FILE DAG_KEY
"""

from __future__ import annotations

import json
import runpy
import sys


def main(dag_file: str, dag_key: str) -> int:
    namespace = runpy.run_path(dag_file, run_name="dagfile_background")
    dag = namespace["DAGS"][dag_key]
    run = dag.test()
    from airflow.utils.session import create_session

    with create_session() as session:
        tasks = {ti.task_id: str(ti.state) for ti in run.get_task_instances(session=session)}
    sys.stdout.flush()
    print(
        "DAG-RESULT "
        + json.dumps({"dag_id": dag.dag_id, "run_id": run.run_id, "state": str(run.state), "tasks": tasks})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
