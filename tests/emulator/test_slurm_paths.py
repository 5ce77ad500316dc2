"""Every Slurm path the emulator serves, in each behaviour a real 24.11 cluster showed."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from slurmapi_emulator import EmulatorConfig, EmulatorHandle
from slurmapi_emulator.versions import SUPPORTED_VERSIONS

from .conftest import TOKEN, Client, V, job_desc, wait_until

SLEEP = "#!/bin/bash\nsleep 30\n"


# ------------------------------------------------------------------------------------------ submit
def test_submit_answer_shape_and_ids_count_from_one(client: Client) -> None:
    answer = client.submit()
    assert answer.slurm_status == 200
    assert set(answer.body) == {"job_id", "step_id", "job_submit_user_msg", "meta", "errors", "warnings"}
    assert (answer.body["job_id"], answer.body["step_id"]) == (1, "batch")
    assert answer.body["errors"] == [] and answer.body["warnings"] == []
    assert client.submit().body["job_id"] == 2


def test_submit_script_in_job_and_top_level_wins(client: Client, emu: EmulatorHandle) -> None:
    out = f"{client.cwd}/which-%j.out"
    body = {"job": job_desc(client.cwd, script="#!/bin/bash\necho from-job\n", standard_output=out)}
    job1 = client.call("POST", f"/slurm/{V}/job/submit", body).body["job_id"]
    body["script"] = "#!/bin/bash\necho top-level\n"
    job2 = client.call("POST", f"/slurm/{V}/job/submit", body).body["job_id"]
    emu.wait_for_state(job1, "COMPLETED")
    emu.wait_for_state(job2, "COMPLETED")
    assert Path(out.replace("%j", str(job1))).read_text() == "from-job\n"
    assert Path(out.replace("%j", str(job2))).read_text() == "top-level\n"


def test_submit_without_script_is_422(client: Client, emu: EmulatorHandle) -> None:
    answer = client.call("POST", f"/slurm/{V}/job/submit", {"job": job_desc(client.cwd)})
    assert answer.slurm_status == 422
    assert answer.body["errors"][0]["error_number"] == 9000
    assert "script" in answer.body["errors"][0]["description"]
    assert emu.jobs() == []


@pytest.mark.parametrize("drop", ["current_working_directory", "environment", "empty-environment"])
def test_submit_without_cwd_or_environment_is_500_2019_and_uses_an_id(
    client: Client, emu: EmulatorHandle, drop: str
) -> None:
    desc = job_desc(client.cwd)
    if drop == "empty-environment":
        desc["environment"] = []
    else:
        del desc[drop]
    answer = client.call("POST", f"/slurm/{V}/job/submit", {"job": desc, "script": "#!/bin/bash\ntrue\n"})
    assert answer.slurm_status == 500
    err = answer.body["errors"][0]
    assert (err["error_number"], err["error"], err["description"]) == (
        2019,
        "I/O error writing script/environment to file",
        "Batch job submission failed",
    )
    assert emu.jobs() == []
    assert client.submit().body["job_id"] == 2  # id 1 was used up, like slurmctld does


def test_submit_wrong_type_is_500_9202(client: Client) -> None:
    answer = client.submit(time_limit="abc")
    assert answer.slurm_status == 500
    err = answer.body["errors"][0]
    assert (err["error_number"], err["description"], err["source"]) == (
        9202,
        'Expected integer but got "abc"',
        "#/job/time_limit/",
    )
    assert client.submit(minimum_nodes={"x": 1}).slurm_status == 500


def test_submit_unknown_partition_is_500_2000(client: Client, emu: EmulatorHandle) -> None:
    answer = client.submit(partition="nosuchpart")
    assert answer.slurm_status == 500
    assert answer.body["errors"][0]["error_number"] == 2000
    assert emu.jobs() == []
    assert client.submit(partition="a3").slurm_status == 200
    job = client.job(1).jobs[0]
    assert job["partition"] == "a3"
    desc = job_desc(client.cwd)
    del desc["partition"]
    answer = client.call("POST", f"/slurm/{V}/job/submit", {"job": desc, "script": "#!/bin/bash\ntrue\n"})
    assert client.job(answer.body["job_id"]).jobs[0]["partition"] == "debug"  # first is the default


@pytest.mark.parametrize(
    "fields",
    [{"minimum_nodes": 5}, {"tres_per_node": "gres/gpu:9"}, {"minimum_cpus": 5}, {"tasks": 3, "cpus_per_task": 2}],
)
def test_submit_more_than_the_node_is_500_2014_and_job_fails(client: Client, fields: dict[str, object]) -> None:
    answer = client.submit(**fields)
    assert answer.slurm_status == 500
    err = answer.body["errors"][0]
    assert (err["error_number"], err["error"]) == (2014, "Requested node configuration is not available")
    job = client.job(1).jobs[0]  # the id was used and the job shows FAILED
    assert job["job_state"] == ["FAILED"]
    assert job["state_reason"] == "BadConstraints"
    assert client.history(1).jobs[0]["state"]["current"] == ["FAILED"]


def test_submit_unknown_fields_warn(client: Client) -> None:
    answer = client.call(
        "POST",
        f"/slurm/{V}/job/submit",
        {
            "job": {**job_desc(client.cwd), "no_such_field": 42, "other": "x"},
            "script": "#!/bin/bash\ntrue\n",
            "extra_top": True,
        },
    )
    assert answer.slurm_status == 200
    descriptions = [w["description"] for w in answer.body["warnings"]]
    assert 'Ignoring unknown field "no_such_field" of type 64 bit integer in DATA_PARSER_JOB_DESC_MSG' in descriptions
    assert 'Ignoring unknown field "other" of type string in DATA_PARSER_JOB_DESC_MSG' in descriptions
    assert any("extra_top" in d for d in descriptions)


def test_submit_held_job(client: Client, emu: EmulatorHandle) -> None:
    answer = client.submit(hold=True)
    assert answer.slurm_status == 200
    assert answer.body["warnings"][0]["description"] == (
        "Job submission resulted in non-zero return code: Job is in held state, pending scheduler release"
    )
    emu.wait_for_state(client.submit_id(script=SLEEP), "RUNNING")  # the scheduler has been past the held job
    job = client.job(1).jobs[0]
    assert (job["job_state"], job["state_reason"], job["hold"]) == (["PENDING"], "JobHeldUser", True)
    assert job["priority"]["number"] == 0
    assert emu.jobs()[0]["pid"] is None


@pytest.mark.parametrize("limit", [{"set": True, "number": 7}, 7, "7"])
def test_time_limit_forms(client: Client, limit: object) -> None:
    job_id = client.submit_id(time_limit=limit)
    job = client.job(job_id).jobs[0]
    assert job["time_limit"] == {"set": True, "infinite": False, "number": 7}
    assert client.history(job_id).jobs[0]["time"]["limit"]["number"] == 7


def test_no_time_limit_is_infinite(client: Client) -> None:
    job_id = client.submit_id()
    assert client.job(job_id).jobs[0]["time_limit"] == {"set": False, "infinite": True, "number": 0}


def test_comment_and_name_are_kept(client: Client, emu: EmulatorHandle) -> None:
    job_id = client.submit_id(name="my-run", comment='airflow:{"dag":"d","run":"r1"}')
    live = client.job(job_id).jobs[0]
    assert (live["name"], live["comment"]) == ("my-run", 'airflow:{"dag":"d","run":"r1"}')
    emu.wait_for_state(job_id, "COMPLETED")
    hist = client.history(job_id).jobs[0]
    assert hist["name"] == "my-run"
    assert hist["comment"] == {"administrator": "", "job": 'airflow:{"dag":"d","run":"r1"}', "system": ""}
    assert emu.jobs()[0]["comment"] == 'airflow:{"dag":"d","run":"r1"}'


def test_environment_output_paths_and_cwd(client: Client, emu: EmulatorHandle, tmp_path: object) -> None:
    script = '#!/bin/bash\necho "$SLURM_JOB_ID $SLURM_JOB_NAME $FOO $(pwd)"\necho oops >&2\n'
    job_id = client.submit_id(
        script=script,
        name="envjob",
        environment=["PATH=/bin:/usr/bin", "FOO=bar"],
        standard_output="out-%j-%x.txt",
        standard_error="err-%j.txt",
    )
    emu.wait_for_state(job_id, "COMPLETED")
    job = client.job(job_id).jobs[0]
    assert job["standard_output"] == f"{client.cwd}/out-{job_id}-envjob.txt"
    assert job["standard_error"] == f"{client.cwd}/err-{job_id}.txt"
    assert Path(job["standard_output"]).read_text() == f"{job_id} envjob bar {client.cwd}\n"
    assert Path(job["standard_error"]).read_text() == "oops\n"


def test_missing_cwd_runs_in_workdir(client: Client, emu: EmulatorHandle) -> None:
    job_id = client.submit_id(script="#!/bin/bash\npwd\n", current_working_directory="/no/such/home/user")
    emu.wait_for_state(job_id, "COMPLETED")
    job = client.job(job_id).jobs[0]
    assert job["current_working_directory"] == "/no/such/home/user"
    assert job["standard_output"] == f"{emu.config.workdir}/slurm-{job_id}.out"
    assert Path(job["standard_output"]).read_text().strip() == emu.config.workdir


# ------------------------------------------------------------------------------------------ job
def test_job_get_unknown_and_non_numeric(client: Client) -> None:
    answer = client.job(999999)
    assert answer.slurm_status == 404
    assert answer.body["jobs"] == []
    err = answer.body["errors"][0]
    assert (err["error_number"], err["description"]) == (2017, "Unable to query JobId=999999")
    answer = client.call("GET", f"/slurm/{V}/job/abc")
    assert answer.slurm_status == 422
    assert answer.body["errors"][0]["error_number"] == 9000


def test_job_state_is_a_list_with_keys_of_the_real_record(client: Client) -> None:
    job = client.job(client.submit_id()).jobs[0]
    assert isinstance(job["job_state"], list)
    for key in (
        "job_state",
        "state_reason",
        "exit_code",
        "derived_exit_code",
        "start_time",
        "end_time",
        "submit_time",
        "nodes",
        "standard_output",
        "standard_error",
        "standard_input",
        "comment",
        "name",
        "partition",
        "user_name",
        "time_limit",
    ):
        assert key in job


# ------------------------------------------------------------------------------------------ cancel
def test_cancel_running_pending_finished_unknown(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(cpus=1, min_job_age=60)
    client = Client(emu)
    running = client.submit_id(script=SLEEP)
    pending = client.submit_id(script=SLEEP)
    emu.wait_for_state(running, "RUNNING")
    answer = client.cancel(pending)
    assert (answer.slurm_status, answer.body["status"]) == (200, [])
    assert client.state(pending) == ["CANCELLED"]
    answer = client.cancel(running)
    assert (answer.slurm_status, answer.body["status"]) == (200, [])
    assert client.state(running)[0] == "CANCELLED"
    wait_until(lambda: client.state(running) == ["CANCELLED"])
    job = client.job(running).jobs[0]
    assert job["exit_code"]["status"] == ["SIGNALED"] and job["exit_code"]["signal"]["name"] == "TERM"
    for job_id in (running, pending):
        status = client.cancel(job_id).body["status"]
        assert status[0]["error"]["code"] == 2021
        assert status[0]["error"]["message"] == "Job/step already completing or completed"
    status = client.cancel(424242).body["status"]
    assert (status[0]["error"]["code"], status[0]["job_id"]["set"]) == (2017, False)
    pend_hist = client.history(pending).jobs[0]
    assert pend_hist["time"]["start"] == 4294967294
    assert pend_hist["steps"] == []


def test_cancel_with_signal_and_flags_query(client: Client, emu: EmulatorHandle) -> None:
    ready = f"{client.cwd}/ready"
    job_id = client.submit_id(
        script=f"#!/bin/bash\ntrap 'echo got-usr1' USR1\ntouch {ready}\nwhile true; do sleep 0.05; done\n"
    )
    wait_until(lambda: Path(ready).exists())
    assert client.cancel(job_id, "?signal=SIGUSR1").body["status"] == []
    wait_until(lambda: "got-usr1" in Path(client.job(job_id).jobs[0]["standard_output"]).read_text())
    assert client.state(job_id) == ["RUNNING"]  # a plain signal does not cancel
    assert client.cancel(job_id, "?signal=SIGKILL&flags=FULL").body["status"] == []
    emu.wait_for_state(job_id, "CANCELLED")
    assert client.cancel(job_id, "?signal=SIGKILL").body["status"][0]["error"]["code"] == 2021
    assert client.cancel(job_id, "?signal=NOPE").slurm_status == 422


def test_cancel_kills_the_whole_process_group(client: Client, emu: EmulatorHandle) -> None:
    pidfile = f"{client.cwd}/child.pid"
    script = f"#!/bin/bash\nsleep 300 &\necho $! > {pidfile}\nwait\n"
    job_id = client.submit_id(script=script)
    pid = int(wait_until(lambda: _read(pidfile)))
    client.cancel(job_id)
    emu.wait_for_state(job_id, "CANCELLED")
    wait_until(lambda: not _alive(pid), timeout=5)


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return False


# ------------------------------------------------------------------------------------------ lists
def test_jobs_list_and_update_time(client: Client, emu: EmulatorHandle) -> None:
    first = client.submit_id(script=SLEEP)
    second = client.submit_id(script=SLEEP)
    answer = client.call("GET", f"/slurm/{V}/jobs/")
    assert [j["job_id"] for j in answer.jobs] == [first, second]
    assert client.call("GET", f"/slurm/{V}/jobs").jobs  # without the trailing slash too
    emu.wait_for_state(second, "RUNNING")

    def unchanged_since_last_update() -> int | None:
        last = client.call("GET", f"/slurm/{V}/jobs/").body["last_update"]["number"]
        return last if client.call("GET", f"/slurm/{V}/jobs/?update_time={last}").jobs == [] else None

    last = wait_until(unchanged_since_last_update)
    answer = client.call("GET", f"/slurm/{V}/jobs/?update_time={last}")
    assert answer.slurm_status == 200 and answer.jobs == []
    assert answer.body["warnings"][0]["description"].startswith(f"No job changes since update_time[{last}]=")
    assert len(client.call("GET", f"/slurm/{V}/jobs/?update_time={last - 1}").jobs) == 2
    time.sleep(1.05)  # update_time counts whole seconds: the cancel must fall in a later one
    client.cancel(first)
    assert len(client.call("GET", f"/slurm/{V}/jobs/?update_time={last}").jobs) == 2


def test_jobs_state_repeated_ids_absent_ids_and_all(client: Client, emu: EmulatorHandle) -> None:
    a = client.submit_id(script=SLEEP)
    b = client.submit_id()
    emu.wait_for_state(b, "COMPLETED")
    answer = client.call("GET", f"/slurm/{V}/jobs/state/?job_id={a}&job_id={b}&job_id=777&job_id={a}")
    assert answer.slurm_status == 200
    assert set(answer.body) == {"jobs", "meta", "errors", "warnings"}
    assert answer.jobs == [{"job_id": str(a), "state": ["RUNNING"]}, {"job_id": str(b), "state": ["COMPLETED"]}]
    all_jobs = client.call("GET", f"/slurm/{V}/jobs/state/").jobs
    assert [j["job_id"] for j in all_jobs] == [str(a), str(b)]
    raw = client.call("GET", f"/slurm/{V}/jobs/state/?job_id={a},{b}")
    assert (raw.slurm_status, raw.body) == (400, "Unable to parse query.")
    encoded = client.call("GET", f"/slurm/{V}/jobs/state/?job_id={a}%2C{b}")
    assert encoded.slurm_status == 422


def test_ping_and_versions(every_version_client: Client) -> None:
    client = every_version_client
    for version in SUPPORTED_VERSIONS:
        answer = client.call("GET", f"/slurm/{version}/ping")
        assert answer.slurm_status == 200, version
        assert answer.body["meta"]["plugin"]["data_parser"] == f"data_parser/{version}"
        job_id = client.call(
            "POST", f"/slurm/{version}/job/submit", {"job": job_desc(client.cwd), "script": "#!/bin/bash\ntrue\n"}
        ).body["job_id"]
        job = client.call("GET", f"/slurm/{version}/job/{job_id}").jobs[0]
        assert isinstance(job["job_state"], list)
    assert "responding" not in client.call("GET", "/slurm/v0.0.41/ping").body["pings"][0]
    assert "stdout_expanded" in client.call("GET", "/slurm/v0.0.43/job/1").jobs[0]
    assert "pinged" not in client.call("GET", "/slurm/v0.0.45/ping").body["pings"][0]  # as real 26.05.5
    for version in ("v0.0.39", "v0.0.46", "v1"):
        answer = client.call("GET", f"/slurm/{version}/ping")
        assert (answer.slurm_status, answer.body) == (
            404,
            "Unable find requested URL. Please view /openapi/v3 for API reference.",
        )


NOT_SERVED = (404, "Unable find requested URL. Please view /openapi/v3 for API reference.")


def _served(client: Client) -> list[str]:
    return [v for v in SUPPORTED_VERSIONS if client.call("GET", f"/slurm/{v}/ping").slurm_status == 200]


@pytest.mark.parametrize(
    ("settings", "served", "release"),
    [
        ({}, ["v0.0.40", "v0.0.41", "v0.0.42"], "24.11.5"),  # the default: what a real 24.11.5 serves
        ({"slurm_release": "24.11"}, ["v0.0.40", "v0.0.41", "v0.0.42"], "24.11.5"),
        ({"slurm_release": "26.05"}, ["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"], "26.05.5"),
        ({"api_versions": ["v0.0.45", "v0.0.40"]}, ["v0.0.40", "v0.0.45"], "24.11.5"),
        ({"slurm_release": "26.05", "api_versions": ["all"]}, list(SUPPORTED_VERSIONS), "26.05.5"),
    ],
)
def test_the_versions_served_are_those_of_the_release_it_reports(
    make_emulator: Callable[..., EmulatorHandle], settings: dict[str, Any], served: list[str], release: str
) -> None:
    client = Client(make_emulator(**settings))
    assert _served(client) == served
    for version in set(SUPPORTED_VERSIONS) - set(served):
        answer = client.call("GET", f"/slurm/{version}/ping")
        assert (answer.slurm_status, answer.body) == NOT_SERVED, version
        submit = client.call("POST", f"/slurm/{version}/job/submit", {"job": job_desc(client.cwd), "script": "true\n"})
        assert (submit.slurm_status, submit.body) == NOT_SERVED, version
    assert client.call("GET", f"/slurm/{served[-1]}/ping").body["meta"]["slurm"]["release"] == release
    assert client.emu.jobs() == []


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"slurm_release": "23.02"}, "slurm_release='23.02'"),
        ({"api_versions": ["v0.0.46"]}, "unknown: v0.0.46"),
        ({"api_versions": []}, "api_versions=[]"),
    ],
)
def test_a_release_or_version_the_emulator_does_not_know_is_refused_at_start(
    settings: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(named)):
        EmulatorConfig(tokens=[TOKEN], **settings).validate()


def test_the_cli_takes_the_release_and_the_versions(tmp_path: Path) -> None:
    from slurmapi_emulator.cli import build_parser, config_from_args

    parse = build_parser().parse_args
    assert config_from_args(parse([])).served_versions == ("v0.0.40", "v0.0.41", "v0.0.42")
    assert config_from_args(parse(["--slurm-release", "26.05"])).served_versions[-1] == "v0.0.45"
    assert config_from_args(parse(["--api-versions", "all"])).served_versions == SUPPORTED_VERSIONS
    assert config_from_args(parse(["--api-versions", "v0.0.43,v0.0.44"])).served_versions == ("v0.0.43", "v0.0.44")


# ------------------------------------------------------------------------------------------ slurmdb
def test_slurmdb_unknown_job(client: Client) -> None:
    answer = client.history(999999)
    assert answer.slurm_status == 200 and answer.jobs == []
    assert answer.body["warnings"][0]["description"].endswith("found nothing")


def test_slurmdb_jobs_filters(client: Client, emu: EmulatorHandle) -> None:
    ok = client.submit_id(name="good")
    bad = client.submit_id(name="t_fail", script="#!/bin/bash\nexit 3\n")
    slow = client.submit_id(name="slow", script="#!/bin/bash\nsleep 30\n", time_limit=1)
    for job_id, state in ((ok, "COMPLETED"), (bad, "FAILED"), (slow, "TIMEOUT")):
        emu.wait_for_state(job_id, state, timeout=10)
    user = client.history(ok).jobs[0]["user"]
    path = f"/slurmdb/{V}/jobs/"
    ids = lambda query: [j["job_id"] for j in client.call("GET", path + query).jobs]  # noqa: E731
    assert ids("") == [ok, bad, slow]
    assert ids(f"?users={user}") == [ok, bad, slow]
    assert ids(f"?users={user}&users=root") == [ok, bad, slow]
    assert ids("?job_name=t_fail") == [bad]
    assert ids("?job_name=t_fail&job_name=good") == [ok, bad]
    now = int(time.time())
    window = f"&start_time={now - 3600}&end_time={now + 60}"
    assert ids("?state=TIMEOUT" + window) == [slow]
    assert ids("?state=TIMEOUT&state=FAILED" + window) == [bad, slow]
    assert ids("?state=TIMEOUT") == []  # without a window slurmdbd looks at "now"
    assert ids(f"?start_time={now + 30}&end_time={now + 60}") == []
    raw = client.call("GET", path + "?state=TIMEOUT,FAILED" + window)
    assert (raw.slurm_status, raw.body) == (400, "Unable to parse query.")
    encoded = client.call("GET", path + "?state=TIMEOUT%2CFAILED" + window)
    assert encoded.slurm_status == 500 and encoded.body["errors"][0]["error_number"] == 9207
    users = client.call("GET", path + f"?users={user}%2Croot")
    assert users.slurm_status == 422
    assert [e["error_number"] for e in users.body["errors"]] == [2166, 9000]


def test_cancel_in_older_data_parsers_has_no_status_list(client: Client, emu: EmulatorHandle) -> None:
    job_id = client.submit_id(script=SLEEP)
    emu.wait_for_state(job_id, "RUNNING")
    answer = client.call("DELETE", f"/slurm/v0.0.41/job/{job_id}")
    assert (answer.slurm_status, set(answer.body)) == (200, {"meta", "errors", "warnings"})
    emu.wait_for_state(job_id, "CANCELLED")
    answer = client.call("DELETE", f"/slurm/v0.0.40/job/{job_id}")
    assert answer.slurm_status == 200 and "Job/step already" in answer.body["warnings"][0]["description"]
    answer = client.call("DELETE", "/slurm/v0.0.40/job/999")  # always 200, like v0.0.42's cancel
    assert answer.slurm_status == 200 and "Invalid job id" in answer.body["warnings"][0]["description"]


def test_job_ids_with_step_or_array_suffix_and_out_of_range(client: Client) -> None:
    job_id = client.submit_id()
    answer = client.call("GET", f"/slurm/{V}/job/{job_id}.batch")
    assert answer.slurm_status == 200 and answer.jobs[0]["job_id"] == job_id
    assert answer.body["warnings"][0]["description"].startswith("Job steps are not supported")
    answer = client.call("GET", f"/slurm/{V}/job/{job_id}_3")
    assert answer.body["warnings"][0]["description"].startswith("Job array Ids are not currently supported")
    answer = client.call("GET", f"/slurm/{V}/job/0")  # real slurmrestd 24.11.5 cannot parse 0 as a job id
    assert answer.slurm_status == 422
    assert answer.body["errors"][0]["description"] == "Rejecting request. Failure parsing parameters"
    answer = client.call("GET", f"/slurm/{V}/job/{0x03FF0000}")
    assert answer.slurm_status == 404 and answer.body["errors"][0]["description"] == "Invalid JobID=67043328 rejected"
    assert client.call("GET", f"/slurm/{V}/job/1.2.3").slurm_status == 422
