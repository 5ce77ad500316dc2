"""A foreign record of garbage in every list answer must not fail anyone's watch.

A small proxy sits between the provider and the emulator and adds records of the wrong shape (no
``job_id``, ``job_state: 5``, ``1e400``, a bare number...) to every ``jobs/``, ``jobs/state`` and
``slurmdb jobs`` answer, as another user's odd job would. The shared poller, real triggers and a
deferred sensor run through ``dag.test()`` must still read their own jobs correctly.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROJECT, load_dag, run_dag
from tests.unit.triggers.test_poller import (
    Triggerer,
    assert_completed,
    assert_failed,
    make_trigger,
    submit,
    waiting_script,
)
from tests.waiting import wait_until

_HUGE = "__HUGE_NUMBER__"
POISON_LIVE: list[Any] = [
    7,
    "job",
    {"job_id": None, "job_state": ["RUNNING"]},
    {"job_id": "abc"},
    {"job_id": _HUGE, "job_state": ["FAILED"]},
    {"job_id": 4242420, "job_state": 5},
    {"job_id": 4242421, "job_state": ["RUNNING"], "exit_code": [1], "time_limit": "soon", "end_time": {"number": []}},
    {"job_id": 4242422, "job_state": [["COMPLETED"]], "name": {"nested": [[[]]]}},
]
POISON_STATES: list[Any] = [
    "x",
    {"job_id": "4242420", "state": 5},
    {"job_id": None, "state": ["RUNNING"]},
    {"job_id": _HUGE, "state": ["FAILED"]},
    {"job_id": "4242423"},
]
POISON_HISTORY: list[Any] = [
    5,
    {"job_id": 4242424, "time": "x", "state": {"current": ["COMPLETED"]}},
    {"job_id": 4242425, "state": {"current": [{}]}},
    {"job_id": None},
]
_JOB_PATH = re.compile(r"^/slurm/v0\.0\.\d+/job/\d+$")
_LIST_PATH = re.compile(r"^/(slurm|slurmdb)/v0\.0\.\d+/jobs(/state)?/?(\?|$)")


class PoisoningProxy:
    """Forwards envelope calls to ``upstream``; list answers come back with foreign garbage records."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.poisoned: Counter[str] = Counter()
        self.garble_job_records = 0  # how many more job/{id} answers get a record of the wrong shape
        self.always_garbled: set[int] = set()  # jobs whose job/{id} record is always of the wrong shape
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type")}
                request = urllib.request.Request(proxy.upstream + self.path, data=data, headers=headers, method="POST")
                try:
                    with urllib.request.urlopen(request, timeout=60) as answer:
                        status, content = answer.status, answer.read()
                except urllib.error.HTTPError as exc:
                    status, content = exc.code, exc.read()
                if status == 200:
                    asked = json.loads(data)
                    content = proxy.poison(asked.get("path", ""), content)
                    if asked.get("method") == "HTTP_METHOD_GET" and _JOB_PATH.match(asked.get("path", "")):
                        content = proxy.garble(content, int(asked["path"].rsplit("/", 1)[1]))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def poison(self, path: str, content: bytes) -> bytes:
        match = _LIST_PATH.match(path)
        if not match:
            return content
        envelope = json.loads(content)
        structured = "structuredBody" in envelope
        body = envelope["structuredBody"] if structured else json.loads(envelope["body"])
        if not isinstance(body, dict) or not isinstance(body.get("jobs"), list):
            return content
        kind = "history" if match.group(1) == "slurmdb" else "states" if match.group(2) else "live"
        poison = {"history": POISON_HISTORY, "states": POISON_STATES, "live": POISON_LIVE}[kind]
        body["jobs"] = [poison[0], *body["jobs"][:1], *poison[1:], *body["jobs"][1:]]
        text = json.dumps(body).replace(json.dumps(_HUGE), "1e400")
        self.poisoned[kind] += 1
        if structured:
            return f'{{"status":{envelope["status"]},"structuredBody":{text}}}'.encode()
        return json.dumps({"status": envelope["status"], "body": text}).encode()

    def garble(self, content: bytes, job_id: int) -> bytes:
        """The asked job's own record with ``job_state: 5``, while ``garble_job_records`` lasts."""
        envelope = json.loads(content)
        always = job_id in self.always_garbled
        if (self.garble_job_records <= 0 and not always) or "body" not in envelope:
            return content
        body = json.loads(envelope["body"])
        if not body.get("jobs"):
            return content
        if not always:
            self.garble_job_records -= 1
        self.poisoned["job"] += 1
        body["jobs"][0]["job_state"] = 5
        return json.dumps({**envelope, "body": json.dumps(body)}).encode()

    def __enter__(self) -> PoisoningProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def poisoned_connection(
    request: pytest.FixtureRequest, emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Any, PoisoningProxy]]:
    """``google_cloud_default`` whose ``api_endpoint`` is the poisoning proxy in front of an emulator."""
    emulator = emulator_factory(cpus=8, **getattr(request, "param", {}))
    with PoisoningProxy(emulator.url) as proxy:
        extra = {"key_path": str(credentials_file), "api_endpoint": proxy.url, "project": PROJECT}
        monkeypatch.setenv(
            "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", json.dumps({"conn_type": "google_cloud_platform", "extra": extra})
        )
        yield emulator, proxy


ANSWER_KINDS = [{}, {"envelope": "structured"}, {"reject_query_strings": True}]
ANSWER_IDS = ["jobs-state", "structuredBody", "jobs-list-fallback"]


@pytest.mark.parametrize("poisoned_connection", ANSWER_KINDS, ids=ANSWER_IDS, indirect=True)
async def test_the_shared_poller_reads_its_jobs_among_foreign_garbage(
    poisoned_connection: tuple[Any, PoisoningProxy], tmp_path: Path
) -> None:
    emulator, proxy = poisoned_connection
    go = tmp_path / "go"
    ok = await submit(emulator, waiting_script(go, 0), name="ok")
    bad = await submit(emulator, waiting_script(go, 3), name="bad")
    triggerer = Triggerer()
    try:
        triggerer.start("ok", make_trigger(ok))
        triggerer.start("bad", make_trigger(bad))
        await asyncio.to_thread(emulator.wait_for_state, ok, "RUNNING", 60)
        go.touch()
        await triggerer.finish()
    finally:
        await triggerer.stop_all()
    assert_completed(triggerer.event("ok"), ok)
    assert_failed(triggerer.event("bad"), bad, "FAILED", exit_code=3)
    assert proxy.poisoned["states" if proxy.poisoned["states"] else "live"] > 0, proxy.poisoned


def test_a_deferred_sensor_through_dag_test_reads_its_job_while_a_foreign_record_is_garbage(
    airflow_db: Any, poisoned_connection: tuple[Any, PoisoningProxy], monkeypatch: Any, tmp_path: Path
) -> None:
    emulator, proxy = poisoned_connection
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
    from tests.conftest import CLUSTER

    go = tmp_path / "go"
    job = {"name": "watched", "partition": "debug", "current_working_directory": str(emulator.config.workdir)}
    job_id = SlurmApiHook(**CLUSTER).submit_job(job, waiting_script(go, 0)).job_id

    def release_after_poisoned_polls() -> None:
        """The job ends only once the deferred sensor's poller has read two poisoned lists."""
        wait_until(lambda: sum(proxy.poisoned.values()) >= 2, "two poisoned lists read", timeout=120, give_up=True)
        go.touch()  # in any case: the test then says what went wrong

    releaser = threading.Thread(target=release_after_poisoned_polls, daemon=True)
    releaser.start()
    for name, value in (
        ("SLURMAPI_DEFERRABLE", "true"),
        ("SLURMAPI_WATCH_JOB_ID", str(job_id)),
        ("SLURMAPI_PROJECT", PROJECT),
        ("SLURMAPI_REGION", CLUSTER["region"]),
        ("SLURMAPI_CLUSTER_ID", CLUSTER["cluster_id"]),
    ):
        monkeypatch.setenv(name, value)
    state, tasks = run_dag(load_dag("slurm_watchers.py", "sensor"))
    go.touch()
    releaser.join()
    assert sum(proxy.poisoned.values()) >= 2, "the deferred sensor's poller never read a poisoned list"
    assert state == "success", tasks


def test_a_garbled_record_of_the_job_asked_for_is_read_again(
    poisoned_connection: tuple[Any, PoisoningProxy],
) -> None:
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
    from airflow_provider_slurmapi.slurm.api.errors import MalformedRecordError
    from tests.conftest import CLUSTER

    emulator, proxy = poisoned_connection
    hook = SlurmApiHook(**CLUSTER)
    hook.client.retry_initial_wait = 0.05
    job = {"name": "garbled", "partition": "debug", "current_working_directory": str(emulator.config.workdir)}
    job_id = hook.submit_job(job, "#!/bin/bash\nsleep 30\n").job_id

    proxy.garble_job_records = 2
    found = hook.get_live_job(job_id)
    assert found is not None and found.job_id == job_id and proxy.poisoned["job"] == 2

    proxy.garble_job_records = 10**6
    hook.client.retry_seconds = 1
    with pytest.raises(MalformedRecordError, match=rf"job {job_id}.*job_state=5"):
        hook.get_live_job(job_id)
    hook.cancel_job(job_id)


async def test_a_garbled_record_of_one_job_fails_no_other_trigger_and_is_ridden_out(
    poisoned_connection: tuple[Any, PoisoningProxy], tmp_path: Path
) -> None:
    emulator, proxy = poisoned_connection
    go = tmp_path / "go"
    garbled = await submit(emulator, waiting_script(go, 0), name="garbled")
    fine = await submit(emulator, waiting_script(go, 0), name="fine")
    proxy.always_garbled.add(garbled)
    triggerer = Triggerer()
    try:
        triggerer.start("garbled", make_trigger(garbled))
        triggerer.start("fine", make_trigger(fine))
        await asyncio.to_thread(emulator.wait_for_state, fine, "RUNNING", 60)
        go.touch()
        await triggerer.finish()
    finally:
        await triggerer.stop_all()
    assert_completed(triggerer.event("fine"), fine)
    event = triggerer.event("garbled")
    # Unreadable is transient (a proxy or Slurm garbling one answer): that job's watch rides it out as an
    # outage, and reads the job's end from the history once it has left the queue, where it is whole.
    assert event["status"] == "success" and event["job"]["source"] == "history", event
