"""Jobs from submit to history: states, reasons, exit codes, times, purge and accounting lag."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from slurmapi_emulator import EmulatorHandle

from .conftest import Client, V, wait_until

SLEEP = "#!/bin/bash\nsleep 30\n"


def _n(obj: dict[str, object]) -> int:
    number = obj["number"]
    assert isinstance(number, int)
    return number


def test_full_lifecycle_pending_running_completed_purged_history(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(min_job_age=1, minute_seconds=1)
    client = Client(emu)
    job_id = client.submit_id(script="#!/bin/bash\necho hello\nsleep 0.5\necho done\n", time_limit=5)
    job = client.job(job_id).jobs[0]  # right after submit: PENDING, reason None, no resources
    if job["job_state"] == ["PENDING"]:  # (unless the scheduler was quicker than this GET)
        assert (job["state_reason"], job["job_resources"]) == ("None", None)
        assert (_n(job["start_time"]), _n(job["end_time"])) == (0, 0)
    wait_until(lambda: client.state(job_id) == ["RUNNING"])
    job = client.job(job_id).jobs[0]
    assert job["nodes"] == "localhost" and job["batch_host"] == "localhost"
    assert _n(job["start_time"]) >= _n(job["submit_time"])
    assert _n(job["end_time"]) == _n(job["start_time"]) + 5  # projected end: start + limit
    running_hist = client.history(job_id).jobs[0]
    assert running_hist["state"]["current"] == ["RUNNING"] and running_hist["time"]["end"] == 0
    wait_until(lambda: client.state(job_id) == ["COMPLETED"])
    job = client.job(job_id).jobs[0]
    assert job["exit_code"]["status"] == ["SUCCESS"] and _n(job["exit_code"]["return_code"]) == 0
    assert _n(job["submit_time"]) <= _n(job["start_time"]) <= _n(job["end_time"])
    assert Path(job["standard_output"]).read_text() == "hello\ndone\n"
    wait_until(lambda: client.job(job_id).slurm_status == 404, timeout=5)  # MinJobAge: purged
    assert emu.jobs()[0]["in_live_queue"] is False
    assert client.call("GET", f"/slurm/{V}/jobs/state/?job_id={job_id}").jobs == []
    hist = client.history(job_id).jobs[0]
    assert hist["state"] == {"current": ["COMPLETED"], "reason": "None"}
    assert hist["time"]["start"] == _n(job["start_time"]) and hist["time"]["end"] == _n(job["end_time"])
    assert hist["time"]["elapsed"] == hist["time"]["end"] - hist["time"]["start"]
    assert hist["steps"][0]["step"]["id"] == f"{job_id}.batch"
    assert hist["stdout_expanded"] == job["standard_output"]


def test_exit_code_3_fails_with_nonzero_exit(client: Client, emu: EmulatorHandle) -> None:
    job_id = client.submit_id(script="#!/bin/bash\necho failing >&2\nexit 3\n")
    emu.wait_for_state(job_id, "FAILED")
    job = client.job(job_id).jobs[0]
    assert job["state_reason"] == "NonZeroExitCode"
    assert job["exit_code"]["status"] == ["ERROR"] and _n(job["exit_code"]["return_code"]) == 3
    hist = client.history(job_id).jobs[0]
    assert hist["state"]["current"] == ["FAILED"]
    assert hist["exit_code"]["status"] == ["ERROR"] and _n(hist["exit_code"]["return_code"]) == 3
    assert hist["steps"][0]["state"] == ["FAILED"]


def test_sigkill_fails_with_signal(client: Client, emu: EmulatorHandle) -> None:
    job_id = client.submit_id(script="#!/bin/bash\nkill -9 $$\n")
    emu.wait_for_state(job_id, "FAILED")
    job = client.job(job_id).jobs[0]
    assert job["state_reason"] == "RaisedSignal"
    assert job["state_description"] == "RaisedSignal:9(Killed)"
    code = job["exit_code"]
    assert code["status"] == ["SIGNALED"] and code["return_code"]["set"] is False
    assert code["signal"] == {"id": {"set": True, "infinite": False, "number": 9}, "name": "KILL"}
    hist = client.history(job_id).jobs[0]
    assert hist["exit_code"]["status"] == ["SIGNALED"] and hist["exit_code"]["signal"]["name"] == "KILL"
    assert hist["steps"][0]["state"] == ["CANCELLED"]


def test_time_limit_gives_timeout(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(minute_seconds=1, kill_wait=2)
    client = Client(emu)
    job_id = client.submit_id(script="#!/bin/bash\ntrap '' TERM\nsleep 30\n", time_limit=1)
    emu.wait_for_state(job_id, "RUNNING")
    emu.wait_for_state(job_id, "TIMEOUT", timeout=10)
    job = client.job(job_id).jobs[0]
    assert job["job_state"] == ["TIMEOUT", "COMPLETING"] and job["state_reason"] == "TimeLimit"
    assert job["exit_code"]["status"] == ["SIGNALED"] and job["exit_code"]["signal"]["name"] == "TERM"
    # the script ignores SIGTERM: COMPLETING until SIGKILL after KillWait, then TIMEOUT alone
    wait_until(lambda: client.state(job_id) == ["TIMEOUT"], timeout=5)
    hist = client.history(job_id).jobs[0]
    assert hist["state"]["current"] == ["TIMEOUT"]
    assert hist["exit_code"]["status"] == ["SUCCESS"]  # job level, as slurmdbd records it
    assert hist["steps"][0]["state"] == ["CANCELLED"]
    assert hist["steps"][0]["exit_code"]["signal"]["name"] == "TERM"


def test_held_job_stays_pending_costs_no_process_and_cancels(client: Client, emu: EmulatorHandle) -> None:
    job_id = client.submit_id(hold=True, script=SLEEP)
    later = client.submit_id(script=SLEEP)
    emu.wait_for_state(later, "RUNNING")  # the scheduler has been past the held job
    client.cancel(later)
    assert client.state(job_id) == ["PENDING"]
    assert emu.jobs()[0]["pid"] is None
    assert client.cancel(job_id).body["status"] == []
    job = client.job(job_id).jobs[0]
    assert job["job_state"] == ["CANCELLED"] and job["state_reason"] == "JobHeldUser"
    assert _n(job["start_time"]) == _n(job["end_time"])
    hist = client.history(job_id).jobs[0]
    assert hist["state"]["current"] == ["CANCELLED"]
    assert hist["time"]["start"] == 4294967294 and hist["nodes"] == "None assigned"
    assert hist["kill_request_user"] == hist["user"]


def test_scheduler_caps_running_jobs_by_cpus_and_gpus(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(cpus=2, gpus=8, min_job_age=60)
    client = Client(emu)
    a = client.submit_id(script=SLEEP)
    b = client.submit_id(script=SLEEP, tres_per_node="gres/gpu:8")
    c = client.submit_id(script=SLEEP)
    d = client.submit_id(script=SLEEP)
    emu.wait_for_state(b, "RUNNING")
    wait_until(lambda: client.job(c).jobs[0]["state_reason"] == "Resources")
    assert client.job(d).jobs[0]["state_reason"] == "Priority"
    assert [j["state"] for j in emu.jobs()] == ["RUNNING", "RUNNING", "PENDING", "PENDING"]
    gpu_job = client.job(b).jobs[0]
    assert gpu_job["tres_per_node"] == "gres/gpu:8" and "gres/gpu=8" in gpu_job["tres_alloc_str"]
    client.cancel(a)
    emu.wait_for_state(c, "RUNNING")
    assert client.job(d).jobs[0]["state_reason"] == "Resources"
    for job_id in (b, c, d):
        client.cancel(job_id)


def test_gpu_job_sees_its_devices(client: Client, emu: EmulatorHandle) -> None:
    job_id = client.submit_id(script="#!/bin/bash\necho $CUDA_VISIBLE_DEVICES\n", tres_per_node="gres/gpu:2")
    emu.wait_for_state(job_id, "COMPLETED")
    assert Path(client.job(job_id).jobs[0]["standard_output"]).read_text() == "0,1\n"


def test_history_delay_lags_accounting(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(min_job_age=0.2, history_delay=1.0)
    client = Client(emu)
    submitted = time.monotonic()
    job_id = client.submit_id(script="#!/bin/bash\nsleep 1.5\n")
    if time.monotonic() - submitted < 0.8:
        assert client.history(job_id).jobs == []  # slurmdbd has not heard of it yet
    emu.wait_for_state(job_id, "COMPLETED")
    ended = time.monotonic()
    wait_until(lambda: client.job(job_id).slurm_status == 404, timeout=5)  # gone from the queue
    stale = client.history(job_id).jobs
    if time.monotonic() - ended < 0.8:  # accounting still shows the job running
        assert stale[0]["state"]["current"] == ["RUNNING"] and stale[0]["time"]["end"] == 0
    wait_until(lambda: [j["state"]["current"] for j in client.history(job_id).jobs] == [["COMPLETED"]], timeout=5)
    # How long the lag is, is measured by bench/history_lag.py (part "history"), against a baseline.


def test_pending_jobs_cost_no_process(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(cpus=1, min_job_age=60)
    client = Client(emu)
    ids = [client.submit_id(script=SLEEP) for _ in range(20)]
    emu.wait_for_state(ids[0], "RUNNING")
    jobs = emu.jobs()
    assert [j["pid"] is not None for j in jobs] == [True] + [False] * 19
    client.cancel(ids[0])


def test_no_job_process_outlives_the_emulator(tmp_path: Path) -> None:
    from slurmapi_emulator import EmulatorConfig, run_emulator

    pids = tmp_path / "pids"
    pids.mkdir()
    script = f"#!/bin/bash\necho $$ > {pids}/$SLURM_JOB_ID\nsleep 300 &\necho $! > {pids}/$SLURM_JOB_ID.child\nwait\n"
    with run_emulator(EmulatorConfig(tokens=["t"], cpus=1, workdir=str(tmp_path), kill_wait=0.2)) as emu:
        client = Client(emu, token="t")
        first = client.submit_id(script=script)
        client.submit_id(script=script)
        emu.wait_for_state(first, "RUNNING")
        wait_until(lambda: (pids / f"{first}.child").exists())
        client.cancel(first)  # the second job is being started while the emulator stops

    def alive() -> list[str]:
        found = []
        for path in pids.iterdir():
            text = path.read_text().strip()
            if text and Path(f"/proc/{text}").exists():
                state = Path(f"/proc/{text}/stat").read_text().split()[2]
                if state != "Z":
                    found.append(text)
        return found

    wait_until(lambda: alive() == [], timeout=5)  # SIGKILL kill_wait (0.2 s) after SIGTERM
