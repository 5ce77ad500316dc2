"""Auth: a real google-auth service-account flow against the emulator's own token endpoint."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
from google.auth.transport.requests import AuthorizedSession
from google.oauth2 import service_account
from slurmapi_emulator import EmulatorHandle

from .conftest import Client, V, wait_until

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
PING = {"method": "HTTP_METHOD_GET", "path": f"/slurm/{V}/ping"}


@pytest.fixture
def sa_emulator(make_emulator: Callable[..., EmulatorHandle], tmp_path: Path) -> EmulatorHandle:
    return make_emulator(tokens=[], credentials_file=str(tmp_path / "sa.json"), project="p-1")


def test_credentials_file_is_a_service_account_key(sa_emulator: EmulatorHandle, tmp_path: Path) -> None:
    path = tmp_path / "sa.json"
    data = json.loads(path.read_text())
    assert data["type"] == "service_account"
    assert data["project_id"] == "p-1"
    assert data["token_uri"] == f"{sa_emulator.url}/token"
    assert data["private_key"].startswith("-----BEGIN PRIVATE KEY-----")
    assert data["client_email"].endswith("@p-1.iam.gserviceaccount.com")
    assert data["private_key_id"]
    assert path.stat().st_mode & 0o077 == 0


def test_google_auth_service_account_flow(sa_emulator: EmulatorHandle, tmp_path: Path) -> None:
    creds = service_account.Credentials.from_service_account_file(str(tmp_path / "sa.json"), scopes=SCOPES)
    session = AuthorizedSession(creds)
    resp = session.post(sa_emulator.envelope_url(), json=PING, timeout=10)
    assert resp.status_code == 200
    assert json.loads(resp.json()["body"])["pings"][0]["pinged"] == "UP"
    assert creds.token and creds.token.startswith("ya29.")
    assert creds.expiry is not None
    # the issued token works on its own, too
    assert Client(sa_emulator, token=creds.token).call("GET", f"/slurm/{V}/ping").http_status == 200


def test_expire_token_fault_then_google_auth_refreshes(sa_emulator: EmulatorHandle, tmp_path: Path) -> None:
    creds = service_account.Credentials.from_service_account_file(str(tmp_path / "sa.json"), scopes=SCOPES)
    session = AuthorizedSession(creds)
    assert session.post(sa_emulator.envelope_url(), json=PING, timeout=10).status_code == 200
    old = creds.token
    sa_emulator.add_fault("expire-token")
    # AuthorizedSession sees 401, refreshes through /token and retries: the caller sees 200
    assert session.post(sa_emulator.envelope_url(), json=PING, timeout=10).status_code == 200
    assert creds.token != old
    assert Client(sa_emulator, token=old).call("GET", f"/slurm/{V}/ping").http_status == 401
    statuses = [c["http_status"] for c in sa_emulator.calls()["last"]]
    assert statuses == [200, 401, 200, 401]


def test_expire_token_fault_with_static_token(client: Client, emu: EmulatorHandle) -> None:
    emu.add_fault("expire-token@jobs")
    assert client.call("GET", f"/slurm/{V}/ping").http_status == 200
    answer = client.call("GET", f"/slurm/{V}/jobs/")
    assert answer.http_status == 401
    assert answer.envelope["error"]["status"] == "UNAUTHENTICATED"
    assert client.call("GET", f"/slurm/{V}/jobs/").http_status == 200  # static tokens work again


def test_short_token_lifetime_expires_tokens(make_emulator: Callable[..., EmulatorHandle], tmp_path: Path) -> None:
    emu = make_emulator(tokens=[], credentials_file=str(tmp_path / "sa.json"), token_lifetime=1)
    creds = service_account.Credentials.from_service_account_file(str(tmp_path / "sa.json"), scopes=SCOPES)
    session = AuthorizedSession(creds)
    assert session.post(emu.envelope_url(), json=PING, timeout=10).status_code == 200
    token = creds.token
    wait_until(lambda: Client(emu, token=token).call("GET", f"/slurm/{V}/ping").http_status == 401)  # 1 s lifetime


def test_token_endpoint_rejects_foreign_keys_and_bad_grants(
    sa_emulator: EmulatorHandle, tmp_path: Path, make_emulator: Callable[..., EmulatorHandle]
) -> None:
    other = make_emulator(tokens=[], credentials_file=str(tmp_path / "other.json"))
    data = json.loads((tmp_path / "other.json").read_text())
    data["token_uri"] = f"{sa_emulator.url}/token"  # a key the first emulator never issued
    (tmp_path / "forged.json").write_text(json.dumps(data))
    creds = service_account.Credentials.from_service_account_file(str(tmp_path / "forged.json"), scopes=SCOPES)
    resp = AuthorizedSession(creds)
    with pytest.raises(Exception, match="invalid_grant"):
        resp.post(sa_emulator.envelope_url(), json=PING, timeout=10)
    bad = requests.post(f"{sa_emulator.url}/token", data={"grant_type": "password", "assertion": "x"}, timeout=10)
    assert bad.status_code == 400 and bad.json()["error"] == "unsupported_grant_type"
    bad = requests.post(
        f"{sa_emulator.url}/token",
        data={"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": "a.b.c"},
        timeout=10,
    )
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_grant"
    assert other.url != sa_emulator.url


def test_credentials_file_key_is_reused_across_restarts(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path
) -> None:
    path = tmp_path / "sa.json"
    first = make_emulator(tokens=[], credentials_file=str(path))
    key1 = json.loads(path.read_text())
    second = make_emulator(tokens=[], credentials_file=str(path))
    key2 = json.loads(path.read_text())
    assert key1["private_key"] == key2["private_key"] and key1["private_key_id"] == key2["private_key_id"]
    assert key2["token_uri"] == f"{second.url}/token" != key1["token_uri"] or first.port == second.port


def test_airflow_google_connection_works_unchanged(
    sa_emulator: EmulatorHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import airflow.providers.google.common.hooks.base_google as base_google

    key_path = str(tmp_path / "sa.json")
    for conn_id, extra in (
        ("emu_key_path", {"key_path": key_path}),
        ("emu_keyfile_dict", {"keyfile_dict": Path(key_path).read_text()}),
    ):
        conn = {
            "conn_type": "google_cloud_platform",
            "extra": {**extra, "project": "p-1", "api_endpoint": sa_emulator.url},
        }
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
        hook = base_google.GoogleBaseHook(gcp_conn_id=conn_id)
        creds = hook.get_credentials()
        resp = AuthorizedSession(creds).post(sa_emulator.envelope_url(), json=PING, timeout=10)
        assert resp.status_code == 200, resp.text
