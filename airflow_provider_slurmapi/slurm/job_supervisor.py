"""The supervisor that runs a wrapped batch script on the node (``report_output=True``).

Not imported by the provider: :func:`~airflow_provider_slurmapi.slurm.job_output.wrap_script` embeds
this file's text in the batch script, and the batch shell runs it with the node's ``python3``
(3.6 or newer; only the standard library). It

1. reads the user's script from the batch script itself (its last bytes), checks its size and SHA-256,
   copies it into a private directory under ``$TMPDIR`` (default ``/tmp``) and checks the copy the
   same way: the script runs whole or not at all. When no good copy can be had, the job ends with exit
   code 125 and says why on its standard error and in its ``Extra``;
2. runs the script with its own interpreter, with the signal mask and dispositions the batch shell had
   (so, as the batch shell would have), in the batch shell's process group;
3. passes on the signals that Slurm sent to the batch shell alone (``scancel --batch``,
   ``--signal=B:...``, the time limit under ``proctrack/cgroup``), and only those: a *canary* process,
   which blocks every signal, sits beside the script, so a signal Slurm sent to every process (or to
   the process group) shows up pending on the canary, and the script got it too;
4. when the script has ended, writes ``airflow-output:`` and the last lines of its output (controls
   stripped, values of sensitive environment variables redacted) into the job's ``Extra``;
5. ends exactly as the script did: the same exit code, or death by the same signal.

Arguments: the batch script's path, the batch shell's ``SigBlk`` and ``SigIgn`` masks (hex, from
``/proc``), whether ``LC_CTYPE`` was set and its value (Python's locale coercion may set it), then a
JSON document of settings, ``--`` and the script's own arguments.
"""

import os
import sys

try:  # python3-minimal (Debian) lacks shutil, tempfile and resource: only what it has is used
    import contextlib
    import hashlib
    import json
    import re
    import signal
    import time
    from typing import Any, Dict, List, Optional, Tuple
except ImportError:  # pragma: no cover - an odd python3: the batch shell runs the script as unwrapped
    if __name__ == "__main__":
        os.environ["_SLURMAPI_NO_PYTHON"] = "1"
        os.execv("/bin/sh", ["/bin/sh", sys.argv[1], *sys.argv[sys.argv.index("--") + 1 :]])
    raise

WRAPPER_FAILED = 125  # the exit code when the script cannot be had whole (as env/timeout use 125)
CANARY_WAIT_SECONDS = 0.25  # how long a signal's twin may take to reach the canary
UNCATCHABLE = {signal.SIGKILL, signal.SIGSTOP}
PROGRESS_COMMAND = r"""#!/bin/sh
# slurm_progress MESSAGE...: show MESSAGE as this job's progress in the Airflow task log (Slurm's Extra field).
_m=$(printf '%s' "$*" | tr -d '\000')
if [ "$(printf '%s' "$_m" | wc -c)" -gt 1024 ]; then
  _m=$(printf '%s' "$_m" | head -c 1024 | LC_ALL=C sed "\$s/$(printf '[\300-\367][\200-\277]*')\$//")
fi
if [ -z "$SLURM_JOB_ID" ] || ! scontrol update JobId="$SLURM_JOB_ID" Extra="$_m" >/dev/null 2>&1; then
  echo "slurm_progress: could not set the progress message (no scontrol, or its update failed)" >&2
fi
exit 0
"""
_CONTROL = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC ... BEL/ST
    r"|\x1b[P^_X][^\x1b]*(?:\x1b\\)?"  # DCS, PM, APC, SOS ... ST
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI (7- and 8-bit)
    r"|\x9d[^\x07\x1b\x9c]*(?:\x07|\x9c|\x1b\\)?"  # 8-bit OSC
    r"|\x1b[ -/]*[0-~]?"  # other escape sequences
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"  # other C0/C1 controls (not \t \n \r)
)


def strip_controls(text: str) -> str:
    """What a terminal would show of ``text``, as plain lines: escape sequences and controls removed."""
    lines = []
    for line in _CONTROL.sub("", text).split("\n"):
        line = line.rstrip("\r")
        lines.append(line.rsplit("\r", 1)[-1])  # a line rewritten with \r (progress bar): its last state
    return "\n".join(lines)


def redact(text: str, secrets: List[str]) -> str:
    """``text`` with each secret value replaced by ``***`` (longest first, so no part of one survives)."""
    for value in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(value, "***")
    return text


def sensitive_values(environ: Dict[str, str], names: List[str], parts: List[str], min_length: int) -> List[str]:
    """Values of the variables named, and of those whose name holds a sensitive part (as Airflow reads names)."""
    wanted = set(names)
    found = []
    for name, value in environ.items():
        normalized = re.sub(r"\W+", "_", name.strip().lower())
        if (name in wanted or any(part and part in normalized for part in parts)) and len(value) >= min_length:
            found.append(value)
    return found


def last_lines(raw: bytes, budget: int, secrets: List[str]) -> str:
    """The end of the output as plain text, redacted, in at most ``budget`` UTF-8 bytes, whole lines first."""
    text = redact(strip_controls(raw.decode("utf-8", "replace")), secrets)
    text = text.replace("\x00", "").strip("\n")
    data = text.encode("utf-8")
    if len(data) <= budget:
        return text
    cut = data[-budget:].decode("utf-8", "ignore")
    return cut.split("\n", 1)[1] if "\n" in cut else cut


def which(command: str) -> Optional[str]:
    """``command`` as found on PATH (shutil is not in every python3)."""
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(directory or ".", command)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def remove_tree(directory: str) -> None:
    """Remove ``directory`` and what is in it, best effort (shutil is not in every python3)."""
    for root, dirs, files in os.walk(directory, topdown=False):
        for name in files:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(root, name))
        for name in dirs:
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(root, name))
    with contextlib.suppress(OSError):
        os.rmdir(directory)


def private_directory(base: str) -> str:
    """A new directory under ``base`` that only the job's user can enter (tempfile is not in every python3)."""
    for _ in range(100):
        path = os.path.join(base, "slurmapi-job." + os.urandom(6).hex())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path
    raise OSError("no free name for a directory in {}".format(base))


def set_extra(text: str) -> None:
    """Write ``text`` into this job's Extra with ``scontrol``; nothing happens where that cannot be done."""
    job = os.environ.get("SLURM_JOB_ID")
    scontrol = which("scontrol")
    if not job or not scontrol:
        return
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child execs
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.execv(scontrol, [scontrol, "update", "JobId=" + job, "Extra=" + text])
        finally:
            os._exit(127)
    os.waitpid(pid, 0)


def fail(message: str, marker: str) -> None:
    """The script could not be had whole: say so on stderr and in Extra, and end with :data:`WRAPPER_FAILED`."""
    text = "airflow-provider-slurmapi: " + message
    with contextlib.suppress(OSError):
        os.write(2, (text + "\n").encode("utf-8", "replace"))
    set_extra(marker + "\n" + text)
    os._exit(WRAPPER_FAILED)


def read_script(batch: str, size: int, digest: str) -> bytes:
    """The user's script: the last ``size`` bytes of the batch script, if their SHA-256 is ``digest``."""
    with open(batch, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() < size:
            raise OSError("the batch script is shorter than the script it carries")
        handle.seek(-size, os.SEEK_END)
        data = handle.read()
    if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
        raise OSError("the script carried in the batch script does not match its checksum")
    return data


def copy_script(data: bytes, digest: str, progress: bool) -> Tuple[str, str]:
    """A private directory with the checked copy of the script (and the progress command); its paths."""
    base = os.environ.get("TMPDIR") or "/tmp"
    directory = private_directory(base)
    try:
        path = os.path.join(directory, "slurm_script")
        with open(path, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(path, 0o700)
        with open(path, "rb") as handle:
            copy = handle.read()
        if len(copy) != len(data) or hashlib.sha256(copy).hexdigest() != digest:
            raise OSError(f"the copy in {directory} is not whole ({len(copy)} of {len(data)} bytes)")
        if progress:
            os.mkdir(os.path.join(directory, "bin"))
            command = os.path.join(directory, "bin", "slurm_progress")
            with open(command, "w") as handle:
                handle.write(PROGRESS_COMMAND)
            os.chmod(command, 0o700)
            with open(command) as handle:
                if handle.read() != PROGRESS_COMMAND:
                    raise OSError(f"the progress command in {directory} is not whole")
        return directory, path
    except BaseException:
        remove_tree(directory)
        raise


def mask_of(text: str) -> set:  # type: ignore[type-arg]
    """The signals set in a ``/proc/PID/status`` mask (hex)."""
    try:
        bits = int(text.strip() or "0", 16)
    except ValueError:
        return set()
    return {n for n in all_signals() if bits >> (n - 1) & 1}


def all_signals() -> List[int]:
    """Every signal a process can block or catch (not glibc's two internal real-time ones)."""
    if hasattr(signal, "valid_signals"):
        valid = {int(n) for n in signal.valid_signals()}
    else:  # Python 3.6, 3.7
        valid = set(range(1, 32)) | set(range(34, signal.NSIG))
    return sorted(n for n in valid if n not in UNCATCHABLE and n < signal.NSIG)


def start_canary() -> Tuple[int, int, int]:
    """A process beside the script that blocks every signal: what is sent to more than the batch shell pends there.

    It lives as long as the script, so every signal Slurm sends to the whole step reaches it (a canary
    replaced after each signal could be missing from the process list of Slurm's next one: SIGCONT, then
    SIGTERM). Asked about a signal through a pipe, it takes that signal's pending copy, waiting up to
    CANARY_WAIT_SECONDS for it, and answers 1 (it had one) or 0: its pending set stays in step with the
    supervisor's.
    """
    ask_read, ask_write = os.pipe()
    answer_read, answer_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the canary
        try:
            os.close(ask_write)
            os.close(answer_read)
            signal.pthread_sigmask(signal.SIG_BLOCK, all_signals())
            while True:
                asked = os.read(ask_read, 1)
                if not asked:
                    break
                taken = signal.sigtimedwait([asked[0]], CANARY_WAIT_SECONDS)
                os.write(answer_write, b"1" if taken is not None else b"0")
        finally:
            os._exit(0)
    os.close(ask_read)
    os.close(answer_write)
    return pid, ask_write, answer_read


def stop_canary(canary: Tuple[int, int, int]) -> None:
    pid, ask_write, answer_read = canary
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    os.close(ask_write)
    os.close(answer_read)
    with contextlib.suppress(OSError):
        os.waitpid(pid, 0)


def reached_canary(canary: Tuple[int, int, int], signum: int) -> bool:
    """Whether ``signum`` reached the canary too, within CANARY_WAIT_SECONDS: Slurm sent it to more than the shell."""
    _, ask_write, answer_read = canary
    try:
        os.write(ask_write, bytes([signum]))
        return os.read(answer_read, 1) == b"1"
    except OSError:  # the canary is gone (killed with the step): pass the signal on
        return False


def output_file() -> Tuple[Optional[int], int]:
    """The job's stderr file (its stdout when stderr is not a file), opened to read, and its size now."""
    for fd in (2, 1):
        try:
            handle = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
        except OSError:
            continue
        info = os.fstat(handle)
        if (info.st_mode & 0o170000) == 0o100000:
            return handle, info.st_size
        os.close(handle)
    return None, 0


def report(handle: Optional[int], start: int, settings: Dict[str, Any]) -> None:
    """Write the script's last output (redacted, controls stripped) into Extra."""
    if handle is None:
        return
    budget = int(settings["budget"])
    secrets = sensitive_values(dict(os.environ), settings["names"], settings["parts"], int(settings["min_length"]))
    longest = max([len(s.encode("utf-8")) for s in secrets] + [0])
    end = os.fstat(handle).st_size
    if end < start:  # the file was truncated meanwhile
        start = 0
    want = min(end - start, 4 * budget + 2 * longest)  # room for stripped sequences and cut secrets
    raw = os.pread(handle, want, end - want) if want > 0 else b""
    set_extra(settings["marker"] + "\n" + last_lines(raw, budget, secrets))


def run_child(argv: List[str], blocked: set, ignored: set) -> int:  # type: ignore[type-arg]
    """Start the script with the batch shell's signal mask and dispositions; its pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the script
        try:
            for signum in all_signals():
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(signum, signal.SIG_IGN if signum in ignored else signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, sorted(blocked))
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"airflow-provider-slurmapi: cannot run {argv[0]}: {exc}\n".encode())
            os._exit(126 if not isinstance(exc, FileNotFoundError) else 127)
        os._exit(127)
    return pid


def end_like(status: int) -> None:
    """End as the script ended: its exit code, or death by its signal (without a core of our own)."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        try:  # no core file of our own (resource is not in every python3)
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ImportError, OSError, ValueError):
            pass
        if signum not in UNCATCHABLE:
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        time.sleep(1)  # a stop-like default (none is reported here) or a late delivery
        os._exit(128 + signum)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def main(argv: List[str]) -> None:
    batch, sig_blk, sig_ign, ctype_set, ctype = argv[1:6]
    settings = json.loads(argv[6])
    script_args = argv[8:] if len(argv) > 7 and argv[7] == "--" else argv[7:]
    # Python may set LC_CTYPE (PEP 538 locale coercion): give the script the environment the shell had.
    if ctype_set:
        os.environ["LC_CTYPE"] = ctype
    else:
        os.environ.pop("LC_CTYPE", None)
    marker = settings["marker"]
    try:
        data = read_script(batch, int(settings["size"]), settings["sha256"])
        directory, path = copy_script(data, settings["sha256"], bool(settings.get("progress")))
    except (OSError, ValueError) as exc:
        fail(
            "the job's script could not be copied whole into {} ({}); it did not run. Free space there, "
            "set TMPDIR to another directory, or submit with report_output=False.".format(
                os.environ.get("TMPDIR") or "/tmp", exc
            ),
            marker,
        )
        return
    if settings.get("progress"):
        os.environ["PATH"] = os.path.join(directory, "bin") + os.pathsep + os.environ.get("PATH", "")
    blocked, ignored = mask_of(sig_blk), mask_of(sig_ign)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # an inherited "ignore" would reap the script unseen
    watched = [s for s in all_signals() if s not in ignored] + [signal.SIGCHLD]
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    handle, start = output_file()
    canary = start_canary()
    child = run_child([*list(settings["interpreter"]), path, *script_args], blocked, ignored)
    status = None
    while status is None:
        signum = signal.sigwait(set(watched))
        if signum == signal.SIGCHLD:
            while True:
                try:
                    pid, code = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                if pid == child:
                    status = code
            continue
        if reached_canary(canary, signum):
            continue
        with contextlib.suppress(OSError):
            os.kill(child, signum)
    stop_canary(canary)
    try:
        report(handle, start, settings)
    finally:
        remove_tree(directory)
        end_like(status)


if __name__ == "__main__":
    main(sys.argv)
