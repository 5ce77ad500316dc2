"""A triggerer restart with many deferred tasks whose operators left no view of their job.

Each such trigger's job is unknown to the new process: the poller must read it once. Read one by one,
N triggers cost N ``GET /job/{id}`` calls at start; here they cost one ``jobs/`` list. Real triggers,
the real poller and the real emulator, which counts the calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.triggers.poller import MAX_FIRST_READS_ONE_BY_ONE, pollers_of_this_loop
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
