"""A templated region with a typo, or a typo'd endpoint, fails the task at its first try naming the host.

The DAG runs for real (``dag.test()``); the host does not resolve, so nothing is ever sent. What is counted:
the task's tries, the resolutions of the host (the real resolver, counted: one per connection attempt), the
retry and lost-answer lines of the task log, and the emulator's calls (it serves only the token).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import connection_uri_env, load_dag

REGION_HOST = "us-centrl1-aiplatform.googleapis.com"
ENDPOINT_HOST = "slurm-gatewya.invalid"  # a private gateway's name with a typo, under .invalid (RFC 6761)


def does_not_resolve(host: str) -> None:
    """Skip where the resolver cannot say the name does not exist (nothing is sent to a real host from a test)."""
    try:
        socket.getaddrinfo(host, 443)
    except socket.gaierror as exc:
        if exc.errno != socket.EAI_NONAME:
            pytest.skip(f"this machine's resolver cannot say that {host} does not exist ({exc})")
        return
    pytest.skip(f"this machine resolves {host}: nothing is sent to it from a test")


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "sync"])
@pytest.mark.parametrize("typo", ["region", "endpoint"])
def test_a_typo_in_the_region_or_the_endpoint_fails_the_first_try_naming_the_host_with_no_retry_or_look_up(
    typo: str,
    deferrable: bool,
    airflow_db: Any,
    gcp_connection: Any,
    credentials_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    lookups: Callable[[str], int],
) -> None:
    from airflow.utils.session import create_session

    host = REGION_HOST if typo == "region" else ENDPOINT_HOST
    does_not_resolve(host)
    uri = json.loads(connection_uri_env(gcp_connection, credentials_file, retry_seconds=5))
    if typo == "region":
        del uri["extra"]["api_endpoint"]  # the host is built from the region
    else:
        uri["extra"]["api_endpoint"] = f"https://{ENDPOINT_HOST}"
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", json.dumps(uri))
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(deferrable).lower())
    before = lookups(host)
    gcp_connection.reset_calls()

    run = load_dag("slurm_wrong_endpoint.py").test()

    with create_session() as session:
        [ti] = [ti for ti in run.get_task_instances(session=session) if ti.task_id == "job"]
        state, tries = str(run.state), int(ti.try_number)
    out = "".join(capfd.readouterr())
    assert (state, tries) == ("failed", 1), "the task's retries were spent on a name that does not exist"
    assert lookups(host) - before == 1, "the call was tried more than once"
    assert "Slurm Job API call failed" not in out and "answer to the submit was lost" not in out
    assert f"Nothing was sent to {host}: the name does not resolve" in out
    if typo == "region":
        assert "region='us-centrl1'" in out and "e.g. 'us-central1'" in out
    else:
        assert f"api_endpoint='https://{ENDPOINT_HOST}'" in out and "check its spelling" in out
    assert "Not retried" in out
    assert gcp_connection.calls()["by_kind"].get("submit", 0) == 0
