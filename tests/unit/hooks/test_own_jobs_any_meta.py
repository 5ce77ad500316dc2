"""Exactly once, and "my jobs", whatever the endpoint writes in ``meta.client.user``, with nothing configured.

Real HTTP against the emulator, whose answers name in ``meta.client.user`` the token's user (as the Job
API is described), ``root`` (as a real slurmrestd with ``rest_auth/jwt`` does), nobody, or another fixed
account, while the jobs stay owned by the caller's account. The connection has no ``slurm_user`` and no
account is kept (outside a task the Variable store is not reachable): the provider decides who it is
from its own jobs only. "Another user" is a real account of this machine (``nobody``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError
from airflow_provider_slurmapi.slurm.submit.tag import task_comment, task_tag
from tests.unit.hooks.test_submit_once import (
    KEY,
    LONG,
    OTHER_USER,
    connect,
    make_hook,
    spec,
    tagged,
    until_tagged,
)
from tests.waiting import wait_until

META_USERS = ["token", "slurmrestd", "empty", f"user:{OTHER_USER}"]


@pytest.fixture(params=META_USERS)
def endpoint(
    request: pytest.FixtureRequest, emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> Any:
    """An emulator answering ``meta.client.user`` one way, and a connection to it with nothing set."""
    emulator = emulator_factory(meta_client_user=request.param)
    connect(monkeypatch, emulator, credentials_file, request_timeout=1, submit_settle_seconds=4)
    return emulator


def test_the_meta_user_is_what_the_emulator_was_told_and_never_the_jobs_owner(endpoint: Any) -> None:
    """The premise of every test here: the answers do not name the jobs' owner (except "token")."""
    hook = make_hook()
    body = hook.call("GET", "/slurm/v0.0.42/jobs/").body
    said = body["meta"]["client"]["user"]
    mode = endpoint.config.meta_client_user
    expected = {"token": "slurmapi", "slurmrestd": "root", "empty": ""}.get(mode, OTHER_USER)
    assert said == expected


def test_a_lost_answer_gives_one_job_and_the_task_reports_it(endpoint: Any) -> None:
    """The submit is carried out 2 s after it arrived, never answered: found by its send marker, not resent."""
    tag = task_tag("dag", "lost", "run", key=KEY)
    endpoint.add_fault("late=2@submit")
    result = make_hook(until_tagged(endpoint, tag)).submit_job(spec(endpoint, "lost"), LONG, tag=tag)
    jobs = tagged(endpoint, tag)
    assert [job["job_id"] for job in jobs] == [result.job_id], jobs
    assert result.send_marker is not None and result.send_marker in jobs[0]["comment"].split()


def test_a_lost_answer_never_adopts_an_earlier_trys_job(endpoint: Any) -> None:
    """reattach_on_restart=False: try 1's FAILED job carries the task's tag; try 2's lost submit is not it."""
    tag = task_tag("dag", "tries", "run", key=KEY)
    first = make_hook().submit_job(spec(endpoint, "tries"), "#!/bin/bash\nexit 3\n", tag=tag).job_id
    endpoint.wait_for_state(first, ["FAILED"], timeout=30)
    endpoint.add_fault("late=2@submit")
    second = make_hook(until_tagged_twice(endpoint, tag)).submit_job(spec(endpoint, "tries"), LONG, tag=tag)
    assert second.job_id != first
    assert sorted(job["job_id"] for job in tagged(endpoint, tag)) == [first, second.job_id]


def test_a_copied_tag_and_marker_on_another_users_job_is_never_adopted_nor_cancelled(endpoint: Any) -> None:
    """Another user copies our whole comment (tag and send marker) onto newer jobs of theirs."""
    tag = task_tag("dag", "copy", "run", key=KEY)
    hook = make_hook()
    result = hook.submit_job(spec(endpoint, "copy"), LONG, tag=tag, comment=task_comment(tag, "dag", "copy", "run"))
    (ours,) = tagged(endpoint, tag)
    squatters = endpoint.add_foreign_jobs(2, OTHER_USER, name="copy", comment=ours["comment"])
    squatters += endpoint.add_foreign_jobs(1, OTHER_USER, name="copy", comment=ours["comment"], state="COMPLETED")
    assert min(squatters) > result.job_id
    since = int(time.time()) - 600
    for lookup in (hook, make_hook()):  # this process, and a retry's new process that knows no account
        found = lookup.find_job_by_tag(tag, name="copy", since=since)
        assert found is not None and found.job_id == result.job_id
    assert result.send_marker is not None
    assert make_hook().cancel_later_copies(result.send_marker, result.job_id) == []
    states = {job["job_id"]: job["state"] for job in endpoint.jobs()}
    assert all(states[job_id] != "CANCELLED" for job_id in squatters), states


def test_the_copy_sweep_of_one_try_never_cancels_another_trys_job(endpoint: Any) -> None:
    """Two tries' jobs carry the same tag; try 1's sweep (after its resend) looks for its own marker only."""
    tag = task_tag("dag", "sweep", "run", key=KEY)
    first = make_hook().submit_job(spec(endpoint, "sweep"), LONG, tag=tag)
    second = make_hook().submit_job(spec(endpoint, "sweep"), LONG, tag=tag)
    assert second.job_id > first.job_id and first.send_marker is not None
    assert make_hook().cancel_later_copies(first.send_marker, first.job_id) == []
    assert endpoint.wait_for_state(second.job_id, ["PENDING", "RUNNING"], timeout=5)


def test_the_default_listing_shows_our_jobs_after_a_submit_and_fails_naming_the_fix_before(endpoint: Any) -> None:
    endpoint.add_foreign_jobs(2, OTHER_USER, name="theirs")
    with pytest.raises(ConfigurationError, match=r"slurm_user.*all_users=True.*submit a job first"):
        make_hook().list_jobs(own=True)  # nothing submitted, nothing kept: never a silent empty list
    hook = make_hook()
    ours = hook.submit_job(spec(endpoint, "mine"), LONG).job_id
    assert [job.job_id for job in hook.list_jobs(own=True)] == [ours]
    assert [job.job_id for job in hook.list_jobs(own=True, history=True)] == [ours]
    assert hook.caller_user() == "slurmapi"


def until_tagged_twice(emulator: Any, tag: str) -> Any:
    """A fake clock whose waits last until a second job with ``tag`` was carried out (the late submit)."""
    from tests.unit.hooks.fake_clock import FakeClock

    def carried_out() -> None:
        wait_until(lambda: len(tagged(emulator, tag)) >= 2, f"a second job with tag {tag} carried out")

    return FakeClock(before_sleep=carried_out)
