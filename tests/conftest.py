"""Test harness: a throw-away Airflow home and database, the emulator, and a real Google connection.

``AIRFLOW_HOME`` is set here, before anything imports Airflow, so tests never touch a developer's
own Airflow database. The connection ``google_cloud_default`` is a real service-account key file
whose ``token_uri`` is the emulator's OAuth endpoint: google-auth signs a JWT, the emulator checks it
and issues the bearer token the envelope then checks.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="slurmapi-test-airflow-"))
atexit.register(shutil.rmtree, _AIRFLOW_HOME, ignore_errors=True)
os.environ["AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
# One secret for every process of the test deployment, as in a real one (Airflow signs with it; the
# Slurm task tags have their own key: [slurmapi] tag_secret or the Variable slurmapi_tag_secret).
os.environ.setdefault("AIRFLOW__API__SECRET_KEY", "slurmapi-tests-shared-secret")
os.environ.setdefault("AIRFLOW__WEBSERVER__SECRET_KEY", "slurmapi-tests-shared-secret")
# dag.test() syncs DAGs from the DAGs folder: it holds links to the example DAGs and the test DAGs.
DAGS_FOLDER = _AIRFLOW_HOME / "dags"
DAGS_FOLDER.mkdir()
for _dag_file in [
    *(REPO / "example_dags").glob("*.py"),
    *(REPO / "tests" / "dag_runs" / "dag_files").glob("*.[ps][yh]"),
    *(
        path
        for suffix in (".sbatch", ".slurm", ".bash", ".tmpl")
        for path in (REPO / "tests" / "dag_runs" / "dag_files").glob(f"*{suffix}")
    ),
]:
    (DAGS_FOLDER / _dag_file.name).symlink_to(_dag_file)
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(DAGS_FOLDER)
os.environ["AIRFLOW__LOGGING__LOGGING_LEVEL"] = "INFO"
os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)

# -- the suites that need root and the real Slurm lab run only when asked for -------------------------------
LAB_SUITES = ("slurm", "deployment")
LAB_SUITES_HINT = (
    "{n} live-Slurm and deployment tests not selected (they need root and the Slurm lab): "
    "run them with `make test-slurm` and `make test-deployment` (or `pytest -m slurm` / `-m deployment`); "
    "`make test` runs everything."
)


def _asked_for_lab_suites(config: pytest.Config, items: list[pytest.Item]) -> bool:
    """A marker expression (``-m``, as the Makefile gives) decides by itself; without one, the lab suites
    run only if every test the command line names needs the lab (``pytest tests/live_slurm/test_x.py``)."""
    if config.option.markexpr:
        return True
    named = [
        (config.invocation_params.dir / arg.split("::", 1)[0]).resolve()
        for arg in config.args
        if not arg.startswith("-")
    ]
    roots = {config.rootpath.resolve(), *((config.rootpath / p).resolve() for p in config.getini("testpaths"))}
    if not named or any(path in roots or any(root.is_relative_to(path) for root in roots) for path in named):
        return False
    return all(_needs_lab(item) for item in items)


def _needs_lab(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) for name in LAB_SUITES)


_LAB_DESELECTED = pytest.StashKey[int]()


@pytest.hookimpl(trylast=True)  # after the suites' own conftests have marked their tests
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """A plain ``pytest`` (a laptop, no root, no lab) deselects the live-Slurm and deployment suites."""
    if _asked_for_lab_suites(config, items):
        return
    deselected = [item for item in items if _needs_lab(item)]
    if deselected:
        items[:] = [item for item in items if not _needs_lab(item)]
        config.hook.pytest_deselected(items=deselected)
        config.stash[_LAB_DESELECTED] = len(deselected)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker tells the controller how many it left out (the controller collects nothing)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["lab_deselected"] = session.config.stash.get(_LAB_DESELECTED, 0)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    count = getattr(node, "workeroutput", {}).get("lab_deselected", 0)
    node.config.stash[_LAB_DESELECTED] = max(count, node.config.stash.get(_LAB_DESELECTED, 0))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """One line saying how to run what a plain ``pytest`` left out."""
    count = config.stash.get(_LAB_DESELECTED, 0)
    if count:
        terminalreporter.write_line(LAB_SUITES_HINT.format(n=count))


PROJECT = "demo-project"
REGION = "us-central1"
CLUSTER_ID = "demo-cluster"
CLUSTER = {"project_id": PROJECT, "region": REGION, "cluster_id": CLUSTER_ID}


@pytest.fixture(autouse=True)
def _logs_follow_each_tests_capture() -> None:
    """Airflow's structlog loggers bind ``sys.stdout`` when first used and are cached: the first test
    that logs would own the stream for the whole session. Uncached, each test's capture sees its logs."""
    try:
        import structlog
    except ImportError:  # Airflow 2.11 logs through stdlib logging only
        return
    if structlog.is_configured():
        structlog.configure(cache_logger_on_first_use=False)


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A migrated metadata database in the throw-away Airflow home (``dag.test()`` needs one)."""
    result = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=300,
    )
    if result.returncode != 0:
        pytest.fail(f"airflow db migrate failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    seed_tag_key()
    return _AIRFLOW_HOME


def settled_tag_key() -> str:
    """A tag key as the provider makes one, made an hour ago: a deployment's steady state, in which a task
    reads the key once and never waits for it to settle. The first-use wave (a key made moments ago, waited
    on) is judged by ``tests/dag_runs/test_tag_key.py`` and the 3.3 deployment's scale scenario."""
    import time

    from airflow_provider_slurmapi.tag_secret import _new_key

    return _new_key(made=time.time() - 3600)


def seed_tag_key() -> None:
    """Give the test deployment's database a :func:`settled_tag_key` in the Variable the provider reads."""
    from airflow.models.variable import Variable
    from airflow.utils.session import create_session

    from airflow_provider_slurmapi.tag_secret import VARIABLE_KEY

    with create_session() as session:
        session.query(Variable).filter(Variable.key == VARIABLE_KEY).delete()
        session.add(Variable(key=VARIABLE_KEY, val=settled_tag_key()))


@pytest.fixture(scope="session")
def credentials_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("creds") / "service-account.json"


def emulator_config(credentials_file: Path, tmp_path: Path, **overrides: Any) -> Any:
    from slurmapi_emulator import EmulatorConfig

    settings: dict[str, Any] = {
        "credentials_file": credentials_file,
        "project": PROJECT,
        "workdir": tmp_path / "jobs",
        "min_job_age": 2.0,
        "minute_seconds": 2.0,
    }
    settings.update(overrides)
    (tmp_path / "jobs").mkdir(exist_ok=True)
    return EmulatorConfig(**settings)


@pytest.fixture
def emulator_factory(credentials_file: Path, tmp_path: Path) -> Iterator[Any]:
    """Start emulators with chosen settings; all are stopped (and their jobs killed) after the test."""
    from contextlib import ExitStack

    from slurmapi_emulator import run_emulator

    with ExitStack() as stack:

        def start(**overrides: Any) -> Any:
            return stack.enter_context(run_emulator(emulator_config(credentials_file, tmp_path, **overrides)))

        yield start


@pytest.fixture
def emulator(emulator_factory: Any) -> Any:
    return emulator_factory()


def connection_uri_env(emulator: Any, credentials_file: Path, **extra: Any) -> str:
    return json.dumps(
        {
            "conn_type": "google_cloud_platform",
            "extra": {"key_path": str(credentials_file), "api_endpoint": emulator.url, "project": PROJECT, **extra},
        }
    )


@pytest.fixture
def gcp_connection(emulator: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``google_cloud_default`` pointing at the emulator, with a real service-account key."""
    return point_airflow_at(emulator, credentials_file, monkeypatch)


def point_airflow_at(emulator: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Point ``google_cloud_default`` and the test DAGs' cluster settings at ``emulator``."""
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(emulator, credentials_file))
    for name, value in (
        ("SLURMAPI_PROJECT", PROJECT),
        ("SLURMAPI_REGION", REGION),
        ("SLURMAPI_CLUSTER_ID", CLUSTER_ID),
    ):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SLURMAPI_WORKDIR", str(emulator.config.workdir))
    monkeypatch.setenv("SLURMAPI_POLL_INTERVAL", "0.5")
    return emulator


def load_dag(file_name: str, dag_id: str | None = None) -> Any:
    """Parse a DAG file of the test DAGs folder now (it reads the environment at parse time)."""
    import runpy

    namespace = runpy.run_path(str(DAGS_FOLDER / file_name), run_name=f"dagfile_{Path(file_name).stem}")
    if dag_id is None:
        return namespace["dag"]
    return namespace["DAGS"][dag_id]


def run_dag(dag: Any) -> tuple[str, dict[str, str]]:
    """``dag.test()``; the run's state and each task's state.

    Airflow 2.11's ``dag.test()`` lets an ``execution_timeout`` escape as an exception where 3.x marks
    the task failed: both count as a failed run here.
    """
    from airflow_provider_slurmapi._compat import AirflowTaskTimeout

    try:
        run = dag.test()
    except AirflowTaskTimeout:
        return "failed", {}
    from airflow.utils.session import create_session

    with create_session() as session:
        states = {ti.task_id: str(ti.state) for ti in run.get_task_instances(session=session)}
    return str(run.state), states


@pytest.fixture
def lookups() -> Iterator[Callable[[str], int]]:
    """How often each host was resolved: the real resolver, counted (one connection attempt each)."""
    real, asked = socket.getaddrinfo, []

    def counted(host: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(host)
        return real(host, *args, **kwargs)

    socket.getaddrinfo = counted  # type: ignore[assignment]
    try:
        yield lambda host: asked.count(host)
    finally:
        socket.getaddrinfo = real  # type: ignore[assignment]
