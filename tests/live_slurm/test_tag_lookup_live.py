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

from tests.live_slurm.conftest import JOB_USER, Gateways, make_hook
from tests.live_slurm.lab import Lab
from tests.waiting import wait_until

pytestmark = pytest.mark.slurm
OTHER_USER = "daemon"  # another Slurm user of the lab (an account of its chroot; 26.05 refuses "nobody")
JOB = {"partition": "debug", "current_working_directory": "/tmp", "environment": ["PATH=/usr/bin:/bin"]}


def test_a_running_tagged_job_is_found_beside_finished_jobs_of_its_name(gateway: Any, lab: Lab) -> None:
    hook = make_hook(gateway)
    name = f"tag-lookup-{uuid.uuid4().hex[:8]}"
    since = int(time.time()) - 60
    earlier_tag, tag = f"airflow-ti={uuid.uuid4().hex}", f"airflow-ti={uuid.uuid4().hex}"
    done = hook.submit_job({**JOB, "name": name}, "#!/bin/bash\ntrue\n", tag=earlier_tag, comment=f"x {earlier_tag}")
    wait_until(
        lambda: (record := hook.get_history_job(done.job_id)) is not None and record.is_finished and record.comment,
        f"job {done.job_id} in the history with its comment",
        timeout=120,
        every=1,
    )
    running = hook.submit_job({**JOB, "name": name}, "#!/bin/bash\nsleep 120\n", tag=tag, comment=f"x {tag}")
    try:
        wait_until(
            lambda: any(
                j.job_id == running.job_id for j in hook.list_jobs(history=True, job_name=name, start_time=since)
            ),
            f"job {running.job_id} in the history",
            timeout=120,
            every=1,
        )
        found = hook.find_job_by_tag(tag, name=name, since=since)
        assert found is not None and found.job_id == running.job_id, found
        assert hook.find_job_by_tag(earlier_tag, name=name, since=since).job_id == done.job_id  # type: ignore[union-attr]
    finally:
        hook.cancel_job(running.job_id)


@pytest.mark.parametrize("configured", [False, True], ids=["nothing-configured", "slurm_user"])
def test_a_copy_of_the_tag_on_a_job_of_another_user_is_never_adopted_nor_cancelled(
    configured: bool, gateways: Gateways, lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``daemon``, another Slurm user, copies our whole comment (tag and send marker) onto a newer held job
    of its own: a retry never takes it, the sweep for late copies never cancels it. As a user gets it (no
    ``slurm_user``: the account is learned from our own job, meta.client.user says "root"), and once with
    ``slurm_user`` set."""
    import json

    import requests

    from tests.live_slurm.lab import in_lab, user_token

    extra = {"slurm_user": JOB_USER} if configured else {}
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", gateways.connection("body", **extra))
    gateway = gateways.get("body")
    hook = make_hook(gateway)
    name = f"tag-copy-{uuid.uuid4().hex[:8]}"
    since = int(time.time()) - 60
    tag = f"airflow-ti={uuid.uuid4().hex}"
    result = hook.submit_job({**JOB, "name": name}, "#!/bin/bash\ntrue\n", tag=tag, comment=f"x {tag}")
    ours = result.job_id
    lab.final(ours)
    comment = f"x {tag} {result.send_marker}"  # what our job's comment shows (squeue -o %k)
    body = {"job": {**JOB, "name": name, "hold": True, "comment": comment}, "script": "#!/bin/bash\ntrue\n"}
    answer = requests.post(
        f"{lab.url}/slurm/v0.0.42/job/submit",
        data=json.dumps(body),
        headers={"X-SLURM-USER-TOKEN": user_token(OTHER_USER, 600), "Content-Type": "application/json"},
        timeout=60,
    )
    answer.raise_for_status()
    copy = int(answer.json()["job_id"])
    try:
        assert copy > ours
        assert hook.caller_user() == JOB_USER
        for lookup in (hook, make_hook(gateway)):  # and a retry's new process that knows no account yet
            found = lookup.find_job_by_tag(tag, name=name, since=since)
            assert found is not None and found.job_id == ours, found
        assert result.send_marker is not None
        assert make_hook(gateway).cancel_later_copies(result.send_marker, ours) == []
        held = lab.live(copy)
        assert held is not None and held.state == "PENDING", held
    finally:
        in_lab("scancel", str(copy))
