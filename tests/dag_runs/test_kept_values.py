"""The kept account and API version (issue 33 point 3): a read error is not "absent".

Real DAG runs (``dag.test()``) against the emulator; the Variable lives in a real secrets backend
(``[secrets] backend``: :mod:`tests.dag_runs.flaky_secrets`) that fails the reads it is told to, so the
task reads it the way a worker reads a deployment's Vault or Secret Manager (Task SDK on 3.x, the
secrets backends and the ORM on 2.x).
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_slurmapi import account_store
from airflow_provider_slurmapi.hooks import slurm as slurm_hooks
from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
from airflow_provider_slurmapi.slurm.api.kept_version import KeptVersion
from tests.conftest import CLUSTER, load_dag, run_dag
from tests.dag_runs.test_tag_key import _forget_secrets_backends


@pytest.fixture
def flaky_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[type]:
    """The deployment's Variables in a secrets backend that fails its first reads of ``FlakyBackend.key``."""
    from tests.dag_runs.flaky_secrets import FlakyBackend

    path = f"{FlakyBackend.__module__}.{FlakyBackend.__qualname__}"
    monkeypatch.setenv("AIRFLOW__SECRETS__BACKEND", path)
    monkeypatch.setenv("AIRFLOW__WORKERS__SECRETS_BACKEND", path)
    monkeypatch.setattr(FlakyBackend, "reads", 0)
    monkeypatch.setattr(account_store, "READ_BACKOFF_SECONDS", 0.05)
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    monkeypatch.setenv("SLURMAPI_API_VERSION", "auto")  # the test DAGs' default is a fixed v0.0.42
    _forget_secrets_backends()
    yield FlakyBackend
    monkeypatch.undo()
    _forget_secrets_backends()


def _names() -> tuple[str, str]:
    """The Variables of the account and of the version that the run's hook reads."""
    cluster = SlurmApiHook(**{**CLUSTER, "api_version": "auto"}).cluster
    return slurm_hooks._account_variable(cluster), slurm_hooks._version_variable(cluster)


@pytest.mark.parametrize("which", ["account", "version"])
def test_a_kept_value_whose_store_fails_for_a_moment_is_read_again_and_used(
    airflow_db: Any, gcp_connection: Any, flaky_store: Any, monkeypatch: pytest.MonkeyPatch, which: str
) -> None:
    account_name, version_name = _names()
    if which == "account":
        monkeypatch.setattr(flaky_store, "key", account_name)
        monkeypatch.setattr(flaky_store, "value", getpass.getuser())  # the user the emulator runs jobs as
    else:
        monkeypatch.setattr(flaky_store, "key", version_name)
        monkeypatch.setattr(flaky_store, "value", KeptVersion("v0.0.41", time.time()).text())
    monkeypatch.setattr(flaky_store, "failures_left", 2)
    gcp_connection.reset_calls()
    state, _ = run_dag(load_dag("slurm_scenarios.py", "completes"))
    assert state == "success"
    assert flaky_store.failures_left == 0 and flaky_store.reads >= 3, "the two failed reads did not happen"
    paths = [str(call.get("path")) for call in gcp_connection.calls()["last"] if call.get("path")]
    if which == "version":  # the kept version was spoken: no negotiation
        assert not [p for p in paths if p.endswith("/ping")] and all("/v0.0.41/" in p for p in paths), paths


@pytest.mark.parametrize("which", ["account", "version"])
def test_a_kept_value_whose_store_stays_down_fails_the_try_with_the_fix_and_submits_nothing(
    airflow_db: Any,
    gcp_connection: Any,
    flaky_store: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    which: str,
) -> None:
    account_name, version_name = _names()
    name = account_name if which == "account" else version_name
    monkeypatch.setattr(flaky_store, "key", name)
    monkeypatch.setattr(flaky_store, "value", None)
    monkeypatch.setattr(flaky_store, "failures_left", 1000)
    state, _ = run_dag(load_dag("slurm_scenarios.py", "completes"))
    out = "".join(capfd.readouterr())
    assert state == "failed"
    assert gcp_connection.jobs() == [], "a job was submitted while the kept value could not be read"
    assert f"The Airflow Variable '{name}'" in out
    assert "could not be read (4 attempts)" in out
    assert ("slurm_user" if which == "account" else "api_version") in out
