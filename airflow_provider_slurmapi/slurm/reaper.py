"""Cancel the job of a submit whose task was killed before the answer came: a detached process.

A task killed while its submit is on its way cannot cancel the job itself once it is gone: Airflow 3's
supervisor sends SIGKILL 5 s after SIGTERM, Airflow 2 after ``killed_task_cleanup_time``, and Slurm may
still be making the job (the answer is late, or the front end carries the submit out later). So the
task's ``on_kill`` starts this module as a process of its own session (``start_new_session``: the
kill of the task's process group does not reach it), which outlives the task, looks for the job that
carries the submit's marker, and cancels it.

- Its order comes on stdin, as JSON, never in argv, the environment or a file: the endpoint and the
  cluster, a short-lived access token (the one the submit was sent with), the submit's send marker,
  the job name, the time the submit was sent, the caller's account where known, and the deadline:
  the settle window, the time a submit with a lost answer waits before it is sent again, so the
  longest the service may still make the job.
- It writes nothing (its stdout and stderr go nowhere; the task log is closed by then), and keeps no
  file: no token or tag is left behind.
- It runs isolated (``python -I``: neither the working directory, nor ``PYTHON*`` variables, nor the
  user's site directory reach ``sys.path``), from ``/``, with only :data:`KEPT_ENVIRONMENT`: a
  ``json.py`` planted in the task's working directory would otherwise be imported and read the
  order, token included. It imports this package from where the task imported it
  (:data:`_BOOTSTRAP`), without putting that directory on ``sys.path``.
- It looks every :data:`PAUSE_SECONDS` until it finds the job(s) or the deadline passes, and cancels
  what it found. A job the task cancelled itself (the answer came before the kill ended the process)
  is cancelled again, which Slurm answers harmlessly.

The marker is the submit's send marker (``slurmapi-send=``, random, one per submit call): no other
try's job carries it, and the one lookup of our own jobs (``our_jobs_plan``) never takes another
user's copy of it. :func:`find_and_cancel` is the loop around that lookup.

This module knows nothing of Airflow (it must start quickly in a fresh interpreter, after the kill).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
from airflow_provider_slurmapi.slurm.api.errors import SlurmApiError, UnauthenticatedError
from airflow_provider_slurmapi.slurm.api.plans import Plan, Send, SystemClock
from airflow_provider_slurmapi.slurm.client import SlurmClient, no_answer
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob

# How often the reaper looks for the job: a few calls each time, for at most the settle window (90 s by default).
PAUSE_SECONDS = 3.0
# How long one call's transient failures are retried: the next look retries anyway.
CALL_RETRY_SECONDS = 10.0
# The variables a reaper process keeps: enough to start Python and reach the network (proxies, CAs);
# none of the task's connections, Variables or Airflow settings.
# PYTHONPATH is not among them: ``-I`` ignores it, and the package is found by its own path (_BOOTSTRAP).
KEPT_ENVIRONMENT = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "VIRTUAL_ENV",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
)


@dataclass(frozen=True)
class ReapOrder:
    """What the reaper needs; ``token`` is secret and never leaves the pipe (``repr`` hides it)."""

    project_id: str
    region: str
    cluster_id: str
    api_endpoint: str | None
    api_version: str
    marker: str
    name: str | None
    since: int
    deadline: float
    timeout: float
    account: str | None
    token: str

    def __repr__(self) -> str:
        return (
            f"ReapOrder(cluster={self.region}/{self.cluster_id}, marker={self.marker!r}, since={self.since}, "
            f"deadline={self.deadline:.0f})"
        )

    def cluster(self) -> ClusterRef:
        return ClusterRef(
            self.project_id,
            self.region,
            self.cluster_id,
            api_version=self.api_version,
            api_endpoint=self.api_endpoint,
        )


# The reaper's working directory: it reads and writes no file, and only root can write here, so nothing
# of the task's working directory (another user's, a DAG author's) is in reach.
WORKING_DIRECTORY = "/"
# What the isolated interpreter runs (``python -I -c _BOOTSTRAP <package directory's parent>``): this
# package is loaded from the path the task loaded it from (site-packages, an editable checkout, a folder
# on the task's PYTHONPATH), and nothing else is looked for there: the standard library and requests
# come from the interpreter's own sys.path, never from that directory.
_BOOTSTRAP = """\
import importlib.machinery, importlib.util, sys
spec = importlib.machinery.PathFinder.find_spec("airflow_provider_slurmapi", [sys.argv[1]])
if spec is not None and spec.loader is not None:
    package = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = package
    spec.loader.exec_module(package)
from airflow_provider_slurmapi.slurm.reaper import main
sys.exit(main())
"""


def command() -> list[str]:
    """The reaper's command line: this interpreter, isolated, loading this package from where it is."""
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return [sys.executable, "-I", "-c", _BOOTSTRAP, package_root]


def spawn(order: ReapOrder) -> int:
    """Start a detached reaper with ``order`` on its stdin; its process id. Returns at once."""
    env = {name: os.environ[name] for name in KEPT_ENVIRONMENT if name in os.environ}
    process = subprocess.Popen(
        command(),
        cwd=WORKING_DIRECTORY,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        env=env,
    )
    assert process.stdin is not None
    with process.stdin:
        process.stdin.write(json.dumps(asdict(order)).encode())
    return process.pid


class _OneTokenTransport:
    """The reaper's transport: sends with the one token it was given (it cannot refresh it)."""

    def __init__(self, order: ReapOrder) -> None:
        self._cluster = order.cluster()
        self._token = order.token
        self._timeout = order.timeout

    def __repr__(self) -> str:
        return f"<reaper cluster={self._cluster.region}/{self._cluster.cluster_id}>"

    def send(self, envelope: Send) -> tuple[int, bytes]:
        import requests

        try:
            response = requests.post(
                self._cluster.url,
                data=envelope.data,
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._token}"},
                timeout=self._timeout,
                allow_redirects=False,  # as the hooks' transports: the token and envelope go to the endpoint only
            )
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise no_answer(self._cluster, self._timeout, exc) from exc
        return response.status_code, response.content

    def refresh(self) -> None:
        raise UnauthenticatedError("The reaper's access token was refused; it cannot get another.", http_status=401)


def reaper_client(order: ReapOrder) -> SlurmClient[SystemClock]:
    """A reaper's client: its one-token transport (:class:`_OneTokenTransport`) and real time, as a hook's."""
    client = SlurmClient(
        order.cluster(),
        transport=_OneTokenTransport(order),
        clock=SystemClock(),
        timeout=order.timeout,
        retry_seconds=CALL_RETRY_SECONDS,
    )
    if order.account:
        client._account, client._account_from = order.account, "the killed task's"
    return client


class ReapClient(Protocol):
    """What :func:`find_and_cancel` needs of a client (a :class:`SlurmClient`)."""

    def run(self, plan: Plan[Any]) -> Any: ...
    def our_jobs_plan(
        self, marker: str, *, name: str | None = None, since: int | None = None
    ) -> Plan[list[SlurmJob]]: ...
    def cancel_plan(self, job_id: int, signal: str | None = None) -> Plan[Any]: ...


def find_and_cancel(
    client: ReapClient,
    marker: str,
    since: int,
    deadline: float,
    *,
    name: str | None = None,
    pause: float = PAUSE_SECONDS,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> list[int]:
    """Until ``deadline`` (Unix time): look for our jobs that carry ``marker``, submitted since ``since``;
    cancel them and return their ids (empty: none appeared)."""
    while True:
        looked_at = clock()
        try:
            jobs = client.run(client.our_jobs_plan(marker, name=name, since=since))
        except SlurmApiError:
            jobs = []
        found = [job.job_id for job in jobs]
        cancelled = []
        for job_id in found:
            try:
                client.run(client.cancel_plan(job_id))
                cancelled.append(job_id)
            except SlurmApiError:
                continue  # looked for and cancelled again at the next look
        if found and len(cancelled) == len(found):
            return cancelled
        if looked_at >= deadline:
            return cancelled
        sleep(max(0.0, min(pause, deadline - clock())))


def read_order(data: Mapping[str, Any]) -> ReapOrder:
    return ReapOrder(**{name: data[name] for name in ReapOrder.__dataclass_fields__})


def main() -> int:
    try:
        order = read_order(json.loads(sys.stdin.read()))
    except (ValueError, KeyError, TypeError):
        return 2
    find_and_cancel(
        reaper_client(order),
        order.marker,
        order.since,
        order.deadline,
        name=order.name,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
