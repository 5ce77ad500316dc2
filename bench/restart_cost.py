"""What a triggerer restart with N deferred tasks costs the shared poller: envelope calls until every
trigger's job has been read once.

    .venv/bin/python bench/restart_cost.py [--n 1,100,1000]

N held jobs on the emulator, watched by one ``ClusterPoller`` as N rebuilt triggers would. Measured
in the same run, on the same jobs: triggers that carry their operator's last view of the job
(``last_seen``: the floor, one ``jobs/state`` call), triggers without it read as this release reads
them (one ``jobs/`` list for all the jobs nobody has seen yet), and the same read one ``GET /job/{id}``
at a time (the baseline: what every release before this one did). Calls are counted by the emulator:
what the project's API quota would be charged.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.emulator_proc import GOAL_MISSED, run_in_airflow_home  # noqa: E402

# Goal: the restart's calls do not grow with N (at most this many, chunks of jobs/state included).
GOAL_MAX_CALLS = 4


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", default="1,100,1000")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.n.split(",")]
    return run_in_airflow_home("slurmapi-bench-restart-", lambda tmp: _bench(tmp, sizes))


async def _bench(tmp: Path, sizes: list[int]) -> int:
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook
    from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
    from airflow_provider_slurmapi.triggers import poller as poller_module
    from airflow_provider_slurmapi.triggers.poller import ClusterPoller, Subscription
    from bench.emulator_proc import CLUSTER_ID, PROJECT, REGION, start_emulator

    print(
        f"{'N':>5} {'with last_seen':>15} {'ours (no view)':>15} {'one by one':>11} {'ours/one-by-one':>16} "
        f"{'seconds ours/one-by-one':>24}"
    )
    ok = True
    with start_emulator(tmp) as emulator:
        os.environ.update(emulator.connection_env())
        key = ClusterRef(PROJECT, REGION, CLUSTER_ID)
        ids = emulator.submit_held_jobs(max(sizes))
        async with SlurmApiAsyncHook(cluster=key) as hook:
            seen = await hook.get_live_jobs(ids)  # what the operators saw before they deferred
        for n in sizes:
            watched = ids[:n]
            calls: dict[str, float] = {}
            seconds: dict[str, float] = {}
            for case in ("last_seen", "ours", "one_by_one"):
                saved = poller_module.MAX_FIRST_READS_ONE_BY_ONE
                if case == "one_by_one":
                    poller_module.MAX_FIRST_READS_ONE_BY_ONE = 10**9
                hook = SlurmApiAsyncHook(cluster=key)
                poller = ClusterPoller(key, hook)
                try:
                    for job_id in watched:  # subscriptions without starting the poller's own loop
                        view = seen[job_id] if case == "last_seen" else None
                        sub = Subscription(job_id, 3600, view, pending=True)
                        poller._subscriptions.setdefault(job_id, set()).add(sub)
                        if view is not None:
                            poller._known[job_id] = view
                    emulator.reset_calls()
                    t0 = time.perf_counter()
                    await poller.poll_once()  # the first round after the restart
                    seconds[case] = time.perf_counter() - t0
                    calls[case] = emulator.calls()["total"]
                    if not all(job_id in poller._known for job_id in watched):
                        raise RuntimeError(f"{case}: not every job was read in the first round")
                finally:
                    poller_module.MAX_FIRST_READS_ONE_BY_ONE = saved
                    await hook.close()
            bounded = calls["ours"] <= GOAL_MAX_CALLS
            ok = ok and bounded
            print(
                f"{n:>5} {calls['last_seen']:>15.0f} {calls['ours']:>15.0f} {calls['one_by_one']:>11.0f} "
                f"{calls['ours'] / calls['one_by_one']:>16.3f} {seconds['ours'] / seconds['one_by_one']:>24.2f}  "
                f"calls {calls['ours']:.0f} <= {GOAL_MAX_CALLS}: {'OK' if bounded else 'FAIL'}",
                flush=True,
            )
    return 0 if ok else GOAL_MISSED


if __name__ == "__main__":
    sys.exit(main())
