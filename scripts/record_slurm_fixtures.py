"""Record the real Slurm answers the tests read, from the running lab (run by ``scripts/slurm-lab record``).

Runs the scenarios against slurmrestd (plain HTTP, no code of the provider) and writes, for each one,
``NAME.json`` (the answer, indented) or ``NAME.body.txt`` (a plain-text answer) beside ``NAME.meta``
(the request: method, url, ``http_status``, ``request_body``) into ``DIR/slurm-24.11/``, and slurmrestd's
own OpenAPI document (v0.0.40-42) into ``DIR/slurm-openapi/``. The names and the story (jobs A, B, F,
H, ...) are the ones the tests know. Job ids and times differ between recordings; nothing else should.

Numbers are written as the first recording wrote them (through jq): a whole float as an integer
(slurmrestd's ``1.0`` as ``1``); JSON does not tell them apart.

The lab is shared: list answers keep only this recording's jobs (the ``.meta`` says how many were
left out), and the recording waits for a quiet node before the scenarios that need both CPUs.

Input (set by ``scripts/slurm-lab record``): ``SLURM_LAB_URL``, ``SLURM_LAB_TOKEN_FILE`` (the job user's
token), ``SLURM_LAB_ROOT_TOKEN`` (root's), ``SLURM_LAB_SHORT_TOKEN`` (one that expires within seconds),
``SLURM_LAB_CTLD_ONLY_URL`` (a slurmrestd started without ``openapi/slurmdbd``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

V = "v0.0.42"
RESPONSES = "slurm-24.11"
OPENAPI = "slurm-openapi"
SPEC = "slurmrestd-24.11-v0.0.40-42"
ENV = ["PATH=/bin:/usr/bin"]
# Every job this recording submits carries one of these names (the tests know them).
NAMES = {"t", "t_jobscript", "t_fail", "t_held", "bad", "tl_int", "noenv", "unk", "big", "tl", "t_sigkill"}
NAMES |= {"t_timeout", "t_paths"}
FINISHED = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}


def whole_numbers(value: Any) -> Any:
    """``value`` with every float that holds a whole number written as an integer (as jq prints it)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    return value


def log(message: str) -> None:
    print(f"record: {message}", file=sys.stderr, flush=True)


def job(name: str, **fields: Any) -> dict[str, Any]:
    """A job description as the scenarios submit it (cwd /tmp, a non-empty environment)."""
    return {"name": name, "partition": "debug", "current_working_directory": "/tmp", "environment": ENV, **fields}


SIZES = {"minimum_nodes": 1, "tasks_per_node": 1}
LIMIT_2 = {"time_limit": {"set": True, "number": 2}}
JOB_A = {"job": job("t", **SIZES, **LIMIT_2), "script": "#!/bin/bash\necho hello\nsleep 5\necho done\n"}


class Recorder:
    """Sends requests to slurmrestd and writes each answer beside its request."""

    def __init__(self, url: str, token: str, out: Path) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.out = out
        self.started = int(time.time())
        self.ids: dict[str, int] = {}

    # -- HTTP -----------------------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = "",
        raw: bytes | None = None,
        url: str = "",
    ) -> tuple[int, str, str, float]:
        """(HTTP status, answer text, content type, seconds); ``token=None`` sends none."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        token = self.token if token == "" else token
        if token is not None:
            headers["X-SLURM-USER-TOKEN"] = token
        req = urllib.request.Request((url or self.url) + path, data=data, headers=headers, method=method)
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                status, content, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as err:
            status, content, ctype = err.code, err.read(), err.headers.get("Content-Type", "")
        return status, content.decode("utf-8", "replace"), ctype, time.monotonic() - t0

    def get(self, path: str) -> Any:
        """A JSON answer, not recorded (to wait for a state)."""
        status, text, _, _ = self.request("GET", path)
        try:
            return json.loads(text)
        except ValueError:
            return {"status": status, "text": text}

    # -- recording ------------------------------------------------------------------------------------
    def call(
        self,
        name: str,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = "",
        raw: bytes | None = None,
        url: str = "",
    ) -> Any:
        """Send one request and record it as ``name``; returns the answer (JSON, or the text)."""
        status, text, ctype, took = self.request(method, path, body, token=token, raw=raw, url=url)
        meta = [
            f"method: {method}",
            f"url: {url or self.url}{path}",
            f"http_status: {status}",
            f"time_total_s+content_type: {took:.6f} {ctype}",
            f"captured_at_epoch: {int(time.time())}",
        ]
        try:
            answer: Any = whole_numbers(json.loads(text))
        except ValueError:
            answer = text
        if isinstance(answer, dict) and isinstance(answer.get("jobs"), list) and self._is_list(path):
            kept = [j for j in answer["jobs"] if self._ours(j)]
            if len(kept) != len(answer["jobs"]):
                meta.append(f"jobs_kept: {len(kept)} of {len(answer['jobs'])} (other users' jobs of the lab left out)")
            answer["jobs"] = kept
        if isinstance(answer, str):
            (self.out / f"{name}.body.txt").write_text(answer)
        else:
            (self.out / f"{name}.json").write_text(json.dumps(answer, indent=2, ensure_ascii=False) + "\n")
        if raw is not None:
            meta += ["request_body:", raw.decode()]
        elif body is not None:
            meta += ["request_body:", json.dumps(body, indent=2)]
        (self.out / f"{name}.meta").write_text("\n".join(meta) + "\n")
        log(f"{name}: HTTP {status}")
        return answer

    @staticmethod
    def _is_list(path: str) -> bool:
        return "/jobs/" in path

    def _ours(self, record: Any) -> bool:
        """A job of this recording: one of its names, submitted since it started."""
        if not isinstance(record, dict) or record.get("name") not in NAMES:
            return False
        submitted = record.get("submit_time") or (record.get("time") or {}).get("submission")
        number = submitted.get("number") if isinstance(submitted, dict) else submitted
        return isinstance(number, int) and number >= self.started - 5

    def submit(self, label: str, name: str, body: Any, **kwargs: Any) -> int | None:
        answer = self.call(name, "POST", f"/slurm/{V}/job/submit", body, **kwargs)
        job_id = answer.get("job_id") if isinstance(answer, dict) else None
        if job_id:
            self.ids[label] = int(job_id)
        return int(job_id) if job_id else None

    # -- waiting --------------------------------------------------------------------------------------
    def live(self, job_id: int) -> dict[str, Any] | None:
        answer = self.get(f"/slurm/{V}/job/{job_id}")
        jobs = answer.get("jobs") if isinstance(answer, dict) else None
        return jobs[0] if jobs else None

    def history(self, job_id: int) -> dict[str, Any] | None:
        answer = self.get(f"/slurmdb/{V}/job/{job_id}")
        jobs = answer.get("jobs") if isinstance(answer, dict) else None
        return jobs[-1] if jobs else None

    def wait(self, what: str, check: Callable[[], Any], timeout: float = 120, interval: float = 0.3) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise SystemExit(f"record: gave up waiting {timeout:.0f}s for {what}")
            time.sleep(interval)

    def wait_live(self, label: str, states: set[str], reason: str | None = None, timeout: float = 120) -> None:
        def check() -> bool:
            record = self.live(self.ids[label])
            if record is None or record["job_state"][0] not in states or "COMPLETING" in record["job_state"]:
                return False
            return reason is None or record.get("state_reason") == reason

        self.wait(f"job {label} ({self.ids[label]}) in {sorted(states)} {reason or ''}", check, timeout)

    def wait_purged(self, label: str, timeout: float = 120) -> None:
        job_id = self.ids[label]
        self.wait(f"job {label} ({job_id}) to leave the live queue", lambda: self.live(job_id) is None, timeout, 1)

    def wait_history_finished(self, label: str, timeout: float = 120) -> None:
        def check() -> bool:
            record = self.history(self.ids[label])
            return record is not None and record["state"]["current"][0] in FINISHED

        self.wait(f"the history of job {label} to say it ended", check, timeout)

    def wait_quiet_node(self, *own: str, timeout: float = 600) -> None:
        """No job but ``own`` waits, runs or completes: Slurm's main scheduler then starts the next job at
        once, as in the first recording (a busy lab leaves it to the backfill, which sets other flags)."""
        allowed = {self.ids[label] for label in own}

        def check() -> bool:
            answer = self.get(f"/slurm/{V}/jobs/")
            busy = [
                j["job_id"]
                for j in answer.get("jobs", [])
                if j["job_id"] not in allowed
                and (j["job_state"][0] in ("RUNNING", "PENDING", "SUSPENDED") or "COMPLETING" in j["job_state"])
            ]
            if busy:
                log(f"waiting for other jobs of the lab to end: {busy[:10]}")
            return not busy

        try:
            self.wait("a quiet node", check, timeout, interval=2)
        except SystemExit:
            log("the queue never emptied: recording anyway (the story check below will say what differs)")


def check_story(out: Path) -> list[str]:
    """What the tests rely on that a busy lab can change; empty when the recording followed the story."""

    def first(name: str) -> Any:
        return json.loads((out / f"{name}.json").read_text())["jobs"][0]

    problems = []
    started = (
        "48_slurmdb_job_A",
        "49_slurmdb_job_B_cancelled",
        "50_slurmdb_job_F_failed",
        "72_slurmdb_job_failed_exit3",
    )
    for name in (*started, "73_slurmdb_job_sigkill", "74_slurmdb_job_timeout", "75_slurmdb_job_paths"):
        if "STARTED_ON_SCHEDULE" not in first(name)["flags"]:
            problems.append(f"{name}: not started by the main scheduler ({first(name)['flags']})")
    for path in sorted(out.glob("*.json")):
        body = json.loads(path.read_text())
        for record in body.get("jobs", []) if isinstance(body, dict) else []:
            if "BACKFILL_ATTEMPTED" in (record.get("flags") or []):
                problems.append(f"{path.stem}: job {record.get('job_id')} went through the backfill scheduler")
    timeout = first("71_job_timeout_live")["exit_code"]
    if timeout["status"] != ["SIGNALED"] or timeout["signal"]["name"] != "TERM":
        problems.append(f"71_job_timeout_live: the time limit ended the job with {timeout}, not signal TERM")
    if json.loads((out / "82_slurmdb_jobs_state_no_window.json").read_text())["jobs"]:
        problems.append("82_slurmdb_jobs_state_no_window: found jobs")
    names = {j["name"] for j in json.loads((out / "47_jobs_all_after_purge.json").read_text())["jobs"]}
    if not {"t_held", "big"} <= names:
        problems.append(f"47_jobs_all_after_purge: H or the BadConstraints job is missing ({sorted(names)})")
    return problems


def record(rec: Recorder, root_token: str, short_token: str, ctld_only_url: str, openapi_dir: Path) -> None:
    ids = rec.ids
    rec.call("01_ping", "GET", f"/slurm/{V}/ping")
    rec.call("02_openapi_spec_noauth", "GET", "/openapi/v3", token=None)
    record_openapi(rec, openapi_dir)
    rec.call("04_diag", "GET", f"/slurm/{V}/diag")
    rec.call("05_partitions", "GET", f"/slurm/{V}/partitions")
    rec.call("06_nodes", "GET", f"/slurm/{V}/nodes")

    # Jobs A (completes), B (cancelled while running), F (exit 3, waits behind A and B), H (held).
    rec.wait_quiet_node()
    rec.submit("A", "07_submit_script_toplevel", JOB_A)
    rec.call("08_job_A_immediately_after_submit", "GET", f"/slurm/{V}/job/{ids['A']}")
    rec.wait_live("A", {"RUNNING"})
    rec.call("09_job_A_running", "GET", f"/slurm/{V}/job/{ids['A']}")
    rec.call("10_jobs_all_while_A_running", "GET", f"/slurm/{V}/jobs/")
    rec.call("11_jobs_update_time_past", "GET", f"/slurm/{V}/jobs/?update_time={int(time.time()) - 60}")
    for _ in range(10):  # the lab is shared: retry until nothing changed since the last update
        last = rec.get(f"/slurm/{V}/jobs/")["last_update"]["number"]
        answer = rec.call("12_jobs_update_time_now_nochange", "GET", f"/slurm/{V}/jobs/?update_time={last}")
        if answer.get("warnings"):
            break
        time.sleep(0.5)
    rec.call("13_jobs_flags_detail", "GET", f"/slurm/{V}/jobs/?flags=DETAIL")
    script_b = "#!/bin/bash\necho long\nsleep 120\n"
    rec.wait_quiet_node("A")
    rec.submit("B", "14_submit_script_in_job", {"job": job("t_jobscript", **SIZES, **LIMIT_2, script=script_b)})
    script_f = "#!/bin/bash\necho failing >&2\nexit 3\n"
    rec.submit("F", "15_submit_failing_exit3", {"job": job("t_fail", **LIMIT_2, script=script_f)})
    rec.wait_live("F", {"PENDING"}, "Resources", timeout=30)
    rec.call("17_job_F_pending_queued_behind_A_B", "GET", f"/slurm/{V}/job/{ids['F']}")
    rec.wait_live("B", {"RUNNING"})
    rec.call("18_job_B_running", "GET", f"/slurm/{V}/job/{ids['B']}")
    rec.wait_live("A", {"COMPLETED"})
    rec.call("16_job_A_completed", "GET", f"/slurm/{V}/job/{ids['A']}")
    rec.call("19_cancel_running_B", "DELETE", f"/slurm/{V}/job/{ids['B']}")
    rec.wait_live("B", {"CANCELLED"}, timeout=10)  # its COMPLETING flag gone, as the first recording saw it
    rec.call("20_job_B_right_after_cancel", "GET", f"/slurm/{V}/job/{ids['B']}")
    time.sleep(2)
    rec.call("21_job_B_after_cancel_2s", "GET", f"/slurm/{V}/job/{ids['B']}")
    rec.call("22_cancel_completed_A", "DELETE", f"/slurm/{V}/job/{ids['A']}")
    rec.call("23_cancel_already_cancelled_B", "DELETE", f"/slurm/{V}/job/{ids['B']}")
    rec.call("24_cancel_unknown_999999", "DELETE", f"/slurm/{V}/job/999999")
    rec.call("25_job_unknown_999999", "GET", f"/slurm/{V}/job/999999")
    rec.call("26_job_nonnumeric_abc", "GET", f"/slurm/{V}/job/abc")

    # MinJobAge: A, B and F leave the live queue (the history keeps them) before the next jobs come.
    for label in ("A", "B", "F"):
        rec.wait_purged(label)
    rec.submit("H", "27_submit_held", {"job": job("t_held", hold=True, script="#!/bin/bash\nsleep 1\n")})
    rec.call("28_job_held_pending", "GET", f"/slurm/{V}/job/{ids['H']}")
    rec.call("29_cancel_pending_held", "DELETE", f"/slurm/{V}/job/{ids['H']}")
    rec.call("30_cancel_with_signal_query", "DELETE", f"/slurm/{V}/job/{ids['H']}?signal=SIGKILL")

    # What a submit is refused for, and what it is not.
    true = "#!/bin/bash\ntrue\n"
    noenv = {key: value for key, value in job("noenv").items() if key != "environment"}
    over_max = {"set": True, "number": 999999999}
    submits: list[tuple[str, str, Any]] = [
        ("bad_time_limit", "31_submit_bad_time_limit_string", {"job": job("bad", time_limit="abc"), "script": true}),
        ("tl_int", "32_submit_time_limit_plain_int", {"job": job("tl_int", time_limit=1), "script": true}),
        ("partition", "33_submit_unknown_partition", {"job": job("bad", partition="nosuchpart"), "script": true}),
        ("no_script", "34_submit_no_script", {"job": job("bad")}),
        ("noenv", "35_submit_no_environment", {"job": noenv, "script": true}),
        ("unk", "37_submit_unknown_field", {"job": job("unk", no_such_field=42), "script": true}),
        ("big", "38_submit_too_many_nodes", {"job": job("big", minimum_nodes=5), "script": true}),
        ("tl", "39_submit_time_limit_over_max", {"job": job("tl", time_limit=over_max), "script": true}),
    ]
    for label, name, body in submits:
        rec.submit(label, name, body)
    rec.call("36_submit_invalid_json", "POST", f"/slurm/{V}/job/submit", raw=b'{"job": {"name": "x",')

    # Tokens and versions.
    rec.call("40_ping_no_token", "GET", f"/slurm/{V}/ping", token=None)
    rec.call("41_ping_bad_token", "GET", f"/slurm/{V}/ping", token="not-a-token")
    rec.submit("ROOT", "42_submit_as_root", JOB_A, token=root_token)
    rec.call("43_other_versions_ping_v0.0.41", "GET", "/slurm/v0.0.41/ping")
    rec.call("44_other_versions_ping_v0.0.40", "GET", "/slurm/v0.0.40/ping")
    rec.call("45_unknown_version_ping_v0.0.39", "GET", "/slurm/v0.0.39/ping")

    rec.call("46_job_A_after_purge_from_live_queue", "GET", f"/slurm/{V}/job/{ids['A']}")
    rec.call("47_jobs_all_after_purge", "GET", f"/slurm/{V}/jobs/")
    for label in ("A", "B", "F", "H"):
        rec.wait_history_finished(label)
    rec.call("48_slurmdb_job_A", "GET", f"/slurmdb/{V}/job/{ids['A']}")
    rec.call("49_slurmdb_job_B_cancelled", "GET", f"/slurmdb/{V}/job/{ids['B']}")
    rec.call("50_slurmdb_job_F_failed", "GET", f"/slurmdb/{V}/job/{ids['F']}")
    rec.call("51_slurmdb_job_H_cancelled_pending", "GET", f"/slurmdb/{V}/job/{ids['H']}")
    rec.call("52_slurmdb_job_unknown_999999", "GET", f"/slurmdb/{V}/job/999999")
    rec.call("53_slurmdb_jobs_user_tester", "GET", f"/slurmdb/{V}/jobs/?users=tester")
    rec.call("54_slurmdb_jobs_all", "GET", f"/slurmdb/{V}/jobs/")
    rec.call("55_slurmdb_config_clusters", "GET", f"/slurmdb/{V}/clusters/")

    # Bad, expired and missing tokens.
    bad = "eyJhbGciOiJIUzI1NiJ9.eyJleHAiOjEsInN1biI6InRlc3RlciJ9.bad-signature"
    bad_submit = {"job": job("badtok", time_limit={"set": True, "number": 1}), "script": true}
    rec.call("60_submit_bad_token", "POST", f"/slurm/{V}/job/submit", bad_submit, token=bad)
    rec.call("61_job_get_bad_token", "GET", f"/slurm/{V}/job/{ids['A']}", token=bad)
    rec.wait("the short token to expire", lambda: time.time() > rec.started + 3, interval=0.5)
    rec.call("62_jobs_expired_token", "GET", f"/slurm/{V}/jobs/", token=short_token)
    rec.call("63_slurmdb_jobs_expired_token", "GET", f"/slurmdb/{V}/jobs/", token=short_token)
    rec.call("64_slurmdb_job_bad_token", "GET", f"/slurmdb/{V}/job/{ids['A']}", token=bad)
    rec.call("65_slurmdb_no_token", "GET", f"/slurmdb/{V}/job/{ids['A']}", token=None)

    # How jobs end: exit 3, SIGKILL, a time limit, output paths; two at a time on an empty node, so that
    # Slurm's main scheduler starts each at once (not its backfill, which sets other flags).
    rec.wait_quiet_node()
    rec.submit("F2", "_submit_F2", {"job": job("t_fail", **LIMIT_2, script=script_f)})
    rec.submit("K", "_submit_K", {"job": job("t_sigkill", **LIMIT_2, script="#!/bin/bash\nkill -9 $$\n")})
    rec.wait_live("F2", {"FAILED"})
    rec.call("66_job_failed_exit3_live", "GET", f"/slurm/{V}/job/{ids['F2']}")
    rec.wait_live("K", {"FAILED"})
    rec.call("67_job_sigkill_live", "GET", f"/slurm/{V}/job/{ids['K']}")
    limit_1 = {"time_limit": {"set": True, "number": 1}}
    rec.wait_quiet_node()
    rec.submit("T", "_submit_T", {"job": job("t_timeout", **limit_1, script="#!/bin/bash\nsleep 300\n")})
    paths = {"standard_output": "/tmp/paths-%j.out", "standard_error": "/tmp/paths-%j.err"}
    script_p = "#!/bin/bash\necho out\necho err >&2\n"
    rec.submit("P", "_submit_P", {"job": job("t_paths", **LIMIT_2, **paths, script=script_p)})
    rec.wait_live("T", {"RUNNING"})
    rec.wait("the history to hold T as running", lambda: running_in_history(rec, ids["T"]), interval=0.5)
    rec.call("68_slurmdb_job_running", "GET", f"/slurmdb/{V}/job/{ids['T']}")
    rec.call("69_job_timeout_candidate_running", "GET", f"/slurm/{V}/job/{ids['T']}")
    rec.wait_live("P", {"COMPLETED"})
    rec.call("70_job_with_stdout_stderr_paths", "GET", f"/slurm/{V}/job/{ids['P']}")
    rec.wait_live("T", {"TIMEOUT"}, timeout=240)  # a 1-minute limit ends about 86 s after the start
    rec.call("71_job_timeout_live", "GET", f"/slurm/{V}/job/{ids['T']}")
    for label in ("F2", "K", "T", "P"):
        rec.wait_history_finished(label)
    rec.call("72_slurmdb_job_failed_exit3", "GET", f"/slurmdb/{V}/job/{ids['F2']}")
    rec.call("73_slurmdb_job_sigkill", "GET", f"/slurmdb/{V}/job/{ids['K']}")
    rec.call("74_slurmdb_job_timeout", "GET", f"/slurmdb/{V}/job/{ids['T']}")
    rec.call("75_slurmdb_job_paths", "GET", f"/slurmdb/{V}/job/{ids['P']}")

    # Query strings of the history and the live list, once T's end lies a while in the past (a state
    # query without a time window looks at "now" only).
    t_end = (rec.history(ids["T"]) or {}).get("time", {}).get("end", time.time())
    time.sleep(max(0.0, t_end + 15 - time.time()))
    db = f"/slurmdb/{V}/jobs/"
    window = f"start_time={rec.started - 600}&end_time={int(time.time()) + 60}"
    rec.call("76_slurmdb_jobs_by_state", "GET", f"{db}?state=TIMEOUT,FAILED")
    rec.call("80_slurmdb_jobs_state_csv_raw_comma", "GET", f"{db}?state=TIMEOUT,FAILED")
    rec.call("81_slurmdb_jobs_state_csv_pct2C", "GET", f"{db}?state=TIMEOUT%2CFAILED&{window}")
    rec.call("82_slurmdb_jobs_state_no_window", "GET", f"{db}?state=TIMEOUT")
    rec.call("83_slurmdb_jobs_state_with_window", "GET", f"{db}?state=TIMEOUT&{window}")
    rec.call("84_slurmdb_jobs_state_repeated_param", "GET", f"{db}?state=TIMEOUT&state=FAILED&{window}")
    rec.call("85_slurmdb_jobs_users_repeated_param", "GET", f"{db}?users=tester&users=root")
    rec.call("86_slurmdb_jobs_users_pct2C", "GET", f"{db}?users=tester%2Croot")
    rec.call("87_slurmdb_jobs_job_name", "GET", f"{db}?job_name=t_fail")
    rec.call("88_jobs_raw_comma_flags", "GET", f"/slurm/{V}/jobs/?flags=DETAIL,ALL")
    if ctld_only_url:
        rec.call(
            "90_slurmdb_job_when_slurmdbd_not_configured", "GET", f"/slurmdb/{V}/job/{ids['A']}", url=ctld_only_url
        )
    for scratch in rec.out.glob("_submit_*"):  # the submits of the second story are not scenarios
        scratch.unlink()
    (rec.out / "job_ids.json").write_text(json.dumps(ids, indent=2, sort_keys=True) + "\n")


def running_in_history(rec: Recorder, job_id: int) -> bool:
    record = rec.history(job_id)
    return record is not None and record["state"]["current"][0] == "RUNNING"


def record_openapi(rec: Recorder, openapi_dir: Path) -> None:
    """slurmrestd's own OpenAPI document: every data parser it loads (v0.0.40-42), both plugin sets."""
    status, text, ctype, took = rec.request("GET", "/openapi/v3")
    if status != 200:
        raise SystemExit(f"record: GET /openapi/v3 answered {status}: {text[:200]}")
    (openapi_dir / f"{SPEC}.json").write_text(
        json.dumps(whole_numbers(json.loads(text)), indent=2, ensure_ascii=False) + "\n"
    )
    meta = [
        "method: GET",
        f"url: {rec.url}/openapi/v3",
        f"http_status: {status}",
        f"time_total_s+content_type: {took:.6f} {ctype}",
        f"captured_at_epoch: {int(time.time())}",
    ]
    (openapi_dir / f"{SPEC}.meta").write_text("\n".join(meta) + "\n")
    log(f"{SPEC}.json: HTTP {status}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = Path(__file__).resolve().parent
    parser.add_argument("dir", nargs="?", type=Path, default=here.parent / "tests" / "fixtures")
    target = parser.parse_args().dir.resolve()
    env = os.environ
    rec_token = Path(env["SLURM_LAB_TOKEN_FILE"]).read_text().strip()
    with tempfile.TemporaryDirectory(prefix="slurm-record-") as tmp:
        staging = Path(tmp)
        (staging / RESPONSES).mkdir()
        (staging / OPENAPI).mkdir()
        rec = Recorder(env["SLURM_LAB_URL"], rec_token, staging / RESPONSES)
        record(
            rec,
            env["SLURM_LAB_ROOT_TOKEN"],
            env["SLURM_LAB_SHORT_TOKEN"],
            env.get("SLURM_LAB_CTLD_ONLY_URL", ""),
            staging / OPENAPI,
        )
        problems = check_story(staging / RESPONSES)
        if problems:
            kept_at = Path(tempfile.mkdtemp(prefix="slurm-record-rejected-"))
            shutil.copytree(staging, kept_at, dirs_exist_ok=True)
            raise SystemExit(
                "record: the lab was too busy, this recording left the story the tests know; record again on a "
                f"quiet lab ({target} is unchanged, the recording is in {kept_at}):\n  " + "\n  ".join(problems)
            )
        # Only a complete recording that followed the story replaces the old one.
        (target / OPENAPI).mkdir(parents=True, exist_ok=True)
        kept = here.parent / "tests" / "fixtures" / OPENAPI
        if kept.resolve() != (target / OPENAPI).resolve():  # a recording elsewhere gets the kept documents too
            for path in kept.iterdir():
                if not path.name.startswith(SPEC):
                    shutil.copy2(path, target / OPENAPI / path.name)
        for path in (staging / OPENAPI).iterdir():
            shutil.copy2(path, target / OPENAPI / path.name)
        shutil.rmtree(target / RESPONSES, ignore_errors=True)
        shutil.copytree(staging / RESPONSES, target / RESPONSES)
    log(f"{len(list((target / RESPONSES).glob('*.meta')))} answers in {target / RESPONSES}; jobs {rec.ids}")


if __name__ == "__main__":
    main()
