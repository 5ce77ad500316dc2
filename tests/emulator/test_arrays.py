"""Job arrays as Slurm 24.11 serves them: meta record, task records, %N throttle, %A_%a, jobs/state, cancel."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from slurmapi_emulator import EmulatorHandle

from .conftest import Client, V, wait_until

# Task 2 fails with exit code 3; every task writes its array variables.
SCRIPT = (
    "#!/bin/bash\necho $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT "
    "$SLURM_ARRAY_TASK_MIN $SLURM_ARRAY_TASK_MAX $SLURM_ARRAY_TASK_STEP $SLURM_JOB_ID\nsleep 0.6\n"
    'if [ "$SLURM_ARRAY_TASK_ID" = 2 ]; then exit 3; fi\n'
)


def _n(obj: dict[str, object]) -> int | None:
    return obj["number"] if obj["set"] else None  # type: ignore[return-value]


def _records(client: Client, array_id: int) -> list[dict[str, object]]:
    answer = client.job(array_id)
    return answer.jobs if answer.slurm_status == 200 else []


def test_array_runs_every_task_within_its_throttle(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path
) -> None:
    emu = make_emulator(minute_seconds=1, min_job_age=30, cpus=4)
    client = Client(emu)
    array_id = client.submit_id(script=SCRIPT, array="0-3%2", standard_output=str(tmp_path / "arr-%A_%a.out"))
    meta = client.job(array_id).jobs[0]
    assert _n(meta["array_job_id"]) == array_id and _n(meta["array_task_id"]) is None  # type: ignore[arg-type]
    assert _n(meta["array_max_tasks"]) == 2  # type: ignore[arg-type]
    most_running = 0

    def all_done() -> bool:
        nonlocal most_running
        records = _records(client, array_id)
        most_running = max(most_running, sum(r["job_state"] == ["RUNNING"] for r in records))
        for r in records:  # a meta record stands for waiting tasks; the throttle holds it back
            if _n(r["array_task_id"]) is None and r["job_state"] == ["PENDING"] and most_running >= 2:  # type: ignore[arg-type]
                assert r["state_reason"] == "JobArrayTaskLimit" and str(r["array_task_string"]).endswith("%2")
        return len(records) == 4 and all(r["job_state"][0] in ("COMPLETED", "FAILED") for r in records)  # type: ignore[index]

    wait_until(all_done, timeout=30, every=0.1)
    assert most_running <= 2
    records = {_n(r["array_task_id"]): r for r in _records(client, array_id)}  # type: ignore[arg-type]
    assert sorted(records) == [0, 1, 2, 3]  # type: ignore[type-var]
    assert records[3]["job_id"] == array_id  # the last task takes over the array's own record
    assert records[2]["job_state"] == ["FAILED"] and _n(records[2]["exit_code"]["return_code"]) == 3  # type: ignore[index]
    for task_id, rec in records.items():
        assert _n(rec["array_job_id"]) == array_id and rec["array_task_string"] == ""  # type: ignore[arg-type]
        path = tmp_path / f"arr-{array_id}_{task_id}.out"
        assert rec["standard_output"] == str(path)
        assert path.read_text().split() == [str(array_id), str(task_id), "4", "0", "3", "1", str(rec["job_id"])]
    states = client.call("GET", f"/slurm/{V}/jobs/state/?job_id={array_id}").jobs
    assert sorted(s["job_id"] for s in states) == sorted(f"{r['job_id']}_{t}" for t, r in records.items())
    history = client.history(array_id).jobs
    assert sorted(h["array"]["task_id"]["number"] for h in history) == [0, 1, 2, 3]
    assert {h["array"]["job_id"] for h in history} == {array_id}


def test_pending_array_is_one_meta_record_expanded_in_jobs_state(client: Client) -> None:
    array_id = client.submit_id(script=SCRIPT, array="0-4:2%1", hold=True)
    (meta,) = client.job(array_id).jobs
    assert meta["array_task_string"] == "0,2,4%1" or meta["array_task_string"] == "0-4:2%1"
    states = client.call("GET", f"/slurm/{V}/jobs/state/?job_id={array_id}").jobs
    assert states == [{"job_id": f"{array_id}_{t}", "state": ["PENDING"]} for t in (0, 2, 4)]
    (hist,) = wait_until(lambda: client.history(array_id).body.get("jobs"))
    assert hist["array"]["task"] == "0x15" and hist["array"]["task_id"]["set"] is False
    client.cancel(array_id)
    (meta,) = client.job(array_id).jobs
    assert meta["job_state"] == ["CANCELLED"]


def test_cancel_by_array_id_cancels_every_task(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(minute_seconds=1, min_job_age=30, cpus=4)
    client = Client(emu)
    array_id = client.submit_id(script="#!/bin/bash\nsleep 30\n", array="0-5%2")
    wait_until(lambda: sum(r["job_state"] == ["RUNNING"] for r in _records(client, array_id)) == 2)
    answer = client.cancel(array_id)
    assert answer.slurm_status == 200 and not answer.body["errors"]
    wait_until(lambda: all(r["job_state"] == ["CANCELLED"] for r in _records(client, array_id)))
    states = client.call("GET", f"/slurm/{V}/jobs/state/?job_id={array_id}").jobs
    assert len(states) == 6 and all(s["state"] == ["CANCELLED"] for s in states)


def test_bad_array_spec_is_refused_like_slurm(client: Client) -> None:
    for spec in ("abc", "0-9999999", "5-1"):
        answer = client.submit(script=SCRIPT, array=spec)
        assert answer.slurm_status == 500
        assert answer.body["errors"][0]["error_number"] == 2081, answer.raw_text
