"""Airflow's own ``airflow triggerer`` process holding N genuine deferred waits, confined like Composer 3's smallest triggerer.

    .venv/bin/python bench/triggerer.py                  # make bench-triggerer
    .venv/bin/python bench/triggerer.py --n 100 --vcpu 0.5 --memory-mib 512 --clusters 1,10

The path: a throw-away PostgreSQL (tests/deployment/harness.py), ``airflow db migrate``, the DAG of
bench/triggerer_dags serialized; per case a DAG run whose mapped ``wait`` task has N task instances
DEFERRED on N trigger rows. The rows come from a real deferral: ``SlurmJobSensor.execute`` against the
emulator raises ``TaskDeferred`` once per cluster, and that trigger is cloned for each held job (only
``job_id`` differs). Then ``airflow triggerer --capacity C`` runs in a fresh cgroup (cpu quota, memory
limit); the emulator counts the calls; a ``LagProbeTrigger`` (bench/triggerer_triggers.py) on its own
deferred task instance records the event loop's lag; the harness cancels every job at once (a wave) and
reads when each task instance leaves DEFERRED in the metadata database.

Variants on the same rows: ``provider`` (SlurmJobTrigger, the shared poller), ``peer`` (one GET per
trigger per interval, bench/peer_baseline.py), ``idle`` (a trigger that does nothing: Airflow's own cost,
subtracted from ``provider`` to give the provider's share of CPU and memory).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import requests

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path[:0] = [str(BENCH), str(REPO)]

from cases import percentile as pct  # noqa: E402
from confine import Confinement  # noqa: E402
from emulator_proc import (  # noqa: E402
    API_VERSION,
    CLUSTER_ID,
    GOAL_MISSED,
    PROJECT,
    REGION,
    STATIC_TOKEN,
    set_tag_secret,
    start_emulator,
)

DAG_ID = "bench_triggerer"
VARIANTS = ("provider", "peer", "idle")


def airflow_env(tmp: Path, pg_url: str, emulator: Any) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
    env.update(emulator.connection_env())
    env.update(
        AIRFLOW_HOME=str(tmp / "airflow-home"),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=pg_url,
        AIRFLOW__CORE__DAGS_FOLDER=str(BENCH / "triggerer_dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__FERNET_KEY="",
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC="5",
        AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT="0",
        PYTHONPATH=os.pathsep.join([str(BENCH), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    env["AIRFLOW__SLURMAPI__TAG_SECRET"] = os.environ["AIRFLOW__SLURMAPI__TAG_SECRET"]
    return env


def airflow(env: dict[str, str], *args: str, timeout: float = 600) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(f"airflow {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def cancel_jobs(emulator: Any, job_ids: list[int], threads: int = 8) -> dict[int, float]:
    """Cancel every job (a wave ending together): each job's end time, as the harness saw it answered."""
    url = emulator.envelope_url()
    headers = {"Authorization": f"Bearer {STATIC_TOKEN}"}
    ended: dict[int, float] = {}
    lock = threading.Lock()

    def chunk(ids: list[int]) -> None:
        session = requests.Session()
        for job_id in ids:
            body = {"method": "HTTP_METHOD_DELETE", "path": f"/slurm/{API_VERSION}/job/{job_id}"}
            session.post(url, json=body, headers=headers, timeout=60).raise_for_status()
            with lock:
                ended[job_id] = time.time()

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(chunk, [job_ids[k::threads] for k in range(threads)]))
    return ended


class Rows:
    """The metadata database, through Airflow's ORM (this process imports Airflow once its env is set)."""

    def __init__(self) -> None:
        from airflow.models.dagbag import DBDagBag
        from airflow.utils.session import create_session

        self.create_session = create_session
        with create_session() as session:
            self.dag = DBDagBag().get_latest_version_of_dag(DAG_ID, session=session)
        assert self.dag is not None, "the benchmark DAG was not serialized"

    def genuine_trigger(self, cluster_id: str, job_id: int, interval: float) -> Any:
        """The trigger a real deferral of ``SlurmJobSensor`` hands Airflow (its execute against the emulator)."""
        try:
            from airflow.sdk.exceptions import TaskDeferred
        except ImportError:  # Airflow 2
            from airflow.exceptions import TaskDeferred

        from airflow_provider_slurmapi.sensors.slurm import SlurmJobSensor

        sensor = SlurmJobSensor(
            task_id="wait",
            job_id=job_id,
            region=REGION,
            cluster_id=cluster_id,
            project_id=PROJECT,
            deferrable=True,
            poke_interval=interval,
        )
        try:
            sensor.execute({"ti": SimpleNamespace(try_number=1, map_index=0), "task_instance": None})
        except TaskDeferred as deferred:
            return deferred
        raise RuntimeError(f"SlurmJobSensor did not defer on held job {job_id}")

    def create(self, run_id: str, triggers: list[Any], method: str, probe: Any) -> None:
        from airflow.models.taskinstance import TaskInstance
        from airflow.models.trigger import Trigger
        from airflow.utils.state import DagRunState, TaskInstanceState
        from airflow.utils.types import DagRunTriggeredByType, DagRunType

        try:
            from airflow._shared.timezones import timezone
        except ImportError:  # pragma: no cover
            from airflow.utils import timezone
        now = timezone.utcnow()
        with self.create_session() as session:
            run = self.dag.create_dagrun(
                run_id=run_id,
                logical_date=None,
                run_after=now,
                run_type=DagRunType.MANUAL,
                triggered_by=DagRunTriggeredByType.TEST,
                state=DagRunState.RUNNING,
                session=session,
            )
            session.flush()
            for ti in run.get_task_instances(session=session):
                session.delete(ti)
            session.flush()
            version = run.created_dag_version_id
            wait, probe_task = self.dag.get_task("wait"), self.dag.get_task("probe")
            rows = [Trigger.from_object(t) for t in [*triggers, probe]]
            session.add_all(rows)
            session.flush()
            tis = []
            for index, row in enumerate(rows):
                last = index == len(rows) - 1
                ti = TaskInstance(
                    probe_task if last else wait,
                    dag_version_id=version,
                    run_id=run_id,
                    map_index=-1 if last else index,
                )
                ti.state = TaskInstanceState.DEFERRED
                ti.trigger_id = row.id
                ti.next_method = method
                ti.next_kwargs = {}
                ti.try_number = 1
                ti.start_date = now
                tis.append(ti)
            session.add_all(tis)

    def states(self, run_id: str) -> dict[int, str]:
        from sqlalchemy import text

        with self.create_session() as session:
            rows = session.execute(
                text("SELECT map_index, state FROM task_instance WHERE dag_id=:d AND run_id=:r AND task_id='wait'"),
                {"d": DAG_ID, "r": run_id},
            ).all()
        return {int(m): str(s) for m, s in rows}

    def assigned(self) -> int:
        from sqlalchemy import text

        with self.create_session() as session:
            return int(session.execute(text("SELECT count(*) FROM trigger WHERE triggerer_id IS NOT NULL")).scalar())

    def clear(self) -> None:
        from sqlalchemy import text

        with self.create_session() as session:
            for sql in ("DELETE FROM task_instance", "DELETE FROM dag_run", "DELETE FROM trigger", "DELETE FROM job"):
                session.execute(text(sql))


def died(result: dict[str, Any], group: Confinement) -> dict[str, Any]:
    """A case whose triggerer died (the OOM killer at its memory limit): what its cgroup recorded, no window."""
    result.update(died=True, oom=group.oom_kills(), peak_usage=group.memory_peak(), alive=False)
    return result


def run_case(
    args: argparse.Namespace,
    tmp: Path,
    env: dict[str, str],
    emulator: Any,
    rows: Rows,
    n: int,
    clusters: int,
    variant: str,
    vcpu: float,
    memory_mib: int,
    case_no: int,
) -> dict[str, Any]:
    from peer_baseline import PeerPollingTrigger
    from triggerer_triggers import IdleTrigger, LagProbeTrigger

    from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger

    interval = args.interval
    names = [CLUSTER_ID] if clusters <= 1 else [f"{CLUSTER_ID}-{k}" for k in range(clusters)]
    job_ids = emulator.submit_held_jobs(n) if variant != "idle" else list(range(1, n + 1))
    triggers: list[Any] = []
    if variant == "provider":
        seeds = {c: rows.genuine_trigger(c, job_ids[0], interval) for c in names}
        method = next(iter(seeds.values())).method_name
        for i, job_id in enumerate(job_ids):
            _, kwargs = seeds[names[i % len(names)]].trigger.serialize()
            triggers.append(SlurmJobTrigger(**{**kwargs, "job_id": job_id}))
    elif variant == "peer":
        method = "execute_complete"
        for i, job_id in enumerate(job_ids):
            triggers.append(
                PeerPollingTrigger(
                    job_id=job_id,
                    region=REGION,
                    cluster_id=names[i % len(names)],
                    project_id=PROJECT,
                    poll_interval=interval,
                )
            )
    else:
        method = "execute_complete"
        triggers = [IdleTrigger(job_id=j, poll_interval=interval) for j in job_ids]
    lag_file = tmp / f"lag-{case_no}.txt"
    run_id = f"bench-{case_no}"
    rows.clear()
    rows.create(run_id, triggers, method, LagProbeTrigger(path=str(lag_file)))

    group = Confinement(f"slurmapi-bench-triggerer-{os.getpid()}-{case_no}", vcpu, memory_mib << 20)
    log = (tmp / f"triggerer-{case_no}.log").open("w")
    capacity = max(1000, n + 1)
    cmd = [str(Path(sys.executable).parent / "airflow"), "triggerer", "--capacity", str(capacity)]
    proc = subprocess.Popen(
        cmd, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=group.enter, start_new_session=True
    )
    result: dict[str, Any] = {
        "n": n,
        "clusters": clusters,
        "variant": variant,
        "vcpu": vcpu,
        "memory_mib": memory_mib,
        "capacity": capacity,
        "cgroup": group.kind,
    }
    try:
        t0 = time.monotonic()
        while rows.assigned() < n + 1:
            if proc.poll() is not None and group.oom_kills():  # the limit is the finding: record it, go on
                return died(result, group)
            if proc.poll() is not None or time.monotonic() - t0 > args.start_timeout:
                raise RuntimeError(
                    f"the triggerer did not take {n + 1} triggers (took {rows.assigned()}): "
                    f"{(tmp / f'triggerer-{case_no}.log').read_text()[-3000:]}"
                )
            time.sleep(1)
        cpu_start0 = group.cpu_seconds()
        # Until every trigger runs and has polled once (the peer's first polls build N hooks).
        time.sleep(interval * 1.5)
        result["start_s"] = time.monotonic() - t0
        if proc.poll() is not None:  # died while its triggers started (the OOM killer at the memory limit)
            return died(result, group)
        result["start_cpu_s"] = group.cpu_seconds() - cpu_start0
        emulator.reset_calls()
        cpu0, thr0, wall0, epoch0 = group.cpu_seconds(), group.throttled(), time.monotonic(), time.time()
        time.sleep(interval * args.intervals)
        wall = time.monotonic() - wall0
        cpu = group.cpu_seconds() - cpu0
        calls = emulator.calls()["total"]
        lags = []
        if lag_file.exists():
            for line in lag_file.read_text().splitlines():
                stamp, _, lag = line.partition(" ")
                if epoch0 <= float(stamp) <= epoch0 + wall:
                    lags.append(float(lag))
        result.update(
            calls_per_cluster_interval=calls / clusters / (wall / interval),
            cpu_share=cpu / wall / vcpu,
            throttled_periods=group.throttled() - thr0,
            rss=group.memory_rss(),
            peak_usage=group.memory_peak(),
            peak_rss_processes=group.peak_rss_of_processes(),
            lag_p50_ms=pct(lags, 0.5),
            lag_p99_ms=pct(lags, 0.99),
            lag_samples=len(lags),
        )
        if variant != "idle":
            ended = cancel_jobs(emulator, job_ids)
            wave_end = time.time()
            left: dict[int, float] = {}
            deadline = time.monotonic() + interval * 3 + 120
            index_of = {j: i for i, j in enumerate(job_ids)}
            while len(left) < n and time.monotonic() < deadline:
                now = time.time()
                for index, state in rows.states(run_id).items():
                    if state != "deferred" and index not in left:
                        left[index] = now
                time.sleep(0.25)
            delays = [left[index_of[j]] - t for j, t in ended.items() if index_of[j] in left]
            result.update(
                wave_cancel_s=wave_end - min(ended.values()),
                left_deferred=len(left),
                end_to_task_p50_s=pct(delays, 0.5),
                end_to_task_p99_s=pct(delays, 0.99),
                end_to_task_max_s=max(delays) if delays else float("nan"),
            )
        result["oom"] = group.oom_kills()
        result["alive"] = proc.poll() is None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait(10)
        log.close()
        group.remove()
    return result


def fmt(value: Any, spec: str) -> str:
    if isinstance(value, float) and value != value:
        return "-"
    return format(value, spec) if value is not None else "-"


def goals(results: list[dict[str, Any]], interval: float) -> list[tuple[str, bool]]:
    """Issue 36's goal, judged on the largest N at 0.5 vCPU on one cluster (when that case ran)."""
    by = {(r["n"], r["clusters"], r["variant"], r["vcpu"]): r for r in results}
    cases = [k for k in by if k[2] == "provider" and k[3] == 0.5]
    if not cases:
        return []
    n, clusters, _, vcpu = max(cases, key=lambda k: (k[0], -k[1]))
    r, idle = by[(n, clusters, "provider", vcpu)], by.get((n, clusters, "idle", vcpu))
    nan = float("nan")  # a died case measured no window: every comparison with it is a MISS
    share = r.get("cpu_share", nan) - (idle.get("cpu_share", nan) if idle else 0.0)
    lag_p99 = r.get("lag_p99_ms", nan)
    limit = r["memory_mib"] << 20
    slack = interval + 5.0  # one poll interval plus the triggerer's own loop (job_heartbeat_sec=5)
    return [
        (
            f"N={n} at {vcpu} vCPU: the provider's CPU < 10% of the quota (measured {100 * share:.1f}%)",
            share < 0.10 and r["alive"],
        ),
        (
            f"N={n}: memory inside {r['memory_mib']} MiB (peak {r['peak_usage'] / 2**20:.0f} MiB, OOM {r['oom']})",
            r["peak_usage"] < limit and r["alive"],
        ),
        (f"N={n}: event-loop lag p99 < 20 ms (measured {lag_p99:.1f} ms)", lag_p99 < 20 and r["alive"]),
        (
            f"N={n}: job end to task out of DEFERRED p99 <= {slack:.0f} s (measured {r.get('end_to_task_p99_s', float('nan')):.1f} s)",
            r.get("end_to_task_p99_s", float("inf")) <= slack and r.get("left_deferred") == n,
        ),
    ]


def report(results: list[dict[str, Any]]) -> None:
    by = {(r["n"], r["clusters"], r["variant"], r["vcpu"]): r for r in results}
    print()
    print("Airflow triggerer (real `airflow triggerer` process in a cgroup), per case:")
    head = (
        f"{'vCPU':>4} {'N':>5} {'cl':>2} {'variant':>8} {'calls/cl/int':>12} {'CPU/quota':>9} {'RSS':>8} "
        f"{'RSS/trig':>8} {'peak':>8} {'lag p50':>8} {'lag p99':>8} {'end->task p50':>13} {'p99':>6} {'start':>6}"
    )
    print(head)
    for r in results:
        print(
            f"{r['vcpu']:>4} {r['n']:>5} {r['clusters']:>2} {r['variant']:>8} "
            f"{fmt(r.get('calls_per_cluster_interval'), '.1f'):>12} {fmt(100 * r.get('cpu_share', float('nan')), '.1f'):>8}% "
            f"{r.get('rss', 0) / 2**20:>7.0f}M {r.get('rss', 0) / max(1, r['n']) / 1024:>7.1f}K "
            f"{r.get('peak_usage', 0) / 2**20:>7.0f}M {fmt(r.get('lag_p50_ms'), '.1f'):>6}ms "
            f"{fmt(r.get('lag_p99_ms'), '.1f'):>6}ms {fmt(r.get('end_to_task_p50_s'), '.1f'):>12}s "
            f"{fmt(r.get('end_to_task_p99_s'), '.1f'):>5}s {r.get('start_s', 0):>5.0f}s"
        )
    print()
    print("Ratios (peer / provider) and the provider's own share (provider - idle, same N, same confinement):")
    for (n, clusters, variant, vcpu), r in by.items():
        if variant != "provider" or r.get("died"):
            continue  # a died case measured no window: no ratio to give
        peer, idle = (by.get((n, clusters, v, vcpu)) for v in ("peer", "idle"))
        peer, idle = (None if side and side.get("died") else side for side in (peer, idle))
        parts = [f"{vcpu} vCPU N={n} clusters={clusters}:"]
        if peer:
            parts.append(
                f"calls {peer['calls_per_cluster_interval'] / max(r['calls_per_cluster_interval'], 1e-9):.0f}x,"
            )
            parts.append(f"CPU {peer['cpu_share'] / max(r['cpu_share'], 1e-9):.1f}x,")
            parts.append(f"RSS {peer['rss'] / max(r['rss'], 1):.2f}x,")
            parts.append(f"lag p99 {peer['lag_p99_ms'] / max(r['lag_p99_ms'], 1e-9):.1f}x;")
        if idle:
            share = r["cpu_share"] - idle["cpu_share"]
            parts.append(f"provider CPU {100 * share:.1f}% of quota (Airflow alone {100 * idle['cpu_share']:.1f}%),")
            parts.append(f"provider RSS {(r['rss'] - idle['rss']) / max(1, n) / 1024:.1f} KiB per wait")
        print(" ".join(parts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="100,1000,5000")
    parser.add_argument("--clusters", default="1,10")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--sizes", default="0.5:512", help="vCPU:MiB pairs, comma separated (e.g. 0.5:512,1:1024)")
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--intervals", type=int, default=3)
    parser.add_argument("--start-timeout", type=float, default=900.0)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bench/triggerer.py needs root (it makes cgroups for the triggerer).")
        return 2
    from tests.deployment.harness import Postgres

    # A stop (TERM, or INT though a background shell ignores it) still stops the triggerer, PostgreSQL and the cgroup.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    set_tag_secret()
    tmp = Path(tempfile.mkdtemp(prefix="slurmapi-bench-triggerer-"))
    pg = Postgres()
    pg.start()
    results: list[dict[str, Any]] = []
    try:
        with start_emulator(tmp) as emulator:
            env = airflow_env(tmp, pg.url, emulator)
            airflow(env, "db", "migrate")
            airflow(env, "dags", "reserialize")
            os.environ.update(env)
            rows = Rows()
            case_no = 0
            for size in args.sizes.split(","):
                vcpu_s, _, mib_s = size.partition(":")
                for n in [int(x) for x in args.n.split(",")]:
                    for clusters in [int(x) for x in args.clusters.split(",")]:
                        for variant in args.variants.split(","):
                            if variant == "idle" and clusters != 1:
                                continue  # Airflow's own cost does not depend on the clusters
                            case_no += 1
                            started = time.monotonic()
                            r = run_case(
                                args, tmp, env, emulator, rows, n, clusters, variant, float(vcpu_s), int(mib_s), case_no
                            )
                            r["case_s"] = time.monotonic() - started
                            results.append(r)
                            print(json.dumps(r), flush=True)
    finally:
        pg.stop()
    report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    verdicts = goals(results, args.interval)
    for text, ok in verdicts:
        print(f"   {'PASS' if ok else 'MISS'}  {text}")
    return 0 if all(ok for _, ok in verdicts) else GOAL_MISSED


if __name__ == "__main__":
    sys.exit(main())
