"""Scale: 5000 pending jobs cost no process, and the polling paths answer for all of them.

How fast they answer is measured in ``bench/`` (timings do not belong in tests).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from slurmapi_emulator import EmulatorHandle

from .conftest import Client, V

N_JOBS = 5000


def test_5000_pending_jobs_and_fast_polling(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(cpus=2, min_job_age=600)

    def submit_batch(batch: range) -> list[int]:
        client = Client(emu)
        return [client.submit_id(script="#!/bin/bash\nsleep 600\n", name=f"j{i}") for i in batch]

    with ThreadPoolExecutor(4) as pool:
        ids = sorted(i for chunk in pool.map(submit_batch, [range(k, N_JOBS, 4) for k in range(4)]) for i in chunk)
    assert ids == list(range(1, N_JOBS + 1))
    emu.wait_for_state(2, "RUNNING")
    jobs = emu.jobs()
    assert sum(j["pid"] is not None for j in jobs) == 2  # --cpus caps RUNNING; pending jobs have no process
    client = Client(emu)

    query = "&".join(f"job_id={i}" for i in range(1001, 2001))
    for _ in range(2):
        answer = client.call("GET", f"/slurm/{V}/jobs/state/?{query}")
        assert len(answer.jobs) == 1000 and answer.jobs[0] == {"job_id": "1001", "state": ["PENDING"]}
    assert len(client.call("GET", f"/slurm/{V}/jobs/state/").jobs) == N_JOBS
    for _ in range(2):  # the second answer comes from the emulator's cache: the same jobs
        resp = client.post_raw(json.dumps({"method": "HTTP_METHOD_GET", "path": f"/slurm/{V}/jobs/"}))
        assert resp.status_code == 200
    assert len(json.loads(resp.json()["body"])["jobs"]) == N_JOBS
    client.cancel(1)
    client.cancel(2)
