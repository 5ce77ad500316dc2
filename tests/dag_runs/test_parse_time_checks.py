"""A literal mistake in a DAG file fails the DAG's parse, naming the field, the value and the fix.

Each DAG file is written to a folder of its own and parsed by Airflow's ``DagBag``, as the dag processor
does: the mistake is an import error of that file, before any run. A templated value (``{{ ... }}``) is
only known once rendered, so it still parses and is checked when the task runs, as before.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLUSTER_ID, DAGS_FOLDER, PROJECT, REGION, run_dag

_DAG = """
from datetime import datetime

from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator

try:
    from airflow.sdk import DAG
except ImportError:
    from airflow import DAG

with DAG(dag_id="{dag_id}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, params={{"region": "us-central1-a"}}) as dag:
    SlurmSubmitJobOperator(
        task_id="job",
        project_id="{project}",
        region={region!r},
        cluster_id={cluster_id!r},
        job={job!r},
        script={script!r},
    )
"""
GOOD: dict[str, Any] = {
    "region": REGION,
    "cluster_id": CLUSTER_ID,
    "job": {"partition": "debug", "time_limit": 5},
    "script": "#!/bin/bash\necho hello\n",
}


def dag_bag(folder: Path) -> Any:
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow 2
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef]

    return DagBag(dag_folder=str(folder))


def write_dag(folder: Path, dag_id: str, **changes: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dag_id}.py"
    path.write_text(_DAG.format(dag_id=dag_id, project=PROJECT, **{**GOOD, **changes}))
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"region": "us-central1-a"},
            "region='us-central1-a' is not a Google Cloud region: give your training cluster's region, "
            "lowercase, e.g. 'us-central1'",
        ),
        (
            {"cluster_id": f"projects/{PROJECT}/locations/{REGION}/modelDevelopmentClusters/c1"},
            "is not a training cluster id: give the cluster's id as the console shows it",
        ),
        (
            {"job": {"partition": "debug", "time_limit": "soon"}},
            "job.time_limit='soon' is not a Slurm time",
        ),
        (
            {"job": {"time_limit": 0}},
            "job.time_limit=0 must be at least 1 minute (for no limit, give 'UNLIMITED')",
        ),
        (
            {"job": {"partition": "debug", "timelimit": 5}},
            "job key 'timelimit' is not a Slurm job field; did you mean 'time_limit'?",
        ),
        (
            {"job": {"partition": "debug", "time_limit": {"set": True, "numbr": 5}}},
            "job key 'time_limit.numbr' (job.time_limit.numbr) is not a Slurm job field; did you mean "
            "'time_limit.number'?",
        ),
        (
            {"script": "python train.py"},
            "script='python train.py' is one line that does not start with '#!', so it is neither a batch "
            "script nor a script file",
        ),
    ],
    ids=[
        "zone-for-region",
        "resource-name-for-cluster-id",
        "time-limit-word",
        "time-limit-zero",
        "job-key-typo",
        "nested-job-key-typo",
        "one-line-script",
    ],
)
def test_a_literal_mistake_is_an_import_error_of_the_dag_file(
    changes: dict[str, Any], message: str, tmp_path: Path
) -> None:
    path = write_dag(tmp_path / "dags", "literal_mistake", **changes)
    bag = dag_bag(tmp_path / "dags")
    assert bag.dag_ids == []
    assert list(bag.import_errors) == [str(path)]
    assert message in bag.import_errors[str(path)]


def test_the_same_dag_without_the_mistake_parses(tmp_path: Path) -> None:
    """The control: the file of the cases above, as given, is a DAG (so each import error is its mistake)."""
    write_dag(tmp_path / "dags", "no_mistake")
    bag = dag_bag(tmp_path / "dags")
    assert bag.import_errors == {}
    task = bag.dags["no_mistake"].get_task("job")
    assert (task.region, task.cluster_id, task.job["time_limit"]) == (REGION, CLUSTER_ID, 5)


def test_templated_values_parse_and_are_checked_when_the_task_runs(
    airflow_db: Any, gcp_connection: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    # in the DAG folder of this Airflow home (its DAG bundle): dag.test() runs only a DAG of a known bundle
    path = write_dag(
        DAGS_FOLDER,
        "parse_time_templated",
        region="{{ params.region }}",
        cluster_id="{{ var.value.get('slurm_cluster', '" + CLUSTER_ID + "') }}",
        job={"partition": "debug", "time_limit": "{{ params.get('minutes', 5) }}"},
        script="{{ params.get('script', '#!/bin/bash') }}",
    )
    try:
        bag = dag_bag(path)
        assert bag.import_errors == {} and "parse_time_templated" in bag.dag_ids
        gcp_connection.reset_calls()
        # dag.test() runs the file's DAG object, as the other DAG-run tests do: the file the bag parsed
        state, tasks = run_dag(runpy.run_path(str(path), run_name="dagfile_parse_time_templated")["dag"])
    finally:
        path.unlink()
    assert (state, tasks) == ("failed", {"job": "failed"})
    # the rendered region is the zone of the parse-time case: the same message, when the task runs, before any call
    assert "region='us-central1-a' is not a Google Cloud region" in "".join(capfd.readouterr())
    assert gcp_connection.calls()["total"] == 0
