"""The same scenarios with each REST version the lab's Slurm serves (24.11: v0.0.40-42; 26.05:
v0.0.42-45, from the provider's version table), with "auto", and with both envelope answer shapes."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import requests

from airflow_provider_slurmapi.hooks import slurm as slurm_hooks
from airflow_provider_slurmapi.slurm.api.api_versions import NEGOTIATE, served_by, traits
from tests.conftest import load_dag
from tests.live_slurm.conftest import CLUSTER_ID, GATEWAY_TOKEN, make_hook, run_dag_capture
from tests.live_slurm.lab import SLURM_RELEASE, Lab
from tests.waiting import wait_until

pytestmark = pytest.mark.slurm


# Every version the lab's release serves, oldest first (24.11: v0.0.40-42; 26.05: v0.0.42-45).
LAB_VERSIONS = [row.name for row in reversed(served_by(SLURM_RELEASE))]
# The versions older than v0.0.42 the lab serves (none on 26.05).
UNKNOWN_JOB_ID = 60000000
OLD_VERSIONS = [v for v in LAB_VERSIONS if traits(v).history_time_filter == "relative"]


def _history(hook: Any, job_id: int, timeout: float = 30) -> Any:
    """The job as the history (``/slurmdb``) has it; records reach slurmdbd a little after the end."""
    return wait_until(
        lambda: (job := hook.get_history_job(job_id)) is not None and job.is_finished and job,
        f"job {job_id} finished in the history",
        timeout=timeout,
        every=0.5,
    )


@pytest.mark.parametrize("api_version", LAB_VERSIONS)
def test_submit_wait_and_history_with_each_api_version(
    api_version: str,
    mode: bool,
    gateway: Any,
    lab: Lab,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLURMAPI_API_VERSION", api_version)
    dag = load_dag("slurm_scenarios.py", "completes")
    result = run_dag_capture(dag, capfd)
    assert (result.state, result.tasks) == ("success", {"job": "success"})
    job_id = result.job(gateway)
    paths = [call["path"] or "" for call in gateway.calls()["last"]]
    assert any(p.startswith(f"/slurm/{api_version}/") for p in paths), f"no {api_version} call among {paths[-20:]}"
    assert lab.final(job_id).state == "COMPLETED"
    assert f"Slurm job {job_id} COMPLETED after" in result.log
    job = _history(make_hook(gateway, api_version), job_id)
    assert (job.source, job.state.value, job.exit.return_code, job.name) == (
        "history",
        "COMPLETED",
        0,
        "scenario-completes",
    )
    assert job.comment and f"dag=slurm_scenario_completes task=job run={result.run_id}" in job.comment


def test_structured_gateway_answers_in_structured_body(use_envelope: Any) -> None:
    gateway = use_envelope("structured")
    url = gateway.envelope_url(CLUSTER_ID)
    answer = requests.post(
        url,
        json={"method": "HTTP_METHOD_GET", "path": "/slurm/v0.0.42/ping"},
        headers={"Authorization": f"Bearer {GATEWAY_TOKEN}"},
        timeout=30,
    ).json()
    assert set(answer) == {"status", "structuredBody"}, json.dumps(answer)[:300]
    assert answer["structuredBody"]["pings"][0]["pinged"] == "UP"


@pytest.mark.parametrize(
    ("scenario", "dag_state", "job_state", "says"),
    [
        ("completes", "success", "COMPLETED", r"Slurm job {id} COMPLETED after"),
        (
            "exit3",
            "failed",
            "FAILED",
            r"Slurm job {id} \(scenario-exit3\),? ended FAILED, reason NonZeroExitCode, exit code 3",
        ),
    ],
)
def test_structured_envelope_scenarios(
    scenario: str,
    dag_state: str,
    job_state: str,
    says: str,
    mode: bool,
    use_envelope: Any,
    lab: Lab,
    capfd: pytest.CaptureFixture[str],
) -> None:
    gateway = use_envelope("structured")
    result = run_dag_capture(load_dag("slurm_scenarios.py", scenario), capfd)
    assert result.state == dag_state, result.tasks
    job_id = result.job(gateway)
    assert lab.final(job_id).state == job_state
    assert re.search(says.format(id=job_id), result.log), f"/{says}/ not in the log"
    kinds = gateway.calls()["by_kind"]
    assert kinds.get("submit", 0) >= 1, kinds


@pytest.mark.parametrize("api_version", OLD_VERSIONS)
def test_default_submit_operator_works_with_older_api_versions(
    api_version: str, gateway: Any, lab: Lab, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scenario DAG as users write it (reattach_on_restart left at its default True)."""
    monkeypatch.setenv("SLURMAPI_API_VERSION", api_version)
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    result = run_dag_capture(load_dag("slurm_scenarios.py", "completes"), capfd)
    assert "Parsing of" not in result.log, "Slurm refused the epoch start_time of the tag look-up"
    assert (result.state, result.tasks) == ("success", {"job": "success"})
    assert lab.final(result.job(gateway)).state == "COMPLETED"


def test_auto_negotiates_the_newest_version_the_real_slurm_serves(
    gateway: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """One ping on 26.05 (v0.0.45 answers); two on 24.11 (v0.0.45 404, then v0.0.42 names the release)."""
    import logging

    caplog.set_level(logging.INFO)
    kept: dict[str, str] = {}  # a fresh deployment, as far as negotiation goes: no version kept yet
    monkeypatch.setattr(
        slurm_hooks, "version_store", lambda where: (lambda: kept.get(where()), lambda v: kept.__setitem__(where(), v))
    )
    gateway.reset_calls()
    hook = make_hook(gateway, NEGOTIATE)
    assert hook.get_job(UNKNOWN_JOB_ID) is None
    newest = LAB_VERSIONS[-1]
    pings = [c["path"] for c in gateway.calls()["last"] if (c["path"] or "").endswith("/ping")]
    assert pings == (
        ["/slurm/v0.0.45/ping"] if newest == "v0.0.45" else ["/slurm/v0.0.45/ping", f"/slurm/{newest}/ping"]
    )
    assert hook.client.api_version == newest
    assert f"Slurm REST API version {newest} negotiated" in caplog.text + "".join(capfd.readouterr())
    assert list(kept.values()) == [newest]  # kept for the deployment's next task processes
    # A kept version the real slurmrestd does not serve (v0.0.45 on 24.11) is negotiated again, not a failure.
    if newest != "v0.0.45":
        kept.update(dict.fromkeys(kept, "v0.0.45"))
        gateway.reset_calls()
        again = make_hook(gateway, NEGOTIATE)
        assert again.get_job(UNKNOWN_JOB_ID) is None
        called = [c["path"] for c in gateway.calls()["last"]]
        assert called[:3] == [f"/slurm/v0.0.45/job/{UNKNOWN_JOB_ID}", "/slurm/v0.0.45/ping", f"/slurm/{newest}/ping"]
        assert again.client.api_version == newest and list(kept.values()) == [newest]


def test_a_version_the_real_slurm_deprecates_is_said_once(
    gateway: Any, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """Slurm 26.05 deprecates v0.0.42 but does not say so in its answers; the provider says it once."""
    import logging

    caplog.set_level(logging.INFO)
    hook = make_hook(gateway, "v0.0.42")
    for _ in range(3):
        assert hook.get_job(UNKNOWN_JOB_ID) is None
    text = caplog.text + "".join(capfd.readouterr())
    expected = 1 if traits("v0.0.42").deprecated_in == SLURM_RELEASE else 0
    assert text.count("v0.0.42 is deprecated in Slurm") == expected, text[-2000:]
