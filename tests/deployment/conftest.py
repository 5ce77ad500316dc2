"""The ``deployment`` suite: one real Airflow deployment per session, shared by every scenario.

Airflow is the one of the Python running pytest (``make test-deployment`` runs this suite once per
Airflow version, each from its own venv). The Slurm side is the real lab behind the emulator's gateway
mode, started here in-process; the Airflow processes reach it over HTTP with a real service-account
key whose token endpoint is the gateway's. Marked ``deployment``: the other runs exclude it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.tag_secret import VARIABLE_KEY
from tests.conftest import PROJECT, REGION, connection_uri_env, settled_tag_key
from tests.deployment.harness import Deployment, DeploymentError, running_deployment
from tests.live_slurm.lab import LAB_SCRIPT, Lab, LabUnavailable, find_or_start_lab

HERE = Path(__file__).resolve().parent
CLUSTER_ID = "slurm-lab"
POLL_INTERVAL = 5.0
# (cluster id, Airflow connection id) of the clusters of the several-cluster scenarios; the first is the
# one every other scenario uses.
CLUSTERS = [(CLUSTER_ID, "google_cloud_default"), ("slurm-lab-b", "slurm_lab_b"), ("slurm-lab-c", "slurm_lab_c")]


@dataclass
class Cluster:
    cluster_id: str
    conn_id: str
    gateway: Any


FIGURES: list[str] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The figures the scenarios measured, under the Airflow version they ran on."""
    if FIGURES:
        import airflow

        terminalreporter.section(f"deployment figures, Airflow {airflow.__version__}")
        for line in FIGURES:
            terminalreporter.write_line(line)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.path)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.deployment)


@pytest.fixture(scope="session")
def lab() -> Lab:
    try:
        return find_or_start_lab()
    except LabUnavailable as exc:
        pytest.fail(f"The real Slurm lab is not available ({LAB_SCRIPT}): {exc}", pytrace=False)


@contextlib.contextmanager
def _gateway_to(lab: Lab, creds: Path) -> Iterator[Any]:
    """The emulator in gateway mode in front of the real lab; jobs left behind are cancelled at the end."""
    from slurmapi_emulator import EmulatorConfig, run_emulator

    config = EmulatorConfig(
        slurmrestd=lab.url, slurm_token_file=str(lab.token_file), credentials_file=str(creds), project=PROJECT
    )
    with run_emulator(config) as handle:
        handle.credentials_file = creds
        try:
            yield handle
        finally:
            for job in handle.jobs():
                record = lab.live(job["job_id"])
                if record is not None and not record.finished:
                    lab.cancel(job["job_id"])


@pytest.fixture(scope="session")
def gateway(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The emulator in gateway mode in front of the real lab: cluster ``slurm-lab``."""
    with _gateway_to(lab, tmp_path_factory.mktemp("deployment-gateway") / "service-account.json") as handle:
        yield handle


@pytest.fixture(scope="session")
def cluster_gateways(gateway: Any, lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Cluster]]:
    """Three clusters (``CLUSTERS``), each behind a gateway of its own in front of the same lab, so the
    calls each cluster gets are counted apart: what a deployment watching several clusters sends."""
    with contextlib.ExitStack() as stack:
        handles = [gateway] + [
            stack.enter_context(_gateway_to(lab, tmp_path_factory.mktemp(f"gateway-{c}") / "service-account.json"))
            for c in CLUSTERS[1:]
        ]
        yield [Cluster(cid, conn, handle) for (cid, conn), handle in zip(CLUSTERS, handles, strict=True)]


def set_tag_key(deployment: Deployment, value: str) -> None:
    """Set the deployment's tag key (Variable ``slurmapi_tag_secret``) as an operator would, by the CLI."""
    done = deployment.airflow("variables", "set", VARIABLE_KEY, value)
    assert done.returncode == 0, done.stderr[-2000:]


def deployment_executor() -> str:
    """Airflow 3.3 runs as Cloud Composer 3 does (CeleryExecutor: 2 workers, 2 schedulers, 2 triggerers);
    the older lines keep the LocalExecutor. ``SLURMAPI_DEPLOYMENT_EXECUTOR=LocalExecutor`` forces it."""
    import airflow

    forced = os.environ.get("SLURMAPI_DEPLOYMENT_EXECUTOR")
    if forced:
        if forced not in ("LocalExecutor", "CeleryExecutor"):
            raise pytest.UsageError(
                f"SLURMAPI_DEPLOYMENT_EXECUTOR={forced!r}: use LocalExecutor or CeleryExecutor (or leave it unset)"
            )
        return forced
    major, minor = (int(p) for p in airflow.__version__.split(".")[:2])
    return "CeleryExecutor" if (major, minor) >= (3, 3) else "LocalExecutor"


@pytest.fixture(scope="session")
def deployment(
    gateway: Any, cluster_gateways: list[Cluster], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    import airflow

    major = int(airflow.__version__.split(".")[0])
    env = {
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT": connection_uri_env(gateway, gateway.credentials_file),
        "SLURMAPI_PROJECT": PROJECT,
        "SLURMAPI_REGION": REGION,
        "SLURMAPI_CLUSTER_ID": CLUSTER_ID,
        "SLURMAPI_PARTITION": "debug",
        "SLURMAPI_POLL_INTERVAL": str(POLL_INTERVAL),
        "SLURMAPI_SCALE_CLUSTERS": ",".join(f"{c.conn_id}:{c.cluster_id}" for c in cluster_gateways),
    }
    for c in cluster_gateways[1:]:
        env[f"AIRFLOW_CONN_{c.conn_id.upper()}"] = connection_uri_env(c.gateway, c.gateway.credentials_file)
    # Kept after the run (logs of every component) and named in the summary; not pytest's rotating tmp.
    root = Path(tempfile.mkdtemp(prefix=f"slurmapi-deployment-{airflow.__version__}-"))
    FIGURES.append(f"logs of the deployment: {root}")
    executor = deployment_executor()
    FIGURES.append(f"executor: {executor}")
    try:
        with running_deployment(Path(sys.executable), root, env, major, executor) as deployment:
            # Its key made long ago (tasks never wait for it to settle); the scale scenario deletes it first.
            set_tag_key(deployment, settled_tag_key())
            yield deployment
    except DeploymentError as exc:
        pytest.fail(f"The Airflow deployment did not start: {exc}", pytrace=False)
