"""The output wrapper judged by real Slurm: the same script run wrapped and unwrapped, compared.

Each test submits the script twice straight to slurmrestd (no Airflow in between): once as
``wrap_script`` makes it (what the operator sends with ``report_output=True``), once untouched, and
compares what Slurm records (exit code, signal, state) and what the script saw (files it writes into
the lab's ``/tmp``).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi._compat import sensitive_name_parts
from airflow_provider_slurmapi.slurm.jobs.extra import read_extra
from airflow_provider_slurmapi.slurm.submit.job_output import Redaction, wrap_script
from tests.live_slurm.lab import LAB_CHROOT_TMP, Lab, V
from tests.waiting import wait_until

pytestmark = pytest.mark.slurm

ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")


def _outcome(record: dict[str, Any]) -> tuple[str, int | None, int | None]:
    """What Slurm's history records of one job (or array task): state, return code, signal."""
    exit_code = record.get("exit_code") or {}
    rc = exit_code.get("return_code") or {}
    sig = (exit_code.get("signal") or {}).get("id") or {}
    return (
        record["state"]["current"][0],
        rc.get("number") if rc.get("set") else None,
        sig.get("number") if sig.get("set") else None,
    )


def _history_tasks(lab: Lab, job_id: int, count: int, timeout: float) -> dict[int, tuple[str, int | None, int | None]]:
    """Every task of an array, once all ``count`` of them have ended in the history: task id -> outcome."""

    def ended_tasks() -> dict[int, tuple[str, int | None, int | None]]:
        _, body = lab.call("GET", f"/slurmdb/{V}/job/{job_id}")
        jobs = body.get("jobs", []) if isinstance(body, dict) else []
        return {
            int(job["array"]["task_id"]["number"]): _outcome(job)
            for job in jobs
            if job["state"]["current"][0] in ENDED and (job.get("array") or {}).get("task_id", {}).get("set")
        }

    done: dict[int, tuple[str, int | None, int | None]] = wait_until(
        lambda: tasks if len(tasks := ended_tasks()) >= count else None,
        f"array {job_id}: all {count} tasks ended in the history",
        timeout=timeout,
        every=3,
    )
    return done


def _ended(lab: Lab, job_id: int, timeout: float = 120) -> tuple[str, int | None, int | None]:
    """One job's outcome, from the history once it has ended there."""

    def last_record() -> Any:
        _, body = lab.call("GET", f"/slurmdb/{V}/job/{job_id}")
        jobs = body.get("jobs", []) if isinstance(body, dict) else []
        return jobs[-1] if jobs and jobs[-1]["state"]["current"][0] in ENDED else None

    return _outcome(wait_until(last_record, f"job {job_id} ended in the history", timeout=timeout, every=1))


def _wait_for(path: Path, timeout: float = 120) -> None:
    wait_until(path.exists, f"{path} appeared", timeout=timeout, every=0.3)


def _extra(lab: Lab, job_id: int) -> str:
    record = lab.final(job_id)
    return str(record.raw.get("extra") or "")


def _both(lab: Lab, script: str, **job: Any) -> tuple[int, int]:
    """Submit ``script`` wrapped and unwrapped; their job ids."""
    return lab.submit(wrap_script(script), **job), lab.submit(script, **job)


# Every code 0-255 is 512 array tasks on the lab's 2 CPUs, about 13 minutes: run with SLURM_LIVE_FULL=1.
# By default the codes around each boundary: 0-3, what the wrapper itself could mean (125-127, its
# own failure exit), the signal range's edges (128-132, 134, 137, 139, 143), SIGSTOP/SIGTSTP-like
# codes that once hung the wrapper (147, 148), and the end of the range.
EXIT_CODES = (
    list(range(256))
    if os.environ.get("SLURM_LIVE_FULL") == "1"
    else [0, 1, 2, 3, 125, 126, 127, 128, 129, 130, 131, 132, 134, 137, 139, 143, 147, 148, 159, 160, 254, 255]
)


def test_every_exit_code_0_to_255_is_recorded_as_unwrapped(lab: Lab) -> None:
    """Array tasks ``exit $SLURM_ARRAY_TASK_ID``, wrapped and unwrapped: Slurm records the same for each
    (all 256 codes with SLURM_LIVE_FULL=1, else the boundary codes of EXIT_CODES)."""
    script = "#!/bin/bash\nexit $SLURM_ARRAY_TASK_ID\n"
    array = ",".join(str(code) for code in EXIT_CODES)
    wrapped, plain = _both(lab, script, array=array, name="wrapper-exit-codes")
    got = _history_tasks(lab, wrapped, len(EXIT_CODES), timeout=1500)
    want = _history_tasks(lab, plain, len(EXIT_CODES), timeout=600)
    assert want[147] == ("FAILED", 147, None)  # what the comparison stands on
    assert sorted(want) == EXIT_CODES
    differ = {task: (got[task], want[task]) for task in EXIT_CODES if got[task] != want[task]}
    assert not differ, f"wrapped != unwrapped for {len(differ)} codes, e.g. {sorted(differ.items())[:5]}"


SIGNALS = ("TERM", "KILL", "INT", "SEGV", "ABRT", "HUP", "QUIT", "USR1", "XCPU", "PIPE")


def test_death_by_signal_is_recorded_as_unwrapped(lab: Lab) -> None:
    """A script that kills itself with each signal: the same state, exit code and signal wrapped or not."""
    script = (
        "#!/bin/bash\nsigs=(" + " ".join(SIGNALS) + ")\necho dying >&2\nkill -${sigs[$SLURM_ARRAY_TASK_ID]} $$\n"
        "sleep 5\nexit 3\n"
    )
    wrapped, plain = _both(lab, script, array=f"0-{len(SIGNALS) - 1}", name="wrapper-signals")
    got = _history_tasks(lab, wrapped, len(SIGNALS), timeout=600)
    want = _history_tasks(lab, plain, len(SIGNALS), timeout=600)
    assert want[0][2] == 15  # the unwrapped script died of SIGTERM: the comparison is about signals
    assert {SIGNALS[t]: got[t] for t in got} == {SIGNALS[t]: want[t] for t in want}


def _signal_counter(tag: str, signal: str) -> str:
    """A script that logs each ``signal`` it receives into /tmp, then ends 2 s after the first one."""
    return f"""#!/bin/bash
f=/tmp/{tag}-$SLURM_JOB_ID.got
trap 'echo {signal} >> "$f"' {signal}
touch /tmp/{tag}-$SLURM_JOB_ID.ready
n=0
while [ ! -s "$f" ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n + 1)); done
for i in $(seq 20); do sleep 0.1; done
exit 0
"""


def _received(lab: Lab, tag: str, job_id: int, send: str, timeout: float = 120) -> list[str]:
    """Wait until the job is running its loop, send it the signal (a REST DELETE), and return what it logged."""
    _wait_for(LAB_CHROOT_TMP / f"{tag}-{job_id}.ready", timeout)
    status, body = lab.call("DELETE", f"/slurm/{V}/job/{job_id}{send}")
    assert status == 200, body
    # Not _ended: a cancelled job is CANCELLED in the history at once, while its processes may still be
    # running their traps (COMPLETING). Once COMPLETING is gone, every process of the job has exited.
    lab.final(job_id, timeout=120)
    got = LAB_CHROOT_TMP / f"{tag}-{job_id}.got"
    return got.read_text().split() if got.exists() else []


@pytest.mark.parametrize(
    ("signal", "send", "expected"),
    [
        pytest.param("TERM", "", ["TERM"], id="scancel-every-process"),
        pytest.param("USR1", "?signal=USR1&flags=BATCH_JOB", ["USR1"], id="scancel-b-usr1"),
        pytest.param("XCPU", "?signal=XCPU&flags=BATCH_JOB", ["XCPU"], id="scancel-b-xcpu"),
        pytest.param("USR2", "?signal=USR2&flags=FULL_JOB", ["USR2"], id="scancel-f-usr2"),
    ],
)
def test_signals_reach_the_script_as_unwrapped(lab: Lab, signal: str, send: str, expected: list[str]) -> None:
    """scancel (TERM to every process), ``scancel -b`` (the batch shell only), ``scancel -f`` (its process group)."""
    tag = f"wrsig-{uuid.uuid4().hex[:8]}"
    script = _signal_counter(tag, signal)
    wrapped, plain = _both(lab, script, name="wrapper-signal", time_limit=5)
    unwrapped_saw = _received(lab, tag, plain, send)
    wrapped_saw = _received(lab, tag, wrapped, send)
    assert unwrapped_saw == expected
    assert wrapped_saw == unwrapped_saw


@pytest.fixture
def full_tmpdir() -> Iterator[Path]:
    """A 16 KiB tmpfs inside the lab's /tmp, filled to the last byte (needs root to mount)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    path = LAB_CHROOT_TMP / f"wrfull-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k,mode=1777", "tmpfs", str(path)], check=True)
    try:
        subprocess.run(["dd", "if=/dev/zero", f"of={path}/filler", "bs=1k"], capture_output=True)
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)
        path.rmdir()


def test_with_tmpdir_full_the_script_runs_whole_or_not_at_all(lab: Lab, full_tmpdir: Path) -> None:
    """TMPDIR on a full tmpfs: the wrapped script does not run (exit 125, says why); unwrapped it runs to exit 1."""
    tag = f"wrfull-{uuid.uuid4().hex[:8]}"
    long_path = "/tmp/" + tag + "/" + "x" * 4000  # a cut copy would stop in here, as in the issue
    script = f"#!/bin/bash\ntouch /tmp/{tag}-$SLURM_JOB_ID.ran\nrm -rf {long_path}\nexit 1\n"
    env = ["PATH=/usr/local/bin:/usr/bin:/bin", f"TMPDIR=/tmp/{full_tmpdir.name}"]
    wrapped, plain = _both(lab, script, name="wrapper-tmpfull", environment=env)
    assert _ended(lab, plain) == ("FAILED", 1, None)
    assert (LAB_CHROOT_TMP / f"{tag}-{plain}.ran").exists()
    assert _ended(lab, wrapped) == ("FAILED", 125, None)
    assert not (LAB_CHROOT_TMP / f"{tag}-{wrapped}.ran").exists(), "a part of the script ran"
    extra = read_extra(_extra(lab, wrapped)).output or ""
    assert "could not be copied whole" in extra and "did not run" in extra, extra


def test_sensitive_values_and_control_sequences_never_reach_extra(lab: Lab) -> None:
    """A failing job prints its token and escape sequences on stderr: Extra has the line, not the token."""
    token = "tok-" + uuid.uuid4().hex
    passed = "pw-" + uuid.uuid4().hex  # a value the operator knows Airflow masks, under a plain name
    parts, min_length = sensitive_name_parts()
    script = (
        "#!/bin/bash\n"
        "printf 'step 1 \\033[31mred\\033[0m \\033]0;window title\\007done\\n' >&2\n"
        'echo "login refused: MY_API_TOKEN=$MY_API_TOKEN db=$DB_URI (check the token)" >&2\n'
        "exit 3\n"
    )
    env = ["PATH=/usr/local/bin:/usr/bin:/bin", f"MY_API_TOKEN={token}", f"DB_URI={passed}"]
    job_id = lab.submit(
        wrap_script(script, Redaction(names=("DB_URI",), parts=parts, min_length=min_length)),
        name="wrapper-redact",
        environment=env,
    )
    assert _ended(lab, job_id) == ("FAILED", 3, None)
    extra = _extra(lab, job_id)
    assert token not in extra and passed not in extra
    assert "\x1b" not in extra and "\x07" not in extra
    assert extra == "airflow-output:\nstep 1 red done\nlogin refused: MY_API_TOKEN=*** db=*** (check the token)"
    # The same as `scontrol show job` shows it to any user (PrivateData=none): read with scontrol too.
    shown = subprocess.run(
        ["chroot", str(LAB_CHROOT_TMP.parent), "scontrol", "show", "job", str(job_id)],
        capture_output=True,
        text=True,
        check=False,
    )
    if shown.returncode == 0:
        assert token not in shown.stdout and "MY_API_TOKEN=***" in shown.stdout


def test_the_time_limit_warning_for_the_batch_shell_reaches_the_script(lab: Lab) -> None:
    """``--signal=B:XCPU@60`` with a 1-minute limit: Slurm signals the batch shell alone, within its ~30 s check."""
    tag = f"wrwarn-{uuid.uuid4().hex[:8]}"
    warning = {
        "time_limit": 1,
        "kill_warning_signal": "XCPU",
        "kill_warning_delay": {"set": True, "number": 60},
        "kill_warning_flags": ["BATCH_JOB"],
    }
    wrapped, plain = _both(lab, _signal_counter(tag, "XCPU"), name="wrapper-warning", **warning)
    outcomes = {}
    for job_id in (plain, wrapped):
        outcomes[job_id] = _ended(lab, job_id, timeout=300)
    got = {job_id: (LAB_CHROOT_TMP / f"{tag}-{job_id}.got") for job_id in (plain, wrapped)}
    saw = {job_id: path.read_text().split() if path.exists() else [] for job_id, path in got.items()}
    assert saw[plain] == ["XCPU"] and outcomes[plain] == ("COMPLETED", 0, None)
    assert (saw[wrapped], outcomes[wrapped]) == (saw[plain], outcomes[plain])
