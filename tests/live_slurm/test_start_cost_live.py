"""Starting a task on a busy real cluster: 2,000 held jobs of another Slurm user (root) in the queue.

Asserts call counts, never times: a first try is one submit call; a retry finds its job with one
call, and no start lists the live queue. Jobs of root are made with a root token that only the host's
root can issue (``scontrol token`` in the lab); they are cancelled at the end.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from tests.conftest import load_dag, run_dag
from tests.live_slurm.conftest import make_hook
from tests.live_slurm.lab import Lab, in_lab, root_token
from tests.waiting import wait_until

FOREIGN_JOBS = 2000
FOREIGN_NAME = "slurmapi-foreign-held"
V = "v0.0.42"


@pytest.fixture(scope="module")
def busy_queue(lab: Lab) -> Iterator[list[int]]:
    """2,000 held jobs of root, another Slurm user than the lab's job user; cancelled afterwards."""
    if os.geteuid() != 0:
        pytest.fail("this test makes jobs of another Slurm user with a root token: run it as root (CI does)")
    token = root_token(1800)
    headers = {"X-SLURM-USER-TOKEN": token, "Content-Type": "application/json"}
    body = json.dumps(
        {
            "job": {
                "name": FOREIGN_NAME,
                "partition": "debug",
                "hold": True,
                "current_working_directory": "/tmp",
                "environment": ["PATH=/usr/bin:/bin"],
            },
            "script": "#!/bin/bash\ntrue\n",
        }
    )

    def submit(count: int) -> list[int]:
        session = requests.Session()
        ids = []
        for _ in range(count):
            answer = session.post(f"{lab.url}/slurm/{V}/job/submit", data=body, headers=headers, timeout=60)
            answer.raise_for_status()
            ids.append(int(answer.json()["job_id"]))
        return ids

    try:
        with ThreadPoolExecutor(4) as pool:
            ids = [i for chunk in pool.map(submit, [FOREIGN_JOBS // 4] * 4) for i in chunk]
        yield ids
    finally:
        in_lab("scancel", "--user=root", f"--name={FOREIGN_NAME}")


def test_task_starts_among_2000_jobs_of_another_user_cost_one_call_each(
    busy_queue: list[int], gateway: Any, lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(busy_queue) == FOREIGN_JOBS
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    gateway.reset_calls()
    dag = load_dag("slurm_scenarios.py", "completes")
    state, tasks = run_dag(dag)
    assert state == "success", tasks
    kinds = [call["kind"] for call in gateway.calls()["last"]]
    assert kinds[0] == "submit" and kinds.count("submit") == 1, kinds
    assert "jobs" not in kinds, kinds  # never the whole queue
    # The one history call is the accounting read of its own job, once it has ended; never a list.
    history = [call["path"] for call in gateway.calls()["last"] if call["kind"] == "slurmdb"]
    assert len(history) == 1 and kinds.index("slurmdb") > kinds.index("submit"), kinds

    # A retry without a stored id: one history call filtered by name, never the live queue.
    hook = make_hook(gateway)
    ours = [job for job in hook.list_jobs() if job.comment and f"dag={dag.dag_id} " in job.comment]
    newest = max(ours, key=lambda job: job.job_id)
    assert newest.comment is not None
    assert history == [f"/slurmdb/{V}/job/{newest.job_id}"], history
    tag = newest.comment.split()[-1]
    wait_until(  # slurmdbd records the job a moment after slurmctld
        lambda: tag in str(getattr(lab.history(newest.job_id), "raw", {}).get("comment")),
        "slurmdbd recorded the job with its comment",
        timeout=60,
        every=0.5,
    )
    gateway.reset_calls()
    found = hook.find_job_by_tag(tag, name="scenario-completes", since=int(time.time()) - 600)
    assert found is not None and found.job_id == newest.job_id
    assert [call["kind"] for call in gateway.calls()["last"]] == ["slurmdb"]

    # A retry with the stored id (task state store, Airflow 3.3+): one call.
    gateway.reset_calls()
    assert hook.get_job(newest.job_id) is not None
    assert [call["kind"] for call in gateway.calls()["last"]] == ["job-get"]
