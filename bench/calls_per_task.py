"""Gateway calls per task: a task start (the submit) and a task resumed from the triggerer (the
accounting read), with ``api_version`` fixed (the baseline: no negotiation can cost anything) and
with ``auto`` (negotiated once per deployment and cluster, then kept in an Airflow Variable).

    .venv/bin/python bench/calls_per_task.py [--tasks 5] [--release 24.11]

The emulator acts as a Slurm release (24.11 by default: ``auto`` then needs two pings, v0.0.45 refused
and v0.0.42 answering). Each task is run as a task process does it: a fresh ``SlurmApiHook`` (no state
shared in memory with the task before). The deployment's Variables (the learned account, the kept
version) are a dict shared by the tasks of one side: the bench runs outside a task, where Airflow 3's
Task SDK cannot reach them; the hooks' store callbacks and the core's use of them are the real ones. Calls are counted by the emulator (what the project's API quota is charged).
The first task of a deployment also learns the caller's account (one read, kept); the counts of the
later tasks are what every other task costs.

A second table counts the same at operator level: a deferrable ``SlurmSubmitJobOperator`` task's start
(``execute`` until it defers: the submit, no look at the job) and its resume (``execute_complete`` with
its trigger's event, in a fresh operator: the accounting read). The trigger's own calls are not counted.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.emulator_proc import GOAL_MISSED, run_in_airflow_home  # noqa: E402

FIXED = "v0.0.42"
# Goals (issue 25): a later task's start costs 1 call (the submit); a resume at most the accounting read.
GOAL_START_CALLS = 1
GOAL_RESUME_CALLS = 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=5, help="tasks started and resumed per side")
    parser.add_argument("--release", default="24.11", help="the Slurm release the emulator acts as")
    args = parser.parse_args(argv)
    return run_in_airflow_home("slurmapi-bench-calls-", lambda tmp: _bench(tmp, args.tasks, args.release))


def task_calls(emulator: Any, api_version: str, tasks: int) -> tuple[list[int], list[int], list[str]]:
    """Calls of each task's start and of each task's resume, each in a fresh hook; the first start's paths."""
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
    from bench.emulator_proc import CLUSTER_ID, PROJECT, REGION

    cluster = {"project_id": PROJECT, "region": REGION, "cluster_id": CLUSTER_ID, "api_version": api_version}
    job = {"name": "bench-calls", "partition": "debug", "hold": True, "current_working_directory": "/tmp"}
    starts: list[int] = []
    resumes: list[int] = []
    first: list[str] = []
    for _ in range(tasks):
        emulator.reset_calls()
        result = SlurmApiHook(**cluster).submit_job(job, "#!/bin/bash\nsleep 3600\n")
        calls = emulator.calls()
        starts.append(int(calls["total"]))
        first = first or [f"{call.get('method')} {call.get('path')}" for call in calls["last"]]
        emulator.reset_calls()
        SlurmApiHook(**cluster).get_accounting(result.job_id)  # what execute_complete reads
        resumes.append(int(emulator.calls()["total"]))
    return starts, resumes, first


async def operator_calls(emulator: Any, api_version: str, tasks: int) -> tuple[list[int], list[int]]:
    """Calls of each deferrable ``SlurmSubmitJobOperator`` task's start (``execute`` until it defers) and
    resume (``execute_complete`` with its trigger's event, in a fresh operator, as a resumed task process)."""
    try:
        from airflow.sdk.exceptions import TaskDeferred
    except ImportError:  # Airflow 2.11
        from airflow.exceptions import TaskDeferred  # type: ignore[no-redef,attr-defined]

    from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator
    from bench.emulator_proc import CLUSTER_ID, PROJECT, REGION
    from tests.unit.task_instance import StateStore, TaskInstance, task_context

    def operator() -> SlurmSubmitJobOperator:
        return SlurmSubmitJobOperator(
            task_id="bench",
            script="#!/bin/bash\ntrue\n",
            job={"name": "bench-calls-op", "partition": "debug", "current_working_directory": "/tmp"},
            project_id=PROJECT,
            region=REGION,
            cluster_id=CLUSTER_ID,
            api_version=api_version,
            deferrable=True,
            poll_interval=0.2,
        )

    starts: list[int] = []
    resumes: list[int] = []
    for number in range(tasks):
        ti = TaskInstance(run_id=f"bench__{api_version}_{number}")
        emulator.reset_calls()
        try:
            operator().execute(task_context(ti, StateStore()))
            raise AssertionError("a deferrable task must defer")
        except TaskDeferred as deferred:
            starts.append(int(emulator.calls()["total"]))
            (event,) = [event async for event in deferred.trigger.run()]  # the triggerer's part: not counted
        emulator.reset_calls()
        operator().execute_complete(task_context(ti, StateStore()), event.payload)
        resumes.append(int(emulator.calls()["total"]))
    return starts, resumes


def deployment_variables() -> dict[str, str]:
    """The deployment's Variables as a dict, behind the hooks' real store callbacks."""
    from collections.abc import Callable

    from airflow_provider_slurmapi.hooks import slurm as slurm_hooks

    kept: dict[str, str] = {}

    def store(where: Callable[[], str]) -> tuple[Callable[[], str | None], Callable[[str], None]]:
        return (lambda: kept.get(where())), (lambda value: kept.__setitem__(where(), value))

    slurm_hooks.account_store = store  # type: ignore[assignment]
    slurm_hooks.version_store = store  # type: ignore[assignment]
    return kept


async def _bench(tmp: Path, tasks: int, release: str) -> int:
    from bench.emulator_proc import start_emulator

    kept = deployment_variables()
    ok = True
    print(f"calls per task, emulator acting as Slurm {release}; {tasks} tasks per side, each a fresh hook")
    print(f"{'api_version':>12} {'1st start':>10} {'later starts':>13} {'1st resume':>11} {'later resumes':>14}")
    with start_emulator(tmp, slurm_release=release) as emulator:
        os.environ.update(emulator.connection_env())
        rows: dict[str, tuple[list[int], list[int]]] = {}
        paths: dict[str, list[str]] = {}
        for version in (FIXED, "auto"):
            kept.clear()  # each side starts a fresh deployment
            starts, resumes, paths[version] = task_calls(emulator, version, tasks)
            rows[version] = (starts, resumes)
            print(f"{version:>12} {starts[0]:>10} {max(starts[1:]):>13} {resumes[0]:>11} {max(resumes[1:]):>14}")
        print("deferrable SlurmSubmitJobOperator tasks (operator level, the trigger's calls not counted):")
        for version in (FIXED, "auto"):
            kept.clear()
            starts, resumes = await operator_calls(emulator, version, tasks)
            rows[f"operator {version}"] = (starts, resumes)
            print(f"{version:>12} {starts[0]:>10} {max(starts[1:]):>13} {resumes[0]:>11} {max(resumes[1:]):>14}")
        for version, called in paths.items():
            print(f"first start with {version}: {', '.join(called)}")
        base_starts, base_resumes = rows[FIXED]
        auto_starts, auto_resumes = rows["auto"]
        later_start, later_resume = max(auto_starts[1:]), max(auto_resumes[1:])
        ratio = sum(auto_starts + auto_resumes) / max(1, sum(base_starts + base_resumes))
        print(f"auto / fixed, all calls of the {tasks} tasks: {ratio:.2f}x")
        for goal, met in (
            (f"a later task's start costs {GOAL_START_CALLS} call with auto", later_start <= GOAL_START_CALLS),
            (f"a resumed task costs at most {GOAL_RESUME_CALLS} call with auto", later_resume <= GOAL_RESUME_CALLS),
            ("auto costs no more than a fixed api_version after the first task", later_start <= max(base_starts[1:])),
            (
                f"a later deferrable operator task's start costs {GOAL_START_CALLS} call with auto",
                max(rows["operator auto"][0][1:]) <= GOAL_START_CALLS,
            ),
            (
                f"a resumed deferrable operator task costs at most {GOAL_RESUME_CALLS} call with auto",
                max(rows["operator auto"][1][1:]) <= GOAL_RESUME_CALLS,
            ),
        ):
            print(f"  {'PASS' if met else 'FAIL'}  {goal}")
            ok = ok and met
    return 0 if ok else GOAL_MISSED


if __name__ == "__main__":
    sys.exit(main())
