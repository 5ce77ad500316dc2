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
