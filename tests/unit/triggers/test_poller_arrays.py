"""Job arrays through the shared poller: one jobs/state call a round follows every task, two arrays
watched together keep their own tasks, and a plain job beside them is unaffected."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook, SlurmApiHook
from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
from airflow_provider_slurmapi.triggers.poller import ClusterPoller, Subscription
from tests.conftest import CLUSTER, connection_uri_env
from tests.waiting import wait_until, wait_until_async

KEY = ClusterRef(CLUSTER["project_id"], CLUSTER["region"], CLUSTER["cluster_id"])


@pytest.fixture
def connected(emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    emulator = emulator_factory(cpus=4, min_job_age=60)
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(emulator, credentials_file))
    return emulator


def test_two_arrays_and_a_job_on_one_poller(connected: Any) -> None:
    hook = SlurmApiHook(**CLUSTER)
    workdir = str(connected.config.workdir)
    spec = {"partition": "debug", "current_working_directory": workdir}
    # Array A: task 1 fails (exit 5). Array B: all complete, with other task ids. Both throttled to 1
    # so that their tasks start one by one, under job ids the poller has not seen.
    fails = '#!/bin/bash\nsleep 0.5\nif [ "$SLURM_ARRAY_TASK_ID" = 1 ]; then exit 5; fi\n'
    a = hook.submit_job({**spec, "name": "a", "array": "0-2%1"}, fails).job_id
    b = hook.submit_job({**spec, "name": "b", "array": "1-4%1"}, "#!/bin/bash\nsleep 0.5\n").job_id
    plain = hook.submit_job({**spec, "name": "plain"}, "#!/bin/bash\nsleep 1\n").job_id

    async def scenario() -> tuple[dict[int, Any], list[int], list[int], dict[int, list[str]]]:
        async_hook = SlurmApiAsyncHook(cluster=KEY)
        poller = ClusterPoller(KEY, async_hook)
        subs = {}
        for job_id in (a, b, plain):
            seen = await async_hook.get_job(job_id)  # what the operator saw after its submit
            subs[job_id] = Subscription(job_id, 3600, seen)
            poller._subscriptions.setdefault(job_id, set()).add(subs[job_id])
            poller._known[job_id] = seen  # type: ignore[assignment]
        calls: list[int] = []
        quiet: list[int] = []  # the calls of rounds in which no watched job changed
        lines: dict[int, list[str]] = {a: [], b: []}

        def picture() -> list[str]:
            return [poller._known[j].describe() for j in (a, b, plain)]

        async def one_round() -> bool:
            """A poll round as the poller runs it; True once every watched job has finished."""
            connected.reset_calls()
            before = picture()
            await poller.poll_once()
            calls.append(connected.calls()["total"])
            if picture() == before and len(calls) > 1:  # the first round reads what it has not polled yet
                quiet.append(calls[-1])
            for array_id in (a, b):
                known = poller._known[array_id]
                if not lines[array_id] or lines[array_id][-1] != known.describe():
                    lines[array_id].append(known.describe())
            return all(poller._known[j].is_finished for j in (a, b, plain))

        # The assertions below say what did not finish.
        await wait_until_async(one_round, "every watched job finished", timeout=60, every=0.25, give_up=True)
        final = dict(poller._known)
        await async_hook.close()
        return final, calls, quiet, lines

    final, calls, quiet, lines = asyncio.run(scenario())
    assert final[plain].succeeded and final[plain].array is None
    assert sorted(final[a].array.tasks) == [0, 1, 2] and sorted(final[b].array.tasks) == [1, 2, 3, 4]
    assert [t.task_id for t in final[a].array.failed] == [1] and final[a].array.tasks[1].exit_code == 5
    assert final[b].succeeded and final[b].describe() == f"array {b}: 4 COMPLETED"
    # Each task id belongs to its own array: the job ids of A's tasks are not B's.
    a_jobs = {t.job_id for t in final[a].array.tasks.values()}
    b_jobs = {t.job_id for t in final[b].array.tasks.values()}
    assert not a_jobs & b_jobs and None not in a_jobs | b_jobs
    jobs = {j["job_id"]: j for j in connected.jobs()}
    assert all(jobs[t.job_id]["array_job_id"] == b for t in final[b].array.tasks.values())
    assert len(lines[b]) >= 3, lines  # the counts changed as the tasks ran, one by one
    # Rounds in which nothing changed cost one call (jobs/state); more only at a change of the plain
    # job, at the first sight of a task two arrays could own, and at an array's end. (How many rounds
    # see a change depends on the machine's speed, so only the quiet ones are counted.)
    assert quiet and all(n == 1 for n in quiet), (quiet, calls)


def test_a_task_watched_by_its_own_id_beside_its_array(connected: Any) -> None:
    """A sensor on one task (its own job id) and an operator on the whole array, on one poller."""
    hook = SlurmApiHook(**CLUSTER)
    spec = {"partition": "debug", "current_working_directory": str(connected.config.workdir), "name": "pair"}
    array_id = hook.submit_job({**spec, "array": "0-2"}, "#!/bin/bash\nsleep 1.5\n").job_id

    def started_task() -> int | None:
        return next(
            (j["job_id"] for j in connected.jobs() if j["array_task_id"] == 0 and j["state"] == "RUNNING"), None
        )

    task_job = wait_until(started_task, "task 0 running", timeout=10, give_up=True)
    assert task_job is not None and task_job != array_id

    async def scenario() -> dict[int, Any]:
        async_hook = SlurmApiAsyncHook(cluster=KEY)
        poller = ClusterPoller(KEY, async_hook)
        for job_id in (array_id, task_job):
            seen = await async_hook.get_job(job_id)
            poller._subscriptions.setdefault(job_id, set()).add(Subscription(job_id, 3600, seen))
            poller._known[job_id] = seen  # type: ignore[assignment]

        async def one_round() -> bool:
            connected.reset_calls()
            await poller.poll_once()
            calls.append(connected.calls()["total"])
            return all(poller._known[j].is_finished for j in (array_id, task_job))

        # The assertions below say what did not finish.
        await wait_until_async(one_round, "both watched jobs finished", timeout=40, every=0.25, give_up=True)
        final = dict(poller._known)
        await async_hook.close()
        return final

    calls: list[int] = []
    final = asyncio.run(scenario())
    # The task's own entry in jobs/state answers for it: no history read of it every round.
    assert calls.count(1) >= len(calls) // 2, calls
    assert final[task_job].array is None and final[task_job].succeeded and final[task_job].job_id == task_job
    assert final[array_id].describe() == f"array {array_id}: 3 COMPLETED"
