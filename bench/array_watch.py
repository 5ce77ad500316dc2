"""What watching a job array costs the shared poller: envelope calls per poll interval.

    .venv/bin/python bench/array_watch.py [--tasks 1000] [--small 10] [--throttle 100] [--interval 0.5]

One ``ClusterPoller`` (what every deferred operator and sensor of a triggerer shares) watches, on the
emulator, from submit to the end:

- ``array``: one array of ``--tasks`` tasks (``sleep 1`` each, ``%throttle`` at once), so its counts
  change at every interval;
- baseline ``small array``: an array of ``--small`` tasks, the same way;
- baseline ``single jobs``: ``--tasks`` plain jobs of the same script, ``throttle`` running at once
  (the emulator gets that many CPUs): what a DAG that maps one task per job watches.

All three are measured in this run, on this machine. Calls are counted by the emulator (the project's
API quota). The goal: the array costs one call per interval whatever its number of tasks, like the
small array, plus the reads at its end (its tasks' reasons and exit codes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.emulator_proc import GOAL_MISSED, run_in_airflow_home  # noqa: E402

CLUSTER = {"project_id": "bench-project", "region": "us-central1", "cluster_id": "bench-cluster"}
# Every job waits for the file "go" in its working directory (made once the watch has begun), then runs 1 s.
SCRIPT = "#!/bin/sh\nwhile [ ! -e go ]; do sleep 0.2; done\nsleep 1\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--small", type=int, default=10)
    parser.add_argument("--throttle", type=int, default=100)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args(argv)
    return run_in_airflow_home("slurmapi-bench-array-", lambda tmp: _bench(tmp, args))


async def _watch(emulator: Any, key: Any, ids: list[int], interval: float, gate: Path) -> dict[str, Any]:
    """Poll ``ids`` through one poller until every job is over; calls of each round, as the emulator counts them."""
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook
    from airflow_provider_slurmapi.triggers.poller import ClusterPoller, Subscription

    hook = SlurmApiAsyncHook(cluster=key)
    poller = ClusterPoller(key, hook)
    seen = {job_id: await hook.get_job(job_id) for job_id in ids}  # what each operator saw after its submit
    subs = {}
    for job_id in ids:  # subscriptions without starting the poller's own loop
        sub = Subscription(job_id, interval, seen[job_id])
        poller._subscriptions.setdefault(job_id, set()).add(sub)
        poller._known[job_id] = seen[job_id]  # type: ignore[assignment]
        subs[job_id] = sub
    rounds: list[int] = []
    gate.touch()  # the jobs may go on now
    started = time.perf_counter()
    try:
        while True:
            emulator.reset_calls()
            await poller.poll_once()
            rounds.append(emulator.calls()["total"])
            known = [poller._known.get(job_id) for job_id in ids]
            if all(job is not None and job.is_finished for job in known):
                break
            if time.perf_counter() - started > 900:
                raise RuntimeError("the watched jobs did not end within 15 minutes")
            await asyncio.sleep(interval)
    finally:
        await hook.close()
    final = [poller._known[job_id] for job_id in ids]
    return {"rounds": rounds, "seconds": time.perf_counter() - started, "final": final}


def _row(name: str, result: dict[str, Any]) -> dict[str, Any]:
    rounds: list[int] = result["rounds"]
    watching = rounds[:-1] or rounds  # the last round also reads how the tasks ended
    return {
        "name": name,
        "rounds": len(rounds),
        "median": statistics.median(watching),
        "max": max(watching),
        "last": rounds[-1],
        "mean": sum(rounds) / len(rounds),
        "total": sum(rounds),
    }


async def _bench(tmp: Path, args: argparse.Namespace) -> int:
    from slurmapi_emulator import EmulatorConfig, run_emulator

    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
    from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef

    creds = tmp / "service-account.json"
    (tmp / "jobs").mkdir()
    config = EmulatorConfig(
        credentials_file=creds, project="bench-project", workdir=tmp / "jobs", cpus=args.throttle, min_job_age=300
    )
    key = ClusterRef("bench-project", "us-central1", "bench-cluster")
    rows = []
    with run_emulator(config) as emulator:
        extra = {"key_path": str(creds), "api_endpoint": emulator.url, "project": "bench-project"}
        os.environ["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"] = json.dumps(
            {"conn_type": "google_cloud_platform", "extra": extra}
        )
        sync = SlurmApiHook(**CLUSTER)
        runs = [tmp / "jobs" / name for name in ("small", "big", "singles")]
        for run in runs:
            run.mkdir()

        def job(run: Path) -> dict[str, Any]:
            return {"name": "bench-array", "current_working_directory": str(run)}

        def submit_array(tasks: int, run: Path) -> int:
            spec = {**job(run), "array": f"0-{tasks - 1}%{args.throttle}"}
            return sync.submit_job(spec, SCRIPT).job_id

        small = await _watch(emulator, key, [submit_array(args.small, runs[0])], args.interval, runs[0] / "go")
        big = await _watch(emulator, key, [submit_array(args.tasks, runs[1])], args.interval, runs[1] / "go")
        singles = [
            sync.submit_job({**job(runs[2]), "name": f"bench-single-{i}"}, SCRIPT).job_id for i in range(args.tasks)
        ]
        plain = await _watch(emulator, key, singles, args.interval, runs[2] / "go")
        for name, result, expected in (
            (f"array of {args.tasks} tasks", big, args.tasks),
            (f"baseline: array of {args.small} tasks", small, args.small),
            (f"baseline: {args.tasks} single jobs", plain, args.tasks),
        ):
            final = result["final"]
            done = sum(len(j.array.tasks) for j in final if j.array is not None) or len(final)
            if done != expected or not all(j.succeeded for j in final):
                raise RuntimeError(f"{name}: {done} of {expected} tasks seen, not all COMPLETED")
            rows.append(_row(name, result))
    print(f"\nwatching until the end, poll interval {args.interval}s, throttle {args.throttle} (emulator CPUs)")
    print(
        f"{'watched':<32} {'rounds':>6} {'calls/int median':>17} {'max':>4} {'last round':>11} {'mean':>6} {'total':>6}"
    )
    for row in rows:
        print(
            f"{row['name']:<32} {row['rounds']:>6} {row['median']:>17.1f} {row['max']:>4} {row['last']:>11} "
            f"{row['mean']:>6.1f} {row['total']:>6}"
        )
    big_row, small_row, plain_row = rows
    print(
        f"\narray of {args.tasks} tasks: {big_row['median']:.1f} calls per interval while it runs "
        f"(max {big_row['max']}), {big_row['median'] / small_row['median']:.2f}x the array of {args.small} tasks, "
        f"{big_row['mean'] / plain_row['mean']:.3f}x the {args.tasks} single jobs in mean calls per interval "
        f"({big_row['mean']:.2f} vs {plain_row['mean']:.1f}); whole watch {big_row['total']} calls vs "
        f"{plain_row['total']}."
    )
    ok = big_row["max"] <= 1 and big_row["median"] == small_row["median"]
    print(f"goal: one call per interval whatever the number of tasks: {'OK' if ok else 'FAIL'}")
    return 0 if ok else GOAL_MISSED


if __name__ == "__main__":
    sys.exit(main())
