"""Job arrays on real Slurm 24.11: the emulator's array records have the lab's shape, and an array
runs end to end through Airflow (counts in the log, failed task named, fail-fast, XCom per task)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import PROJECT, load_dag
from tests.live_slurm.conftest import CLUSTER_ID, GATEWAY_TOKEN, Gateways, run_dag_capture
from tests.live_slurm.lab import SLURM_RELEASE, Lab
from tests.live_slurm.test_contract_live import EnvelopeClient, Reply, key_diff, type_diff
from tests.waiting import wait_until

pytestmark = pytest.mark.slurm

V = "v0.0.42"
ARRAY_FIELDS = ("array_job_id", "array_task_id", "array_max_tasks", "array_task_string")
# Task 2 fails with exit code 3; tasks wait 3 s, so the meta record of waiting tasks can be seen.
SCRIPT = '#!/bin/bash\nsleep 3\nif [ "$SLURM_ARRAY_TASK_ID" = 2 ]; then exit 3; fi\n'


def _n(value: dict[str, Any]) -> int | None:
    return value["number"] if value.get("set") else None


def run_array_script(client: EnvelopeClient, cwd: str) -> dict[str, Any]:
    """Submit ``0-3%2``, keep the first answer with a meta record and tasks, and the final ones."""
    job = {
        "name": "contract-array",
        "partition": "debug",
        "current_working_directory": cwd,
        "environment": ["PATH=/bin:/usr/bin"],
        "array": "0-3%2",
        "standard_output": f"{cwd}/contract-array-%A_%a.out",
    }
    submit = client.call("POST", f"/slurm/{V}/job/submit", {"job": job, "script": SCRIPT})
    assert submit.status == 200, submit
    array_id = int(submit.body["job_id"])
    seen: dict[str, Any] = {"array_id": array_id}
    # Each task's last live record and jobs/state entry: on a busy lab tasks 0 and 1 may leave the live
    # queue (MinJobAge) before tasks 2 and 3 have even started, so "final" gathers them across polls.
    last: dict[int, dict[str, Any]] = {}
    entries: dict[str, dict[str, Any]] = {}  # by task id

    def over() -> bool:
        live = client.call("GET", f"/slurm/{V}/job/{array_id}")
        state = client.call("GET", f"/slurm/{V}/jobs/state/?job_id={array_id}")
        records = live.body.get("jobs") or [] if isinstance(live.body, dict) else []
        metas = [r for r in records if _n(r["array_task_id"]) is None]
        tasks = [r for r in records if _n(r["array_task_id"]) is not None]
        last.update({t: r for r in tasks if (t := _n(r["array_task_id"])) is not None})
        for entry in state.body.get("jobs") or [] if isinstance(state.body, dict) else []:
            if "_" in str(entry["job_id"]):  # "<job id of the task>_<task id>": the latest entry of each task
                entries[str(entry["job_id"]).rsplit("_", 1)[1]] = entry
        if metas and tasks and "mixed" not in seen:
            seen["mixed"] = live
            seen["mixed_state"] = state
        # Over for good: every task's last record and jobs/state entry show the end state alone (a busy
        # node may keep COMPLETING on for a moment, and the two calls may see different moments).
        if (
            len(last) == 4
            and all(r["job_state"] in (["COMPLETED"], ["FAILED"]) for r in last.values())
            and len(entries) == 4
            and all(e["state"] in (["COMPLETED"], ["FAILED"]) for e in entries.values())
        ):
            seen["final"] = Reply(live.http_status, live.status, {**live.body, "jobs": list(last.values())})
            seen["final_state"] = Reply(state.http_status, state.status, {**state.body, "jobs": list(entries.values())})
            return True
        return False

    # Without "final" the tests that read it say what is missing.
    wait_until(over, f"array {array_id} over for good", timeout=180, every=0.3, give_up=True)

    def recorded() -> bool:  # the history records every task once it has ended
        history = client.call("GET", f"/slurmdb/{V}/job/{array_id}")
        if len(history.body.get("jobs") or []) == 4 and all(
            h["state"]["current"][0] in ("COMPLETED", "FAILED") for h in history.body["jobs"]
        ):
            seen["history"] = history
            return True
        return False

    wait_until(recorded, f"array {array_id}'s tasks in the history", timeout=60, every=1, give_up=True)
    return seen


@pytest.fixture(scope="module")
def both(gateways: Gateways, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """(real Slurm, emulator): the same array script against both."""
    from slurmapi_emulator import EmulatorConfig, run_emulator

    real = run_array_script(EnvelopeClient(gateways.get("body").envelope_url(CLUSTER_ID), GATEWAY_TOKEN), "/tmp")
    workdir = tmp_path_factory.mktemp("array-contract")
    config = EmulatorConfig(
        tokens=[GATEWAY_TOKEN],
        project=PROJECT,
        partitions=["debug"],
        cpus=2,
        min_job_age=10.0,
        workdir=str(workdir),
        slurm_release=SLURM_RELEASE,
    )
    with run_emulator(config) as emulator:
        emu = run_array_script(EnvelopeClient(emulator.envelope_url(CLUSTER_ID), GATEWAY_TOKEN), str(workdir))
    return real, emu


def _by_task(reply: Reply) -> dict[int | None, dict[str, Any]]:
    return {_n(r["array_task_id"]): r for r in reply.body["jobs"]}


def test_array_records_have_the_labs_shape(both: tuple[dict[str, Any], dict[str, Any]]) -> None:
    real, emu = both
    for step in ("mixed", "final"):
        assert step in real and step in emu, f"{step}: Slurm {step in real}, emulator {step in emu}"
        for task_id in (None, 0) if step == "mixed" else (0, 2, 3):
            r, e = _by_task(real[step]).get(task_id), _by_task(emu[step]).get(task_id)
            assert r is not None and e is not None, (step, task_id)
            assert key_diff(r, e, f"{step}[{task_id}]") == [] and type_diff(r, e, f"{step}[{task_id}]") == []
            assert r["job_state"] == e["job_state"] or step == "mixed"
            # The same meaning: array id, task id, throttle, task string (relative to each array's id).
            assert (_n(r["array_job_id"]) == real["array_id"]) and (_n(e["array_job_id"]) == emu["array_id"])
            assert _n(r["array_max_tasks"]) == _n(e["array_max_tasks"]) == 2
            assert (r["job_id"] == real["array_id"]) == (e["job_id"] == emu["array_id"]), (step, task_id)
            for rec, array_id in ((r, real["array_id"]), (e, emu["array_id"])):
                suffix = f"{array_id}_{task_id if task_id is not None else 4294967294}.out"
                assert rec["standard_output"].endswith(f"contract-array-{suffix}"), rec["standard_output"]
    for answers in (real, emu):  # the meta record lists the waiting tasks, with the throttle
        meta = _by_task(answers["mixed"])[None]
        assert meta["array_task_string"].endswith("%2") and meta["job_state"] == ["PENDING"]
    rf, ef = _by_task(real["final"]), _by_task(emu["final"])
    assert rf[3]["job_id"] == real["array_id"] and ef[3]["job_id"] == emu["array_id"]  # the last task took it over
    assert (rf[2]["job_state"], rf[2]["state_reason"]) == (ef[2]["job_state"], ef[2]["state_reason"])
    assert _n(rf[2]["exit_code"]["return_code"]) == _n(ef[2]["exit_code"]["return_code"]) == 3


def test_jobs_state_answers_one_entry_per_task(both: tuple[dict[str, Any], dict[str, Any]]) -> None:
    for answers in both:
        array_id = answers["array_id"]
        final = {e["job_id"]: e["state"] for e in answers["final_state"].body["jobs"]}
        tasks = _by_task(answers["final"])
        assert final == {f"{tasks[t]['job_id']}_{t}": tasks[t]["job_state"] for t in range(4)}
        mixed = [e["job_id"] for e in answers["mixed_state"].body["jobs"]]
        waiting = [e for e in mixed if e.startswith(f"{array_id}_")]
        assert waiting and all("_" in e for e in mixed)  # the waiting tasks under the array's id


def test_history_holds_every_task_of_the_array(both: tuple[dict[str, Any], dict[str, Any]]) -> None:
    shapes = []
    for answers in both:
        assert "history" in answers
        jobs = {h["array"]["task_id"]["number"]: h for h in answers["history"].body["jobs"]}
        assert sorted(jobs) == [0, 1, 2, 3]
        assert {h["array"]["job_id"] for h in jobs.values()} == {answers["array_id"]}
        assert jobs[3]["job_id"] == answers["array_id"] and jobs[3]["array"]["limits"]["max"]["running"]["tasks"] == 2
        assert jobs[2]["state"]["current"] == ["FAILED"] and jobs[2]["exit_code"]["return_code"]["number"] == 3
        shapes.append(jobs[0]["array"])
    assert key_diff(shapes[0], shapes[1], "array") == [] and type_diff(shapes[0], shapes[1], "array") == []


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "sync"])
def test_array_end_to_end_on_real_slurm(
    deferrable: bool, gateway: Any, lab: Lab, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """One task fails: the task fails naming it; with fail-fast (sync) the tasks still waiting are cancelled."""
    monkeypatch.setenv("SLURMAPI_DEFERRABLE", str(deferrable).lower())
    dag = load_dag("slurm_arrays.py", "one_fails" if deferrable else "fail_fast")
    result = run_dag_capture(dag, capfd)
    assert result.state == "failed", result.log[-3000:]
    sent = result.xcom("job", key="slurm_job")
    array_id = sent["job_id"]
    assert f"array {array_id}: " in result.log
    history: dict[int, str] = {}
    unstarted: list[str] = []  # the states of the meta record: the tasks that never started, as one record

    def recorded() -> bool:  # what real Slurm recorded of each task
        nonlocal history, unstarted
        status, body = lab.call("GET", f"/slurmdb/{V}/job/{array_id}")
        assert status == 200, body
        started = [h for h in body["jobs"] if h["array"]["task_id"]["set"]]  # the meta record has none
        history = {h["array"]["task_id"]["number"]: h["state"]["current"][0] for h in started}
        unstarted = [h["state"]["current"][0] for h in body["jobs"] if not h["array"]["task_id"]["set"]]
        states = set(history.values()) | set(unstarted)
        return len(history) >= (4 if deferrable else 1) and not {"RUNNING", "PENDING"} & states

    wait_until(recorded, f"array {array_id}'s tasks ended in the history", timeout=60, every=1, give_up=True)
    tasks = {t["task_id"]: t for t in sent["array"]["tasks"]}
    if deferrable:
        assert history == {0: "COMPLETED", 1: "COMPLETED", 2: "FAILED", 3: "COMPLETED"}, history
        assert "task ids 2" in result.log and "reason NonZeroExitCode, exit code 3" in result.log
        assert {t: v["state"] for t, v in tasks.items()} == history
        assert tasks[2]["exit_code"] == 3
    else:
        assert tasks[0]["state"] == "FAILED" and tasks[0]["exit_code"] == 4
        assert "array_fail_fast: task 0" in result.log
        assert {v["state"] for t, v in tasks.items() if t} == {"CANCELLED"}, tasks
        # Task 1 may have started beside task 0 (its own record, CANCELLED) or still waited on a busy lab;
        # the tasks that never started stay in the meta record, which the cancel ends CANCELLED.
        assert history[0] == "FAILED" and set(history.values()) <= {"FAILED", "CANCELLED"}, (history, unstarted)
        assert len(history) == 6 or unstarted == ["CANCELLED"], (history, unstarted)
