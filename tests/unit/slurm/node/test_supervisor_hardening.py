"""The supervisor's cases of issue 23, outside Slurm (real Slurm judges them in tests/live_slurm/test_wrapper_hardening.py).

Each runs the real wrapped batch script with /bin/sh in a session of its own, so a script's ``pkill -s 0``
reaches only its own job's processes, as in a Slurm batch step.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from airflow_provider_slurmapi.slurm.node.job_supervisor import last_lines, secret_forms, strip_controls
from airflow_provider_slurmapi.slurm.submit.job_output import PYTHON_PATHS, wrap_script
from tests.waiting import wait_until

SECRET = "s3cr3t-QWERTY-uiop-98765"  # 24 characters, as in the issue
NO_PYTHON = ("/nonexistent/bin/python3",)


def _pieces(secret: str, length: int = 4) -> list[str]:
    return [secret[i : i + length] for i in range(len(secret) - length + 1)]


def _leaks(text: str, secret: str = SECRET) -> list[str]:
    return [piece for piece in _pieces(secret) if piece in text]


JUNK = {
    "progress-bars": "".join(f"\r[{'#' * (i % 40):<40}] {i}%" for i in range(100)) + "\n",
    "ansi": "\x1b[31m\x1b[1m\x1b[0m" * 400 + "\n",
    "nul": "\x00" * 4096,
    "blank-lines": "\n" * 4096,
}


@pytest.mark.parametrize("junk", sorted(JUNK))
def test_a_secret_cut_by_the_window_is_redacted_before_any_cut(junk: str) -> None:
    """The secret, then ~4 KB that normalisation takes away: wherever the window starts, no 4 characters survive."""
    raw = f"connecting with token={SECRET}\n{JUNK[junk]}Error: refused\n".encode()
    secret_at = raw.index(SECRET.encode())
    for start in range(secret_at - 2, secret_at + len(SECRET) + 1):  # up to the secret's line end
        shown = last_lines(raw[start:], 1008, [SECRET], whole=False)
        assert not _leaks(shown), (start, shown[:200])
        assert shown.endswith("Error: refused")
    assert last_lines(raw, 100_000, [SECRET]).startswith("connecting with token=***")


def test_redaction_runs_after_normalisation() -> None:
    """A secret split by an escape sequence, a NUL or a zero-width space is whole once normalised."""
    for split in ("\x1b[0m", "\x00", "\u200b", "\u202e"):
        raw = f"key={SECRET[:10]}{split}{SECRET[10:]}\n".encode()
        assert last_lines(raw, 1008, [SECRET]) == "key=***"


def test_a_value_ending_in_cr_is_redacted() -> None:
    """Read from a CRLF env file, the value ends in \\r: the printed line loses it, the redaction still finds it."""
    value = SECRET + "\r"
    raw = f"token={value}\nnext line\n".encode()
    assert last_lines(raw, 1008, [value]) == "token=***\nnext line"
    assert SECRET in secret_forms([value])


def test_multi_line_secrets_are_redacted_line_by_line_even_cut() -> None:
    key = "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\nAQEFAASCBKcwggSjAgEAAoIB\n-----END KEY-----"
    raw = f"loaded {key}\nfailed\n".encode()
    for start in range(0, 60):
        shown = last_lines(raw[start:], 1008, [key], whole=start == 0)
        assert "MIIEvQ" not in shown and "AQEFAA" not in shown, shown


@pytest.mark.parametrize(
    "control", ["\u202e", "\u2066", "\u200f", "\u200b", "\u200d", "\u2060", "\ufeff", "\u2028", "\u2029", "\u061c"]
)
def test_unicode_controls_are_stripped(control: str) -> None:
    assert strip_controls(f"a{control}b\nc") == "ab\nc"


def test_an_unterminated_escape_takes_no_more_than_its_line() -> None:
    assert strip_controls("x\x1b]8;;https://example.invalid/\nreal error\nmore") == "x\nreal error\nmore"
    assert strip_controls("x\x1bPq#0;2;0;0;0\nreal error") == "x\nreal error"
    assert strip_controls("x\x9d0;title\nreal error") == "x\nreal error"


# -- the wrapped script, run -----------------------------------------------------------------------------
def _run(
    tmp_path: Path,
    script: str,
    *,
    python_paths: tuple[str, ...] = PYTHON_PATHS,
    path: str | None = None,
    plain: bool = False,
) -> subprocess.CompletedProcess[str]:
    batch = tmp_path / ("plain.sh" if plain else "batch.sh")
    batch.write_text(script if plain else wrap_script(script, python_paths=python_paths))
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {"PATH": path or os.environ["PATH"], "TMPDIR": str(tmp_path / "tmp")}
    shell = "/bin/bash" if plain else "/bin/sh"
    return subprocess.run(
        [shell, str(batch)], cwd=tmp_path, env=env, capture_output=True, text=True, start_new_session=True, timeout=60
    )


def _left_behind(tmp_path: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "tmp").rglob("*"))


@pytest.mark.parametrize("python_paths", [PYTHON_PATHS, NO_PYTHON], ids=["python3", "no-python3"])
def test_no_copy_of_the_script_is_on_disk_while_it_runs_or_after(tmp_path: Path, python_paths: tuple[str, ...]) -> None:
    script = '#!/bin/bash\nfind "$TMPDIR" -name slurm_script > seen\ncat "$0" > copy\nexit 3\n'
    assert _run(tmp_path, script, python_paths=python_paths).returncode == 3
    assert (tmp_path / "seen").read_text() == "", "a copy was on disk while the script ran"
    assert (tmp_path / "copy").read_text() == script, "the script could not read itself ($0)"
    assert _left_behind(tmp_path) == []


def _ready(proc: subprocess.Popen[bytes], directory: Path) -> bool:
    """The script has started (its ``ready`` file); it must not have ended before."""
    assert proc.poll() is None, "the script ended before it started"
    return (directory / "ready").exists()


def test_no_copy_is_left_after_the_supervisor_is_killed(tmp_path: Path) -> None:
    """The script SIGKILLs its supervisor (the batch shell): the canary removes the directory."""
    script = "#!/bin/bash\nkill -KILL $PPID\nsleep 0.5\nexit 0\n"
    assert _run(tmp_path, script).returncode == -signal.SIGKILL
    wait_until(lambda: not _left_behind(tmp_path), "the canary removed the copies", timeout=20, give_up=True)
    assert _left_behind(tmp_path) == []


def test_python3_is_never_taken_from_the_jobs_path(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text(f"#!/bin/sh\ntouch {tmp_path}/fake-python-ran\nexit 99\n")
    (fake / "python3").chmod(0o755)
    result = _run(tmp_path, "#!/bin/bash\necho ok >&2\nexit 0\n", path=f"{fake}:{os.environ['PATH']}")
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "fake-python-ran").exists()


def test_the_python3_paths_are_checked() -> None:
    for bad in ("python3", "/usr/bin/python3 -c x", "/tmp/$(id)", "/a\nb"):
        with pytest.raises(ValueError, match="python_paths"):
            wrap_script("#!/bin/bash\n", python_paths=(bad,))


@pytest.mark.parametrize("kill", ["-TERM", "-KILL"])
def test_a_pkill_python3_in_the_script_ends_as_unwrapped(tmp_path: Path, kill: str) -> None:
    """``pkill python3`` (its own session: its job) finds neither the supervisor nor its canary."""
    script = f"#!/bin/bash\npkill {kill} -s 0 python3\nsleep 0.3\necho still here >&2\nexit 0\n"
    plain = _run(tmp_path, script, plain=True)
    wrapped = _run(tmp_path, script)
    assert (wrapped.returncode, wrapped.stderr) == (plain.returncode, plain.stderr) == (0, "still here\n")


CANARY_KILLER = """#!/bin/bash
trap 'echo USR1 >> got' USR1
trap 'echo PIPE >> got' PIPE
{kill}
touch ready
n=0
while [ ! -s got ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
sleep 1
exit 0
"""


@pytest.mark.parametrize(
    "kill", ["pkill -s 0 python3", "pkill -KILL -s 0 -x slurmapi-canary"], ids=["pkill-python3", "canary-killed"]
)
def test_a_dead_canary_is_replaced_and_a_batch_signal_reaches_the_script_once(tmp_path: Path, kill: str) -> None:
    """Then ``scancel --batch -s USR1`` (the batch shell alone): USR1 once, no SIGPIPE, the job ends as it would."""
    (tmp_path / "batch.sh").write_text(wrap_script(CANARY_KILLER.format(kill=kill)))
    env = {"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(["/bin/sh", str(tmp_path / "batch.sh")], cwd=tmp_path, env=env, start_new_session=True)
    try:
        wait_until(lambda: _ready(proc, tmp_path), "the script started")
        os.kill(proc.pid, signal.SIGUSR1)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert (tmp_path / "got").read_text().split() == ["USR1"]
