"""Issue 23's cases judged by real Slurm: each script run wrapped, wrapped on a "node without python3",
and unwrapped, and compared.

"Without python3" is the wrapper made with ``python_paths=NO_PYTHON``: the batch shell looks for the
supervisor's python3 at fixed paths baked into the batch script when the DAG's code wraps it, never
at a path the job's environment could name, so a test names paths that do not exist on the node.

Scripts that pkill python3 scope it to their own session (``-s 0``, their job), as a job on a shared
node would have to: the lab's other jobs (other developers') run as the same user.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from airflow_provider_slurmapi._compat import sensitive_name_parts
from airflow_provider_slurmapi.slurm.jobs.extra import read_extra
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob
from airflow_provider_slurmapi.slurm.node.job_supervisor import WINDOW_BYTES
from airflow_provider_slurmapi.slurm.submit.job_output import Redaction, wrap_script
from tests.live_slurm.lab import LAB_CHROOT_TMP, Lab, V
from tests.live_slurm.test_wrapper_live import _ended, _extra, _wait_for
from tests.waiting import wait_until

pytestmark = pytest.mark.slurm

NO_PYTHON = ("/nonexistent/bin/python3",)
WAYS = ("wrapped", "no-python3", "unwrapped")
SECRET = "s3cr3t-QWERTY-uiop-98765"  # 24 characters, as in the issue
PATH = "PATH=/usr/local/bin:/usr/bin:/bin"


def _redaction() -> Redaction:
    parts, min_length = sensitive_name_parts()
    return Redaction(parts=parts, min_length=min_length)


def _submit(lab: Lab, way: str, script: str, **job: object) -> int:
    if way == "wrapped":
        sent = wrap_script(script, _redaction())
    elif way == "no-python3":
        sent = wrap_script(script, _redaction(), python_paths=NO_PYTHON)
    else:
        sent = script
    return lab.submit(sent, name=f"hardening-{way}", **job)


def _all_ways(lab: Lab, script: str, **job: object) -> dict[str, int]:
    return {way: _submit(lab, way, script, **job) for way in WAYS}


def _private_tmp(tag: str) -> Path:
    """A TMPDIR of the job's own inside the lab's /tmp, to see what the wrapper leaves there."""
    path = LAB_CHROOT_TMP / tag
    path.mkdir()
    path.chmod(0o1777)
    return path


def _job(lab: Lab, job_id: int) -> SlurmJob:
    record = lab.final(job_id)
    return SlurmJob.from_live(record.raw) if record.source == "live" else SlurmJob.from_history(record.raw)


def _pieces(text: str, length: int = 4) -> list[str]:
    return [text[i : i + length] for i in range(len(text) - length + 1)]


CANARY = """#!/bin/bash
f=/tmp/{tag}-$SLURM_JOB_ID
trap 'echo USR1 >> $f.got' USR1
trap 'echo PIPE >> $f.got' PIPE
{kill}
touch $f.ready
n=0
while [ ! -s $f.got ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
sleep 2
exit 0
"""


# The canary SIGKILLed by pid: the children of the script's parent but the script, when that parent is the
# supervisor (wrapped); unwrapped (and in the no-python3 fallback) the parent is slurmstepd: nothing to kill.
KILL_THE_CANARY = (
    'if [ "$(cat /proc/$PPID/comm)" != slurmstepd ]; then\n'
    '  for p in $(pgrep -P $PPID); do [ "$p" != $$ ] && kill -KILL "$p"; done\n'
    "fi"
)


@pytest.mark.parametrize("kill", ["pkill -s 0 python3", KILL_THE_CANARY], ids=["pkill-python3", "canary-sigkilled"])
def test_the_canary_s_death_then_scancel_batch_usr1_ends_as_unwrapped(lab: Lab, kill: str) -> None:
    """The script pkills python3 (or the canary itself), then ``scancel --batch --signal=USR1``: USR1 once,
    no SIGPIPE, and the job ends COMPLETED as unwrapped (it stayed RUNNING, spinning, before)."""
    tag = f"hdcanary-{uuid.uuid4().hex[:8]}"
    jobs = _all_ways(lab, CANARY.format(tag=tag, kill=kill), time_limit=5)
    seen, outcomes = {}, {}
    for way, job_id in jobs.items():
        _wait_for(LAB_CHROOT_TMP / f"{tag}-{job_id}.ready")
        status, body = lab.call("DELETE", f"/slurm/{V}/job/{job_id}?signal=USR1&flags=BATCH_JOB")
        assert status == 200, body
        outcomes[way] = _ended(lab, job_id)
        got = LAB_CHROOT_TMP / f"{tag}-{job_id}.got"
        seen[way] = got.read_text().split() if got.exists() else []
    assert seen["unwrapped"] == ["USR1"] and outcomes["unwrapped"] == ("COMPLETED", 0, None)
    assert seen == {way: ["USR1"] for way in WAYS}, seen
    assert outcomes == dict.fromkeys(WAYS, outcomes["unwrapped"]), outcomes


def test_a_pkill_9_python3_in_the_script_ends_as_unwrapped(lab: Lab) -> None:
    """``pkill -9 python3`` (its job's): COMPLETED as unwrapped, not FAILED 0:9 (the supervisor was python3)."""
    script = "#!/bin/bash\npkill -9 -s 0 python3\nsleep 1\necho still here >&2\nexit 0\n"
    jobs = _all_ways(lab, script, time_limit=3)
    outcomes = {way: _ended(lab, job_id) for way, job_id in jobs.items()}
    assert outcomes == dict.fromkeys(WAYS, ("COMPLETED", 0, None)), outcomes


# The junk after the secret is sized so that the 64 KiB window the supervisor reads starts in the middle
# of the secret: the window cuts it, and normalisation would then take away the junk.
JUNK_SCRIPT = """#!/bin/bash
tail=$'\\nError: refused\\n'
n=$(( {window} - ${{#MY_API_TOKEN}} / 2 - ${{#tail}} ))
printf 'token=%s' "$MY_API_TOKEN" >&2
case {kind} in
bars) yes $'\\r[##########] 50%' | tr -d '\\n' | head -c $n ;;
ansi) yes $'\\e[31m\\e[1m\\e[0m' | tr -d '\\n' | head -c $n ;;
nul) head -c $n /dev/zero ;;
blank) yes '' | head -c $n ;;
esac >&2
printf '%s' "$tail" >&2
exit 1
"""


# The window the supervisor read before (4 x 1,008 + 2 x 24 bytes: the 16 of 24 characters), and its own.
@pytest.mark.parametrize("window", [4 * 1008 + 2 * len(SECRET), WINDOW_BYTES], ids=["old-window", "window"])
@pytest.mark.parametrize("kind", ["bars", "ansi", "nul", "blank"])
def test_a_secret_cut_by_the_read_window_never_reaches_extra(lab: Lab, kind: str, window: int) -> None:
    script = JUNK_SCRIPT.format(window=window, kind=kind)
    jobs = _all_ways(lab, script, environment=[PATH, f"MY_API_TOKEN={SECRET}"])
    outcomes = {way: _ended(lab, job_id) for way, job_id in jobs.items()}
    assert outcomes == dict.fromkeys(WAYS, ("FAILED", 1, None)), outcomes
    extras = {way: _extra(lab, job_id) for way, job_id in jobs.items()}
    leaked = {way: [p for p in _pieces(SECRET) if p in extra] for way, extra in extras.items()}
    assert leaked == {way: [] for way in WAYS}, (leaked, extras)
    assert (read_extra(extras["wrapped"]).output or "").endswith("Error: refused"), extras["wrapped"]
    assert "no python3 at /nonexistent/bin/python3" in extras["no-python3"]
    assert extras["unwrapped"] == ""


def test_a_secret_value_ending_in_cr_never_reaches_extra(lab: Lab) -> None:
    """A value read from a CRLF file ends in \\r; printed, the line loses it: still redacted."""
    script = '#!/bin/bash\necho "token=$MY_API_TOKEN" >&2\necho "next line" >&2\nexit 1\n'
    jobs = _all_ways(lab, script, environment=[PATH, f"MY_API_TOKEN={SECRET}\r"])
    outcomes = {way: _ended(lab, job_id) for way, job_id in jobs.items()}
    assert outcomes == dict.fromkeys(WAYS, ("FAILED", 1, None)), outcomes
    extras = {way: _extra(lab, job_id) for way, job_id in jobs.items()}
    assert extras["wrapped"] == "airflow-output:\ntoken=***\nnext line", extras["wrapped"]
    assert all(SECRET[:8] not in extra for extra in extras.values()), extras


def test_unicode_controls_and_unterminated_escapes_are_stripped(lab: Lab) -> None:
    script = (
        "#!/bin/bash\n"
        "printf 'bidi \\u202eevil\\u202c zero\\u200bwidth \\u2066iso\\u2069 line\\u2028sep para\\u2029sep\\n' >&2\n"
        "printf 'link \\e]8;;https://example.invalid/\\nreal error: disk full\\nlast line\\n' >&2\n"
        "exit 2\n"
    )
    jobs = _all_ways(lab, script, environment=[PATH, "LANG=C.UTF-8"])
    outcomes = {way: _ended(lab, job_id) for way, job_id in jobs.items()}
    assert outcomes == dict.fromkeys(WAYS, ("FAILED", 2, None)), outcomes
    output = read_extra(_extra(lab, jobs["wrapped"])).output
    assert output == "bidi evil zerowidth iso linesep parasep\nlink \nreal error: disk full\nlast line", output


ENDINGS = {
    "exit": "exit 0\n",
    # The batch shell SIGKILLed: the supervisor when wrapped (the script's parent), the script itself when not.
    "batch-shell-sigkilled": (
        'if [ "$(cat /proc/$PPID/comm)" = slurmapi-wrap ]; then kill -KILL $PPID; else kill -KILL $$; fi\nsleep 2\n'
    ),
    "scancel-signal-kill": "touch /tmp/$TAG-$SLURM_JOB_ID.ready\nsleep 60\n",  # every process SIGKILLed
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_no_copy_of_the_script_is_left_after_any_ending(lab: Lab, ending: str) -> None:
    tag = f"hdcopy-{uuid.uuid4().hex[:8]}"
    script = f'#!/bin/bash\n# {tag}: the marker of this script\'s text\nfind "$TMPDIR" -type f >&2\n{ENDINGS[ending]}'
    tmp = {way: _private_tmp(f"{tag}-{way}") for way in WAYS}
    jobs = {
        way: _submit(lab, way, script, time_limit=3, environment=[PATH, f"TMPDIR=/tmp/{tag}-{way}", f"TAG={tag}"])
        for way in WAYS
    }
    if ending == "scancel-signal-kill":
        for job_id in jobs.values():
            _wait_for(LAB_CHROOT_TMP / f"{tag}-{job_id}.ready")
            status, body = lab.call("DELETE", f"/slurm/{V}/job/{job_id}?signal=KILL")
            assert status == 200, body
    for job_id in jobs.values():
        lab.final(job_id, timeout=120)

    def copies_left() -> dict[str, list[str]]:
        return {
            way: [str(p) for p in tmp[way].rglob("*") if p.is_file() and tag in p.read_text(errors="replace")]
            for way in WAYS
        }

    # The canary's clean-up after its supervisor's death is not instant.
    wait_until(lambda: not any(copies_left().values()), "no copy left", timeout=10, every=0.5, give_up=True)
    copies = copies_left()
    assert copies == {way: [] for way in WAYS}, copies
    for way in ("no-python3", "unwrapped"):
        assert list(tmp[way].iterdir()) == [], (way, list(tmp[way].rglob("*")))
    if ending != "scancel-signal-kill":  # every process killed at once: slurm_progress's directory may stay
        assert list(tmp["wrapped"].iterdir()) == [], list(tmp["wrapped"].rglob("*"))


def test_python3_is_taken_from_fixed_system_paths_never_the_jobs_path(lab: Lab) -> None:
    tag = f"hdpath-{uuid.uuid4().hex[:8]}"
    fake = _private_tmp(tag) / "bin"
    fake.mkdir(mode=0o755)
    (fake / "python3").write_text(f"#!/bin/sh\ntouch /tmp/{tag}/fake-python-ran\nexit 99\n")
    (fake / "python3").chmod(0o755)
    script = "#!/bin/bash\necho reported >&2\nexit 4\n"
    environment = [f"PATH=/tmp/{tag}/bin:/usr/local/bin:/usr/bin:/bin"]
    jobs = _all_ways(lab, script, environment=environment)
    outcomes = {way: _ended(lab, job_id) for way, job_id in jobs.items()}
    assert outcomes == dict.fromkeys(WAYS, ("FAILED", 4, None)), outcomes
    assert not (fake.parent / "fake-python-ran").exists(), "the job's PATH chose the supervisor's python3"
    assert read_extra(_extra(lab, jobs["wrapped"])).output == "reported"


def test_a_node_without_python3_is_named_in_the_failure_message(lab: Lab) -> None:
    script = "#!/bin/bash\necho 'ValueError: bad shard' >&2\nexit 3\n"
    jobs = _all_ways(lab, script)
    outcomes = {way: _ended(lab, job_id) for way, job_id in jobs.items()}
    assert outcomes == dict.fromkeys(WAYS, ("FAILED", 3, None)), outcomes
    messages = {
        way: _job(lab, job_id).failure_message(output_expected=way != "unwrapped") for way, job_id in jobs.items()
    }
    assert messages["wrapped"].endswith("ValueError: bad shard"), messages["wrapped"]
    assert "no python3 at /nonexistent/bin/python3 on node" in messages["no-python3"], messages["no-python3"]
    assert "report_output=True" in messages["unwrapped"] and "python3" in messages["unwrapped"]
    if os.environ.get("SLURMAPI_PRINT_MESSAGES"):
        print(messages)
