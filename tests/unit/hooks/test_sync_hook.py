"""The sync hook against the emulator over real HTTP, with a real service-account key connection."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
from airflow_provider_slurmapi.slurm.api.errors import (
    ClusterNotFoundError,
    ConfigurationError,
    PermissionDeniedError,
    RequestTooLargeError,
    SlurmError,
)
from airflow_provider_slurmapi.slurm.jobs.readers import CancelOutcome
from airflow_provider_slurmapi.slurm.jobs.states import JobState
from tests.conftest import CLUSTER
from tests.waiting import wait_until

QUICK = "#!/bin/bash\necho hello\n"


def make_hook(**kwargs: Any) -> SlurmApiHook:
    hook = SlurmApiHook(**{**CLUSTER, **kwargs})
    hook.client.retry_initial_wait = 0.05
    return hook


def job_spec(workdir: Any, **fields: Any) -> dict[str, Any]:
    return {"name": "t", "partition": "debug", "current_working_directory": str(workdir), **fields}


def test_submit_wait_and_find_in_history_after_purge(gcp_connection: Any) -> None:
    hook = make_hook()
    result = hook.submit_job(job_spec(gcp_connection.config.workdir, time_limit=1), QUICK)
    assert result.job_id >= 1
    gcp_connection.wait_for_state(result.job_id, ["COMPLETED"], timeout=30)
    live = hook.get_job(result.job_id)
    assert live is not None and live.state is JobState.COMPLETED and live.source == "live"
    assert live.stdout and live.exit.return_code == 0
    # MinJobAge is 2 s here: the job leaves the live queue, and the hook finds it in the history.

    wait_until(lambda: hook.get_live_job(result.job_id) is None, "the job left the live queue", every=0.5)
    history = hook.get_job(result.job_id)
    assert history is not None and history.source == "history" and history.succeeded
    assert history.job_id == result.job_id


def test_structured_envelope_works_the_same(emulator_factory: Any, credentials_file: Any, monkeypatch: Any) -> None:
    from tests.conftest import connection_uri_env

    emulator = emulator_factory(envelope="structured")
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(emulator, credentials_file))
    hook = make_hook()
    job_id = hook.submit_job(job_spec(emulator.config.workdir), QUICK).job_id
    emulator.wait_for_state(job_id, ["COMPLETED"], timeout=30)
    job = hook.get_job(job_id)
    assert job is not None and job.succeeded
    with pytest.raises(SlurmError, match="2000 Invalid partition name specified"):
        hook.submit_job(job_spec(emulator.config.workdir, partition="nope"), QUICK)


def logged(caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> str:
    """What hooks logged: Airflow 3's hook loggers write through structlog, not only stdlib logging."""
    return caplog.text + "".join(capfd.readouterr())


def test_missing_fields_get_logged_defaults(
    gcp_connection: Any, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO)
    hook = make_hook()
    job_id = hook.submit_job({"partition": "debug"}, QUICK).job_id
    text = logged(caplog, capfd)
    assert "current_working_directory was not set" in text
    assert "environment was not set" in text
    job = hook.get_live_job(job_id)
    assert job is not None


def test_slurm_errors_reach_the_user(gcp_connection: Any) -> None:
    hook = make_hook()
    with pytest.raises(SlurmError, match=r"2000 Invalid partition name specified \(Batch job submission failed\)"):
        hook.submit_job(job_spec(gcp_connection.config.workdir, partition="nope"), QUICK)
    with pytest.raises(SlurmError, match="no node that fits"):
        hook.submit_job(job_spec(gcp_connection.config.workdir, tres_per_node="gres/gpu:64"), QUICK)
    with pytest.raises(ConfigurationError, match="time_limit"):
        hook.submit_job(job_spec(gcp_connection.config.workdir, time_limit="abc"), QUICK)


def test_held_job_warning_is_returned_and_logged(
    gcp_connection: Any, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    hook = make_hook()
    result = hook.submit_job(job_spec(gcp_connection.config.workdir, hold=True), QUICK)
    assert any("held" in w for w in result.warnings)
    assert "held state" in logged(caplog, capfd)
    job = hook.get_job(result.job_id)
    assert job is not None and job.state is JobState.PENDING and job.reason == "JobHeldUser"
    assert hook.cancel_job(result.job_id) is CancelOutcome.CANCELLED


def test_cancel_outcomes(gcp_connection: Any) -> None:
    hook = make_hook()
    job_id = hook.submit_job(job_spec(gcp_connection.config.workdir), "#!/bin/bash\nsleep 60\n").job_id
    gcp_connection.wait_for_state(job_id, ["RUNNING"], timeout=30)
    assert hook.cancel_job(job_id) is CancelOutcome.CANCELLED
    gcp_connection.wait_for_state(job_id, ["CANCELLED"], timeout=30)
    assert hook.cancel_job(job_id) is CancelOutcome.ALREADY_FINISHED
    assert hook.cancel_job(999999) is CancelOutcome.UNKNOWN_JOB
    assert hook.get_job(999999) is None


def test_list_and_states(gcp_connection: Any) -> None:
    hook = make_hook()
    ids = [hook.submit_job(job_spec(gcp_connection.config.workdir), "#!/bin/bash\nsleep 30\n").job_id for _ in range(3)]
    states = hook.get_live_states(ids)
    assert set(states) == set(ids)
    listed = {job.job_id for job in hook.list_jobs()}
    assert set(ids) <= listed
    for job_id in ids:
        hook.cancel_job(job_id)


def test_states_fall_back_to_jobs_list_when_query_strings_are_refused(
    emulator_factory: Any, credentials_file: Any, monkeypatch: Any
) -> None:
    from tests.conftest import connection_uri_env

    emulator = emulator_factory(reject_query_strings=True)
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(emulator, credentials_file))
    hook = make_hook()
    job_id = hook.submit_job(job_spec(emulator.config.workdir), "#!/bin/bash\nsleep 30\n").job_id
    assert set(hook.get_live_states([job_id])) == {job_id}
    hook.cancel_job(job_id)


def test_wrong_cluster_and_missing_permission(emulator_factory: Any, credentials_file: Any, monkeypatch: Any) -> None:
    from tests.conftest import connection_uri_env

    emulator = emulator_factory(clusters={"another-cluster"})
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(emulator, credentials_file))
    with pytest.raises(ClusterNotFoundError, match="cluster_id=demo-cluster"):
        make_hook().get_job(1)
    denied = emulator_factory(deny_permission=True)
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(denied, credentials_file))
    with pytest.raises(PermissionDeniedError, match=r"modelDevelopmentClusters\.run"):
        make_hook().get_job(1)


@pytest.mark.parametrize(("region", "served"), [("us-centrl1", None), ("europe-west4", ["us-central1"])])
def test_a_region_the_api_does_not_serve_fails_at_once_naming_region_and_cluster(
    region: str, served: list[str] | None, emulator_factory: Any, credentials_file: Any, monkeypatch: Any
) -> None:
    """A typo in a templated region that is still a region's shape: the API's 404 NOT_FOUND, not retried."""
    from airflow_provider_slurmapi.slurm.api.errors import is_permanent
    from tests.conftest import connection_uri_env

    emulator = emulator_factory(**({"regions": served} if served else {}))
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(emulator, credentials_file))
    with pytest.raises(ClusterNotFoundError) as caught:
        make_hook(region=region).submit_job(job_spec(emulator.config.workdir), QUICK)
    message = str(caught.value)
    assert f"region={region}" in message and "cluster_id=demo-cluster" in message, message
    assert f"locations/{region}` not found" in message and "Check project_id, region and cluster_id" in message
    assert is_permanent(caught.value)
    assert emulator.calls()["total"] == 1, "the provider tried again what no retry can fix"
    assert emulator.jobs() == []


def test_large_request_is_refused_before_sending(gcp_connection: Any) -> None:
    hook = make_hook()
    hook.get_job(1)  # warm up: token and session
    before = gcp_connection.calls()["total"]
    with pytest.raises(RequestTooLargeError, match="shared storage"):
        hook.submit_job(job_spec(gcp_connection.config.workdir), "#!/bin/bash\n" + "#" * (1024 * 1024))
    assert gcp_connection.calls()["total"] == before
    assert not [job for job in gcp_connection.jobs() if job["name"] == "t"]


def test_transient_failures_of_reads_are_retried(gcp_connection: Any) -> None:
    hook = make_hook()
    job_id = hook.submit_job(job_spec(gcp_connection.config.workdir), QUICK).job_id
    gcp_connection.add_fault("unavailable@job-get*2")
    gcp_connection.add_fault("503-before@job-get*1")
    assert hook.get_live_job(job_id) is not None


def test_no_secret_in_logs_errors_or_repr(
    gcp_connection: Any, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    hook = make_hook()
    hook.get_job(1)
    token = hook.session.credentials.token  # type: ignore[attr-defined]
    assert token
    try:
        make_hook(cluster_id="nope", api_endpoint=gcp_connection.url).get_job(1)
    except Exception as exc:  # any error text must be token-free
        assert token not in str(exc)
    text = logged(caplog, capfd)
    assert token not in text
    assert token not in repr(hook)
    assert "PRIVATE KEY" not in text


def test_the_termination_wait_runs_on_the_hooks_clock(gcp_connection: Any) -> None:
    """The cancel operator's wait: a job that does not finish is looked at every poll until the timeout,
    on the hook's clock (no real time passes here); a cancelled one is answered once it has finished."""
    from tests.unit.hooks.fake_clock import FakeClock

    hook, clock = make_hook(), FakeClock()
    hook.client.clock = clock
    workdir = gcp_connection.config.workdir
    running = hook.submit_job(job_spec(workdir, name="stays"), "#!/bin/bash\nsleep 120\n").job_id
    gcp_connection.wait_for_state(running, ["RUNNING", "PENDING"], timeout=30)
    gcp_connection.reset_calls()
    job = hook.wait_for_termination(running, 10, poll_seconds=3)
    assert job is not None and not job.is_finished
    assert clock.sleeps == [3, 3, 3, 1]  # the last wait ends at the timeout, not past it
    assert gcp_connection.calls()["total"] == 5  # the first look and one after each wait
    hook.cancel_job(running)
    done = hook.wait_for_termination(running, 60, poll_seconds=1)
    assert done is not None and done.is_finished and done.state is JobState.CANCELLED
    assert hook.wait_for_termination(999_999, 10, poll_seconds=1) is None


def test_a_setting_of_the_client_tuned_on_the_hook_says_where_it_moved(gcp_connection: Any) -> None:
    """Before the hooks held a client, callers tuned ``hook.retry_seconds`` and the like: such a line must
    fail naming ``hook.client``, not set an attribute nothing reads."""
    from airflow_provider_slurmapi.hooks.slurm import CLIENT_ATTRIBUTES, SlurmApiAsyncHook

    for hook in (make_hook(), SlurmApiAsyncHook(**CLUSTER)):
        for name in sorted(CLIENT_ATTRIBUTES):
            assert hasattr(hook.client, name), name
            with pytest.raises(AttributeError, match=rf"use hook\.client\.{name}"):
                setattr(hook, name, getattr(hook.client, name))
            with pytest.raises(AttributeError, match=rf"use hook\.client\.{name}"):
                getattr(hook, name)
        assert not hasattr(hook, "no_such_thing")
