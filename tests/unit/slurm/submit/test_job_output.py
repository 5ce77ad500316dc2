"""The script wrapper and the reading of ``extra``, without a cluster (running jobs is judged elsewhere)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import pytest

from airflow_provider_slurmapi.slurm.jobs.controls import strip_controls
from airflow_provider_slurmapi.slurm.jobs.extra import read_extra
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob
from airflow_provider_slurmapi.slurm.jobs.states import JobState, JobStateInfo
from airflow_provider_slurmapi.slurm.node.job_supervisor import last_lines, mask_of, sensitive_values
from airflow_provider_slurmapi.slurm.submit.job_output import (
    EXTRA_LIMIT_BYTES,
    Redaction,
    interpreter_of,
    mentions_progress,
    posix_cksum,
    wrap_script,
)
from tests.waiting import wait_until


def test_sbatch_lines_stay_at_the_top_right_after_the_interpreter_line() -> None:
    script = "#!/usr/bin/env python3\n# a comment\n#SBATCH --time=5\n\n#SBATCH --mem=1G\nimport os\n#SBATCH --late=1\n"
    wrapped = wrap_script(script).split("\n")
    assert wrapped[:3] == ["#!/bin/sh", "#SBATCH --time=5", "#SBATCH --mem=1G"]
    assert "#SBATCH --late=1" not in wrapped[:10], "Slurm stops reading #SBATCH at the first command"


def test_the_script_is_embedded_unchanged_and_run_with_its_own_interpreter() -> None:
    script = "#!/usr/bin/env python3\nprint('$HOME `x` \\\\ @@SCRIPT@@')\n"
    wrapped = wrap_script(script)
    assert wrapped.endswith(script)
    assert "exec /usr/bin/env python3 /dev/fd/9 " in wrapped  # without python3: from the unlinked copy


@pytest.mark.parametrize(
    ("line", "argv"),
    [
        ("#!/bin/bash", ["/bin/bash"]),
        ("#! /bin/bash -l", ["/bin/bash", "-l"]),
        ("#!/usr/bin/env python3", ["/usr/bin/env", "python3"]),
        ("#!/usr/bin/env -S python3 -u", ["/usr/bin/env", "-S python3 -u"]),
    ],
)
def test_interpreter_line_is_read_as_the_kernel_reads_it(line: str, argv: list[str]) -> None:
    assert interpreter_of(line + "\necho\n") == argv


def test_read_extra_tells_output_from_progress() -> None:
    assert read_extra("airflow-output:\nline 1\nline 2").output == "line 1\nline 2"
    assert read_extra("airflow-output:").output == ""
    assert read_extra("epoch 3/10 loss=0.12").progress == "epoch 3/10 loss=0.12"
    assert read_extra("") == read_extra(None) == read_extra("  ")


def test_failure_message_ends_with_the_last_output_or_says_none_was_reported() -> None:
    failed = SlurmJob(job_id=4242, state_info=JobStateInfo(JobState.FAILED), source="live")
    with_output = SlurmJob.from_dict({**failed.to_dict(), "extra": "airflow-output:\nTraceback\nValueError: x"})
    assert with_output.failure_message().endswith("\nLast output of job 4242:\nTraceback\nValueError: x")
    assert "No output was reported by job 4242" in failed.failure_message(output_expected=True)
    assert "output" not in failed.failure_message().lower()


def test_progress_is_detected_in_scripts() -> None:
    assert mentions_progress("#!/bin/bash\nslurm_progress 'x'\n")
    assert mentions_progress("#!/usr/bin/env python3\nrun(['scontrol', 'update', 'extra=x'])\n")
    assert not mentions_progress("#!/bin/bash\necho hi\n")
    assert EXTRA_LIMIT_BYTES == 1024


PLACEHOLDERS = "@@SCRIPT@@ @@LIMIT@@ @@MARKER@@ @@SBATCH@@ @@DELIM@@ @@INTERPRETER@@ @@SETTINGS@@ @@START@@ @@SIZE@@"


def test_user_text_is_never_rewritten_not_even_sbatch_lines_holding_placeholders() -> None:
    """The #SBATCH lines are copied as they are, and the script is the batch script's tail, byte for byte."""
    script = f"#!/bin/bash\n#SBATCH --comment={PLACEHOLDERS}\n#SBATCH --job-name=@@LIMIT@@\necho {PLACEHOLDERS}\n"
    wrapped = wrap_script(script)
    assert wrapped.split("\n")[1:3] == [f"#SBATCH --comment={PLACEHOLDERS}", "#SBATCH --job-name=@@LIMIT@@"]
    assert wrapped.endswith(script)
    assert wrapped.count(PLACEHOLDERS) == 3  # the #SBATCH line, and the script's two lines


def test_control_sequences_are_stripped_from_what_reaches_the_log_and_xcom() -> None:
    """ANSI colours, OSC titles/hyperlinks, other escapes and C0/C1 controls never reach the task log."""
    extra = (
        "airflow-output:\n\x1b[1;31mError\x1b[0m: bad \x1b]0;pwned title\x07shard\x1b]8;;http://x\x1b\\link"
        "\x1b]8;;\x1b\\\nprogress 10%\rprogress 100%\n\x1bc\x9b2Jbell\x07\x00end"
    )
    assert read_extra(extra).output == "Error: bad shardlink\nprogress 100%\nbellend"
    assert read_extra("\x1b[32mepoch 3/10\x1b[0m").progress == "epoch 3/10"
    failed = SlurmJob(job_id=7, state_info=JobStateInfo(JobState.FAILED), source="live")
    job = SlurmJob.from_dict({**failed.to_dict(), "extra": extra})
    assert "\x1b" not in (job.to_dict()["extra"] or "") and "\x07" not in job.failure_message()


def test_posix_cksum_matches_the_cksum_command() -> None:
    for data in (b"", b"a", b"#!/bin/bash\necho hi\n" * 100, bytes(range(256)) * 3):
        out = subprocess.run(["cksum"], input=data, capture_output=True, check=True).stdout.split()
        assert (int(out[0]), int(out[1])) == (posix_cksum(data), len(data))


def test_sensitive_values_by_name_part_or_by_name_and_redacted_even_when_cut() -> None:
    environ = {"MY_API_TOKEN": "tok-123456", "db-password": "pw-abcdef", "PLAIN": "x-visible", "DB_URI": "uri-1234"}
    found = sensitive_values(environ, ["DB_URI"], ["token", "password"], 5)
    assert sorted(found) == ["pw-abcdef", "tok-123456", "uri-1234"]
    assert sensitive_values({"TOKEN": "abc"}, [], ["token"], 5) == []  # shorter than Airflow masks
    raw = ("x" * 2000 + "\nkey tok-123456 end\n").encode()
    assert last_lines(raw, 30, found) == "key *** end"
    assert strip_controls("a\x1b[2Kb\rc") == "c"


NO_PYTHON = ("/nonexistent/bin/python3",)  # a node without python3 at any of the paths looked at


def _as_a_batch_step_starts() -> None:
    """The child starts with the default signal dispositions, as a Slurm batch step does, whatever this
    process inherited (under ``nohup`` SIGHUP is ignored, and an ignored signal stays ignored across exec)."""
    for number in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(number, signal.SIG_DFL)


def _run_wrapped(
    tmp_path: Path,
    script: str,
    *args: str,
    env: dict[str, str] | None = None,
    python_paths: tuple[str, ...] | None = None,
) -> tuple[int, str]:
    path = tmp_path / "batch.sh"
    path.write_text(wrap_script(script) if python_paths is None else wrap_script(script, python_paths=python_paths))
    environ = {"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path), **(env or {})}
    proc = subprocess.run(
        ["/bin/sh", str(path), *args],
        env=environ,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        preexec_fn=_as_a_batch_step_starts,
    )
    return proc.returncode, proc.stderr


def _run_plain(tmp_path: Path, script: str, *args: str) -> int:
    path = tmp_path / "plain.sh"
    path.write_text(script)
    path.chmod(0o700)
    env = {"PATH": os.environ["PATH"]}
    return subprocess.run(
        [str(path), *args], env=env, capture_output=True, cwd=tmp_path, preexec_fn=_as_a_batch_step_starts
    ).returncode


@pytest.mark.parametrize("code", [0, 1, 2, 126, 127, 128, 129, 130, 137, 143, 147, 159, 255])
def test_exit_codes_are_kept_outside_slurm_too(tmp_path: Path, code: int) -> None:
    """The quick local check (real Slurm judges all 256 codes in tests/live_slurm/test_wrapper_live.py)."""
    script = "#!/bin/bash\nexit $1\n"
    assert _run_wrapped(tmp_path, script, str(code))[0] == _run_plain(tmp_path, script, str(code)) == code


@pytest.mark.parametrize("sig", ["TERM", "INT", "SEGV", "ABRT", "KILL", "HUP"])
def test_death_by_signal_is_kept_outside_slurm_too(tmp_path: Path, sig: str) -> None:
    script = f"#!/bin/bash\nkill -{sig} $$\nexit 3\n"
    wrapped, _ = _run_wrapped(tmp_path, script)
    assert wrapped == _run_plain(tmp_path, script) < 0


def test_without_python3_the_script_runs_unwrapped_from_a_checked_copy(tmp_path: Path) -> None:
    script = "#!/bin/bash\ntouch ran\nexit 143\n"
    code, err = _run_wrapped(tmp_path, script, python_paths=NO_PYTHON)
    assert (code, err) == (143, "") and (tmp_path / "ran").exists()
    assert not list(tmp_path.glob("slurmapi-job.*")), "a copy of the script was left behind"


def test_without_python3_a_script_that_cannot_be_copied_does_not_run(tmp_path: Path) -> None:
    script = "#!/bin/bash\ntouch ran\nexit 0\n"
    code, err = _run_wrapped(tmp_path, script, env={"TMPDIR": str(tmp_path / "missing")}, python_paths=NO_PYTHON)
    assert code == 125 and "did not run" in err and not (tmp_path / "ran").exists()


def test_a_script_that_cannot_be_copied_does_not_run_and_says_why(tmp_path: Path) -> None:
    script = "#!/bin/bash\ntouch ran\nexit 0\n"
    code, err = _run_wrapped(tmp_path, script, env={"TMPDIR": str(tmp_path / "missing")})
    assert code == 125 and "could not be copied whole" in err and not (tmp_path / "ran").exists()


def test_redaction_settings_carry_names_never_values() -> None:
    wrapped = wrap_script("#!/bin/bash\nexit 1\n", Redaction(names=("DB_URI",), parts=("token",), min_length=5))
    assert '"names":["DB_URI"]' in wrapped and '"parts":["token"]' in wrapped


# What a script sees of the signals Slurm sends, run outside Slurm: each way of sending is done here as
# slurmstepd does it (proctrack/linuxproc lists the step's processes from /proc, then signals each).
SIGNAL_LOGGER = """#!/bin/bash
for s in TERM USR1 USR2; do trap "echo $s >> got" $s; done
touch ready
n=0
while [ ! -s got ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.1; done
exit 0
"""


def _process_tree(root: int) -> list[int]:
    """``root`` and every live process below it, found as proctrack/linuxproc finds them (a /proc scan)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            state, parent = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError):
            continue
        if state != "Z":
            children.setdefault(int(parent), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _pending(pid: int, signum: int) -> bool:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return False
    return any(signum in mask_of(line.split(":", 1)[1]) for line in lines if line.startswith(("SigPnd:", "ShdPnd:")))


def _signals_seen(directory: Path, argv: list[str], send: str) -> list[str]:
    """Start ``argv`` as a batch shell, send the signal ``send`` way once the script runs; what the script logged."""
    directory.mkdir()
    env = {"PATH": os.environ["PATH"], "TMPDIR": str(directory)}
    proc = subprocess.Popen(argv, cwd=directory, env=env, start_new_session=True)
    try:

        def started() -> bool:
            assert proc.poll() is None, "the script ended before it started"
            return (directory / "ready").exists()

        wait_until(started, "the script started")
        if send == "scancel":  # SIGCONT then SIGTERM to every process of the step
            listed = _process_tree(proc.pid)
            for pid in listed:
                os.kill(pid, signal.SIGCONT)
            # The SIGTERM list is the one made before SIGCONT was handled (slurmstepd makes a list per
            # signal, and the two can be that close): a process started after it would not get SIGTERM.
            wait_until(lambda: not any(_pending(pid, signal.SIGCONT) for pid in listed), "SIGCONT taken", every=0.01)
            for pid in listed:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        elif send == "batch":  # scancel --batch: the batch shell alone
            os.kill(proc.pid, signal.SIGUSR1)
        else:  # scancel --full: the batch shell's process group
            os.killpg(proc.pid, signal.SIGUSR2)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    got = directory / "got"
    return got.read_text().split() if got.exists() else []


@pytest.mark.parametrize(("send", "expected"), [("scancel", ["TERM"]), ("batch", ["USR1"]), ("full", ["USR2"])])
def test_signals_reach_the_script_once_as_unwrapped_outside_slurm_too(
    tmp_path: Path, send: str, expected: list[str]
) -> None:
    """The quick local check (real Slurm judges the same in tests/live_slurm/test_wrapper_live.py)."""
    (tmp_path / "batch.sh").write_text(wrap_script(SIGNAL_LOGGER))
    (tmp_path / "plain.sh").write_text(SIGNAL_LOGGER)
    plain = _signals_seen(tmp_path / "plain", ["/bin/bash", str(tmp_path / "plain.sh")], send)
    wrapped = _signals_seen(tmp_path / "wrapped", ["/bin/sh", str(tmp_path / "batch.sh")], send)
    assert plain == expected
    assert wrapped == plain


def test_without_the_wrapper_a_failure_says_in_one_line_how_to_turn_it_on() -> None:
    from airflow_provider_slurmapi.slurm.jobs.job import REPORT_OUTPUT_HINT

    failed = SlurmJob(job_id=4242, state_info=JobStateInfo(JobState.FAILED), source="live")
    message = failed.failure_message(output_expected=False)
    assert message.endswith("\n" + REPORT_OUTPUT_HINT) and "\n" not in REPORT_OUTPUT_HINT
    for words in ("report_output=True", "[slurmapi] report_output", "every user of the cluster", "PrivateData"):
        assert words in REPORT_OUTPUT_HINT
    assert REPORT_OUTPUT_HINT not in failed.failure_message()  # a job not ours to wrap (a sensor's): nothing


def test_a_node_without_python3_is_named() -> None:
    """What the batch shell writes into Extra where it finds no python3, and the message when nothing came."""
    extra = "airflow-output:\nairflow-provider-slurmapi: no python3 at /usr/bin/python3 on node n1: the script ran"
    failed = SlurmJob(job_id=4242, state_info=JobStateInfo(JobState.FAILED), source="live", extra=extra)
    assert "no python3 at /usr/bin/python3 on node n1" in failed.failure_message(output_expected=True)
    silent = SlurmJob(job_id=4242, state_info=JobStateInfo(JobState.FAILED), source="live")
    assert "python3" in silent.failure_message(output_expected=True)
