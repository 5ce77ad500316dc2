"""A connection without a key: these tests never fetch a token (the recorded answers need none)."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(autouse=True)
def _keyless_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", json.dumps({"conn_type": "google_cloud_platform"}))


@pytest.fixture(autouse=True)
def _account_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded answers are the lab user's (``tester``): the account an earlier job of this connection
    taught the deployment, kept in its Variable (here given through the environment, a secrets backend)."""
    from airflow_provider_slurmapi.account_store import variable_name
    from tests.conftest import CLUSTER_ID, PROJECT, REGION
    from tests.unit.recorded_slurm import CALLER

    name = variable_name("google_cloud_default", PROJECT, REGION, CLUSTER_ID)
    monkeypatch.setenv(f"AIRFLOW_VAR_{name.upper()}", CALLER)
