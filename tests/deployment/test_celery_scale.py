"""At scale, as Cloud Composer 3 runs Airflow: the CeleryExecutor deployment (2 workers, 2 schedulers,
2 triggerers, Redis), several clusters, processes killed and restarted (issue 24).

Each scenario asserts on the jobs in Slurm (the real lab, through the gateways) and on the calls in the
gateways' logs. Task processes are the cost (2 cores), so scenarios 5, 1, 4 and 2 share one wave of
deferred tasks (``wave`` below); each keeps a test of its own that asserts on what the wave recorded for
it. Task counts are parameters (environment variables; defaults are the issue's numbers):
``SLURMAPI_SCALE_TASKS`` (200, the wave over 3 clusters), ``SLURMAPI_KILL_TASKS`` (60 of them, a run
marked failed), ``SLURMAPI_FAILOVER_TASKS`` (100, the fewest still deferred when a triggerer is killed),
``SLURMAPI_TAGKEY_TASKS`` (20, the tag key's first use, first on the fresh deployment). The jobs wait held
in Slurm's queue (no CPU of the shared 2-CPU lab) until the scenario releases a few of them and cancels
the rest.

On the LocalExecutor deployments (Airflow before 3.3, or ``SLURMAPI_DEPLOYMENT_EXECUTOR=LocalExecutor``)
these scenarios skip: they are about several workers and triggerers.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import signal
import time
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_provider_slurmapi.slurm.submit.tag import task_tag
from airflow_provider_slurmapi.tag_secret import VARIABLE_KEY
from tests.deployment.conftest import FIGURES, POLL_INTERVAL, Cluster
from tests.deployment.harness import Deployment, hostname_of, wait_for
from tests.live_slurm.lab import Lab, in_lab

DAG = "deploy_scale"
SCALE_TASKS = int(os.environ.get("SLURMAPI_SCALE_TASKS", "200"))
FAILOVER_TASKS = int(os.environ.get("SLURMAPI_FAILOVER_TASKS", "100"))
KILL_TASKS = int(os.environ.get("SLURMAPI_KILL_TASKS", "60"))
TAGKEY_TASKS = int(os.environ.get("SLURMAPI_TAGKEY_TASKS", "20"))
HEALTH_CHECK_THRESHOLD = 30.0  # [triggerer] triggerer_health_check_threshold: Airflow's default, not set here
SLEEP = "#!/bin/bash\nsleep {seconds}\nexit 0\n"


@pytest.fixture(autouse=True)
def _celery_only(deployment: Deployment) -> None:
    if not deployment.celery:
        pytest.skip(f"{deployment.executor} deployment: these scenarios need several workers and triggerers")


def figure(name: str, value: Any) -> None:
    FIGURES.append(f"{name}: {value}")


def new_run(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- reading Slurm, the gateways and Airflow ------------------------------------------------------------
def scale_jobs(clusters: list[Cluster], run: str) -> dict[int, list[tuple[str, int]]]:
    """The jobs of a run by map index, each as (cluster id, job id), from every gateway's submits."""
    found: dict[int, list[tuple[str, int]]] = collections.defaultdict(list)
    for c in clusters:
        for j in c.gateway.jobs():
            comment = f" {j.get('comment') or ''} "
            if f" dag={DAG} " in comment and f" run={run} " in comment:
                index = re.search(r" map=(\d+) ", comment)
                found[int(index.group(1)) if index else -1].append((c.cluster_id, int(j["job_id"])))
    return dict(found)


def one_job_each(clusters: list[Cluster], run: str, count: int) -> dict[int, tuple[str, int]]:
    """Exactly one job per task (never a second copy): map index -> (cluster id, job id)."""
    jobs = scale_jobs(clusters, run)
    twice = {i: js for i, js in jobs.items() if len(js) != 1}
    assert not twice, f"tasks with other than one job: {twice}"
    assert sorted(jobs) == list(range(count)), f"{count} tasks, jobs for map indexes {sorted(jobs)}"
    return {i: js[0] for i, js in jobs.items()}


def state(lab: Lab, job_id: int) -> str:
    record = lab.live(job_id) or lab.history(job_id)
    return record.state if record is not None else "?"


def states(lab: Lab, job_ids: list[int]) -> collections.Counter[str]:
    return collections.Counter(state(lab, j) for j in job_ids)


def triggerer_hosts(deployment: Deployment) -> dict[int, str]:
    """Triggerer job id -> the hostname its process names itself by (tests/deployment/loopback.py)."""
    jobs = deployment.request("GET", "/jobs", params={"job_type": "TriggererJob", "limit": 100})["jobs"]
    return {int(j["id"]): str(j["hostname"]) for j in jobs}


def holders(deployment: Deployment, run: str) -> dict[int, str | None]:
    """Map index -> hostname of the triggerer holding the task's trigger (None: not assigned yet)."""
    hosts = triggerer_hosts(deployment)
    out: dict[int, str | None] = {}
    for ti in deployment.tis(DAG, run):
        trigger = ti.get("trigger") or {}
        out[int(ti["map_index"])] = hosts.get(trigger.get("triggerer_id") or -1)
    return out


def ti_states(deployment: Deployment, run: str) -> collections.Counter[str]:
    return collections.Counter(str(t["state"]) for t in deployment.tis(DAG, run))


def start_run(deployment: Deployment, prefix: str, count: int, **conf: Any) -> str:
    run = new_run(prefix)
    deployment.trigger(DAG, run, {"count": count, **conf})
    return run


def wait_deferred(deployment: Deployment, run: str, count: int) -> None:
    wait_for(
        lambda: ti_states(deployment, run).get("deferred", 0) == count,
        f"{count} tasks of {run} deferred",
        timeout=120 + 6 * count,
        every=3.0,
    )


def polled_ids(clusters: list[Cluster]) -> set[int]:
    return {
        int(j)
        for c in clusters
        for call in c.gateway.calls()["last"]
        for j in re.findall(r"job_id=(\d+)", call.get("path") or "")
    }


def wait_polled(clusters: list[Cluster], job_ids: set[int]) -> None:
    """Every job polled by a triggerer: a task is DEFERRED before a triggerer runs its trigger."""
    for c in clusters:
        c.gateway.reset_calls()
    wait_for(lambda: job_ids <= polled_ids(clusters), f"{len(job_ids)} jobs polled", timeout=120, every=1.0)


def calls_per_interval(clusters: list[Cluster], job_ids: set[int], intervals: int = 3) -> dict[str, float]:
    """jobs/state calls each cluster got per poll interval: counted over a window that holds at least
    ``intervals`` intervals AND in which every watched job was polled (the event that makes the window
    one of steady polling, not of triggers still starting), divided by the window's measured length."""
    for c in clusters:
        c.gateway.reset_calls()
    counted_from = time.monotonic()
    wait_for(
        lambda: time.monotonic() - counted_from >= intervals * POLL_INTERVAL and job_ids <= polled_ids(clusters),
        f"{intervals} poll intervals in which every one of {len(job_ids)} jobs was polled",
        timeout=30 * POLL_INTERVAL,
        every=0.5,
    )
    calls = {c.cluster_id: c.gateway.calls()["by_kind"].get("jobs-state", 0) for c in clusters}
    spanned = (time.monotonic() - counted_from) / POLL_INTERVAL
    return {cluster_id: count / spanned for cluster_id, count in calls.items()}


def end_jobs(lab: Lab, job_ids: list[int], release: int) -> tuple[list[int], list[int]]:
    """Release the first ``release`` held jobs (they run ``true``), cancel the rest, as an administrator."""
    released, cancelled = job_ids[:release], job_ids[release:]
    if released:
        in_lab("scontrol", "release", ",".join(map(str, released)))
    for start in range(0, len(cancelled), 50):
        in_lab("scancel", *map(str, cancelled[start : start + 50]))
    return released, cancelled


def assert_tasks_end_with_their_jobs(
    deployment: Deployment, lab: Lab, run: str, jobs: dict[int, tuple[str, int]], released: list[int]
) -> None:
    """A released job COMPLETED and its task succeeded; a cancelled one CANCELLED and its task failed."""
    count = len(jobs)
    wait_for(
        lambda: sum(ti_states(deployment, run)[s] for s in ("success", "failed")) == count,
        f"{count} tasks of {run} ended",
        timeout=300 + 2 * count,
        every=3.0,
    )
    by_index = {int(t["map_index"]): t["state"] for t in deployment.tis(DAG, run)}
    wrong = []
    for index, (_, job_id) in jobs.items():
        expected = ("success", "COMPLETED") if job_id in released else ("failed", "CANCELLED")
        got = (by_index[index], state(lab, job_id))
        if got != expected:
            wrong.append((index, job_id, got, expected))
    assert not wrong, wrong[:20]


# -- 6. the tag key on first use ------------------------------------------------------------------------
def test_tag_key_first_use_by_tasks_on_two_workers_at_once_ends_with_one_key_and_every_job_found(
    deployment: Deployment, cluster_gateways: list[Cluster], lab: Lab
) -> None:
    """No ``[slurmapi] tag_secret``, no Variable: every task creates or reads the key at the same moment.

    Airflow 3's Task SDK has no insert-if-absent for a Variable (``Variable.set`` is an upsert): first
    uses close together each write a key, and one used before the last write lands would tag a job with a
    key the deployment no longer holds (before the settle wait, CI saw 3 writers and 2 such jobs of 20).
    This scenario counts the tasks whose job's tag the final key does not make (a retry of such a task
    could not find its job by its tag).
    """
    assert "AIRFLOW__SLURMAPI__TAG_SECRET" not in deployment.env()
    deployment.airflow("variables", "delete", VARIABLE_KEY)  # absent when this runs first; ignore the answer
    assert deployment.airflow("variables", "get", VARIABLE_KEY).returncode != 0
    count = TAGKEY_TASKS
    clusters = cluster_gateways[:1]
    run = start_run(deployment, "tagkey", count)
    wait_deferred(deployment, run, count)
    jobs = one_job_each(clusters, run, count)
    got = deployment.airflow("variables", "get", VARIABLE_KEY)
    assert got.returncode == 0, got.stderr[-2000:]
    # The value alone on its line (<unix seconds>.<token_urlsafe(32)>); log lines may come before it.
    (key_text,) = [
        line for line in got.stdout.splitlines() if re.fullmatch(r"[0-9]{10}\.[A-Za-z0-9_-]{43}", line.strip())
    ]
    key = key_text.strip().encode()
    workers = {str(t.get("hostname")) for t in deployment.tis(DAG, run)}
    figure(f"tag key first use, {count} tasks: workers that ran them", sorted(workers))
    comments = {int(j["job_id"]): str(j.get("comment") or "") for j in cluster_gateways[0].gateway.jobs()}
    lost = [
        (index, job_id)
        for index, (_, job_id) in jobs.items()
        if task_tag(DAG, "job", run, index, key=key) not in comments[job_id].split()
    ]
    logs = [deployment.log(DAG, run, 1, map_index=i) for i in jobs]
    created = sum(f"Creating the Airflow Variable {VARIABLE_KEY}" in text for text in logs)
    waited = sum("for other first uses to finish writing" in text for text in logs)
    figure(
        f"tag key first use, {count} tasks: tasks that wrote a key / waited for it to settle / jobs the final "
        "key does not tag",
        f"{created} / {waited} / {len(lost)}",
    )
    end_jobs(lab, [job_id for _, job_id in jobs.values()], release=0)
    assert_tasks_end_with_their_jobs(deployment, lab, run, jobs, released=[])
    assert workers == {hostname_of("worker-1"), hostname_of("worker-2")}, workers  # both workers submitted
    assert not lost, (
        f"{len(lost)} of {count} jobs carry a tag made with a key the deployment no longer holds (a Variable.set "
        f"upsert race: {created} tasks each wrote a key): {lost[:10]}"
    )


# -- one wave of deferred tasks: scenarios 5, 1, 4 and 2, in that order ---------------------------------
# Task processes are what these scenarios cost (each submit and each resume is one on 2 cores), so four
# of them share one wave of SCALE_TASKS deferred tasks over the 3 clusters, started as two runs: "wave"
# (SCALE_TASKS - KILL_TASKS tasks) and "killrun" (KILL_TASKS). The module-scoped fixture ``wave`` drives
# it in phases and records what each saw; each scenario's test then asserts on its phases, so a failure
# names the scenario (and a phase that raised fails the tests that need it, with its traceback):
#   restarts  both schedulers and Redis restarted once the wave is under way (some tasks deferred, the
#             rest queued or submitting), then every task deferred with exactly one job;       scenario 5
#   calls     all SCALE_TASKS deferred and polled: the jobs/state calls each cluster gets per interval;  1
#   kill      "killrun" marked failed, its triggers on both triggerers: every job CANCELLED;            4
#   failover  the triggerer holding most of "wave" SIGKILLed (FAILOVER_TASKS or more still deferred);   2
#   end       one job per cluster released, the rest cancelled: each task ends with its job's state.
WAVE_PHASES = ("restarts", "calls", "kill", "failover", "end")


@dataclass
class Wave:
    """What the shared wave did, phase by phase (see above)."""

    clusters: list[Cluster]
    runs: dict[str, str] = field(default_factory=dict)  # "wave" / "killrun" -> run id
    jobs: dict[str, dict[int, tuple[str, int]]] = field(default_factory=dict)  # run name -> one job per task
    facts: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # phase -> the traceback it ended with
    done: set[str] = field(default_factory=set)

    @contextlib.contextmanager
    def phase(self, name: str, *needs: str) -> Iterator[bool]:
        """Runs the body (``yield True``) only if the phases it needs ended well; records how it ended."""
        if any(n not in self.done for n in needs):
            yield False
            return
        try:
            yield True
        except Exception:
            self.errors[name] = traceback.format_exc()
        else:
            self.done.add(name)

    def check(self, *phases: str) -> None:
        """Fail the calling scenario if a phase it asserts on raised or never ran."""
        for name in phases:
            if name in self.errors:
                pytest.fail(f"wave phase {name!r} failed:\n{self.errors[name]}", pytrace=False)
            if name not in self.done:
                pytest.fail(f"wave phase {name!r} did not run (phases that failed: {sorted(self.errors)})")

    def ids(self, run: str) -> list[int]:
        return [job_id for _, job_id in sorted(self.jobs[run].values())]


def _restarts(w: Wave, deployment: Deployment, lab: Lab) -> None:
    counts = {"wave": SCALE_TASKS - KILL_TASKS, "killrun": KILL_TASKS}
    for name, count in counts.items():
        w.runs[name] = start_run(deployment, name, count, clusters=len(w.clusters))

    def deferred() -> int:
        return sum(ti_states(deployment, run).get("deferred", 0) for run in w.runs.values())

    wait_for(lambda: deferred() > 0, "the wave under way", timeout=300, every=1.0)
    before: collections.Counter[str] = collections.Counter()
    for run in w.runs.values():
        before.update(ti_states(deployment, run))
    assert deployment.redis is not None
    deployment.redis.restart()  # queued task messages are lost with it
    deployment.restart_component("scheduler")
    deployment.restart_component("scheduler-2")
    w.facts["before restart"] = dict(before)
    for name, count in counts.items():
        wait_deferred(deployment, w.runs[name], count)
        w.jobs[name] = one_job_each(w.clusters, w.runs[name], count)
    w.facts["states after restart"] = states(lab, w.ids("wave") + w.ids("killrun"))


def _calls(w: Wave, deployment: Deployment) -> None:
    jobs = {**{(r, i): j for r in w.jobs for i, j in w.jobs[r].items()}}
    w.facts["misplaced"] = [
        (run, index, cluster_id)
        for (run, index), (cluster_id, _) in jobs.items()
        if cluster_id != w.clusters[index % len(w.clusters)].cluster_id  # task i on cluster i % 3, no other
    ]
    watched = {job_id for _, job_id in jobs.values()}
    wait_polled(w.clusters, watched)
    held = {(run, i): h for run, run_id in w.runs.items() for i, h in holders(deployment, run_id).items()}
    w.facts["holders per cluster"] = {
        c.cluster_id: {held[k] for k, (cid, _) in jobs.items() if cid == c.cluster_id} - {None} for c in w.clusters
    }
    w.facts["calls per interval"] = calls_per_interval(w.clusters, watched)
    w.facts["calls by kind"] = {c.cluster_id: dict(c.gateway.calls()["by_kind"]) for c in w.clusters}


def _kill(w: Wave, deployment: Deployment, lab: Lab) -> None:
    run, ids = w.runs["killrun"], w.ids("killrun")
    w.facts["kill spread"] = collections.Counter(holders(deployment, run).values())
    for c in w.clusters:
        c.gateway.config.latency = 0.3  # Google's token endpoint and API are not on loopback
    try:
        for c in w.clusters:
            c.gateway.reset_calls()
        killed = time.monotonic()
        deployment.patch_run(DAG, run, "failed")
        deadline = killed + 2 * POLL_INTERVAL
        wait_for(
            lambda: states(lab, ids)["CANCELLED"] == len(ids) or time.monotonic() > deadline + 60,
            "the kill answered",
            timeout=300,
            every=0.5,
        )
        w.facts["kill seconds"] = time.monotonic() - killed
        w.facts["kill calls"] = {c.cluster_id: dict(c.gateway.calls()["by_kind"]) for c in w.clusters}
    finally:
        for c in w.clusters:
            c.gateway.config.latency = 0.0
    w.facts["kill states"] = states(lab, ids)
    w.facts["kill jobs after"] = one_job_each(w.clusters, run, len(ids))


def _failover(w: Wave, deployment: Deployment, lab: Lab) -> None:
    run, jobs = w.runs["wave"], w.jobs["wave"]
    w.facts["failover deferred"] = ti_states(deployment, run).get("deferred", 0)
    held = holders(deployment, run)
    victim_host, moved = collections.Counter(h for h in held.values() if h).most_common(1)[0]
    victim = next(n for n in ("triggerer", "triggerer-2") if hostname_of(n) == victim_host)
    survivor = next(n for n in ("triggerer", "triggerer-2") if n != victim)
    w.facts["failover moved"] = [i for i, h in held.items() if h == victim_host]
    triggerer = deployment.component(victim)
    killed = time.monotonic()
    triggerer.signal(signal.SIGKILL)
    triggerer.proc.wait(30)
    try:
        wait_for(
            lambda: set(holders(deployment, run).values()) == {hostname_of(survivor)},
            f"every trigger of {run} on {survivor}",
            timeout=4 * HEALTH_CHECK_THRESHOLD,  # only turns a hang into a failure; the figure is the time
            every=1.0,
        )
        w.facts["failover reassigned"] = time.monotonic() - killed
        wait_polled(w.clusters, {jobs[i][1] for i in w.facts["failover moved"]})
        w.facts["failover resumed"] = time.monotonic() - killed
    finally:
        deployment.start_triggerer(victim)  # the scenarios after this one need two triggerers
    figure(
        f"triggerer failover, {w.facts['failover deferred']} deferred: triggers held by the killed triggerer",
        f"{moved}/{len(jobs)}",
    )
    figure(
        "triggerer failover: seconds from SIGKILL to reassigned / to every moved job polled "
        f"(health-check threshold {HEALTH_CHECK_THRESHOLD:.0f}s)",
        f"{w.facts['failover reassigned']:.1f} / {w.facts['failover resumed']:.1f}",
    )
    w.facts["failover states"] = states(lab, w.ids("wave"))
    w.facts["failover jobs after"] = one_job_each(w.clusters, run, len(jobs))


def _end(w: Wave, deployment: Deployment, lab: Lab) -> None:
    """One job per cluster runs to its end, an administrator cancels the rest."""
    run, jobs = w.runs["wave"], w.jobs["wave"]
    first = {cid: job_id for _, (cid, job_id) in sorted(jobs.items(), reverse=True)}
    released = list(first.values())
    end_jobs(lab, released + [j for j in w.ids("wave") if j not in released], release=len(released))
    assert_tasks_end_with_their_jobs(deployment, lab, run, jobs, released)
    w.facts["end jobs after"] = {r: one_job_each(w.clusters, w.runs[r], len(w.jobs[r])) for r in w.runs}
    w.facts["end states"] = states(lab, w.ids("wave"))
    w.facts["killrun tis"] = ti_states(deployment, w.runs["killrun"])
    # A moved trigger says what it says at start once more, and never more than that.
    w.facts["moved logs"] = {
        index: job_log_lines(deployment, run, index, jobs[index][1]) for index in w.facts.get("failover moved", [])[:20]
    }


@pytest.fixture(scope="module")
def wave(deployment: Deployment, cluster_gateways: list[Cluster], lab: Lab) -> Wave:
    if SCALE_TASKS - KILL_TASKS < FAILOVER_TASKS:
        raise pytest.UsageError(
            f"SLURMAPI_SCALE_TASKS={SCALE_TASKS} leaves {SCALE_TASKS - KILL_TASKS} deferred after the run of "
            f"SLURMAPI_KILL_TASKS={KILL_TASKS}, fewer than SLURMAPI_FAILOVER_TASKS={FAILOVER_TASKS}: raise it"
        )
    w = Wave(cluster_gateways)
    started = time.monotonic()
    with w.phase("restarts") as go:
        if go:
            _restarts(w, deployment, lab)
    with w.phase("calls", "restarts") as go:
        if go:
            _calls(w, deployment)
    with w.phase("kill", "restarts") as go:
        if go:
            _kill(w, deployment, lab)
    with w.phase("failover", "restarts") as go:
        if go:
            _failover(w, deployment, lab)
    with w.phase("end", "restarts") as go:
        if go:
            _end(w, deployment, lab)
    per_cluster = collections.Counter(cid for r in w.jobs.values() for cid, _ in r.values())
    figure(f"wave of {SCALE_TASKS} deferred tasks: jobs seen in Slurm per cluster", dict(per_cluster))
    figure(f"wave of {SCALE_TASKS} deferred tasks: seconds for the whole wave", f"{time.monotonic() - started:.0f}")
    return w


# -- 1. many tasks, several clusters --------------------------------------------------------------------
def test_many_deferred_tasks_over_three_clusters_one_call_per_cluster_per_triggerer_and_each_ends_with_its_job(
    wave: Wave,
) -> None:
    wave.check("restarts", "calls")
    count, clusters = SCALE_TASKS, wave.clusters
    rates, per_cluster_holders = wave.facts["calls per interval"], wave.facts["holders per cluster"]
    for c in clusters:
        figure(
            f"{count} deferred tasks over {len(clusters)} clusters: {c.cluster_id} jobs/state calls per interval",
            f"{rates[c.cluster_id]:.2f} (triggerers holding its triggers: {sorted(per_cluster_holders[c.cluster_id])})",
        )
    assert not wave.facts["misplaced"], wave.facts["misplaced"][:20]
    for c in clusters:
        # One poller per cluster in each triggerer that holds some of its triggers (+1 round in flight).
        assert rates[c.cluster_id] <= len(per_cluster_holders[c.cluster_id]) + 1 / 3, (rates, per_cluster_holders)
        # Per-job reads only for jobs whose state changed, never one per job per interval.
        kinds = wave.facts["calls by kind"][c.cluster_id]
        assert kinds.get("job-get", 0) + kinds.get("jobs", 0) < count // len(clusters), kinds
    # Each task ends with its own job's state, on its own cluster; the ends submitted nothing.
    wave.check("end")
    assert wave.facts["end jobs after"] == {r: wave.jobs[r] for r in wave.runs}


# -- 4. a run is marked failed ----------------------------------------------------------------------------
def test_a_run_marked_failed_with_its_triggers_on_both_triggerers_cancels_every_job_within_two_polls(
    wave: Wave,
) -> None:
    wave.check("restarts", "kill")
    count, spread = KILL_TASKS, wave.facts["kill spread"]
    final, seconds = wave.facts["kill states"], wave.facts["kill seconds"]
    figure(f"run of {count} marked failed: triggers per triggerer", dict(spread))
    figure(
        f"run of {count} marked failed: jobs cancelled / seconds to the last",
        f"{final['CANCELLED']}/{count} {seconds:.1f}",
    )
    assert set(spread) == {hostname_of("triggerer"), hostname_of("triggerer-2")}, spread
    assert final == {"CANCELLED": count}, final
    # Within two polls (10 s), counted rather than timed: every job CANCELLED before either triggerer's
    # fourth jobs/state round on its cluster (rounds at 0, 1 and 2 intervals after the kill).
    for cluster_id, calls in wave.facts["kill calls"].items():
        assert calls.get("jobs-state", 0) <= 2 * 3, (cluster_id, calls, f"{seconds:.1f}s")
    assert wave.facts["kill jobs after"] == wave.jobs["killrun"]


# -- 2. a triggerer dies --------------------------------------------------------------------------------
def job_log_lines(deployment: Deployment, run: str, index: int, job_id: int) -> collections.Counter[str]:
    """The task log's lines about its job or its trigger (Airflow's "trigger ... starting" included),
    counted by their text (no timestamp): a line a restart repeats shows twice."""
    answer = deployment.request(
        "GET",
        f"/dags/{DAG}/dagRuns/{run}/taskInstances/job/logs/1",
        params={"full_content": "true", "map_index": index},
        headers={"Accept": "application/json"},
    )
    content = answer.get("content") if isinstance(answer, dict) else answer
    events = [str(r.get("event", "")) if isinstance(r, dict) else str(r) for r in content or []]
    return collections.Counter(
        e for e in events if re.search(rf"\b{job_id}\b", e) or re.match(rf"trigger {DAG}/{run}/job/{index}/", e)
    )


def test_a_triggerer_sigkilled_with_deferred_tasks_its_triggers_resume_on_the_other_no_job_lost_or_doubled(
    wave: Wave,
) -> None:
    wave.check("restarts", "failover")
    count = len(wave.jobs["wave"])
    assert wave.facts["failover deferred"] >= FAILOVER_TASKS, wave.facts["failover deferred"]
    assert wave.facts["failover states"] == {"PENDING": count}  # none lost, none cancelled
    assert wave.facts["failover jobs after"] == wave.jobs["wave"]
    wave.check("end")  # every task ended with its job's state, no job submitted twice, none left running
    assert wave.facts["end jobs after"]["wave"] == wave.jobs["wave"]
    assert wave.facts["end states"]["PENDING"] == wave.facts["end states"]["RUNNING"] == 0, wave.facts["end states"]
    repeats: dict[int, tuple[int, str]] = {}
    for index, lines in wave.facts["moved logs"].items():
        started = [line for line in lines if line.startswith("trigger ")]
        assert started and lines[started[0]] == 2, lines  # started on each triggerer, once
        line, times = lines.most_common(1)[0]
        repeats[index] = (times, line)
    assert repeats, "no moved task's log read"
    worst = max(repeats.values())
    figure("triggerer failover: most times one line repeats in a moved task's log", f"{worst[0]} ({worst[1][:80]})")
    assert worst[0] <= 2, repeats


# -- 5. restarts --------------------------------------------------------------------------------------------
def test_both_schedulers_and_redis_restarted_mid_run_nothing_lost_or_duplicated(wave: Wave) -> None:
    wave.check("restarts")
    figure(
        f"restarts mid-run of {SCALE_TASKS}: task states when Redis and both schedulers restarted",
        wave.facts["before restart"],
    )
    # Every task deferred with one job (checked as the phase ended), and every job still held in the queue.
    assert wave.facts["states after restart"] == {"PENDING": SCALE_TASKS}, wave.facts["states after restart"]
    wave.check("end")  # then every task ended with its own job's state, and nothing was submitted again
    assert wave.facts["end jobs after"] == {r: wave.jobs[r] for r in wave.runs}
    assert wave.facts["killrun tis"] == {"failed": KILL_TASKS}, wave.facts["killrun tis"]


# -- 3. a worker dies ---------------------------------------------------------------------------------------
def _kill_worker_of(deployment: Deployment, ti: dict[str, Any]) -> str:
    """SIGKILL the whole Celery worker (its pool, the task's supervisor and process) that runs ``ti``, and
    start a new one in its place, as Composer's autoscaler would."""
    name = next(n for n in ("worker-1", "worker-2") if hostname_of(n) == ti.get("hostname"))
    worker = deployment.component(name)
    worker.signal(signal.SIGKILL)
    worker.proc.wait(30)
    deployment.start_worker(name)
    return name


def _retry_outcome(deployment: Deployment, gateway: Any, lab: Lab, dag: str, run: str, job_id: int) -> str:
    final = deployment.wait_ti(dag, run, {"success", "failed"}, timeout=400)
    log = deployment.log(dag, run, int(final["try_number"]))
    jobs = sorted(
        j["job_id"]
        for j in gateway.jobs()
        if f"dag={dag} " in (j.get("comment") or "") and f" run={run} " in f" {j.get('comment')} "
    )
    assert jobs == [job_id], jobs  # exactly one job
    if final["state"] == "success":
        assert final["try_number"] == 2
        assert (
            f"Reattaching to Slurm job {job_id}" in log or f"Slurm job {job_id} of this task instance already" in log
        ), log[-3000:]
    else:
        assert str(job_id) in log, log[-3000:]  # the failure names the job
    assert state(lab, job_id) in ("COMPLETED", "CANCELLED")  # nothing orphaned
    return f"{final['state']} on try {final['try_number']}, job {state(lab, job_id)}"


def test_a_celery_worker_sigkilled_during_a_sync_wait_the_retry_reattaches_to_the_one_job(
    deployment: Deployment, gateway: Any, lab: Lab
) -> None:
    dag, run = "deploy_sync_retry", new_run("workerkill")
    deployment.trigger(dag, run, {"script": SLEEP.format(seconds=60)})
    ti = deployment.wait_ti(dag, run, {"running"})
    (job_id,) = wait_for(
        lambda: [j["job_id"] for j in gateway.jobs() if f" run={run} " in f" {j.get('comment')} "], "the job"
    )
    wait_for(lambda: state(lab, job_id) == "RUNNING", f"job {job_id} RUNNING", timeout=180)
    ti = deployment.ti(dag, run)
    name = _kill_worker_of(deployment, ti)
    outcome = _retry_outcome(deployment, gateway, lab, dag, run, job_id)
    figure(f"{name} SIGKILLed during a sync wait", outcome)


def test_a_celery_worker_sigkilled_while_its_submit_answer_is_late_leaves_exactly_one_job(
    deployment: Deployment, gateway: Any, lab: Lab
) -> None:
    dag, run = "deploy_sync_retry", new_run("latekill")
    gateway.add_fault("late=15@submit")  # carried out 15 s after it arrives, never answered
    try:
        deployment.trigger(dag, run, {"script": SLEEP.format(seconds=20)})
        wait_for(lambda: not gateway.faults(), "the submit sent (the fault taken)", timeout=240)
        ti = deployment.ti(dag, run)
        assert ti["state"] == "running", ti
        name = _kill_worker_of(deployment, ti)
    finally:
        gateway.clear_faults()
    (job_id,) = wait_for(
        lambda: [j["job_id"] for j in gateway.jobs() if f" run={run} " in f" {j.get('comment')} "],
        "the late submit carried out",
        timeout=60,
    )
    outcome = _retry_outcome(deployment, gateway, lab, dag, run, job_id)
    figure(f"{name} SIGKILLed while its submit's answer was late", outcome)
