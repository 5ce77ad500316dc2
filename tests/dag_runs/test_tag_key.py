"""The key of the task tags: a random key the deployment keeps, never a constant nor another secret.

A real DAG run (``dag.test()``) against the emulator: the task reads the key the way a worker does
(the Task SDK on Airflow 3, the ORM on 2.x), so these tests judge where the key really comes from.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from airflow_provider_slurmapi import tag_secret
from airflow_provider_slurmapi.slurm.submit.tag import TAG_PREFIX, task_tag
from tests.conftest import load_dag, run_dag, seed_tag_key


def _read_variable() -> str | None:
    from airflow.models.variable import Variable
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.query(Variable).filter(Variable.key == tag_secret.VARIABLE_KEY).one_or_none()
        return None if row is None else str(row.val)


def _delete_variable() -> None:
    from airflow.models.variable import Variable
    from airflow.utils.session import create_session

    with create_session() as session:
        session.query(Variable).filter(Variable.key == tag_secret.VARIABLE_KEY).delete()


def _tag_of_run(gcp_connection: Any) -> tuple[str, str]:
    """The tag the run's job carries, and the run id its comment names."""
    (job,) = gcp_connection.jobs()
    words = str(job["comment"]).split()
    tag = next(word for word in words if word.startswith(TAG_PREFIX))
    run_id = next(word for word in words if word.startswith("run=")).removeprefix("run=")
    return tag, run_id


@pytest.fixture
def no_configured_key(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[None]:
    monkeypatch.delenv("AIRFLOW__SLURMAPI__TAG_SECRET", raising=False)
    monkeypatch.setattr(tag_secret, "SETTLE_SECONDS", 1.0)  # Airflow 3: a new key's wait, short for one process
    tag_secret.forget_cached_key()
    yield
    tag_secret.forget_cached_key()
    if "airflow_db" in request.fixturenames:
        seed_tag_key()  # the next tests of this process find a key made long ago, as before this one


def test_the_tag_key_is_a_random_key_the_deployment_keeps_not_airflows_secret_key(
    airflow_db: Any, gcp_connection: Any, no_configured_key: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS, conf

    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    _delete_variable()
    state, _ = run_dag(load_dag("slurm_scenarios.py", "completes"))
    assert state == "success"
    stored = _read_variable()
    assert stored is not None, "the first task created the deployment's key"
    from airflow.models import Variable

    key = str(Variable.get(tag_secret.VARIABLE_KEY))
    assert len(key) >= 32
    tag, run_id = _tag_of_run(gcp_connection)
    assert tag == task_tag("slurm_scenario_completes", "job", run_id, key=key.encode())
    # Not keyed with Airflow's own secret: the public tag is no oracle for it.
    section = "api" if AIRFLOW_V_3_0_PLUS else "webserver"
    secret_key = conf.get(section, "secret_key").encode()
    message = f"slurm_scenario_completes\x00job\x00{run_id}\x00-1".encode()
    assert tag.removeprefix(TAG_PREFIX) != hmac.new(secret_key, message, hashlib.sha256).hexdigest()[:32]

    # Another process (no cached key) of the same deployment reads the same key, and makes no new one.
    tag_secret.forget_cached_key()
    first_job_ids = {job["job_id"] for job in gcp_connection.jobs()}
    state, _ = run_dag(load_dag("slurm_scenarios.py", "completes"))
    assert state == "success"
    (second,) = [job for job in gcp_connection.jobs() if job["job_id"] not in first_job_ids]
    words = str(second["comment"]).split()
    run_id = next(word for word in words if word.startswith("run=")).removeprefix("run=")
    assert task_tag("slurm_scenario_completes", "job", run_id, key=key.encode()) in words
    assert str(Variable.get(tag_secret.VARIABLE_KEY)) == key


def test_a_configured_tag_secret_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__SLURMAPI__TAG_SECRET", "  a key the deployment manages, long enough  ")
    tag_secret.forget_cached_key()
    assert tag_secret.tag_key() == b"a key the deployment manages, long enough"


def test_the_tag_secret_option_is_sensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow reads the provider's config section (provider manager) and hides the value."""
    from airflow.configuration import conf

    from airflow_provider_slurmapi._compat import AIRFLOW_V_3_2_PLUS

    monkeypatch.setenv("AIRFLOW__SLURMAPI__TAG_SECRET", "do-not-show-me-1234")
    if not AIRFLOW_V_3_2_PLUS:  # before 3.2: what the CLI and each component do at start; 3.2 loads them lazily
        from airflow.providers_manager import ProvidersManager

        ProvidersManager().initialize_providers_configuration()
        conf.load_providers_configuration()
    assert ("slurmapi", "tag_secret") in conf.sensitive_config_values
    shown = conf.as_dict(display_sensitive=False, display_source=False)
    assert "do-not-show-me-1234" not in repr(shown)
    assert shown["slurmapi"]["tag_secret"] == "< hidden >"


def test_a_key_that_cannot_be_had_is_an_error_that_gives_the_fix(no_configured_key: None) -> None:
    """Outside a task, Airflow 3 has no Variable store to reach: no guess, an error naming the fix."""
    from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
    from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError

    if not AIRFLOW_V_3_0_PLUS:
        pytest.skip("Airflow 2.x reaches the Variable through the ORM from any process")
    with pytest.raises(ConfigurationError, match="AIRFLOW__SLURMAPI__TAG_SECRET"):
        tag_secret.tag_key()


def _set_variable(value: str) -> None:
    from airflow.models.variable import Variable
    from airflow.utils.session import create_session

    _delete_variable()
    with create_session() as session:
        session.add(Variable(key=tag_secret.VARIABLE_KEY, val=value))


def _forget_secrets_backends() -> None:
    """Airflow keeps the backends it built once a custom one is configured: build them again."""
    try:
        from airflow.sdk.configuration import clear_secrets_backends_cache
    except ImportError:  # before 3.3 each read builds them anew while only the defaults were configured
        return
    clear_secrets_backends_cache()


@pytest.fixture
def flaky_backend(monkeypatch: pytest.MonkeyPatch, no_configured_key: None) -> Iterator[type]:
    """A deployment whose key lives in a secrets backend (``[secrets] backend``) that fails its first reads."""
    from tests.dag_runs.flaky_secrets import FlakyBackend

    path = f"{FlakyBackend.__module__}.{FlakyBackend.__qualname__}"
    monkeypatch.setenv("AIRFLOW__SECRETS__BACKEND", path)
    monkeypatch.setenv("AIRFLOW__WORKERS__SECRETS_BACKEND", path)
    monkeypatch.setattr(FlakyBackend, "key", tag_secret.VARIABLE_KEY)
    monkeypatch.setattr(FlakyBackend, "reads", 0)
    monkeypatch.setattr(tag_secret, "READ_BACKOFF_SECONDS", 0.1)
    _forget_secrets_backends()
    yield FlakyBackend
    monkeypatch.undo()
    _forget_secrets_backends()


def test_a_key_whose_store_fails_for_a_moment_is_read_again_and_kept(
    airflow_db: Any, gcp_connection: Any, flaky_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow's own Variable.get logs a failing backend and answers "absent"; creating a key then would
    replace the deployment's (here: in the metastore, beside the backend's). The read is retried instead."""
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    _delete_variable()
    kept = "k" * 11 + "the-deployment-s-key-held-in-its-vault"
    monkeypatch.setattr(flaky_backend, "value", kept)
    monkeypatch.setattr(flaky_backend, "failures_left", 2)
    state, _ = run_dag(load_dag("slurm_scenarios.py", "completes"))
    assert state == "success"
    assert _read_variable() is None, "a new key was created while the deployment's could not be read"
    tag, run_id = _tag_of_run(gcp_connection)
    assert tag == task_tag("slurm_scenario_completes", "job", run_id, key=kept.encode())
    assert flaky_backend.failures_left == 0 and flaky_backend.reads == 3, "the two failed reads did not happen"


def test_a_key_store_that_stays_down_fails_the_try_with_the_fix_and_submits_nothing(
    airflow_db: Any,
    gcp_connection: Any,
    flaky_backend: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    _delete_variable()
    monkeypatch.setattr(flaky_backend, "value", "x" * 43)
    monkeypatch.setattr(flaky_backend, "failures_left", 1000)
    state, _ = run_dag(load_dag("slurm_scenarios.py", "completes"))
    out = "".join(capfd.readouterr())
    assert state == "failed"
    assert flaky_backend.reads == tag_secret.READ_ATTEMPTS
    assert _read_variable() is None, "a new key was created while the deployment's could not be read"
    assert gcp_connection.jobs() == []
    assert f"The Airflow Variable '{tag_secret.VARIABLE_KEY}'" in out
    assert "could not be read" in out and "FlakyBackend raised ConnectionError" in out
    assert "AIRFLOW__SLURMAPI__TAG_SECRET" in out


@pytest.mark.parametrize(
    ("value", "problem"),
    [("   ", "holds only blanks"), ("short-key", "is 9 characters long, shorter than the 32")],
    ids=["blank", "short"],
)
def test_a_blank_or_short_key_variable_is_refused_with_its_name_and_the_fix(
    airflow_db: Any,
    gcp_connection: Any,
    no_configured_key: None,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    value: str,
    problem: str,
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    _set_variable(value)
    try:
        state, _ = run_dag(load_dag("slurm_scenarios.py", "completes"))
        out = "".join(capfd.readouterr())
    finally:
        _delete_variable()
    assert state == "failed"
    assert gcp_connection.jobs() == []
    assert f"the Airflow Variable '{tag_secret.VARIABLE_KEY}', {problem}" in out
    assert "at least 32 characters" in out and f"delete the Variable '{tag_secret.VARIABLE_KEY}'" in out


@pytest.mark.parametrize("value", ["   ", "0123456789abcdef"], ids=["blank", "short"])
def test_a_blank_or_short_tag_secret_option_is_refused_with_its_name(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError

    monkeypatch.setenv("AIRFLOW__SLURMAPI__TAG_SECRET", value)
    with pytest.raises(ConfigurationError, match=r"\[slurmapi\] tag_secret \(AIRFLOW__SLURMAPI__TAG_SECRET\)"):
        tag_secret.tag_key()


Middleware = Callable[[Any, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]


@contextlib.contextmanager
def _execution_api_with(on_key: Middleware) -> Iterator[None]:
    """``dag.test()``'s in-process execution API, built again with ``on_key`` in front of the key's
    Variable route (every other request passes untouched)."""
    from airflow.api_fastapi.execution_api import app as execution_app
    from airflow.sdk.execution_time.supervisor import in_process_api_server

    create = execution_app.create_task_execution_api_app

    def create_with(*args: Any, **kwargs: Any) -> Any:
        api = create(*args, **kwargs)

        @api.middleware("http")
        async def key_route(request: Any, call_next: Any) -> Any:
            if request.url.path.endswith(f"/variables/{tag_secret.VARIABLE_KEY}"):
                return await on_key(request, call_next)
            return await call_next(request)

        return api

    rebuild = getattr(in_process_api_server, "cache_clear", lambda: None)  # 3.3 keeps one; 3.1 one per task
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(execution_app, "create_task_execution_api_app", create_with)
        rebuild()
        yield
    rebuild()


def _airflow_3_only() -> None:
    from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS

    if not AIRFLOW_V_3_0_PLUS:
        pytest.skip("Airflow 2.x workers read Variables from the database, not through an execution API")


@pytest.fixture
def flaky_execution_api(monkeypatch: pytest.MonkeyPatch, no_configured_key: None) -> Iterator[dict[str, int]]:
    """``dag.test()``'s in-process execution API answers the key's Variable route with an error while
    ``left["failures"]`` lasts: 429, which the Task SDK's client does not retry itself (it retries 5xx
    for 31 s), so the task sees what a worker sees once the client's own retries are spent."""
    _airflow_3_only()
    from fastapi.responses import JSONResponse

    left = {"failures": 0, "refused": 0}

    async def flaky(request: Any, call_next: Any) -> Any:
        if left["failures"] > 0:
            left["failures"] -= 1
            left["refused"] += 1
            return JSONResponse({"detail": "a test's transient fault"}, status_code=429)
        return await call_next(request)

    monkeypatch.setattr(tag_secret, "READ_BACKOFF_SECONDS", 0.1)
    with _execution_api_with(flaky):
        yield left


def test_an_execution_api_error_reading_the_key_is_retried_and_the_key_kept(
    airflow_db: Any, gcp_connection: Any, flaky_execution_api: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Task SDK's Variable.get answers None for any execution API error, and the key was then replaced."""
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    kept = "the-deployment-s-key-made-long-ago-" + "k" * 10
    _set_variable(kept)
    flaky_execution_api["failures"] = 2
    state, _ = run_dag(load_dag("slurm_scenarios.py", "completes"))
    assert state == "success"
    assert _read_variable() == kept, "the deployment's key was replaced after a read error"
    tag, run_id = _tag_of_run(gcp_connection)
    assert tag == task_tag("slurm_scenario_completes", "job", run_id, key=kept.encode())
    assert flaky_execution_api["refused"] == 2, "the fault never hit: nothing was tested"


def test_an_execution_api_that_keeps_failing_fails_the_try_and_keeps_the_key(
    airflow_db: Any,
    gcp_connection: Any,
    flaky_execution_api: dict[str, int],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    kept = "the-deployment-s-key-made-long-ago-" + "k" * 10
    _set_variable(kept)
    flaky_execution_api["failures"] = 1000
    state, _ = run_dag(load_dag("slurm_scenarios.py", "completes"))
    out = "".join(capfd.readouterr())
    assert state == "failed"
    assert _read_variable() == kept
    assert gcp_connection.jobs() == []
    assert flaky_execution_api["refused"] == tag_secret.READ_ATTEMPTS
    assert "could not be read (4 attempts)" in out and "execution API" in out, out[-3000:]


@pytest.mark.parametrize("first_use", ["creates", "finds a new key"])
def test_a_new_key_another_first_use_replaces_while_it_settles_is_not_the_one_used(
    airflow_db: Any,
    gcp_connection: Any,
    no_configured_key: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    first_use: str,
) -> None:
    """Airflow 3's ``Variable.set`` is an upsert: a task that read "absent" before this one's key was written
    may write its own later, and that last write is the deployment's key. Here it lands while this task
    waits for its key to settle (the execution API writes it to the database just before answering the
    read that ends the wait): the job must carry the tag of the key that replaced it."""
    _airflow_3_only()
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    _delete_variable()
    # The read that ends the wait: after "absent", the write and the read back; or after the first read.
    settle_read = 3 if first_use == "creates" else 2
    late = tag_secret._new_key()
    reads = 0

    async def racing_writer(request: Any, call_next: Any) -> Any:
        nonlocal reads
        if request.method == "GET":
            reads += 1
            if reads == 1 and first_use == "finds a new key":
                _set_variable(tag_secret._new_key())  # another task created it a moment ago
            if reads == settle_read:
                _set_variable(late)
        return await call_next(request)

    caplog.set_level("INFO", logger=tag_secret.__name__)
    with _execution_api_with(racing_writer):
        state, _ = run_dag(load_dag("slurm_scenarios.py", "completes"))
    assert state == "success"
    assert reads >= settle_read, "the task used its key without waiting for it to settle"
    assert _read_variable() == late
    tag, run_id = _tag_of_run(gcp_connection)
    assert tag == task_tag("slurm_scenario_completes", "job", run_id, key=late.encode())
    assert "Another task wrote the Airflow Variable" in caplog.text


def test_a_key_made_long_ago_or_set_by_the_deployment_is_used_without_waiting(
    airflow_db: Any, gcp_connection: Any, no_configured_key: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the first-use wave waits: a stamped key older than the settle, or any other value, is one read."""
    _airflow_3_only()
    monkeypatch.setattr(tag_secret, "SETTLE_SECONDS", 5.0)  # a wrong wait shows as a second read
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    reads = 0

    async def counting(request: Any, call_next: Any) -> Any:
        nonlocal reads
        reads += request.method == "GET"
        return await call_next(request)

    old = tag_secret._new_key(made=time.time() - 7200)
    for kept in (old, "the-deployment-s-own-key-set-by-hand-" + "k" * 10):
        tag_secret.forget_cached_key()
        _set_variable(kept)
        reads = 0
        with _execution_api_with(counting):
            state, _ = run_dag(load_dag("slurm_scenarios.py", "completes"))
        assert state == "success"
        assert reads == 1, f"{kept[:12]}...: {reads} reads"
    _delete_variable()


@pytest.mark.parametrize(
    ("answers", "error"),
    [([None], "was deleted while its first uses settled"), (["new"] * 10, "was replaced 5 times")],
    ids=["deleted", "keeps-changing"],
)
def test_a_key_that_vanishes_or_never_settles_fails_the_try_and_tags_nothing(
    monkeypatch: pytest.MonkeyPatch, answers: list[str | None], error: str
) -> None:
    """The store itself is a function here: what matters is what the wait does with each answer it reads."""
    monkeypatch.setattr(tag_secret, "SETTLE_SECONDS", 0.05)
    replies = iter(a if a is None else tag_secret._new_key() for a in answers)
    with pytest.raises(tag_secret.TagKeyUnreadableError, match=error) as failed:
        tag_secret._settled(tag_secret._new_key(), lambda: next(replies))
    assert failed.value.permanent is False  # the task's retry reads again
    assert "AIRFLOW__SLURMAPI__TAG_SECRET" in str(failed.value)


def _delete_settled_record() -> None:
    from airflow.models.variable import Variable
    from airflow.utils.session import create_session

    with create_session() as session:
        session.query(Variable).filter(Variable.key == tag_secret.SETTLED_VARIABLE_KEY).delete()


def test_a_key_stamped_in_the_future_settles_once_for_the_deployment_not_until_its_stamp(
    airflow_db: Any,
    gcp_connection: Any,
    no_configured_key: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A key created by a task whose clock runs an hour fast: the first task waits one settle on its own
    clock (not until the stamp) and records the key settled; the next task (another process) uses it
    after one read. It used to make every task wait, for as long as the stamp was ahead."""
    _airflow_3_only()
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    reads = 0

    async def counting(request: Any, call_next: Any) -> Any:
        nonlocal reads
        reads += request.method == "GET"
        return await call_next(request)

    ahead = tag_secret._new_key(made=time.time() + 3600)
    _set_variable(ahead)
    caplog.set_level("INFO", logger=tag_secret.__name__)
    seen = []
    try:
        for _ in ("first task", "next task"):
            tag_secret.forget_cached_key()
            reads = 0
            with _execution_api_with(counting):
                state, _ = run_dag(load_dag("slurm_scenarios.py", "completes"))
            assert state == "success"
            seen.append(reads)
    finally:
        _delete_settled_record()
    assert seen == [2, 1], f"reads of the key by the first task and the next: {seen}"
    assert "ahead of this clock; waiting 1.0 s for other first uses" in caplog.text
    for job in gcp_connection.jobs():
        words = str(job["comment"]).split()
        run_id = next(word for word in words if word.startswith("run=")).removeprefix("run=")
        assert task_tag("slurm_scenario_completes", "job", run_id, key=ahead.encode()) in words


def test_a_key_from_a_creator_whose_clock_is_behind_still_settles(
    airflow_db: Any,
    gcp_connection: Any,
    no_configured_key: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A task whose clock is 25 s behind created the key a moment ago: stamped 25 s back, longer ago than a
    settle, so it was used at once; another first use's write landing just after this task's read then
    replaced it, and the job carried a key the deployment no longer holds. It settles from the first read."""
    _airflow_3_only()
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    behind = tag_secret._new_key(made=time.time() - 25)  # SETTLE_SECONDS is 1 s here: 25 s is well past it
    late = tag_secret._new_key()
    _set_variable(behind)
    reads = 0

    async def racing_writer(request: Any, call_next: Any) -> Any:
        nonlocal reads
        response = await call_next(request)
        if request.method == "GET":
            reads += 1
            if reads == 1:
                _set_variable(late)  # lands just after the first read was answered
        return response

    caplog.set_level("INFO", logger=tag_secret.__name__)
    try:
        with _execution_api_with(racing_writer):
            state, _ = run_dag(load_dag("slurm_scenarios.py", "completes"))
    finally:
        _delete_settled_record()
    assert state == "success"
    tag, run_id = _tag_of_run(gcp_connection)
    assert tag == task_tag("slurm_scenario_completes", "job", run_id, key=late.encode()), (
        "the job carries the tag of a key that was replaced"
    )
    assert "s ago; waiting 1.0 s for other first uses" in caplog.text, "the key was used without a settle"
    assert "Another task wrote the Airflow Variable" in caplog.text


@pytest.mark.parametrize(
    ("stamped", "sleeps"),
    [(3600.0, [20.0]), (-25.0, [20.0]), (-(20.0 + tag_secret.STAMP_SKEW_SECONDS), [])],
    ids=["an-hour-ahead", "25s-behind", "older-than-settle-and-skew"],
)
def test_the_settle_runs_on_the_readers_clock_from_its_first_read(stamped: float, sleeps: list[float]) -> None:
    """With the real 20 s settle on a fake clock: a stamp in the future or one a slow creator made count
    as made at this read (one settle of 20 s); only a stamp older than the settle plus the clock-skew
    bound is used after one read."""
    now = 1_800_000_000.0
    slept: list[float] = []
    value = tag_secret._new_key(made=now + stamped)
    assert tag_secret._settled(value, lambda: value, clock=lambda: now, sleep=slept.append) == value
    assert slept == sleeps
