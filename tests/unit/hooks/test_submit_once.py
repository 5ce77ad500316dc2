"""A submit is sent once, its job found by its own tag only, on a shared cluster and under lost answers.

Real HTTP against the emulator; "another user" is a real account of this machine (``nobody``) that
owns jobs the emulator's harness creates, as on a shared Slurm cluster.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.hooks.slurm import SlurmApiAsyncHook, SlurmApiHook
from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError, UnauthenticatedError
from airflow_provider_slurmapi.slurm.submit.job_output import wrap_script
from airflow_provider_slurmapi.slurm.submit.spec import prepare_submission
from airflow_provider_slurmapi.slurm.submit.tag import task_comment, task_tag
from tests.conftest import CLUSTER, connection_uri_env
from tests.unit.hooks.fake_clock import AsyncFakeClock, FakeClock
from tests.waiting import wait_until

LONG = "#!/bin/bash\nsleep 60\n"
KEY = b"this deployment's secret"
OTHER_USER = "nobody"


def connect(monkeypatch: pytest.MonkeyPatch, emulator: Any, credentials_file: Path, **extra: Any) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", connection_uri_env(emulator, credentials_file, **extra))


def make_hook(clock: FakeClock | None = None) -> SlurmApiHook:
    """A hook whose waits (settle, retries) take no real time."""
    hook = SlurmApiHook(**CLUSTER)
    hook.client.retry_initial_wait = 0.05
    hook.client.clock = clock or FakeClock()
    return hook


def until_tagged(emulator: Any, tag: str) -> FakeClock:
    """A fake clock whose waits last until the emulator has carried out a job with ``tag`` (the late
    submit): the event the settle window stands for, waited for as an event."""

    def carried_out() -> None:
        wait_until(lambda: tagged(emulator, tag), f"a job with tag {tag} carried out")

    return FakeClock(before_sleep=carried_out)


def spec(emulator: Any, name: str = "train") -> dict[str, Any]:
    return {"name": name, "partition": "debug", "current_working_directory": str(emulator.config.workdir)}


def foreign_jobs(emulator: Any, count: int, **fields: Any) -> list[int]:
    return list(emulator.add_foreign_jobs(count, OTHER_USER, **fields))


def tagged(emulator: Any, tag: str) -> list[dict[str, Any]]:
    return [job for job in emulator.jobs() if tag in (job.get("comment") or "").split()]


def kinds_of_calls(emulator: Any) -> list[str]:
    return [call["kind"] for call in emulator.calls()["last"]]


def test_a_submit_carried_out_after_the_client_timed_out_is_not_sent_again(
    emulator: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service acts on the submit 3 s after it arrived; the client gave up after 1 s. One job."""
    connect(monkeypatch, emulator, credentials_file, request_timeout=1, submit_settle_seconds=4)
    tag = task_tag("dag", "late", "run", key=KEY)
    emulator.add_fault("late=3@submit")
    clock = until_tagged(emulator, tag)
    result = make_hook(clock).submit_job(spec(emulator), LONG, tag=tag)
    jobs = tagged(emulator, tag)  # the late submit was carried out: the settle waited for it
    assert [job["job_id"] for job in jobs] == [result.job_id], jobs
    assert not result.resent and 0 < clock.now() < 4  # found within the settle window, not resent


def test_two_jobs_after_a_resend_keep_the_older_and_cancel_the_newer(
    emulator: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A settle window set shorter than the service takes: the resend races the late submit; one survives."""
    connect(monkeypatch, emulator, credentials_file, request_timeout=2, submit_settle_seconds=0.5)
    tag = task_tag("dag", "race", "run", key=KEY)
    emulator.add_fault("late=2.5@submit")  # the first send: carried out at 2.5 s, never answered
    emulator.add_fault("slow=1.5@submit")  # the resend (at ~2 s): carried out at once, answered at ~3.5 s
    result = make_hook().submit_job(spec(emulator), LONG, tag=tag)
    jobs = tagged(emulator, tag)
    assert len(jobs) == 2, jobs
    older, newer = sorted(jobs, key=lambda job: job["job_id"])
    assert result.job_id == older["job_id"]
    emulator.wait_for_state(newer["job_id"], ["CANCELLED"], timeout=20)
    assert emulator.wait_for_state(older["job_id"], ["PENDING", "RUNNING"], timeout=5)
    assert f"Slurm job {newer['job_id']} carries {result.send_marker} too" in capsys.readouterr().out


def test_a_401_on_submit_is_never_resent_by_the_transport(
    emulator: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """google-auth would refresh the token and send the POST again at once; the submit looks first."""
    connect(monkeypatch, emulator, credentials_file, submit_settle_seconds=1)
    tag = task_tag("dag", "token", "run", key=KEY)
    hook = make_hook()
    hook.get_live_job(1)  # a token is fetched before the fault revokes it
    emulator.reset_calls()
    emulator.add_fault("expire-token@submit")
    result = hook.submit_job(spec(emulator), LONG, tag=tag)
    kinds = kinds_of_calls(emulator)
    first, second = (i for i, kind in enumerate(kinds) if kind == "submit")
    assert second > first + 1 and {"jobs", "slurmdb"} & set(kinds[first + 1 : second]), kinds
    assert [job["job_id"] for job in tagged(emulator, tag)] == [result.job_id]


async def test_the_async_hook_never_resends_a_post_on_401(gcp_connection: Any) -> None:
    async with SlurmApiAsyncHook(**CLUSTER) as hook:
        await hook.get_job(1)  # a token is fetched before the fault revokes it
        gcp_connection.reset_calls()
        gcp_connection.add_fault("expire-token@submit")
        body = {"job": spec(gcp_connection), "script": LONG}
        with pytest.raises(UnauthenticatedError):
            await hook.call("POST", hook.client.paths.submit(), body)
        assert kinds_of_calls(gcp_connection) == ["submit"]
        assert gcp_connection.jobs() == []
        assert await hook.get_job(1) is None  # the next call has a fresh token


def test_the_async_hook_settles_a_lost_submit_answer_by_its_tag_as_the_sync_hook_does(
    emulator: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same submit-once plan: the late job is found by its tag, never sent twice; then found again."""
    connect(monkeypatch, emulator, credentials_file, request_timeout=1, submit_settle_seconds=4)
    tag = task_tag("dag", "async", "run", key=KEY)
    emulator.add_fault("late=2@submit")
    clock = until_tagged(emulator, tag)

    async def submit() -> tuple[int, int | None]:
        async with SlurmApiAsyncHook(**CLUSTER) as hook:
            hook.client.clock = AsyncFakeClock(before_sleep=clock.before_sleep)
            result = await hook.submit_job(spec(emulator, "async"), LONG, tag=tag)
            found = await hook.find_job_by_tag(tag, name="async", since=int(time.time()) - 600)
            return result.job_id, found.job_id if found is not None else None

    job_id, found = asyncio.run(submit())
    assert [job["job_id"] for job in tagged(emulator, tag)] == [job_id] == [found]


def test_a_job_of_another_user_with_a_copied_tag_is_never_adopted(gcp_connection: Any) -> None:
    """Another user copies our tag from our job's visible comment onto a newer COMPLETED job of theirs."""
    tag = task_tag("dag", "copy", "run", key=KEY)
    comment = task_comment(tag, "dag", "copy", "run")
    hook = make_hook()
    ours = hook.submit_job(spec(gcp_connection, "copy"), LONG, tag=tag, comment=comment).job_id
    squatters = foreign_jobs(gcp_connection, 2, name="copy", comment=comment, state="COMPLETED")
    assert min(squatters) > ours
    since = int(time.time()) - 600
    found = hook.find_job_by_tag(tag, name="copy", since=since)
    assert found is not None and found.job_id == ours
    retry = make_hook()  # a new process that knows no account: the oldest job with the tag is ours
    found = retry.find_job_by_tag(tag, name="copy", since=since)
    assert found is not None and found.job_id == ours


def test_a_copied_tag_is_never_adopted_once_our_job_left_the_queue_and_the_history_keeps_no_comments(
    emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay: try 1's job ended and left the live queue; the history keeps no comments (Slurm's
    default); another user holds a job with our tag copied from the visible comment. Try 2 must not
    adopt it: the oldest job carrying the tag is ours only if no older record may hide it."""
    emulator = emulator_factory(history_comments=False, min_job_age=0.5)
    connect(monkeypatch, emulator, credentials_file)
    tag = task_tag("dag", "replay", "run", key=KEY)
    comment = task_comment(tag, "dag", "replay", "run")
    hook = make_hook()
    ours = hook.submit_job(spec(emulator, "replay"), "#!/bin/bash\ntrue\n", tag=tag, comment=comment).job_id
    emulator.wait_for_state(ours, ["COMPLETED"], timeout=30)
    wait_until(
        lambda: not any(job["job_id"] == ours and job["in_live_queue"] for job in emulator.jobs()),
        "the finished job left the live queue",
        timeout=60,
        every=0.2,
    )
    (copy,) = foreign_jobs(emulator, 1, name="replay", comment=comment)
    retry = make_hook()  # a new try: a new process, nothing remembered
    found = retry.find_job_by_tag(tag, name="replay", since=int(time.time()) - 600)
    assert found is None or found.job_id != copy, f"adopted job {copy} of user {OTHER_USER}"
    assert found is None  # ours can no longer be told by its tag: the retry submits anew
    # The copy's owner is never taken for ours. Where the store is reachable (Airflow 2: the test's
    # database), the retry knows the account try 1 kept; where it is not (Airflow 3 outside a task), none.
    try:
        account: str | None = retry.caller_user()
    except ConfigurationError as exc:
        assert "slurm_user" in str(exc)
        account = None
    assert account in (None, hook.caller_user()), account


def test_a_retry_looks_in_the_history_filtered_by_name_not_in_the_live_queue(gcp_connection: Any) -> None:
    tag = task_tag("dag", "retry", "run", key=KEY)
    hook = make_hook()
    ours = hook.submit_job(spec(gcp_connection, "retry"), LONG, tag=tag).job_id
    foreign_jobs(gcp_connection, 50)
    gcp_connection.reset_calls()
    found = hook.find_job_by_tag(tag, name="retry", since=int(time.time()) - 600)
    assert found is not None and found.job_id == ours
    assert kinds_of_calls(gcp_connection) == ["slurmdb"]


def test_a_submission_prepared_by_the_operator_is_sent_as_prepared(
    emulator: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked, tagged and wrapped once (as the operator does it to fail early); the hook sends exactly
    that, and still settles a lost answer by its tag instead of sending it twice."""
    connect(monkeypatch, emulator, credentials_file, request_timeout=1, submit_settle_seconds=3)
    tag = task_tag("dag", "prepared", "run", key=KEY)
    comment = task_comment(tag, "dag", "prepared", "run")
    prepared = prepare_submission(
        spec(emulator), "#!/bin/bash\necho prepared once\n", tag=tag, comment=comment, wrap=wrap_script
    )
    emulator.add_fault("late=2@submit")  # carried out at 2 s, never answered: found by its tag
    hook = make_hook(until_tagged(emulator, tag))
    result = hook.submit_prepared(prepared)
    jobs = tagged(emulator, tag)
    assert [job["job_id"] for job in jobs] == [result.job_id], jobs
    # As prepared, and this submit's send marker after it.
    assert jobs[0]["comment"] == f"{prepared.job['comment']} {result.send_marker}"
    emulator.wait_for_state(result.job_id, ["COMPLETED"], timeout=30)
    job = hook.get_job(result.job_id)
    assert job is not None and job.extra is not None and "prepared once" in job.extra  # the wrapper reported it


def test_a_submission_prepared_without_a_tag_gets_a_one_off_tag(gcp_connection: Any) -> None:
    """A caller's own prepare_submission without a tag: the job is still findable after a lost answer."""
    result = make_hook().submit_prepared(prepare_submission(spec(gcp_connection), LONG))
    (job,) = [job for job in gcp_connection.jobs() if job["job_id"] == result.job_id]
    assert "slurmapi-submit=" in (job.get("comment") or ""), job
    make_hook().cancel_job(result.job_id)


def test_a_retry_finds_an_array_as_the_one_job_it_is(gcp_connection: Any) -> None:
    """Every task of an array carries the tag: the lookup answers the array, read whole, not one task."""
    tag = task_tag("dag", "sweep", "run", key=KEY)
    hook = make_hook()
    array_id = hook.submit_job({**spec(gcp_connection, "sweep"), "array": "0-2"}, LONG, tag=tag).job_id
    found = make_hook().find_job_by_tag(tag, name="sweep", since=int(time.time()) - 600)
    assert found is not None and found.job_id == array_id
    assert found.array is not None, "one task's record was taken for the array"
