"""Every example DAG imports cleanly and runs green with dag.test() against the emulator, sync and deferrable."""

from __future__ import annotations

import ast
import importlib.util
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DAGS_FOLDER, REPO, load_dag, run_dag


def _demo_module() -> Any:
    spec = importlib.util.spec_from_file_location("slurmapi_demo", REPO / "scripts" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The demo's own test of a clean log: ERROR/CRITICAL lines and tracebacks.
log_problems = _demo_module().log_problems


@pytest.fixture(autouse=True)
def _no_handlers_on_closed_streams() -> None:
    """Airflow 2.11's ``dag.test()`` adds a log handler on the ``sys.stdout`` of the test that calls it;
    pytest closes that capture after the test, and every later write through it would print a
    "--- Logging error ---" traceback into this test's output. Not the provider's: drop them."""
    loggers = [logging.getLogger(), *logging.root.manager.loggerDict.values()]
    for logger in loggers:
        for handler in list(getattr(logger, "handlers", ())):
            if isinstance(handler, logging.StreamHandler) and getattr(handler.stream, "closed", False):
                logger.removeHandler(handler)


def _around_first_problem(logs: str) -> str:
    first = log_problems(logs)[0]
    start = logs.index(first)
    return logs[max(0, start - 500) : start + 2500]


EXAMPLES = sorted(p.name for p in (REPO / "example_dags").glob("example_*.py"))


@pytest.mark.parametrize("file_name", EXAMPLES)
def test_example_dag_imports_only_public_names(file_name: str) -> None:
    """Users copy the example DAGs: they import nothing private (no ``_compat``), only what a DAG of
    theirs may import, on Airflow 2 and 3 alike (the runs below run them on both)."""
    tree = ast.parse((REPO / "example_dags" / file_name).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or "", *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            assert not any(part.startswith("_") and part != "__future__" for part in name.split(".")), (
                f"{file_name} line {node.lineno} imports the private name {name}"
            )


def test_readme_example_builds_its_dag_on_this_airflow(tmp_path: Path) -> None:
    """The README's one example is a DAG file as it stands, on Airflow 2 and 3 alike (this file runs on
    both), and uses no name that this Airflow deprecates."""
    import runpy
    import warnings

    readme = (REPO / "README.md").read_text()
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    dag_file = tmp_path / "readme_example.py"
    dag_file.write_text(code)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        namespace = runpy.run_path(str(dag_file), run_name="readme_example")
    ours = [w for w in caught if w.filename == str(dag_file)]
    assert not ours, [str(w.message) for w in ours]
    dag = namespace["dag"]
    assert dag.dag_id == "retrain"
    assert dag.get_task("train").job["partition"] == "a3"


def test_example_dags_parse_without_errors(airflow_db: Any) -> None:
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow 2.11
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef]

    bag = DagBag(dag_folder=str(DAGS_FOLDER))
    assert bag.import_errors == {}
    assert {"example_slurm_submit", "example_slurm_sensor", "example_slurm_cancel"} <= set(bag.dag_ids)


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "sync"])
@pytest.mark.parametrize("file_name", EXAMPLES)
def test_example_dag_runs_green(
    file_name: str,
    deferrable: bool,
    airflow_db: Any,
    gcp_connection: Any,
    monkeypatch: Any,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(deferrable).lower())
    dag = load_dag(file_name)
    with caplog.at_level(logging.INFO):
        state, tasks = run_dag(dag)
    assert state == "success", tasks
    errors = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, "a green run logged errors"
    logs = "".join(capfd.readouterr()) + caplog.text
    assert not log_problems(logs), "a green run logged errors or a traceback:\n" + _around_first_problem(logs)
    assert set(tasks.values()) == {"success"}
    # One record per job; an array's tasks are counted as their array (its own record).
    jobs = [
        job
        for job in gcp_connection.jobs()
        if f"dag={dag.dag_id}" in (job.get("comment") or "") and job.get("array_job_id") in (None, job["job_id"])
    ]
    assert jobs, "the DAG's job carries its task-instance tag in its comment"
    if dag.dag_id == "example_slurm_cancel":
        assert [job["state"] for job in jobs] == ["CANCELLED"]
    else:
        assert {job["state"] for job in jobs} == {"COMPLETED"}
        assert len(jobs) == len({job["comment"] for job in jobs}), "one job per task instance"


def test_make_demo_runs_clean(tmp_path: Path) -> None:
    """``make demo`` end to end (its own emulator and Airflow home): green, no error line, no traceback."""
    env = {**os.environ, "SLURMAPI_DEMO_DIR": str(tmp_path)}
    for name in ("AIRFLOW_HOME", "AIRFLOW__CORE__DAGS_FOLDER", "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"):
        env.pop(name, None)  # the demo sets its own
    run = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "demo.py")], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "SUCCESS" in run.stdout
    log = (tmp_path / "dag-test.log").read_text()
    assert "Slurm job" in log, "the demo's log holds the run"
    assert not log_problems(log), log_problems(log)
    assert not log_problems(run.stdout + run.stderr)
    assert "slurmapi_tag_secret" not in log, "the demo sets its own tag key: no Variable created, no wait"
