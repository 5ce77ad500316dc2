"""The sensor in reschedule mode keeps one watch across its pokes, each a new run of the task."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_3_PLUS
from tests.conftest import load_dag, run_dag
from tests.dag_runs.test_watchers import submit
from tests.waiting import wait_until


@pytest.fixture
def reschedule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", "false")
    monkeypatch.setenv("SLURMAPI_SENSOR_MODE", "reschedule")
    # Far longer than the grace: a sensor that only ends at its timeout fails this test.
    monkeypatch.setenv("SLURMAPI_SENSOR_TIMEOUT", "60")


# A job that runs until the test creates its release file (in the job's working directory).
HELD_SCRIPT = "#!/bin/bash\nwhile [ ! -e release ]; do sleep 0.2; done\n"


@contextmanager
def release_after_polls(emulator: Any, polls: int) -> Iterator[None]:
    """Let the held job end once the emulator has answered ``polls`` more reads of one job."""
    emulator.reset_calls()
    stop = threading.Event()

    def release() -> None:
        wait_until(
            lambda: stop.is_set() or emulator.calls()["by_kind"].get("job-get", 0) >= polls,
            f"{polls} reads of the job",
            timeout=600,
            every=0.1,
            give_up=True,  # the DAG run says what went wrong
        )
        (Path(emulator.config.workdir) / "release").touch()

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def output(capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> str:
    """What the run logged: Airflow 3 prints its task logs, Airflow 2.11 logs them through logging."""
    return "".join(capfd.readouterr()) + caplog.text


_STAMP = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)[.,](\d{3})")


def logged(out: str, needle: str) -> list[str]:
    """The log records holding ``needle``, each once: the same record may reach several captures
    (Airflow 2.11 prints it through two handlers), told apart by their timestamps to the millisecond."""
    records: dict[tuple[str, ...], str] = {}
    for line in out.splitlines():
        stamp = _STAMP.search(line)
        if needle in line and stamp:
            records.setdefault(stamp.groups(), line)
    return list(records.values())


def test_rescheduled_sensor_fails_after_the_grace_on_a_missing_job(
    reschedule: None,
    airflow_db: Any,
    gcp_connection: Any,
    monkeypatch: Any,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("SLURMAPI_WATCH_JOB_ID", "424242")
    state, tasks = run_dag(load_dag("slurm_watchers.py", "sensor"))
    out = output(capfd, caplog)
    assert state == "failed", tasks
    assert "Slurm job 424242 has been in neither the live queue nor the accounting history" in out
    assert "Sensor has timed out" not in out


def test_rescheduled_sensor_logs_each_state_once(
    reschedule: None,
    airflow_db: Any,
    gcp_connection: Any,
    monkeypatch: Any,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    job_id = submit(gcp_connection, HELD_SCRIPT)
    gcp_connection.wait_for_state(job_id, ["RUNNING"], timeout=20)
    monkeypatch.setenv("SLURMAPI_WATCH_JOB_ID", str(job_id))
    with release_after_polls(gcp_connection, polls=3):
        state, tasks = run_dag(load_dag("slurm_watchers.py", "sensor"))
    out = output(capfd, caplog)
    assert state == "success", tasks
    pokes = len(logged(out, "Rescheduling task") or logged(out, "up_for_reschedule"))
    running = [line for line in logged(out, f"Slurm job {job_id}: RUNNING") if "->" not in line]
    assert pokes >= 2, f"the sensor was not rescheduled ({pokes} reschedules): nothing tested\n{out[-3000:]}"
    assert len(running) == 1, f"RUNNING logged {len(running)} times over {pokes + 1} pokes\n{out[-3000:]}"
    if AIRFLOW_V_3_3_PLUS:  # the task state store carries the last state from poke to poke
        assert f"Slurm job {job_id}: RUNNING on localhost -> COMPLETED" in out
    else:  # no store: the poke that sees the end says so
        assert f"Slurm job {job_id}: COMPLETED" in out
