"""What reading progress messages costs the shared poller: envelope calls per poll round.

    .venv/bin/python bench/progress_reads.py [--n 1,8,9,100] [--rounds 3]

N running jobs (``sleep``) on the emulator, watched by one ``ClusterPoller`` as N deferred tasks
would. Measured in the same run, on the same jobs: subscriptions without progress (the baseline: one
``jobs/state`` call per round), with progress (``log_progress=True``: the details of running jobs,
batched), and the naive way (one ``GET /job/{id}`` per job per round). Calls are counted by the
emulator: what the project's API quota would be charged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.emulator_proc import GOAL_MISSED, run_in_airflow_home  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", default="1,8,9,100")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.n.split(",")]
    return run_in_airflow_home("slurmapi-bench-progress-", lambda tmp: _bench(tmp, sizes, args.rounds))


async def _bench(tmp: Path, sizes: list[int], rounds: int) -> int:
    from slurmapi_emulator import EmulatorConfig, run_emulator

    from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook, SlurmApiHook
    from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
    from airflow_provider_slurmapi.triggers.poller import MAX_PROGRESS_READS, ClusterPoller, Subscription

    creds = tmp / "service-account.json"
    (tmp / "jobs").mkdir()
    config = EmulatorConfig(credentials_file=creds, project="bench-project", workdir=tmp / "jobs", cpus=max(sizes) + 1)
    print(f"{'N':>5} {'baseline calls/round':>21} {'with progress':>14} {'naive':>6} {'progress/naive':>15}")
    ok = True
    with run_emulator(config) as emulator:
        extra = {"key_path": str(creds), "api_endpoint": emulator.url, "project": "bench-project"}
        os.environ["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"] = json.dumps(
            {"conn_type": "google_cloud_platform", "extra": extra}
        )
        cluster = {"project_id": "bench-project", "region": "us-central1", "cluster_id": "bench-cluster"}
        sync = SlurmApiHook(**cluster)
        for n in sizes:
            ids = [
                sync.submit_job(
                    {"name": f"bench-progress-{i}", "current_working_directory": "/tmp"}, "#!/bin/sh\nsleep 600\n"
                ).job_id
                for i in range(n)
            ]
            for job_id in ids:
                emulator.wait_for_state(job_id, "RUNNING", timeout=60)
            key = ClusterRef("bench-project", "us-central1", "bench-cluster")
            per_round: dict[str, float] = {}
            for progress in (False, True):
                hook = SlurmApiAsyncHook(cluster=key)
                poller = ClusterPoller(key, hook)
                for job_id in ids:  # subscriptions without starting the poller's own loop
                    poller._subscriptions.setdefault(job_id, set()).add(Subscription(job_id, 3600, progress=progress))
                await poller.poll_once()  # warm-up: first sight of every job
                await poller.poll_once()
                emulator.reset_calls()
                for _ in range(rounds):
                    await poller.poll_once()
                per_round["progress" if progress else "baseline"] = emulator.calls()["total"] / rounds
                await hook.close()
            emulator.reset_calls()
            async with SlurmApiAsyncHook(cluster=key) as hook:
                for _ in range(rounds):
                    await asyncio.gather(*(hook.get_job(job_id) for job_id in ids))
            per_round["naive"] = emulator.calls()["total"] / rounds
            extra_calls = per_round["progress"] - per_round["baseline"]
            bounded = extra_calls <= MAX_PROGRESS_READS
            ok = ok and bounded
            print(
                f"{n:>5} {per_round['baseline']:>21.1f} {per_round['progress']:>14.1f} {per_round['naive']:>6.1f} "
                f"{per_round['progress'] / per_round['naive']:>15.2f}  extra {extra_calls:.0f} <= {MAX_PROGRESS_READS}: "
                f"{'OK' if bounded else 'FAIL'}"
            )
            for job_id in ids:
                sync.cancel_job(job_id)
    return 0 if ok else GOAL_MISSED


if __name__ == "__main__":
    sys.exit(main())
