"""The ``slurm`` suite: every scenario through Airflow against a REAL Slurm 24.11, via the emulator's gateway.

Session fixtures: the lab (``SLURM_LAB_URL``/``SLURM_LAB_TOKEN_FILE``, else ``scripts/slurm-lab up``; if
it cannot start, the tests FAIL, they are never skipped), one gateway emulator per envelope shape
(``run_emulator(EmulatorConfig(slurmrestd=..., slurm_token_file=...))``) and ``google_cloud_default``
pointing at it. Slow waits on Slurm start in the background with the session (the 1-minute
time-limit job, the live contract script, a job left to age into the history), so they overlap the
other tests; each test that reads one waits for it itself, within a budget counted from its start.
The tests pass in any order and alone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DAGS_FOLDER, PROJECT, REGION, connection_uri_env
from tests.live_slurm.lab import API_VERSION, LAB_SCRIPT, SLURM_RELEASE, Lab, LabUnavailable, find_or_start_lab

HERE = Path(__file__).resolve().parent
# The lab's job user (scripts/slurm-lab): the user of the token the gateway sends.
JOB_USER = os.environ.get("SLURM_LAB_USER", "tester")
REPO = HERE.parents[1]
CLUSTER_ID = "slurm-lab"
GATEWAY_TOKEN = "slurm-live-static-token"
# The 1-minute time-limit run's budget from its start: ~90 s of job, the rest for a queue other users share.
TIMEOUT_RUN_BUDGET = 480
LIVE_DAG_FILE = "slurm_live_dags.py"

# The DAGs of this suite live beside it; dag.test() needs them in the DAGs folder.
_live_dags_link = DAGS_FOLDER / LIVE_DAG_FILE
if not _live_dags_link.exists():
    _live_dags_link.symlink_to(HERE / "dag_files" / LIVE_DAG_FILE)


# -- collection: mark everything here `slurm` ---------------------------------------------------------------
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.path)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.slurm)


# -- the lab and the gateways ----------------------------------------------------------------------------
@pytest.fixture(scope="session")
def lab() -> Lab:
    """The real Slurm lab; FAILS (never skips) when it cannot be started."""
    try:
        return find_or_start_lab()
    except LabUnavailable as exc:
        pytest.fail(f"The real Slurm lab is not available ({LAB_SCRIPT}): {exc}", pytrace=False)


class Gateways:
    """One gateway emulator per envelope shape, started on first use and kept for the session."""

    def __init__(self, lab: Lab, workdir: Path) -> None:
        self.lab = lab
        self.workdir = workdir
        self._stack = ExitStack()
        self._handles: dict[str, tuple[Any, Path]] = {}
        self._lock = threading.Lock()

    def get(self, envelope: str = "body") -> Any:
        return self._start(envelope)[0]

    def _start(self, envelope: str) -> tuple[Any, Path]:
        from slurmapi_emulator import EmulatorConfig, run_emulator

        with self._lock:
            if envelope not in self._handles:
                creds = self.workdir / f"service-account-{envelope}.json"
                config = EmulatorConfig(
                    slurmrestd=self.lab.url,
                    slurm_token_file=str(self.lab.token_file),
                    credentials_file=str(creds),
                    envelope=envelope,  # type: ignore[arg-type]
                    project=PROJECT,
                    tokens=[GATEWAY_TOKEN],
                    # As slurmrestd answers (rest_auth/jwt over TCP: "root"), not the token's user: the
                    # provider must tell its own jobs with nothing configured, whatever meta says.
                    meta_client_user="slurmrestd",
                )
                handle = self._stack.enter_context(run_emulator(config))
                self._handles[envelope] = (handle, creds)
            return self._handles[envelope]

    def connection(self, envelope: str = "body", **extra: str) -> str:
        """The connection as a user makes it: a key and the endpoint, nothing else (``extra``: e.g. the one
        run with ``slurm_user`` set). The lab's slurmrestd answers meta.client.user "root" whoever the
        token's user is: the provider learns the account from its own jobs."""
        handle, creds = self._start(envelope)
        return connection_uri_env(handle, creds, **extra)

    def cancel_leftovers(self) -> list[int]:
        """Cancel the jobs this session submitted that still wait or run (a failed test may leave some)."""
        left = []
        for handle, _ in list(self._handles.values()):
            for job in handle.jobs():
                record = self.lab.live(job["job_id"])
                if record is not None and not record.finished:
                    self.lab.cancel(job["job_id"])
                    left.append(job["job_id"])
        return left

    def close(self) -> None:
        try:
            self.cancel_leftovers()
        finally:
            self._stack.close()


@pytest.fixture(scope="session")
def gateways(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateways]:
    pool = Gateways(lab, tmp_path_factory.mktemp("slurm-gateways"))
    try:
        pool.get("body")
    except Exception as exc:  # the gateway is part of the harness: no gateway, no suite
        pool.close()
        pytest.fail(f"The gateway emulator in front of {lab.url} did not start: {exc!r}")
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def gateway(gateways: Gateways) -> Any:
    """The session's gateway emulator with the ``body`` (JSON string) envelope."""
    return gateways.get("body")


def airflow_env(gateways: Gateways, envelope: str = "body", **extra: str) -> dict[str, str]:
    """The environment the scenario DAGs and the hooks read: connection and cluster, fast polls."""
    env = {
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT": gateways.connection(envelope),
        "SLURMAPI_PROJECT": PROJECT,
        "SLURMAPI_REGION": REGION,
        "SLURMAPI_CLUSTER_ID": CLUSTER_ID,
        "SLURMAPI_PARTITION": "debug",
        "SLURMAPI_WORKDIR": "/tmp",
        "SLURMAPI_POLL_INTERVAL": "1",
        "SLURMAPI_MISSING_GRACE": "60",
        "SLURMAPI_API_VERSION": API_VERSION,
    }
    env.update(extra)
    return env


@pytest.fixture(autouse=True)
def slurm_env(airflow_db: Path, gateways: Gateways, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Every test here talks to the real cluster through the body-envelope gateway by default."""
    env = airflow_env(gateways)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def use_envelope(gateways: Gateways, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Any]:
    """Point ``google_cloud_default`` at the gateway of another envelope shape; returns that gateway."""

    def switch(envelope: str) -> Any:
        monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", gateways.connection(envelope))
        return gateways.get(envelope)

    return switch


@pytest.fixture(params=[True, False], ids=["deferrable", "sync"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(request.param).lower())
    return bool(request.param)


def make_hook(gateway: Any, api_version: str = API_VERSION) -> Any:
    """A sync hook of the provider on the gateway (the connection comes from the environment)."""
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook

    return SlurmApiHook(
        region=REGION,
        cluster_id=CLUSTER_ID,
        project_id=PROJECT,
        api_version=api_version,
        api_endpoint=gateway.url,
        retry_seconds=30,
    )


@contextmanager
def env_vars(values: dict[str, str]) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        for name, value in values.items():
            mp.setenv(name, value)
        yield


# -- running DAGs ------------------------------------------------------------------------------------------
@dataclass
class DagResult:
    dag_id: str
    run_id: str
    state: str
    tasks: dict[str, str]
    log: str

    def jobs(self, gateway: Any, task_id: str | None = None) -> list[int]:
        """Ids of the Slurm jobs this run submitted (read from the tag in their comment), oldest first."""
        marker = f"dag={self.dag_id} " + (f"task={task_id} " if task_id else "")
        return sorted(
            job["job_id"]
            for job in gateway.jobs()
            if marker in (job.get("comment") or "") and f" run={self.run_id} " in f" {job.get('comment')} "
        )

    def job(self, gateway: Any, task_id: str | None = None) -> int:
        ids = self.jobs(gateway, task_id)
        assert len(ids) == 1, f"expected one Slurm job for {self.dag_id}/{task_id}, found {ids}\n{self.log[-3000:]}"
        return ids[0]

    def xcom(self, task_id: str, key: str = "return_value") -> Any:
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session

        with create_session() as session:
            row = session.scalars(
                XComModel.get_many(run_id=self.run_id, key=key, task_ids=task_id, dag_ids=self.dag_id)
            ).first()
            return XComModel.deserialize_value(row) if row is not None else None


def run_dag_capture(dag: Any, capfd: pytest.CaptureFixture[str], **test_kwargs: Any) -> DagResult:
    """``dag.test()``; the run's state, each task's state and what the run printed (the task logs)."""
    import io
    import logging

    from airflow.utils.session import create_session

    # Task output reaches the captured fds; stdlib log records (e.g. dag.test()'s own "[DAG TEST] ...")
    # may go to a handler bound to an earlier stream, so they are collected here too.
    records = io.StringIO()
    handler = logging.StreamHandler(records)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    capfd.readouterr()
    try:
        run = dag.test(**test_kwargs)
    finally:
        root.removeHandler(handler)
    out = "".join(capfd.readouterr()) + "\n" + records.getvalue()
    with create_session() as session:
        states = {ti.task_id: str(ti.state) for ti in run.get_task_instances(session=session)}
    sys.stdout.write(out[-20000:])  # keep it visible in pytest's report of a failing test
    return DagResult(dag.dag_id, run.run_id, str(run.state), states, out)


# -- background work that waits on Slurm while the other tests run ------------------------------------
@pytest.fixture(scope="session", autouse=True)
def _start_background_work(request: pytest.FixtureRequest) -> None:
    """Start the slow, Slurm-bound work of the selected tests at once, so it overlaps the rest.

    Only a head start: each of these fixtures starts its work on first use anyway, and the tests that
    read the work wait for it, so no test depends on the order the tests run in.
    """
    wanted = {name for item in request.session.items for name in getattr(item, "fixturenames", ())}
    for name in ("timeout_run", "contract_transcripts", "aged_job"):
        if name in wanted:
            request.getfixturevalue(name)


class BackgroundDagRun:
    """A scenario DAG run in its own process (own Airflow home and database), started early."""

    def __init__(self, proc: subprocess.Popen[str], out_path: Path, lab: Lab | None = None) -> None:
        self.proc = proc
        self.started = time.monotonic()
        self.out_path = out_path
        self.lab = lab
        # The last answer of GET /slurm/v0.0.42/job/{id} for the run's job, kept before the purge.
        self.last_live: tuple[int, Any] | None = None
        if lab is not None:
            self._watcher = threading.Thread(target=self._watch, name="background-dag-watch", daemon=True)
            self._watcher.start()

    def job_id(self) -> int | None:
        match = re.search(r"Submitted Slurm job (\d+)", self.output())
        return int(match.group(1)) if match else None

    def _watch(self) -> None:
        """Keep the job's live record until it is final, while the live queue still has it."""
        assert self.lab is not None
        ended_at: float | None = None
        while True:
            job_id = self.job_id()
            if job_id is not None:
                try:
                    status, body = self.lab.call("GET", f"/slurm/v0.0.42/job/{job_id}")
                except Exception:
                    status, body = 0, None
                if status == 200 and isinstance(body, dict) and body.get("jobs"):
                    self.last_live = (status, body)
                    states = body["jobs"][0]["job_state"]
                    if "COMPLETING" not in states and not {"PENDING", "RUNNING"} & set(states):
                        return
            if self.proc.poll() is not None:
                ended_at = ended_at or time.monotonic()
                if time.monotonic() - ended_at > 20:
                    return
            time.sleep(1)

    def result(self, within: float) -> tuple[dict[str, Any], str]:
        """Wait for the run to end, at most ``within`` seconds after it started (whenever the caller asks)."""
        try:
            self.proc.wait(max(0.0, self.started + within - time.monotonic()))
        except subprocess.TimeoutExpired as exc:
            self.stop()
            raise AssertionError(
                f"the background DAG run did not end within {within:.0f}s of its start:\n{self.output()[-5000:]}"
            ) from exc
        out = self.output()
        match = re.search(r"^DAG-RESULT (\{.*\})$", out, re.MULTILINE)
        assert match, f"the background DAG run printed no result (exit {self.proc.returncode}):\n{out[-5000:]}"
        return json.loads(match.group(1)), out

    def output(self) -> str:
        return self.out_path.read_text(errors="replace") if self.out_path.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def start_background_dag(
    airflow_home: Path, env: dict[str, str], dag_file: str, dag_key: str, workdir: Path, lab: Lab | None = None
) -> BackgroundDagRun:
    """Run ``DAGS[dag_key]`` of ``dag_file`` with dag.test() in a subprocess on a copy of the migrated DB."""
    home = Path(tempfile.mkdtemp(prefix="slurm-bg-airflow-", dir=workdir))
    for db_file in airflow_home.glob("airflow.db*"):
        shutil.copy2(db_file, home / db_file.name)
    full_env = {
        **os.environ,
        **env,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
    }
    out_path = home / "output.txt"
    with out_path.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.live_slurm.run_dag_process", str(DAGS_FOLDER / dag_file), dag_key],
            cwd=REPO,
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    return BackgroundDagRun(proc, out_path, lab)


@pytest.fixture(scope="session")
def timeout_run(
    airflow_db: Path, gateways: Gateways, lab: Lab, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BackgroundDagRun]:
    """The ``timeout`` scenario (1-minute limit, ~90 s real time), deferrable, started on first use."""
    env = airflow_env(gateways, SLURMAPI_DEFERRABLE="true")
    workdir = tmp_path_factory.mktemp("slurm-bg")
    run = start_background_dag(airflow_db, env, "slurm_scenarios.py", "timeout", workdir, lab)
    yield run
    if run.proc.poll() is None:
        run.stop()
        job_id = run.job_id()
        if job_id is not None:
            lab.cancel(job_id)


@dataclass
class AgedJob:
    """A quick job submitted through the hook on first use, to be found in the history once it left the queue."""

    job_id: int


@pytest.fixture(scope="session")
def aged_job(gateways: Gateways, lab: Lab) -> AgedJob:
    with env_vars(airflow_env(gateways)):
        hook = make_hook(gateways.get("body"))
        result = hook.submit_job(
            {"name": "slurm-live-aged", "partition": "debug", "current_working_directory": "/tmp"},
            "#!/bin/bash\necho aged $SLURM_JOB_ID\n",
        )
    return AgedJob(result.job_id)


@dataclass
class ContractRuns:
    """The live contract script's two runs in background threads, keyed ``slurm`` and ``emulator``."""

    futures: dict[str, Future[Any]]
    started: float = field(default_factory=time.monotonic)

    def transcript(self, name: str, within: float) -> Any:
        """The run's transcript, waited for at most ``within`` seconds after it started; its failure is raised."""
        try:
            return self.futures[name].result(timeout=max(0.0, self.started + within - time.monotonic()))
        except FutureTimeout:
            raise AssertionError(
                f"the contract script on {name} did not end within {within:.0f}s of its start"
            ) from None


@pytest.fixture(scope="session")
def contract_transcripts(
    gateways: Gateways, lab: Lab, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ContractRuns]:
    """The live contract script, started on first use against a plain emulator and against real Slurm."""
    from slurmapi_emulator import EmulatorConfig, run_emulator

    from tests.live_slurm import test_contract_live as contract

    workdir = tmp_path_factory.mktemp("slurm-contract-emulator")
    with run_emulator(
        EmulatorConfig(
            tokens=[GATEWAY_TOKEN],
            project=PROJECT,
            partitions=["debug"],
            cpus=2,
            gpus=0,
            min_job_age=10.0,  # the lab's MinJobAge
            workdir=str(workdir),
            slurm_release=SLURM_RELEASE,  # the versions the lab serves, as the lab's release
        )
    ) as emulator:
        runs = ContractRuns({})
        threads = []
        for name, handle, cwd in (("emulator", emulator, str(workdir)), ("slurm", gateways.get("body"), "/tmp")):
            future: Future[Any] = Future()
            runs.futures[name] = future

            def work(handle: Any = handle, cwd: str = cwd, future: Future[Any] = future) -> None:
                try:
                    client = contract.EnvelopeClient(handle.envelope_url(CLUSTER_ID), GATEWAY_TOKEN)
                    future.set_result(contract.run_contract_script(client, cwd))
                except BaseException as exc:
                    future.set_exception(exc)

            thread = threading.Thread(target=work, name=f"contract-{name}", daemon=True)
            thread.start()
            threads.append(thread)
        yield runs
        for thread in threads:
            thread.join(180)
