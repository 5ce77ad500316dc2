"""The shared per-cluster poller, with real SlurmJobTriggers against the real emulator.

Triggers are driven as the triggerer drives them: one asyncio task per trigger iterating
``trigger.run()`` on one event loop. Nothing here asserts on time: waits have generous limits that
only turn a hang into a failure, and call counts are compared with the poller's own rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from slurmapi_emulator import run_emulator

from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
from airflow_provider_slurmapi.triggers.poller import ClusterPoller, pollers_of_this_loop
from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger
from tests.conftest import CLUSTER, connection_uri_env, emulator_config
from tests.unit.triggers.rebuild import import_string
from tests.waiting import wait_until, wait_until_async

POLL = 0.2
WAIT = 90.0  # only turns a hang into a failure


# -- helpers ------------------------------------------------------------------------------------------
def connect(
    monkeypatch: pytest.MonkeyPatch, emulator: Any, key_file: Path, conn_id: str = "google_cloud_default"
) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", connection_uri_env(emulator, key_file))
    return conn_id


def waiting_script(go: Path, exit_code: int) -> str:
    """A job that runs until ``go`` exists, then exits with ``exit_code``."""
    return f"#!/bin/bash\nwhile [ ! -e {go} ]; do sleep 0.05; done\nexit {exit_code}\n"


def cluster_hook(conn_id: str) -> SlurmApiHook:
    return SlurmApiHook(
        gcp_conn_id=conn_id,
        project_id=CLUSTER["project_id"],
        region=CLUSTER["region"],
        cluster_id=CLUSTER["cluster_id"],
    )


async def submit(emulator: Any, script: str, *, conn_id: str = "google_cloud_default", **job: Any) -> int:
    spec = {"partition": "debug", "current_working_directory": str(emulator.config.workdir), **job}

    def call() -> int:
        return cluster_hook(conn_id).submit_job(spec, script).job_id

    return await asyncio.to_thread(call)


async def cancel(job_id: int, conn_id: str = "google_cloud_default") -> None:
    await asyncio.to_thread(lambda: cluster_hook(conn_id).cancel_job(job_id))


async def until(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return await wait_until_async(predicate, what, timeout=timeout, every=0.02)


async def running(emulator: Any, *job_ids: int) -> None:
    for job_id in job_ids:
        await asyncio.to_thread(emulator.wait_for_state, job_id, "RUNNING", WAIT)


def hold_the_loop_until(predicate: Callable[[], bool]) -> None:
    """Block the event loop (no poll can happen) until ``predicate()``; the emulator has its own thread."""
    wait_until(predicate, "the condition the loop is held for", timeout=WAIT, every=0.02)


def make_trigger(job_id: int, **overrides: Any) -> SlurmJobTrigger:
    settings: dict[str, Any] = {**CLUSTER, "poll_interval": POLL}
    settings.update(overrides)
    return SlurmJobTrigger(job_id=job_id, **settings)


class Triggerer:
    """Runs triggers like the triggerer: a task per trigger, ``async for event in trigger.run()``."""

    def __init__(self) -> None:
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.events: dict[str, list[dict[str, Any]]] = {}

    def start(self, name: str, trigger: Any) -> None:
        async def drive() -> None:
            async for event in trigger.run():
                self.events.setdefault(name, []).append(event.payload)

        self.tasks[name] = asyncio.get_running_loop().create_task(drive(), name=name)

    async def finish(self, *names: str) -> None:
        tasks = [self.tasks[n] for n in names] if names else list(self.tasks.values())
        await asyncio.wait_for(asyncio.gather(*tasks), WAIT)

    def event(self, name: str) -> dict[str, Any]:
        events = self.events.get(name, [])
        assert len(events) == 1, f"{name}: expected one event, got {events}"
        return events[0]

    async def stop_all(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)


def the_poller() -> ClusterPoller:
    pollers = pollers_of_this_loop()
    assert len(pollers) == 1, pollers
    return next(iter(pollers.values()))


async def rounds(poller: ClusterPoller, count: int) -> None:
    """Wait until the poller has started ``count`` more rounds."""
    start = poller.polls
    await until(lambda: poller.polls >= start + count, f"{count} more polls")


def assert_completed(event: dict[str, Any], job_id: int) -> None:
    assert event["status"] == "success", event
    assert event["job_id"] == job_id
    assert event["job"]["job_id"] == job_id
    assert event["job"]["state"] == "COMPLETED" and event["job"]["exit_code"] == 0


def assert_failed(event: dict[str, Any], job_id: int, state: str, exit_code: int | None = None) -> None:
    assert event["status"] == "failed", event
    assert event["job_id"] == job_id
    assert event["job"]["job_id"] == job_id
    assert event["job"]["state"] == state
    if exit_code is not None:
        assert event["job"]["exit_code"] == exit_code
        assert f"exit code {exit_code}" in event["message"]


@pytest.fixture
def exit_stack() -> Iterator[contextlib.ExitStack[Any]]:
    with contextlib.ExitStack() as stack:
        yield stack


@pytest.fixture
async def triggerer() -> AsyncIterator[Triggerer]:
    """Stops whatever a test left running; then no poller may be left."""
    runner = Triggerer()
    yield runner
    await runner.stop_all()
    assert pollers_of_this_loop() == {}


# -- tests --------------------------------------------------------------------------------------------
async def test_many_triggers_share_one_poller_and_each_gets_its_own_event(
    triggerer: Triggerer, emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    emu = emulator_factory(cpus=64)
    connect(monkeypatch, emu, credentials_file)
    go, never = tmp_path / "go", tmp_path / "never"
    ok = [await submit(emu, waiting_script(go, 0), name=f"ok{i}") for i in range(8)]
    bad = [await submit(emu, waiting_script(go, 3), name=f"bad{i}") for i in range(8)]
    doomed = [await submit(emu, waiting_script(never, 0), name=f"doomed{i}") for i in range(8)]
    held = [await submit(emu, "#!/bin/bash\ntrue\n", name=f"held{i}", hold=True) for i in range(4)]
    await running(emu, *ok, *bad, *doomed)

    for job_id in [*ok, *bad, *doomed, *held]:
        triggerer.start(f"t{job_id}", make_trigger(job_id))
    # Two more triggers on jobs already watched: same poller, same job, each its own subscription.
    triggerer.start("dup-ok", make_trigger(ok[0]))
    triggerer.start("dup-bad", make_trigger(bad[0]))
    every_job = {*ok, *bad, *doomed, *held}
    poller = await until(
        lambda: next((p for p in pollers_of_this_loop().values() if set(p.job_ids) == every_job), None),
        "every trigger subscribed",
    )
    assert len(pollers_of_this_loop()) == 1
    await rounds(poller, 2)  # a round that saw every job
    session = poller.hook._session
    assert session is not None and not session.closed

    # Nothing changes: one jobs/state call per round, nothing else.
    emu.reset_calls()
    start = poller.polls
    await rounds(poller, 5)
    calls = emu.calls()
    polls = poller.polls - start
    assert set(calls["by_kind"]) == {"total", "jobs-state"}, calls["by_kind"]
    assert calls["total"] <= polls + 1  # +1: a round in flight when counting started
    assert calls["total"] <= 2 * polls
    asked = [c["path"] for c in calls["last"]]
    assert all(p.startswith("/slurm/v0.0.42/jobs/state/?") and p.count("job_id=") == len(every_job) for p in asked)

    go.touch()
    for job_id in doomed:
        await cancel(job_id)
    await triggerer.finish(*(f"t{j}" for j in [*ok, *bad, *doomed]), "dup-ok", "dup-bad")
    for job_id in ok:
        assert_completed(triggerer.event(f"t{job_id}"), job_id)
    for job_id in bad:
        assert_failed(triggerer.event(f"t{job_id}"), job_id, "FAILED", 3)
    for job_id in doomed:
        assert_failed(triggerer.event(f"t{job_id}"), job_id, "CANCELLED")
    assert_completed(triggerer.event("dup-ok"), ok[0])
    assert_failed(triggerer.event("dup-bad"), bad[0], "FAILED", 3)

    # The held jobs are still watched by the same poller, alone now.
    assert pollers_of_this_loop() == {poller.key: poller}
    assert set(poller.job_ids) == set(held)
    assert all(name not in triggerer.events for name in (f"t{j}" for j in held))
    await triggerer.stop_all()
    assert pollers_of_this_loop() == {}
    assert session.closed
    assert poller._task is None


async def test_clusters_and_connections_never_mix(
    triggerer: Triggerer,
    emulator_factory: Any,
    credentials_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    exit_stack: contextlib.ExitStack[Any],
) -> None:
    # Two emulators number their jobs from 1: the same job ids, opposite outcomes.
    emu_a = emulator_factory(cpus=8)
    (tmp_path / "b").mkdir()
    key_b = tmp_path / "b" / "key.json"  # its own key file: each emulator only takes the tokens it issued
    emu_b = exit_stack.enter_context(run_emulator(emulator_config(key_b, tmp_path / "b", cpus=8)))
    conn_a = connect(monkeypatch, emu_a, credentials_file, "slurm_a")
    conn_b = connect(monkeypatch, emu_b, key_b, "slurm_b")
    go = tmp_path / "go"
    a1 = await submit(emu_a, waiting_script(go, 0), conn_id=conn_a)
    a2 = await submit(emu_a, waiting_script(go, 3), conn_id=conn_a)
    b1 = await submit(emu_b, waiting_script(go, 3), conn_id=conn_b)
    b2 = await submit(emu_b, waiting_script(go, 0), conn_id=conn_b)
    assert (a1, a2) == (b1, b2) == (1, 2)
    await running(emu_a, a1, a2)
    await running(emu_b, b1, b2)

    triggerer.start("a1", make_trigger(a1, gcp_conn_id=conn_a))
    triggerer.start("a2", make_trigger(a2, gcp_conn_id=conn_a))
    triggerer.start("b1", make_trigger(b1, gcp_conn_id=conn_b))
    triggerer.start("b2", make_trigger(b2, gcp_conn_id=conn_b))
    # Same connection, another cluster id: a poller of its own (the emulator serves any cluster id).
    triggerer.start("a2-other", make_trigger(a2, gcp_conn_id=conn_a, cluster_id="other-cluster"))
    # Same connection and cluster, another API version: a poller of its own too.
    triggerer.start("a1-v41", make_trigger(a1, gcp_conn_id=conn_a, api_version="v0.0.41"))

    # The default api_version "auto" is the poller's key, not the version it negotiates: one poller
    # for all the triggers of a cluster that leave it unset.
    expected = {
        (conn_a, CLUSTER["cluster_id"], "auto"): {a1, a2},
        (conn_b, CLUSTER["cluster_id"], "auto"): {b1, b2},
        (conn_a, "other-cluster", "auto"): {a2},
        (conn_a, CLUSTER["cluster_id"], "v0.0.41"): {a1},
    }

    def layout() -> dict[tuple[str, str, str], set[int]]:
        return {
            (p.key.gcp_conn_id, p.key.cluster_id, p.key.api_version): set(p.job_ids)
            for p in pollers_of_this_loop().values()
        }

    await until(lambda: layout() == expected, "four pollers")
    pollers = list(pollers_of_this_loop().values())
    await until(lambda: all(p.polls >= 2 and p.hook._session is not None for p in pollers), "every poller polled")
    hooks = {id(p.hook) for p in pollers}
    sessions = [p.hook._session for p in pollers]
    assert len(hooks) == 4 and len({id(s) for s in sessions}) == 4

    go.touch()
    await triggerer.finish()
    assert_completed(triggerer.event("a1"), a1)
    assert_failed(triggerer.event("a2"), a2, "FAILED", 3)
    assert_failed(triggerer.event("b1"), b1, "FAILED", 3)
    assert_completed(triggerer.event("b2"), b2)
    assert_failed(triggerer.event("a2-other"), a2, "FAILED", 3)
    assert_completed(triggerer.event("a1-v41"), a1)
    assert pollers_of_this_loop() == {}
    assert all(s is not None and s.closed for s in sessions)


async def test_cancelling_one_trigger_leaves_the_others_running(
    triggerer: Triggerer, emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    emu = emulator_factory(cpus=8)
    connect(monkeypatch, emu, credentials_file)
    go = tmp_path / "go"
    jobs = [await submit(emu, waiting_script(go, i % 2 * 3)) for i in range(5)]
    await running(emu, *jobs)
    for job_id in jobs:
        triggerer.start(f"t{job_id}", make_trigger(job_id))
    poller = await until(
        lambda: next((p for p in pollers_of_this_loop().values() if len(p.job_ids) == 5), None), "5 subscriptions"
    )
    await rounds(poller, 2)

    # A task cancelled between two polls (the triggerer removing a trigger).
    victim = triggerer.tasks[f"t{jobs[0]}"]
    victim.cancel()
    with pytest.raises(asyncio.CancelledError):
        await victim
    assert set(poller.job_ids) == set(jobs[1:])
    assert pollers_of_this_loop() == {poller.key: poller}

    # A task cancelled while a poll is in flight: the round is held open until the cancel is done.
    entered, release = asyncio.Event(), asyncio.Event()
    real_get_live_states = poller.hook.get_live_states

    async def held_open(job_ids: Any, **kwargs: Any) -> Any:
        entered.set()
        await release.wait()
        return await real_get_live_states(job_ids, **kwargs)

    poller.hook.get_live_states = held_open  # type: ignore[method-assign]
    await until(entered.is_set, "a poll in flight")
    victim = triggerer.tasks[f"t{jobs[1]}"]
    victim.cancel()
    with pytest.raises(asyncio.CancelledError):
        await victim
    release.set()
    await rounds(poller, 2)
    assert set(poller.job_ids) == set(jobs[2:])
    assert not poller._task.done()  # type: ignore[union-attr]

    # Airflow 3.3+: a cancelled task is not a kill (on_kill is); the jobs were not cancelled.
    states = {job["job_id"]: job["state"] for job in emu.jobs()}
    assert states[jobs[0]] == states[jobs[1]] == "RUNNING"

    go.touch()
    await triggerer.finish(*(f"t{j}" for j in jobs[2:]))
    assert_completed(triggerer.event(f"t{jobs[2]}"), jobs[2])
    assert_failed(triggerer.event(f"t{jobs[3]}"), jobs[3], "FAILED", 3)
    assert_completed(triggerer.event(f"t{jobs[4]}"), jobs[4])
    assert f"t{jobs[0]}" not in triggerer.events and f"t{jobs[1]}" not in triggerer.events
    assert pollers_of_this_loop() == {}


async def test_cancelling_every_trigger_stops_the_poller_and_closes_its_session(
    triggerer: Triggerer, emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    emu = emulator_factory()
    connect(monkeypatch, emu, credentials_file)
    held = [await submit(emu, "#!/bin/bash\ntrue\n", hold=True) for _ in range(20)]
    for job_id in held:
        triggerer.start(f"t{job_id}", make_trigger(job_id))
    poller = await until(
        lambda: next((p for p in pollers_of_this_loop().values() if len(p.job_ids) == 20), None), "20 subscriptions"
    )
    await rounds(poller, 2)
    session, task = poller.hook._session, poller._task
    assert session is not None and task is not None
    await triggerer.stop_all()  # what a triggerer shutdown does
    assert pollers_of_this_loop() == {}
    assert session.closed and task.done() and poller.hook._session is None
    assert triggerer.events == {}
    # A new trigger afterwards gets a fresh poller, which works.
    triggerer.start("late", make_trigger(held[0]))
    fresh = await until(lambda: next(iter(pollers_of_this_loop().values()), None), "a new poller")
    assert fresh is not poller
    await rounds(fresh, 2)
    await triggerer.stop_all()


async def test_a_job_that_leaves_the_live_queue_mid_watch_is_read_from_the_history(
    triggerer: Triggerer, emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    emu = emulator_factory(cpus=8, min_job_age=0.0)
    connect(monkeypatch, emu, credentials_file)
    go = tmp_path / "go"
    done_ok = await submit(emu, waiting_script(go, 0))
    done_bad = await submit(emu, waiting_script(go, 3))
    still = await submit(emu, "#!/bin/bash\ntrue\n", hold=True)
    await running(emu, done_ok, done_bad)
    for job_id in (done_ok, done_bad, still):
        triggerer.start(f"t{job_id}", make_trigger(job_id))
    triggerer.start("unknown", make_trigger(424242, missing_grace_seconds=0))
    poller = await until(
        lambda: next((p for p in pollers_of_this_loop().values() if len(p.job_ids) == 4), None), "4 subscriptions"
    )
    await triggerer.finish("unknown")
    event = triggerer.event("unknown")
    assert event["status"] == "error" and "neither the live queue nor the accounting history" in event["message"]
    await rounds(poller, 2)

    # The event loop is held while the jobs end and leave the live queue (MinJobAge 0): the
    # poller's next look finds them missing there.
    go.touch()
    hold_the_loop_until(lambda: {done_ok, done_bad} <= {j["job_id"] for j in emu.jobs() if not j["in_live_queue"]})
    emu.reset_calls()

    await triggerer.finish(f"t{done_ok}", f"t{done_bad}")
    ok_event, bad_event = triggerer.event(f"t{done_ok}"), triggerer.event(f"t{done_bad}")
    assert_completed(ok_event, done_ok)
    assert_failed(bad_event, done_bad, "FAILED", 3)
    assert ok_event["job"]["source"] == bad_event["job"]["source"] == "history"
    calls = emu.calls()
    history_paths = {c["path"] for c in calls["last"] if c["kind"] == "slurmdb"}
    assert history_paths == {f"/slurmdb/v0.0.42/job/{done_ok}", f"/slurmdb/v0.0.42/job/{done_bad}"}
    assert set(poller.job_ids) == {still}
    await triggerer.stop_all()


async def test_an_envelope_that_refuses_query_strings_falls_back_to_the_job_list(
    triggerer: Triggerer, emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    emu = emulator_factory(cpus=8, reject_query_strings=True)
    connect(monkeypatch, emu, credentials_file)
    go = tmp_path / "go"
    ok = await submit(emu, waiting_script(go, 0))
    bad = await submit(emu, waiting_script(go, 3))
    held = await submit(emu, "#!/bin/bash\ntrue\n", hold=True)
    await running(emu, ok, bad)
    emu.reset_calls()
    for job_id in (ok, bad, held):
        triggerer.start(f"t{job_id}", make_trigger(job_id))
    poller = await until(
        lambda: next((p for p in pollers_of_this_loop().values() if len(p.job_ids) == 3), None), "3 subscriptions"
    )
    await rounds(poller, 3)
    calls = emu.calls()
    # The envelope refuses the path before reading it (the emulator records no kind for it).
    refused = [c for c in calls["last"] if c["http_status"] == 400]
    assert len(refused) == 1  # asked once, then the poller remembers
    assert "jobs-state" not in calls["by_kind"]
    assert any(c["kind"] == "jobs" and c["path"] == "/slurm/v0.0.42/jobs/" for c in calls["last"])
    assert not any("?" in c["path"] for c in calls["last"] if c["http_status"] == 200)

    emu.reset_calls()
    start = poller.polls
    await rounds(poller, 4)
    steady = emu.calls()
    assert set(steady["by_kind"]) == {"total", "jobs"}
    assert steady["total"] <= poller.polls - start + 1

    go.touch()
    await triggerer.finish(f"t{ok}", f"t{bad}")
    assert_completed(triggerer.event(f"t{ok}"), ok)
    assert_failed(triggerer.event(f"t{bad}"), bad, "FAILED", 3)
    assert "?" not in "".join(c["path"] for c in emu.calls()["last"] if c["http_status"] == 200)
    await triggerer.stop_all()


async def test_a_trigger_rebuilt_from_serialize_behaves_the_same(
    triggerer: Triggerer, emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    emu = emulator_factory(cpus=8)
    connect(monkeypatch, emu, credentials_file)
    go = tmp_path / "go"
    job_id = await submit(emu, waiting_script(go, 3))
    await running(emu, job_id)
    original = make_trigger(job_id, impersonation_chain=None, cancel_on_kill=False, missing_grace_seconds=42)
    classpath, kwargs = original.serialize()
    # What the triggerer stores and reads back.
    rebuilt = import_string(classpath)(**json.loads(json.dumps(kwargs)))
    assert type(rebuilt) is SlurmJobTrigger
    assert rebuilt.serialize() == (classpath, kwargs)
    assert rebuilt.poller_key == original.poller_key
    assert isinstance(rebuilt.poller_key, ClusterRef)

    triggerer.start("original", original)
    triggerer.start("rebuilt", rebuilt)
    poller = await until(
        lambda: next((p for p in pollers_of_this_loop().values() if p.job_ids == [job_id]), None), "one poller"
    )
    await until(lambda: sum(len(s) for s in poller._subscriptions.values()) == 2, "both subscribed")
    assert len(pollers_of_this_loop()) == 1
    go.touch()
    await triggerer.finish()
    assert triggerer.event("original") == triggerer.event("rebuilt")
    assert_failed(triggerer.event("rebuilt"), job_id, "FAILED", 3)


async def test_a_trigger_leaving_during_a_round_leaves_no_state_behind(
    triggerer: Triggerer, emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    emu = emulator_factory()
    connect(monkeypatch, emu, credentials_file)
    stays, leaves = [await submit(emu, "#!/bin/bash\ntrue\n", hold=True) for _ in range(2)]
    triggerer.start("stays", make_trigger(stays))
    triggerer.start("leaves", make_trigger(leaves))
    poller = await until(
        lambda: next((p for p in pollers_of_this_loop().values() if len(p.job_ids) == 2), None), "2 subscriptions"
    )
    await rounds(poller, 2)
    entered, release = asyncio.Event(), asyncio.Event()
    real_get_live_states = poller.hook.get_live_states

    async def held_open(job_ids: Any, **kwargs: Any) -> Any:
        entered.set()
        await release.wait()
        return await real_get_live_states(job_ids, **kwargs)

    poller.hook.get_live_states = held_open  # type: ignore[method-assign]
    await until(entered.is_set, "a poll in flight")
    triggerer.tasks["leaves"].cancel()
    await asyncio.gather(triggerer.tasks["leaves"], return_exceptions=True)
    release.set()
    await rounds(poller, 2)
    try:
        assert poller.job_ids == [stays]
        assert set(poller._known) <= {stays}, f"left behind: {sorted(set(poller._known) - {stays})}"
    finally:
        await triggerer.stop_all()


async def test_a_burst_of_changes_reads_only_the_changed_jobs_never_the_whole_queue(
    triggerer: Triggerer, emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty held jobs cancelled at once, in a queue with 300 jobs of another user: one job-get each, no jobs/."""
    emu = emulator_factory(min_job_age=600)
    connect(monkeypatch, emu, credentials_file)
    emu.add_foreign_jobs(300, "nobody")
    held = [await submit(emu, "#!/bin/bash\ntrue\n", name=f"burst{i}", hold=True) for i in range(20)]
    for job_id in held:
        triggerer.start(f"t{job_id}", make_trigger(job_id))
    await until(lambda: pollers_of_this_loop() and next(iter(pollers_of_this_loop().values())).polls >= 2, "polls")
    emu.reset_calls()
    hook = cluster_hook("google_cloud_default")
    for job_id in held:  # blocking calls on the loop's thread: no round runs until all are cancelled
        hook.cancel_job(job_id)
    await triggerer.finish()
    for job_id in held:
        assert triggerer.event(f"t{job_id}")["job"]["state"] == "CANCELLED"
    by_kind = emu.calls()["by_kind"]
    assert by_kind.get("job-delete") == 20, by_kind
    assert by_kind.get("job-get", 0) == 20, by_kind
    assert by_kind.get("jobs", 0) == 0, by_kind
