"""A triggerer restart with many deferred tasks whose operators left no view of their job.

Each such trigger's job is unknown to the new process: the poller must read it once. Read one by one,
N triggers cost N ``GET /job/{id}`` calls at start; here they cost one ``jobs/`` list. Real triggers,
the real poller and the real emulator, which counts the calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.triggers import poller as poller_module
from airflow_provider_slurmapi.triggers.poller import (
    MAX_FIRST_READS_ONE_BY_ONE,
    MAX_PENDING_READS,
    pollers_of_this_loop,
)
from tests.unit.triggers.test_poller import (
    Triggerer,
    connect,
    make_trigger,
    rounds,
    submit,
    triggerer,  # noqa: F401 (the fixture)
    until,
)

N = 40


async def test_many_triggers_without_a_view_of_their_job_read_them_in_one_call(
    triggerer: Triggerer,  # noqa: F811 (the fixture)
    emulator_factory: Any,
    credentials_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert N > MAX_FIRST_READS_ONE_BY_ONE
    emu = emulator_factory()
    connect(monkeypatch, emu, credentials_file)
    ids = [await submit(emu, "#!/bin/bash\ntrue\n", name=f"held{i}", hold=True) for i in range(N)]
    emu.reset_calls()
    for job_id in ids:  # as the triggerer rebuilds them after a restart: no last_seen
        triggerer.start(f"t{job_id}", make_trigger(job_id))
    poller = await until(
        lambda: next((p for p in pollers_of_this_loop().values() if len(p.job_ids) == N), None),
        "every trigger subscribed",
    )
    await until(lambda: all(job_id in poller._known for job_id in ids), "every job read once")
    by_kind = emu.calls()["by_kind"]
    assert by_kind.get("job-get", 0) == 0, by_kind  # no job read one by one
    assert by_kind.get("jobs") == 1, by_kind
    assert all(poller._known[j].reason == "JobHeldUser" for j in ids)  # full records, with the reason

    # Later rounds, nothing changing: one jobs/state call each, as before.
    emu.reset_calls()
    start = poller.polls
    await rounds(poller, 3)
    calls = emu.calls()
    assert set(calls["by_kind"]) == {"total", "jobs-state"}, calls["by_kind"]
    assert calls["total"] <= poller.polls - start + 1
    assert not triggerer.events


async def test_many_pending_re_reads_due_at_once_read_them_in_one_call(
    triggerer: Triggerer,  # noqa: F811 (the fixture)
    emulator_factory: Any,
    credentials_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Triggers deferred together come due for their pending re-read together: one ``jobs/`` list reads
    them, not ``MAX_PENDING_READS`` ``job/{id}`` calls a round for minutes (the extra calls a deployment
    of several triggerers saw once its triggers had waited ``PENDING_REREAD_SECONDS``)."""
    assert N > MAX_PENDING_READS
    emu = emulator_factory()
    connect(monkeypatch, emu, credentials_file)
    ids = [await submit(emu, "#!/bin/bash\ntrue\n", name=f"held{i}", hold=True) for i in range(N)]
    for job_id in ids:
        triggerer.start(f"t{job_id}", make_trigger(job_id))
    poller = await until(
        lambda: next((p for p in pollers_of_this_loop().values() if len(p.job_ids) == N), None),
        "every trigger subscribed",
    )
    await until(lambda: all(job_id in poller._known for job_id in ids), "every job read once")
    monkeypatch.setattr(poller_module, "PENDING_REREAD_SECONDS", 0.0)  # every pending job is due every round
    emu.reset_calls()
    start = poller.polls
    await rounds(poller, 3)
    calls = emu.calls()["by_kind"]
    rounds_run = poller.polls - start
    assert calls.get("job-get", 0) == 0, calls  # none read one by one
    assert 1 <= calls.get("jobs", 0) <= rounds_run + 1, calls  # one list a round at the most
    assert poller.pending_reads_batched >= 1
    assert all(poller._known[j].reason == "JobHeldUser" for j in ids)
    assert not triggerer.events


async def test_a_pending_job_first_seen_while_none_is_due_is_re_read_a_period_after_it_was_seen(
    triggerer: Triggerer,  # noqa: F811 (the fixture)
    emulator_factory: Any,
    credentials_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rounds in which no pending job is due skip the search for due ones (thousands of jobs a round):
    a job whose operator's view is current (so no details are read at first) is still noted the round
    it is first seen, and re-read one period later, not one period after the next search."""
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
    from tests.conftest import CLUSTER

    monkeypatch.setattr(poller_module, "PENDING_REREAD_SECONDS", 3.0)
    emu = emulator_factory()
    connect(monkeypatch, emu, credentials_file)
    first = await submit(emu, "#!/bin/bash\ntrue\n", name="first", hold=True)
    triggerer.start("first", make_trigger(first))
    poller = await until(lambda: next(iter(pollers_of_this_loop().values()), None), "the poller")
    await until(lambda: poller._pending_floor is not None, "a round that found no pending job due")
    later = await submit(emu, "#!/bin/bash\ntrue\n", name="later", hold=True)
    seen = SlurmApiHook(**CLUSTER).get_job(later)  # the operator's view: current, so no detail read at first
    assert seen is not None
    emu.reset_calls()
    triggerer.start("later", make_trigger(later, last_seen=seen.to_dict()))
    await until(lambda: later in poller.job_ids, "the later trigger subscribed")
    start = poller.polls
    await rounds(poller, 2)
    assert not any(f"/job/{later}" in str(c.get("path")) for c in emu.calls()["last"])  # nothing read yet
    noted = poller._pending_read_at.get(later)
    assert noted is not None, "the job was not noted when first seen"
    assert poller._pending_floor is not None and poller._pending_floor <= noted
    await until(lambda: poller._pending_read_at.get(later, noted) > noted, "the later job re-read", timeout=30)
    assert poller.polls > start
    assert not triggerer.events
