"""A retry without a stored job id finds its earlier job by tag while that job still runs.

slurmdbd keeps a job's comment only once the job ends (``AccountingStoreFlags=job_comment``): the
history record of a running job carries no comment, so its tag must be read from the live queue even
when finished jobs of the same name (with comments) share the history's answer.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from tests.live_slurm.conftest import make_hook
from tests.live_slurm.lab import Lab

pytestmark = pytest.mark.slurm
JOB = {"partition": "debug", "current_working_directory": "/tmp", "environment": ["PATH=/usr/bin:/bin"]}


def test_a_running_tagged_job_is_found_beside_finished_jobs_of_its_name(gateway: Any, lab: Lab) -> None:
    hook = make_hook(gateway)
    name = f"tag-lookup-{uuid.uuid4().hex[:8]}"
    since = int(time.time()) - 60
    earlier_tag, tag = f"airflow-ti={uuid.uuid4().hex}", f"airflow-ti={uuid.uuid4().hex}"
    done = hook.submit_job({**JOB, "name": name}, "#!/bin/bash\ntrue\n", tag=earlier_tag, comment=f"x {earlier_tag}")
    deadline = time.monotonic() + 120
    while not ((record := hook.get_history_job(done.job_id)) is not None and record.is_finished and record.comment):
        assert time.monotonic() < deadline, f"job {done.job_id} never reached the history with its comment"
        time.sleep(1)
    running = hook.submit_job({**JOB, "name": name}, "#!/bin/bash\nsleep 120\n", tag=tag, comment=f"x {tag}")
    try:
        deadline = time.monotonic() + 120
        while not any(
            j.job_id == running.job_id for j in hook.list_jobs(history=True, job_name=name, start_time=since)
        ):
            assert time.monotonic() < deadline, f"job {running.job_id} never reached the history"
            time.sleep(1)
        found = hook.find_job_by_tag(tag, name=name, since=since)
        assert found is not None and found.job_id == running.job_id, found
        assert hook.find_job_by_tag(earlier_tag, name=name, since=since).job_id == done.job_id  # type: ignore[union-attr]
    finally:
        hook.cancel_job(running.job_id)


def test_a_copy_of_the_tag_on_a_job_of_another_user_is_never_adopted_nor_cancelled(gateway: Any, lab: Lab) -> None:
    """root copies our tag onto a held job of its own: a retry never takes it, a sweep for late copies never
    cancels it (the owner is compared with the connection's user, ``slurm_user``)."""
    import json
    import os

    import requests

    from tests.live_slurm.lab import in_lab, root_token

    if os.geteuid() != 0:
        pytest.fail("this test makes a job of another Slurm user with a root token: run it as root (CI does)")
    hook = make_hook(gateway)
    name = f"tag-copy-{uuid.uuid4().hex[:8]}"
    since = int(time.time()) - 60
    tag = f"airflow-ti={uuid.uuid4().hex}"
    ours = hook.submit_job({**JOB, "name": name}, "#!/bin/bash\ntrue\n", tag=tag, comment=f"x {tag}").job_id
    lab.final(ours)
    token = root_token(600)
    body = {"job": {**JOB, "name": name, "hold": True, "comment": f"x {tag}"}, "script": "#!/bin/bash\ntrue\n"}
    answer = requests.post(
        f"{lab.url}/slurm/v0.0.42/job/submit",
        data=json.dumps(body),
        headers={"X-SLURM-USER-TOKEN": token, "Content-Type": "application/json"},
        timeout=60,
    )
    answer.raise_for_status()
    copy = int(answer.json()["job_id"])
    try:
        assert hook.caller_user() == "tester"
        found = hook.find_job_by_tag(tag, name=name, since=since)
        assert found is not None and found.job_id == ours, found
        assert hook.cancel_later_copies(tag, ours) == []
        record = lab.live(copy)
        assert record is not None and record.state == "PENDING", record
    finally:
        in_lab("scancel", str(copy))
