"""Every credential form of an Airflow Google Cloud connection reaches the API, via GoogleBaseHook."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
from tests.conftest import CLUSTER


def test_key_json_in_keyfile_dict(gcp_connection: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {
        "keyfile_dict": credentials_file.read_text(),
        "api_endpoint": gcp_connection.url,
        "project": "demo-project",
    }
    monkeypatch.setenv("AIRFLOW_CONN_KEYJSON", json.dumps({"conn_type": "google_cloud_platform", "extra": extra}))
    assert SlurmApiHook(gcp_conn_id="keyjson", **CLUSTER).get_job(1) is None


def test_application_default_credentials(
    gcp_connection: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty connection: google-auth's ADC finds GOOGLE_APPLICATION_CREDENTIALS, as on Composer."""
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(credentials_file))
    extra = {"api_endpoint": gcp_connection.url}
    monkeypatch.setenv("AIRFLOW_CONN_ADC", json.dumps({"conn_type": "google_cloud_platform", "extra": extra}))
    hook = SlurmApiHook(gcp_conn_id="adc", **CLUSTER)
    assert hook.get_job(1) is None
    assert hook.cluster.project_id == "demo-project"


def test_impersonation_chain_reaches_google_auth(gcp_connection: Any) -> None:
    from google.auth import impersonated_credentials

    hook = SlurmApiHook(impersonation_chain=["a@p.iam.gserviceaccount.com", "b@p.iam.gserviceaccount.com"], **CLUSTER)
    credentials = hook.get_credentials()
    assert isinstance(credentials, impersonated_credentials.Credentials)
    assert credentials.service_account_email == "b@p.iam.gserviceaccount.com"


def test_project_comes_from_the_connection_or_must_be_given(
    gcp_connection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = SlurmApiHook(region="us-central1", cluster_id="c")
    assert hook.cluster.project_id == "demo-project"
    monkeypatch.setenv(
        "AIRFLOW_CONN_NOPROJECT", json.dumps({"conn_type": "google_cloud_platform", "extra": {"is_anonymous": True}})
    )
    from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="project_id"):
        _ = SlurmApiHook(gcp_conn_id="noproject", region="us-central1", cluster_id="c").cluster


def test_plain_http_is_refused_off_loopback(gcp_connection: Any) -> None:
    from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="unencrypted"):
        _ = SlurmApiHook(api_endpoint="http://example.com:8080", **CLUSTER).cluster
