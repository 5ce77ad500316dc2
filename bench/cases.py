"""One measurement in a fresh process (started by ``bench/run.py``); the result goes to a JSON file.

    python bench/cases.py fanin --variant shared|peer --n N --first-id 1 --interval 1 --intervals 5 \
        --emulator URL --out result.json
    python bench/cases.py hook --emulator URL --calls 25 --blocks 20 --out result.json

Each case runs in its own interpreter so that CPU time, peak memory and the event loop belong to that
case alone; the emulator runs in yet another process, so its CPU is never counted here.
The connection ``google_cloud_default`` comes from the environment (``AIRFLOW_CONN_...``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE_SIZE


def reset_peak_rss() -> bool:
    """Reset VmHWM (Linux >= 4.0: write 5 to clear_refs); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


class LoopSampler:
    """A ticker on the event loop: how late each ``sleep(period)`` wakes up (lag), and the RSS."""

    def __init__(self, period: float = 0.05, rss_every: int = 4) -> None:
        self.period = period
        self.rss_every = rss_every
        self.measuring = False
        self.lags: list[float] = []
        self.max_rss = 0
        self._stop = False

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        ticks = 0
        while not self._stop:
            started = loop.time()
            await asyncio.sleep(self.period)
            late = loop.time() - started - self.period
            ticks += 1
            if ticks % self.rss_every == 0:
                self.max_rss = max(self.max_rss, rss_bytes())
            if self.measuring:
                self.lags.append(max(0.0, late))

    def stop(self) -> None:
        self._stop = True


async def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"warm-up: {what} not reached within {timeout:.0f}s")
        await asyncio.sleep(0.05)


# -- fan-in -------------------------------------------------------------------------------------------
async def fanin(args: argparse.Namespace) -> dict[str, Any]:
    import requests
    from emulator_proc import CLUSTER_ID, PROJECT, REGION, control_headers
    from peer_baseline import PeerPollingTrigger

    from airflow_provider_slurmapi.triggers.poller import pollers_of_this_loop
    from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger

    loop = asyncio.get_running_loop()
    n, interval = args.n, args.interval
    job_ids = list(range(args.first_id, args.first_id + n))
    sampler = LoopSampler()
    sampler_task = loop.create_task(sampler.run())
    await asyncio.sleep(0.1)

    gc.collect()
    rss_before = rss_bytes()
    hwm_reset = reset_peak_rss()
    sampler.max_rss = rss_before
    setup_cpu0, setup_wall0 = time.process_time(), time.perf_counter()
    cluster = {"region": REGION, "project_id": PROJECT, "poll_interval": interval}
    clusters = [CLUSTER_ID] if args.clusters <= 1 else [f"{CLUSTER_ID}-{k}" for k in range(args.clusters)]
    triggers: list[Any]
    if args.variant == "shared":
        triggers = [
            SlurmJobTrigger(job_id=job_id, cluster_id=clusters[i % len(clusters)], **cluster)
            for i, job_id in enumerate(job_ids)
        ]
    else:
        triggers = [
            PeerPollingTrigger(job_id=job_id, cluster_id=clusters[i % len(clusters)], **cluster)
            for i, job_id in enumerate(job_ids)
        ]
        start_gate = asyncio.Event()
        for trigger in triggers:
            trigger.start_gate = start_gate
    events: list[dict[str, Any]] = []

    async def drive(trigger: Any) -> None:  # what the triggerer does with each trigger
        async for event in trigger.run():
            events.append(event.payload)

    tasks = [loop.create_task(drive(trigger)) for trigger in triggers]

    def none_ended() -> bool:
        """A trigger that ended during the warm-up (an error event, an exception) never polls again: say
        so at once rather than wait out the warm-up timeout for a poll that cannot come."""
        ended = [task for task in tasks if task.done()]
        if ended:
            failure = ended[0].exception() if not ended[0].cancelled() else None
            raise RuntimeError(
                f"warm-up: {len(ended)} of {n} triggers ended before it was over; first: {failure or events[:1]!r}"
            )
        return True

    if args.variant == "shared":
        keys = {trigger.poller_key for trigger in triggers}

        def subscribed() -> bool:
            pollers = [pollers_of_this_loop().get(key) for key in keys]
            return none_ended() and all(pollers) and sum(len(p.job_ids) for p in pollers if p) == n

        await wait_until(subscribed, args.warmup_timeout, f"{n} subscriptions")
        pollers = [pollers_of_this_loop()[key] for key in keys]

        def polls() -> float:
            return float(min(poller.polls for poller in pollers))

        first = polls()
        # Two more rounds: the second one started after every trigger had subscribed.
        await wait_until(lambda: polls() >= first + 2, args.warmup_timeout, "a full round")
        setup_cpu, setup_wall = time.process_time() - setup_cpu0, time.perf_counter() - setup_wall0
    else:
        await wait_until(
            lambda: none_ended() and all(t.polls >= 1 for t in triggers), args.warmup_timeout, "every first poll"
        )
        setup_cpu, setup_wall = time.process_time() - setup_cpu0, time.perf_counter() - setup_wall0
        start_gate.set()
        await asyncio.sleep(interval)  # every trigger has started its own cadence

        def polls() -> float:
            return sum(t.polls for t in triggers) / n

    control = control_headers()
    if args.barrier:
        # Several triggerer-like processes: say this one is warm, then start the window when the
        # orchestrator says (it resets the emulator's count for all of them at that moment).
        barrier = Path(args.barrier)
        (barrier / f"ready-{os.getpid()}").touch()
        go = barrier / "go"
        await wait_until(go.exists, args.warmup_timeout, "the orchestrator's go")
        await asyncio.sleep(max(0.0, float(go.read_text()) - time.time()))
    else:
        # Start the window half an interval away from a poll, so that it holds `intervals` polls.
        await asyncio.sleep(interval / 2)
        await asyncio.to_thread(requests.post, f"{args.emulator}/_emulator/calls/reset", headers=control, timeout=30)

    polls_by_cluster0 = {k.cluster_id: p.polls for k, p in pollers_of_this_loop().items()}
    rounds0 = polls()
    sampler.measuring = True
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.sleep(interval * args.intervals)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    sampler.measuring = False
    rounds = polls() - rounds0
    polls_by_cluster = {
        k.cluster_id: p.polls - polls_by_cluster0.get(k.cluster_id, 0) for k, p in pollers_of_this_loop().items()
    }
    calls = (
        await asyncio.to_thread(requests.get, f"{args.emulator}/_emulator/calls", headers=control, timeout=30)
    ).json()
    peak = max(sampler.max_rss, peak_rss_bytes() if hwm_reset else 0)

    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    leftover_pollers = len(pollers_of_this_loop())
    sampler.stop()
    await sampler_task

    intervals = wall / interval
    return {
        "variant": args.variant,
        "n": n,
        "interval": interval,
        "intervals": intervals,
        "calls": calls["total"],
        "calls_by_kind": calls["by_kind"],
        "calls_per_interval": calls["total"] / intervals,
        "cpu_per_interval": cpu / intervals,
        "rounds": rounds,
        "cpu_per_round": cpu / rounds if rounds else float("nan"),
        "peak_mem_per_trigger": (peak - rss_before) / n,
        "lag_p99": percentile(sampler.lags, 0.99),
        "lag_max": max(sampler.lags, default=float("nan")),
        "setup_cpu": setup_cpu,
        "setup_wall": setup_wall,
        "events": len(events),
        "event_sample": events[:1],
        "leftover_pollers": leftover_pollers,
        "polls_by_cluster": polls_by_cluster,
        "pid": os.getpid(),
    }


# -- start cost ---------------------------------------------------------------------------------------
class BenchTaskInstance:
    """What ``SlurmSubmitJobOperator.execute`` reads of a task instance: ids, try number, its XComs."""

    def __init__(self, run_id: str, map_index: int, try_number: int) -> None:
        self.dag_id, self.task_id, self.run_id = "bench_start", "train", run_id
        self.map_index, self.try_number = map_index, try_number
        self.xcoms: dict[str, Any] = {}
        self.stats_tags: dict[str, str] = {}  # Airflow 3.3's execute_resumable reads its team_name

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value

    def xcom_pull(self, task_ids: str | None = None, key: str = "return_value", **_: Any) -> Any:
        return None  # a new try starts with the earlier try's XComs cleared (Airflow 2.11 and 3.x)


class BenchStateStore:
    """The task state store of Airflow 3.3+ (``context["task_state_store"]``): survives retries."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


def start(args: argparse.Namespace) -> dict[str, Any]:
    """N mapped task instances start (first try), then start again as retries; calls and bytes of each."""
    import datetime
    from types import SimpleNamespace

    import requests
    from emulator_proc import CLUSTER_ID, PROJECT, REGION, control_headers

    from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator

    def calls() -> dict[str, Any]:
        return dict(requests.get(f"{args.emulator}/_emulator/calls", headers=control_headers(), timeout=60).json())

    operator = SlurmSubmitJobOperator(
        task_id="train",
        job={"name": "bench-start", "partition": "debug", "hold": True, "current_working_directory": args.workdir},
        script="#!/bin/bash\nsleep 3600\n",
        wait_for_completion=False,
        region=REGION,
        cluster_id=CLUSTER_ID,
        project_id=PROJECT,
    )
    operator.hook.client.retry_initial_wait = 0.05
    run = SimpleNamespace(start_date=datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5))
    run_id = f"bench__{os.getpid()}"
    stores = [BenchStateStore() for _ in range(args.n)]

    def start_all(try_number: int, stored: bool) -> dict[str, float]:
        requests.post(
            f"{args.emulator}/_emulator/calls/reset", headers=control_headers(), timeout=30
        ).raise_for_status()
        cpu0 = time.process_time()
        for index in range(args.n):
            ti = BenchTaskInstance(run_id, index, try_number)
            context: dict[str, Any] = {"ti": ti, "dag_run": run}
            if stored:
                context["task_state_store"] = stores[index]
            operator.execute(context)  # type: ignore[arg-type]
        cpu = time.process_time() - cpu0
        counted = calls()
        return {
            "calls": counted["total"] / args.n,
            "bytes": counted.get("answer_bytes", counted["by_kind"].get("answer_bytes", 0)) / args.n,
            "cpu_ms": cpu * 1000 / args.n,
            "by_kind": {k: v / args.n for k, v in counted["by_kind"].items() if k not in ("total", "answer_bytes")},
        }

    first = start_all(1, stored=True)  # the 3.3+ store records each job id
    retry_stored = start_all(2, stored=True)
    retry_history = start_all(3, stored=False)  # no state store: Airflow 2.11 to 3.2
    return {"n": args.n, "first": first, "retry_stored": retry_stored, "retry_history": retry_history}


# -- poll cost ----------------------------------------------------------------------------------------
async def pollcost(args: argparse.Namespace) -> dict[str, Any]:
    """N watched jobs in one poller; per interval, calls and bytes with no change, then 1% and 50% changing."""
    import requests
    from emulator_proc import API_VERSION, CLUSTER_ID, PROJECT, REGION, control_headers

    from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook, SlurmApiHook
    from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
    from airflow_provider_slurmapi.triggers.poller import ClusterPoller, Subscription

    key = ClusterRef(PROJECT, REGION, CLUSTER_ID, api_version=API_VERSION)
    poller = ClusterPoller(key, SlurmApiAsyncHook(cluster=key))
    ids = list(range(args.first_id, args.first_id + args.n))
    for job_id in ids:
        poller.add(Subscription(job_id, 3600.0))  # one round now, the next in an hour: rounds are ours to run
    await wait_until(lambda: poller.polls >= 1, 600, "the first round")
    await poller.poll_once()
    sync_hook = SlurmApiHook(region=REGION, cluster_id=CLUSTER_ID, project_id=PROJECT)
    untouched = list(ids)
    results: dict[str, Any] = {}
    for label, fraction in (("none", 0.0), ("1%", 0.01), ("50%", 0.5)):
        count = round(fraction * args.n)
        changing, untouched = untouched[:count], untouched[count:]
        for job_id in changing:
            await asyncio.to_thread(sync_hook.cancel_job, job_id)
        await asyncio.to_thread(
            requests.post, f"{args.emulator}/_emulator/calls/reset", headers=control_headers(), timeout=30
        )
        lags = LoopSampler(0.01)
        lag_task = asyncio.get_running_loop().create_task(lags.run())
        lags.measuring = True
        cpu0 = time.process_time()
        await poller.poll_once()
        cpu = time.process_time() - cpu0
        lags.stop()
        await lag_task
        counted = (
            await asyncio.to_thread(
                requests.get, f"{args.emulator}/_emulator/calls", headers=control_headers(), timeout=60
            )
        ).json()
        results[label] = {
            "changed": count,
            "calls": counted["total"],
            "bytes": counted.get("answer_bytes", counted["by_kind"].get("answer_bytes", 0)),
            "cpu_ms": cpu * 1000,
            "by_kind": {k: v for k, v in counted["by_kind"].items() if k not in ("total", "answer_bytes")},
        }
    await poller.stop()
    return {"n": args.n, "intervals": results}


# -- hook overhead ------------------------------------------------------------------------------------
def hook(args: argparse.Namespace) -> dict[str, Any]:
    import requests
    from emulator_proc import API_VERSION, CLUSTER_ID, PROJECT, REGION

    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook

    path = f"/slurm/{API_VERSION}/jobs/state/?job_id={args.job_id}"
    slurm_hook = SlurmApiHook(region=REGION, cluster_id=CLUSTER_ID, project_id=PROJECT)
    slurm_hook.call("GET", path)  # session and token: fetched once, then reused
    token = slurm_hook.session.credentials.token  # type: ignore[attr-defined]
    url = slurm_hook.cluster.url
    plain = requests.Session()
    payload = {"method": "HTTP_METHOD_GET", "path": path}
    headers = {"Authorization": f"Bearer {token}"}

    def through_hook() -> None:
        response = slurm_hook.call("GET", path)
        assert response.status == 200

    def plain_post() -> None:
        response = plain.post(url, json=payload, headers=headers, timeout=60)
        assert response.status_code == 200 and response.content

    timings: dict[str, list[float]] = {"hook": [], "plain": []}
    cpu: dict[str, float] = {"hook": 0.0, "plain": 0.0}
    for fn in (through_hook, plain_post):  # warm both paths
        for _ in range(5):
            fn()
    for block in range(args.blocks):  # interleaved blocks, alternating which goes first
        order = [("hook", through_hook), ("plain", plain_post)]
        if block % 2:
            order.reverse()
        for name, fn in order:
            cpu0 = time.process_time()
            for _ in range(args.calls):
                t0 = time.perf_counter()
                fn()
                timings[name].append(time.perf_counter() - t0)
            cpu[name] += time.process_time() - cpu0
    count = args.calls * args.blocks
    return {
        "calls_each": count,
        "hook_median": statistics.median(timings["hook"]),
        "plain_median": statistics.median(timings["plain"]),
        "hook_cpu_per_call": cpu["hook"] / count,
        "plain_cpu_per_call": cpu["plain"] / count,
        "token_fetches": 1,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="case", required=True)
    f = sub.add_parser("fanin")
    f.add_argument("--variant", choices=("shared", "peer"), required=True)
    f.add_argument("--n", type=int, required=True)
    f.add_argument("--first-id", type=int, default=1)
    f.add_argument("--clusters", type=int, default=1)
    f.add_argument("--interval", type=float, default=1.0)
    f.add_argument("--intervals", type=int, default=5)
    f.add_argument("--warmup-timeout", type=float, default=600.0)
    f.add_argument("--emulator", required=True)
    f.add_argument("--barrier", help="directory: several processes start their window together (bench/run.py)")
    f.add_argument("--out", required=True)
    st = sub.add_parser("start")
    st.add_argument("--n", type=int, required=True)
    st.add_argument("--workdir", required=True)
    st.add_argument("--emulator", required=True)
    st.add_argument("--out", required=True)
    pc = sub.add_parser("pollcost")
    pc.add_argument("--n", type=int, required=True)
    pc.add_argument("--first-id", type=int, default=1)
    pc.add_argument("--emulator", required=True)
    pc.add_argument("--out", required=True)
    h = sub.add_parser("hook")
    h.add_argument("--emulator", required=True)
    h.add_argument("--job-id", type=int, default=1)
    h.add_argument("--calls", type=int, default=25)
    h.add_argument("--blocks", type=int, default=20)
    h.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    # The heavy libraries are loaded before any measurement, the same for every variant.
    import aiohttp  # noqa: F401
    import google.auth.transport.requests  # noqa: F401

    import airflow_provider_slurmapi.hooks.slurm  # noqa: F401

    if args.case == "fanin":
        result = asyncio.run(fanin(args))
    elif args.case == "pollcost":
        result = asyncio.run(pollcost(args))
    elif args.case == "start":
        result = start(args)
    else:
        result = hook(args)
    Path(args.out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
