"""Scale: 5000 pending jobs cost no process, and the polling paths stay fast.

Timings are printed (run with -s to see them) and only checked against generous bounds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from slurmapi_emulator import EmulatorHandle

from .conftest import Client, V

N_JOBS = 5000


def test_5000_pending_jobs_and_fast_polling(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(cpus=2, min_job_age=600)
    started = time.perf_counter()

    def submit_batch(batch: range) -> list[int]:
        client = Client(emu)
        return [client.submit_id(script="#!/bin/bash\nsleep 600\n", name=f"j{i}") for i in batch]

    with ThreadPoolExecutor(4) as pool:
        ids = sorted(i for chunk in pool.map(submit_batch, [range(k, N_JOBS, 4) for k in range(4)]) for i in chunk)
    submit_seconds = time.perf_counter() - started
    assert ids == list(range(1, N_JOBS + 1))
    emu.wait_for_state(2, "RUNNING")
    jobs = emu.jobs()
    assert sum(j["pid"] is not None for j in jobs) == 2  # --cpus caps RUNNING; pending jobs have no process
    client = Client(emu)

    query = "&".join(f"job_id={i}" for i in range(1001, 2001))
    timings = []
    for _ in range(5):
        t0 = time.perf_counter()
        answer = client.call("GET", f"/slurm/{V}/jobs/state/?{query}")
        timings.append(time.perf_counter() - t0)
        assert len(answer.jobs) == 1000 and answer.jobs[0] == {"job_id": "1001", "state": ["PENDING"]}
    t0 = time.perf_counter()
    assert len(client.call("GET", f"/slurm/{V}/jobs/state/").jobs) == N_JOBS
    state_all = time.perf_counter() - t0
    list_timings = []
    for _ in range(2):
        t0 = time.perf_counter()
        resp = client.post_raw(json.dumps({"method": "HTTP_METHOD_GET", "path": f"/slurm/{V}/jobs/"}))
        list_timings.append(time.perf_counter() - t0)
        assert resp.status_code == 200
    assert len(json.loads(resp.json()["body"])["jobs"]) == N_JOBS
    print(
        f"\n{N_JOBS} submits: {submit_seconds:.1f}s; jobs/state 1000 ids: best {min(timings) * 1000:.1f} ms "
        f"(median {sorted(timings)[2] * 1000:.1f} ms); jobs/state all: {state_all * 1000:.0f} ms; "
        f"jobs/ all ({len(resp.content) / 1e6:.0f} MB): first {list_timings[0]:.2f}s, cached "
        f"{list_timings[1]:.2f}s"
    )
    assert min(timings) < 1.0
    client.cancel(1)
    client.cancel(2)
