"""``api_version="auto"``: both hooks negotiate the newest version both sides speak, once per cluster.

Against the emulator acting as a given Slurm release (``slurm_release``: the versions it serves and
the release in every answer's meta), over real HTTP, with a real service-account key connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks import slurm as slurm_hooks
from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook, SlurmApiHook
from tests.conftest import CLUSTER, point_airflow_at


@pytest.fixture(autouse=True)
def _fresh_deployment(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Each test is a fresh deployment as far as negotiation goes: no version kept yet.

    The unit tests have no metadata database, so the deployment's Variables are a dict here (the
    Airflow side of the store: the hooks' callbacks and the core's use of them are the real ones).
    """
    kept: dict[str, str] = {}

    def store(where: Callable[[], str]) -> tuple[Callable[[], str | None], Callable[[str], None]]:
        return (lambda: kept.get(where())), (lambda version: kept.__setitem__(where(), version))

    monkeypatch.setattr(slurm_hooks, "version_store", store)
    yield kept


def cluster_as(release: str, emulator_factory: Any, credentials_file: Any, monkeypatch: Any) -> Any:
    emulator = emulator_factory(slurm_release=release)
    point_airflow_at(emulator, credentials_file, monkeypatch)
    return emulator


def paths_called(emulator: Any) -> list[str]:
    return [str(call.get("path")) for call in emulator.calls()["last"] if call.get("path")]


def logged(caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> str:
    return caplog.text + "".join(capfd.readouterr())


@pytest.mark.parametrize(
    ("release", "picked", "pings"),
    [
        ("26.05", "v0.0.45", ["/slurm/v0.0.45/ping"]),
        # v0.0.45 is refused (404); v0.0.42 answers, and its meta names 24.11, which serves nothing newer.
        ("24.11", "v0.0.42", ["/slurm/v0.0.45/ping", "/slurm/v0.0.42/ping"]),
        # 25.11 serves v0.0.41-44: the v0.0.42 answer's release leads to v0.0.44 without pinging it.
        ("25.11", "v0.0.44", ["/slurm/v0.0.45/ping", "/slurm/v0.0.42/ping"]),
    ],
)
def test_the_sync_hook_speaks_the_newest_version_both_sides_know_and_asks_once_per_deployment(
    release: str,
    picked: str,
    pings: list[str],
    emulator_factory: Any,
    credentials_file: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.INFO)
    emulator = cluster_as(release, emulator_factory, credentials_file, monkeypatch)
    hook = SlurmApiHook(**CLUSTER)
    assert hook.list_jobs() == []
    assert hook.list_jobs(history=True) == []
    assert paths_called(emulator)[: len(pings)] == pings
    assert {p.split("/")[2] for p in paths_called(emulator)[len(pings) :]} == {picked}
    assert f"Slurm REST API version {picked} negotiated" in logged(caplog, capfd)
    # Another hook of the same deployment (another task's process, a poller's) does not ask again: the
    # version is kept (an Airflow Variable per cluster), as the caller's account is.
    emulator.reset_calls()
    assert SlurmApiHook(**CLUSTER).get_job(4242) is None
    assert not [p for p in paths_called(emulator) if p.endswith("/ping")]
    assert all(f"/{picked}/" in p for p in paths_called(emulator))


def test_the_async_hook_negotiates_once_for_many_coroutines(
    emulator_factory: Any, credentials_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    emulator = cluster_as("26.05", emulator_factory, credentials_file, monkeypatch)

    async def many() -> list[Any]:
        async with SlurmApiAsyncHook(**CLUSTER) as hook:
            return await asyncio.gather(*(hook.get_job(4000 + n) for n in range(20)))

    assert asyncio.run(many()) == [None] * 20
    called = paths_called(emulator)
    assert called.count("/slurm/v0.0.45/ping") == 1
    assert all("/v0.0.45/" in p for p in called)


def test_an_explicit_version_is_honoured_without_any_negotiation(
    emulator_factory: Any, credentials_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    emulator = cluster_as("26.05", emulator_factory, credentials_file, monkeypatch)
    assert SlurmApiHook(**{**CLUSTER, "api_version": "v0.0.43"}).list_jobs() == []
    assert paths_called(emulator) == ["/slurm/v0.0.43/jobs/"]


def test_a_deprecated_version_is_said_once_however_many_calls(
    emulator_factory: Any, credentials_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_as("26.05", emulator_factory, credentials_file, monkeypatch)
    hook = SlurmApiHook(**{**CLUSTER, "api_version": "v0.0.42"})
    # Counted where the hook emits them: how many handlers Airflow's logging config puts after that
    # (stderr, task log, pytest's capture) differs between Airflow 2 and 3, as does the logger's kind.
    warned: list[str] = []
    emit = hook.log.warning
    monkeypatch.setattr(
        hook.log, "warning", lambda msg, *args, **kw: (warned.append(msg % args), emit(msg, *args, **kw))
    )
    for _ in range(4):
        hook.list_jobs()
    notices = [text for text in warned if "v0.0.42 is deprecated in Slurm 26.05" in text]
    assert len(notices) == 1, notices
    assert "removed in 26.11" in notices[0]


def test_an_old_cluster_is_found_by_trying_the_rest_newest_first(
    emulator_factory: Any, credentials_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    emulator = cluster_as("23.11", emulator_factory, credentials_file, monkeypatch)  # serves v0.0.40 only
    assert SlurmApiHook(**CLUSTER).list_jobs() == []
    pings = [p for p in paths_called(emulator) if p.endswith("/ping")]
    assert pings == [f"/slurm/{v}/ping" for v in ("v0.0.45", "v0.0.42", "v0.0.44", "v0.0.43", "v0.0.41", "v0.0.40")]
    assert paths_called(emulator)[-1] == "/slurm/v0.0.40/jobs/"


def test_a_kept_version_the_cluster_stopped_serving_is_negotiated_again_not_a_failure(
    emulator_factory: Any, credentials_file: Any, monkeypatch: pytest.MonkeyPatch, _fresh_deployment: dict[str, str]
) -> None:
    """The cluster went from 26.05 to 24.11 (v0.0.45 no longer served) since the version was kept."""
    emulator = cluster_as("24.11", emulator_factory, credentials_file, monkeypatch)
    first = SlurmApiHook(**CLUSTER)
    name = slurm_hooks._version_variable(first.cluster)
    _fresh_deployment[name] = "v0.0.45"
    assert first.get_job(4242) is None
    assert paths_called(emulator)[:3] == ["/slurm/v0.0.45/job/4242", "/slurm/v0.0.45/ping", "/slurm/v0.0.42/ping"]
    assert all("/v0.0.42/" in p for p in paths_called(emulator)[3:])
    assert _fresh_deployment[name] == "v0.0.42"  # the new one is kept for the next task


def test_a_task_process_with_a_kept_version_costs_no_negotiation_and_a_triggerer_negotiates_once(
    emulator_factory: Any, credentials_file: Any, monkeypatch: pytest.MonkeyPatch, _fresh_deployment: dict[str, str]
) -> None:
    emulator = cluster_as("24.11", emulator_factory, credentials_file, monkeypatch)
    assert SlurmApiHook(**CLUSTER).list_jobs() == []  # the first task of the deployment negotiates
    emulator.reset_calls()

    async def triggerer() -> Any:
        async with SlurmApiAsyncHook(**CLUSTER) as hook:
            return await hook.get_job(4242)

    assert asyncio.run(triggerer()) is None  # the triggerer's one client per cluster: reads no Variable
    assert SlurmApiHook(**CLUSTER).get_job(4243) is None  # a task process: the kept version, no ping
    assert paths_called(emulator) == [
        "/slurm/v0.0.45/ping",
        "/slurm/v0.0.42/ping",
        "/slurm/v0.0.42/job/4242",
        "/slurmdb/v0.0.42/job/4242",
        "/slurm/v0.0.42/job/4243",
        "/slurmdb/v0.0.42/job/4243",
    ]


def test_a_task_start_costs_the_submit_alone_and_a_resume_the_accounting_read(
    emulator_factory: Any, credentials_file: Any, monkeypatch: pytest.MonkeyPatch, _fresh_deployment: dict[str, str]
) -> None:
    """Issue 25's goal for calls per task, counted on the gateway: once the deployment knows the version
    and the account (kept by an earlier task), a task process starts with 1 call and resumes with 1."""
    from airflow_provider_slurmapi.account_store import variable_name
    from tests.conftest import CLUSTER_ID, PROJECT, REGION

    emulator = cluster_as("24.11", emulator_factory, credentials_file, monkeypatch)
    first = SlurmApiHook(**CLUSTER)
    job = {"name": "calls", "partition": "debug", "hold": True, "current_working_directory": "/tmp"}
    submitted = first.submit_job(job, "#!/bin/bash\nsleep 60\n")  # the deployment's first task negotiates
    account = emulator.calls()["last"]
    assert [c["path"] for c in account][:3] == [
        "/slurm/v0.0.45/ping",
        "/slurm/v0.0.42/ping",
        "/slurm/v0.0.42/job/submit",
    ]
    owner = next(j["user"] for j in emulator.jobs() if j["job_id"] == submitted.job_id)
    monkeypatch.setenv(
        f"AIRFLOW_VAR_{variable_name('google_cloud_default', PROJECT, REGION, CLUSTER_ID).upper()}", owner
    )

    emulator.reset_calls()
    started = SlurmApiHook(**CLUSTER).submit_job(job, "#!/bin/bash\nsleep 60\n")  # another task's process
    assert paths_called(emulator) == ["/slurm/v0.0.42/job/submit"]
    emulator.reset_calls()
    SlurmApiHook(**CLUSTER).get_accounting(started.job_id)  # the resumed task's one read
    assert paths_called(emulator) == [f"/slurmdb/v0.0.42/job/{started.job_id}"]
