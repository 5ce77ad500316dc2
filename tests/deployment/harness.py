"""A real Airflow deployment for the tests: PostgreSQL, and each Airflow component as its own process.

Everything is started here and stopped by PID (each process leads its own session, so its children go
with it): PostgreSQL from Debian's packages on its own port and data directory, then ``airflow db
migrate``, the api-server (Airflow 3) or webserver (Airflow 2), scheduler, dag-processor (Airflow 3)
and triggerer. Two executors:

- ``LocalExecutor`` (the older Airflow lines): one scheduler, one triggerer; tasks run in the scheduler's
  worker processes.
- ``CeleryExecutor`` (Airflow 3.3, as Cloud Composer 3 runs it): a Redis server from Debian's packages
  (its own port and directory, never the system service) as the broker, the metadata database as the
  result backend, 2 Celery workers, 2 schedulers, 2 triggerers, a dag-processor and the api-server.

The tests drive and read it through the REST API, as a user's tooling would.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from tests.waiting import wait_until

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DAG_FILES = HERE / "dag_files"
WAIT = 180.0  # only turns a hang into a failure
# The Celery deployment: 2 workers of 4 slots each (Composer's default worker_concurrency scales with the
# worker's size; 4 keeps the 2-core machine's load where the LocalExecutor's 8 slots kept it).
CELERY_WORKERS = 2
CELERY_CONCURRENCY = 4


# The address each process names itself by (``[core] hostname_callable``, tests/deployment/loopback.py):
# a task instance's ``hostname`` says which worker ran it, a triggerer job's which triggerer holds it.
HOSTNAMES = {"triggerer": "127.0.0.1", "triggerer-2": "127.0.0.2", "worker-1": "127.0.0.3", "worker-2": "127.0.0.4"}


def hostname_of(name: str) -> str:
    return HOSTNAMES.get(name, "127.0.0.1")


class DeploymentError(RuntimeError):
    """A part of the deployment could not start; the message says which and shows its log."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = WAIT, every: float = 0.5) -> Any:
    """The tests' one wait (``tests/waiting.py``), with the deployment's timeout and cadence."""
    return wait_until(predicate, what, timeout=timeout, every=every)


def postgres_bin() -> Path:
    """The newest installed PostgreSQL's bin directory (Debian: /usr/lib/postgresql/<major>/bin)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise DeploymentError(
            "PostgreSQL is not installed: `make deployment-deps` installs Debian's postgresql package (as root)."
        )
    return Path(found[-1]).parent


def redis_server() -> str:
    found = shutil.which("redis-server")
    if found is None:
        raise DeploymentError(
            "redis-server is not installed: `make deployment-deps` installs Debian's redis-server package (as root)."
        )
    return found


class Redis:
    """A throw-away Redis server (the Celery broker) on its own port and directory, no persistence.

    ``restart()`` stops it by PID and starts it again on the same port: what a broker failover looks like
    to the workers and schedulers (the queued messages are lost, as with Composer's Redis without AOF).
    """

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="slurmapi-deployment-redis-"))
        self.port = free_port()
        self.log = self.root / "redis.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def start(self) -> None:
        cmd = [redis_server(), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.root)]
        cmd += ["--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", str(self.log)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for(self._ping, f"redis-server on port {self.port}", timeout=30, every=0.2)
        except AssertionError as exc:
            tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise DeploymentError(f"{exc}\n{tail}") from None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class Postgres:
    """A throw-away PostgreSQL cluster on its own port, data directory and socket directory."""

    def __init__(self) -> None:
        # Not under pytest's tmp dir: user postgres must reach it (pytest's dirs are private to root).
        self.root = Path(tempfile.mkdtemp(prefix="slurmapi-deployment-pg-"))
        self.data = self.root / "pgdata"
        self.sockets = self.root / "pgsock"
        self.port = free_port()
        self.bin = postgres_bin()
        self.log = self.root / "postgres.log"

    def _as_postgres(self, *cmd: str) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        return subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=120)

    def start(self) -> None:
        for path in (self.root, self.data, self.sockets):
            path.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
            for path in (self.data, self.sockets):
                shutil.chown(path, "postgres")
        self.log.touch()
        if os.geteuid() == 0:
            shutil.chown(self.log, "postgres")
        steps = [
            [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
            [
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-w",
                "-o",
                f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off",
                "start",
            ],
        ]
        for cmd in steps:
            done = self._as_postgres(*cmd)
            if done.returncode != 0:
                raise DeploymentError(f"{cmd[0]} failed: {done.stdout}{done.stderr}\n{self.log.read_text()[-3000:]}")
        for sql in ("CREATE ROLE airflow LOGIN PASSWORD 'airflow'", "CREATE DATABASE airflow OWNER airflow"):
            done = self._as_postgres(
                str(self.bin / "psql"), "-h", str(self.sockets), "-p", str(self.port), "-U", "postgres", "-c", sql
            )
            if done.returncode != 0:
                raise DeploymentError(f"psql {sql!r} failed: {done.stderr}")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://airflow:airflow@127.0.0.1:{self.port}/airflow"

    def stop(self) -> None:
        self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class Component:
    """One Airflow process (a session leader: stopping it by PID takes its children along)."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def stop(self, timeout: float = 20.0) -> None:
        if not self.alive():
            return
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait(10)

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


@dataclass
class Deployment:
    """Airflow (the venv of ``python``) on PostgreSQL, reached through its REST API."""

    python: Path
    root: Path
    extra_env: dict[str, str]
    airflow_major: int = 3
    executor: str = "LocalExecutor"
    components: list[Component] = field(default_factory=list)
    postgres: Postgres | None = None
    redis: Redis | None = None
    port: int = 0
    _token: str | None = None

    # -- lifecycle ------------------------------------------------------------------------------------
    def env(self, **overrides: str) -> dict[str, str]:
        secret = self.extra_env.setdefault("_SECRET", secrets.token_hex(16))
        assert self.postgres is not None
        home = self.root / "airflow-home"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "AIRFLOW__"))}
        env.update(
            {
                "AIRFLOW_HOME": str(home),
                "PYTHONPATH": str(REPO),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.postgres.url,
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": "8",
                "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "256",
                "AIRFLOW__CORE__DAGS_FOLDER": str(DAG_FILES),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
                "AIRFLOW__CORE__HOSTNAME_CALLABLE": "tests.deployment.loopback.hostname",
                "AIRFLOW__CORE__FERNET_KEY": "",
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(self.extra_env.setdefault("_WLOG", str(free_port()))),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(self.extra_env.setdefault("_TLOG", str(free_port()))),
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "60",
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
                "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
                "AIRFLOW__API__SECRET_KEY": secret,
                "AIRFLOW__API_AUTH__JWT_SECRET": secret,
                "AIRFLOW__WEBSERVER__SECRET_KEY": secret,
                "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{self.port}",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{self.port}/execution/",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
                # Airflow 2: the webserver's REST API v1 with basic auth; the scheduler runs the dag files.
                "AIRFLOW__API__AUTH_BACKENDS": "airflow.api.auth.backend.basic_auth",
                "AIRFLOW__WEBSERVER__WEB_SERVER_PORT": str(self.port),
                "AIRFLOW__SCHEDULER__ZOMBIE_DETECTION_INTERVAL": "5",
                "AIRFLOW__SCHEDULER__SCHEDULER_ZOMBIE_TASK_THRESHOLD": "60",
                "AIRFLOW__SCHEDULER__DAG_DIR_LIST_INTERVAL": "10",
            }
        )
        if self.celery:
            assert self.redis is not None
            env.update(
                {
                    "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                    "AIRFLOW__CELERY__BROKER_URL": self.redis.url,
                    "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + self.postgres.url,
                    # 2 workers x 4 = the LocalExecutor's 8 slots ([core] parallelism), so the scenarios that
                    # fill every slot fill the same number.
                    "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(CELERY_CONCURRENCY),
                    # A worker SIGKILLed with a task: the message goes back to the queue only when its
                    # visibility timeout ends; the scheduler's heartbeat timeout decides first.
                    "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT": "21600",
                    # A task whose message a restarted broker lost is queued again after this (default 600 s).
                    "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "60",
                }
            )
        env.update({k: v for k, v in self.extra_env.items() if not k.startswith("_")})
        env.update(overrides)
        return env

    @property
    def celery(self) -> bool:
        return self.executor == "CeleryExecutor"

    def airflow(self, *args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess[str]:
        """Run an ``airflow`` CLI command of this deployment's venv to its end."""
        return subprocess.run(
            [str(self.python), "-m", "airflow", *args],
            env=self.env(**env),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start_component(self, name: str, *args: str, **env: str) -> Component:
        log = self.root / f"{name}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [str(self.python), "-m", "airflow", *args],
                env=self.env(**env),
                cwd=self.root,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        component = Component(name, proc, log)
        self.components.append(component)
        return component

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.postgres = Postgres()
        self.postgres.start()
        if self.celery:
            self.redis = Redis()
            self.redis.start()
        migrated = self.airflow("db", "migrate")
        if migrated.returncode != 0:
            raise DeploymentError(f"airflow db migrate failed:\n{migrated.stdout[-3000:]}{migrated.stderr[-3000:]}")
        if self.airflow_major >= 3:
            self.start_component("api-server", "api-server", "--port", str(self.port))
            self.start_component("dag-processor", "dag-processor")
        else:
            made = self.airflow(
                "users", "create", "-u", "admin", "-p", "admin", "-r", "Admin", "-e", "a@b.c", "-f", "a", "-l", "b"
            )
            if made.returncode != 0:
                raise DeploymentError(f"airflow users create failed:\n{made.stderr[-3000:]}")
            self.start_component("webserver", "webserver", "--port", str(self.port), "--workers", "2")
        self.start_component("scheduler", "scheduler")
        self.start_triggerer()
        if self.celery:
            self.start_component("scheduler-2", "scheduler")
            self.start_triggerer("triggerer-2")
            for index in range(1, CELERY_WORKERS + 1):
                self.start_worker(f"worker-{index}")
        try:
            wait_for(self._healthy, "the Airflow components healthy", timeout=240, every=1.0)
        except AssertionError as exc:
            raise DeploymentError(f"{exc}\n{self.logs()}") from None

    def start_triggerer(self, name: str = "triggerer") -> Component:
        # Each triggerer serves its logs on a port of its own, and names itself by its own loopback address.
        return self.start_component(
            name,
            "triggerer",
            AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT=str(free_port()),
            SLURMAPI_DEPLOYMENT_HOSTNAME=hostname_of(name),
        )

    def start_worker(self, name: str) -> Component:
        """A Celery worker: its own node name, pid file and log-server port (several share the host)."""
        return self.start_component(
            name,
            "celery",
            "worker",
            "--celery-hostname",
            f"{name}@127.0.0.1",
            "--concurrency",
            str(CELERY_CONCURRENCY),
            "--pid",
            str(self.root / f"{name}.pid"),
            AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT=str(free_port()),
            SLURMAPI_DEPLOYMENT_HOSTNAME=hostname_of(name),
        )

    def restart_component(self, name: str, sig: int = signal.SIGTERM) -> Component:
        """Stop ``name`` (``sig``, then SIGKILL after a grace) and start it again as it was started."""
        old = self.component(name)
        old.signal(sig)
        try:
            old.proc.wait(30)
        except subprocess.TimeoutExpired:
            old.signal(signal.SIGKILL)
            old.proc.wait(10)
        if name.startswith("worker"):
            return self.start_worker(name)
        if name.startswith("triggerer"):
            return self.start_triggerer(name)
        return self.start_component(name, "dag-processor" if name == "dag-processor" else name.split("-")[0])

    def running(self, prefix: str) -> list[Component]:
        """The live components whose name starts with ``prefix`` (e.g. every triggerer)."""
        latest: dict[str, Component] = {}
        for c in self.components:
            latest[c.name] = c
        return [c for name, c in latest.items() if name.startswith(prefix) and c.alive()]

    def component(self, name: str) -> Component:
        return next(c for c in reversed(self.components) if c.name == name)

    def _healthy(self) -> bool:
        dead = [c for c in {c.name: c for c in self.components}.values() if not c.alive()]  # the latest of each
        if dead:
            raise DeploymentError(f"{dead[0].name} exited {dead[0].proc.returncode}:\n{dead[0].tail()}")
        try:
            path = "/api/v2/monitor/health" if self.airflow_major >= 3 else "/api/v1/health"
            health = requests.get(f"http://127.0.0.1:{self.port}{path}", timeout=5).json()
        except (requests.RequestException, ValueError):
            return False
        parts = ["metadatabase", "scheduler", "triggerer"] + (["dag_processor"] if self.airflow_major >= 3 else [])
        return all((health.get(p) or {}).get("status") == "healthy" for p in parts)

    def stop(self) -> None:
        for component in reversed(self.components):
            component.stop()
        if self.redis is not None:
            self.redis.remove()
        if self.postgres is not None:
            self.postgres.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {c.name} (pid {c.pid}) ---\n{c.tail(3000)}" for c in self.components)

    # -- REST API -------------------------------------------------------------------------------------
    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v{2 if self.airflow_major >= 3 else 1}"

    def _auth(self) -> dict[str, Any]:
        if self.airflow_major < 3:
            return {"auth": ("admin", "admin")}
        if self._token is None:
            answer = requests.get(f"http://127.0.0.1:{self.port}/auth/token", timeout=30)
            answer.raise_for_status()
            self._token = answer.json()["access_token"]
        return {"headers": {"Authorization": f"Bearer {self._token}"}}

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        auth = self._auth()
        headers = {**auth.get("headers", {}), **kwargs.pop("headers", {})}
        for attempt in range(5):  # a loaded api-server answers a read with a 5xx now and then: read again
            try:
                answer = requests.request(
                    method, f"{self.api}{path}", headers=headers, auth=auth.get("auth"), timeout=90, **kwargs
                )
            except requests.ConnectionError:
                if method != "GET" or attempt == 4:
                    raise
                time.sleep(2)
                continue
            if method != "GET" or answer.status_code < 500:
                break
            time.sleep(2)
        if answer.status_code >= 400:
            raise AssertionError(f"{method} {path} -> {answer.status_code}: {answer.text[:2000]}")
        return answer.json() if answer.content else None

    def wait_for_dag(self, dag_id: str) -> None:
        def parsed() -> bool:
            try:
                self.request("GET", f"/dags/{dag_id}")
                return True
            except AssertionError:
                return False

        wait_for(parsed, f"DAG {dag_id} parsed", every=1.0)

    def trigger(self, dag_id: str, run_id: str, conf: dict[str, Any]) -> str:
        self.wait_for_dag(dag_id)
        body: dict[str, Any] = {"dag_run_id": run_id, "conf": conf}
        if self.airflow_major >= 3:
            body["logical_date"] = None
        self.request("POST", f"/dags/{dag_id}/dagRuns", json=body)
        return run_id

    def ti(self, dag_id: str, run_id: str, task_id: str = "job", map_index: int | None = None) -> dict[str, Any]:
        suffix = f"/{map_index}" if map_index is not None and map_index >= 0 else ""
        return dict(self.request("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}{suffix}"))

    def tis(self, dag_id: str, run_id: str, task_id: str = "job") -> list[dict[str, Any]]:
        """Every task instance of ``task_id`` in the run, page by page (the API caps a page at 100)."""
        found: list[dict[str, Any]] = []
        while True:
            page = self.request(
                "GET",
                f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances",
                params={
                    "limit": 100,
                    "offset": len(found),
                    **({"order_by": "map_index"} if self.airflow_major >= 3 else {}),
                },
            )["task_instances"]
            found.extend(page)
            if len(page) < 100:
                return [t for t in found if t["task_id"] == task_id]

    def wait_ti(
        self, dag_id: str, run_id: str, states: set[str], task_id: str = "job", timeout: float = WAIT
    ) -> dict[str, Any]:
        return wait_for(
            lambda: (ti := self.ti(dag_id, run_id, task_id)) and ti["state"] in states and ti,
            f"{dag_id}/{run_id}/{task_id} in {sorted(states)}",
            timeout,
        )

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self.request("GET", f"/dags/{dag_id}/dagRuns/{run_id}")["state"])

    def log(self, dag_id: str, run_id: str, try_number: int, task_id: str = "job", map_index: int = -1) -> str:
        """The task's log as the UI shows it (worker and trigger lines), read through the API."""
        answer = self.request(
            "GET",
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
            params={"full_content": "true", "map_index": map_index},
            headers={"Accept": "application/json"},
        )
        content = answer.get("content") if isinstance(answer, dict) else answer
        if isinstance(content, list):
            return "\n".join(json.dumps(r, default=str) if isinstance(r, dict) else str(r) for r in content)
        return str(content)

    def patch_ti(self, dag_id: str, run_id: str, state: str, task_id: str = "job") -> None:
        body: dict[str, Any] = {"new_state": state}
        if self.airflow_major < 3:
            body["dry_run"] = False
        self.request("PATCH", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}", json=body)

    def patch_run(self, dag_id: str, run_id: str, state: str) -> None:
        self.request("PATCH", f"/dags/{dag_id}/dagRuns/{run_id}", json={"state": state})

    def clear_ti(self, dag_id: str, run_id: str, task_id: str = "job") -> None:
        body: dict[str, Any] = {"dry_run": False, "task_ids": [task_id], "only_failed": False, "reset_dag_runs": True}
        body["dag_run_id"] = run_id
        self.request("POST", f"/dags/{dag_id}/clearTaskInstances", json=body)


@contextlib.contextmanager
def running_deployment(
    python: Path, root: Path, env: dict[str, str], airflow_major: int, executor: str = "LocalExecutor"
) -> Iterator[Deployment]:
    deployment = Deployment(
        python=python, root=root, extra_env=dict(env), airflow_major=airflow_major, executor=executor
    )
    try:
        deployment.start()
        yield deployment
    finally:
        deployment.stop()
