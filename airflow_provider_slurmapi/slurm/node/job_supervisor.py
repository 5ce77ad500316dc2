"""The supervisor that runs a wrapped batch script on the node (``report_output=True``).

Not imported by the provider: :func:`~airflow_provider_slurmapi.slurm.submit.job_output.wrap_script` embeds
this file's text in the batch script (with :mod:`~airflow_provider_slurmapi.slurm.jobs.controls` inlined),
and the batch shell runs it with the node's ``python3`` (3.6 or newer; only the standard library). It

1. names itself ``slurmapi-wrap`` (its canary ``slurmapi-canary``), so a script's ``pkill python3`` or
   ``pkill -9 python3`` leaves them alone, as it would leave an unwrapped job's batch shell;
2. reads the user's script from the batch script itself (its last bytes), checks its size and SHA-256,
   writes it into a private directory under ``$TMPDIR`` (default ``/tmp``), opens that copy, checks it
   the same way and unlinks it before the script starts: the script runs whole or not at all, and no
   copy of it is left behind however the job ends. When no good copy can be had, the job ends with
   exit code 125 and says why on its standard error and in its ``Extra``;
3. runs the script with its own interpreter, from the open copy (``/proc/PID/fd/N``), with the signal
   mask and dispositions the batch shell had (so, as the batch shell would have), in the batch shell's
   process group;
4. passes on the signals that Slurm sent to the batch shell alone (``scancel --batch``,
   ``--signal=B:...``, the time limit under ``proctrack/cgroup``), and only those: a *canary* process,
   which blocks every signal, sits beside the script, so a signal Slurm sent to every process (or to
   the process group) shows up pending on the canary, and the script got it too (a canary that dies
   is replaced, never written to dead);
5. when the script has ended, writes ``airflow-output:`` and the last lines of its output into the
   job's ``Extra``: normalised (controls stripped, a line rewritten with carriage returns reduced to
   its last state), then the values of sensitive environment variables redacted over the whole
   window read, and only then cut to the limit;
6. ends exactly as the script did: the same exit code, or death by the same signal.

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

try:  # to wait for the canary's answer with a timeout; without it, as before (a blocking read)
    import select
except ImportError:  # pragma: no cover - every CPython build here has it
    select = None  # type: ignore[assignment]

WRAPPER_FAILED = 125  # the exit code when the script cannot be had whole (as env/timeout use 125)
CANARY_WAIT_SECONDS = 0.25  # how long a signal's twin may take to reach the canary
UNCATCHABLE = {signal.SIGKILL, signal.SIGSTOP}
SUPERVISOR_NAME = "slurmapi-wrap"  # process names (comm, at most 15 bytes) without "python"
CANARY_NAME = "slurmapi-canary"
# How much of the end of the output is read: redaction runs over all of it before anything is cut, so a
# secret followed by kilobytes of progress bars, escapes or blank lines is still whole when it is redacted.
WINDOW_BYTES = 64 * 1024
PIECE_MIN_LENGTH = 4  # a line of a multi-line secret (or its part before a \r) redacted on its own from this length
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
# wrap_script puts the text of every module imported so here in place of its import line: on the node the
# supervisor stands alone, and the provider reads Extra with the same rule without importing this file.
from airflow_provider_slurmapi.slurm.jobs.controls import CONTROL_SEQUENCES, strip_controls  # noqa: E402


def secret_forms(secrets: List[str], min_length: int = 1) -> List[str]:
    """Every form a secret value can take in normalised output, longest first.

    The value itself and as :func:`strip_controls` leaves it; and each of its lines and its parts
    between carriage returns from :data:`PIECE_MIN_LENGTH` (or ``min_length``, if longer) characters:
    a value read from a CRLF file ends in a carriage return, which the output's normalisation takes away, and a
    multi-line value (a key) reaches the output line by line.
    """
    forms = set()
    floor = max(PIECE_MIN_LENGTH, min_length)
    for value in secrets:
        for whole in (value, strip_controls(value)):
            if whole and len(whole) >= min_length:
                forms.add(whole)
            for piece in re.split(r"[\r\n]+", CONTROL_SEQUENCES.sub("", whole)):
                if len(piece) >= floor:
                    forms.add(piece)
    return sorted(forms, key=len, reverse=True)


def redact(text: str, secrets: List[str]) -> str:
    """``text`` with each secret value replaced by ``***`` (longest first, so no part of one survives)."""
    for value in sorted(set(secrets), key=len, reverse=True):
        if value:
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


def last_lines(raw: bytes, budget: int, secrets: List[str], whole: bool = True, min_length: int = 1) -> str:
    """The end of the output as plain text, redacted, in at most ``budget`` UTF-8 bytes, whole lines first.

    ``raw`` is the end of the output (all of it when ``whole``). In this order: its first line is dropped
    when ``raw`` starts inside the output (a part of a line, maybe a part of a secret; what follows a
    carriage return in it is kept: it was rewritten whole within the window), the text is normalised
    (:func:`strip_controls`), every form of every secret is redacted over all of it, and only then is
    it cut to ``budget``.
    """
    text = raw.decode("utf-8", "replace")
    if not whole:
        first, newline, rest = text.partition("\n")
        kept = first.rsplit("\r", 1)[1] if "\r" in first else ""
        text = kept + newline + rest
    text = redact(strip_controls(text), secret_forms(secrets, min_length)).strip("\n")
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


def name_process(name: str) -> None:
    """Set this process's name (``comm``, what ``pkill NAME`` and ``ps`` match), best effort."""
    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as handle:
        handle.write(name[:15])


def copy_script(data: bytes, digest: str, progress: bool) -> Tuple[str, int]:
    """A private directory (with the progress command) and an open, checked, unlinked copy of the script.

    The copy is written, opened (the descriptor is not inherited), read back through the descriptor,
    checked, and unlinked before the script starts: it runs from ``/proc/PID/fd/N`` while this process
    lives, and nothing of it is left on disk whatever happens next (a SIGKILL of this process included).
    """
    base = os.environ.get("TMPDIR") or "/tmp"
    directory = private_directory(base)
    try:
        path = os.path.join(directory, "slurm_script")
        with open(path, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(path, 0o500)
        fd = os.open(path, os.O_RDONLY)
        try:
            os.unlink(path)
            copy = os.pread(fd, len(data) + 1, 0)
            if len(copy) != len(data) or hashlib.sha256(copy).hexdigest() != digest:
                raise OSError(f"the copy in {directory} is not whole ({len(copy)} of {len(data)} bytes)")
        except BaseException:
            os.close(fd)
            raise
        if progress:
            os.mkdir(os.path.join(directory, "bin"))
            command = os.path.join(directory, "bin", "slurm_progress")
            with open(command, "w") as handle:
                handle.write(PROGRESS_COMMAND)
            os.chmod(command, 0o700)
            with open(command) as handle:
                if handle.read() != PROGRESS_COMMAND:
                    raise OSError(f"the progress command in {directory} is not whole")
        return directory, fd
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


Canary = Tuple[int, int, int]


def start_canary(directory: str) -> Canary:
    """A process beside the script that blocks every signal: what is sent to more than the batch shell pends there.

    It lives as long as the script, so every signal Slurm sends to the whole step reaches it (a canary
    replaced after each signal could be missing from the process list of Slurm's next one: SIGCONT, then
    SIGTERM). Asked about a signal through a pipe, it takes that signal's pending copy, waiting up to
    CANARY_WAIT_SECONDS for it, and answers 1 (it had one) or 0: its pending set stays in step with the
    supervisor's. Its name is not python's (a script's ``pkill python3`` leaves it); if the supervisor
    dies first (the pipe ends), it removes ``directory``; if it dies, the supervisor starts another.
    """
    ask_read, ask_write = os.pipe()
    answer_read, answer_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the canary
        try:
            name_process(CANARY_NAME)
            os.close(ask_write)
            os.close(answer_read)
            signal.pthread_sigmask(signal.SIG_BLOCK, all_signals())
            while True:
                asked = os.read(ask_read, 1)
                if not asked:  # the supervisor is gone (SIGKILL): nothing of the job stays behind
                    remove_tree(directory)
                    break
                taken = signal.sigtimedwait([asked[0]], CANARY_WAIT_SECONDS)
                os.write(answer_write, b"1" if taken is not None else b"0")
        finally:
            os._exit(0)
    os.close(ask_read)
    os.close(answer_write)
    return pid, ask_write, answer_read


def stop_canary(canary: Canary, reap: bool = True) -> None:
    pid, ask_write, answer_read = canary
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    os.close(ask_write)
    os.close(answer_read)
    if reap:
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)


def reached_canary(canary: Canary, signum: int) -> Optional[bool]:
    """Whether ``signum`` reached the canary too, within CANARY_WAIT_SECONDS: Slurm sent it to more than the shell.

    ``None`` when the canary did not answer (it died, was stopped, or its pipe broke): the caller
    replaces it. A write to a dead canary raises SIGPIPE at this process: that copy is taken here, so
    it is never mistaken for one Slurm sent (and never loops back into another write).
    """
    _, ask_write, answer_read = canary
    try:
        os.write(ask_write, bytes([signum]))
        if select is not None:
            ready, _, _ = select.select([answer_read], [], [], CANARY_WAIT_SECONDS + 2)
            if not ready:
                return None
        answer = os.read(answer_read, 1)
    except OSError:
        signal.sigtimedwait([signal.SIGPIPE], 0)
        return None
    return answer == b"1" if answer else None


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
    """Write the script's last output (normalised, redacted over the whole window, then cut) into Extra."""
    if handle is None:
        return
    budget = int(settings["budget"])
    min_length = int(settings["min_length"])
    secrets = sensitive_values(dict(os.environ), settings["names"], settings["parts"], min_length)
    longest = max([len(s.encode("utf-8")) for s in secrets] + [0])
    end = os.fstat(handle).st_size
    if end < start:  # the file was truncated meanwhile
        start = 0
    want = min(end - start, max(WINDOW_BYTES, 4 * budget + 4 * longest))
    raw = os.pread(handle, want, end - want) if want > 0 else b""
    text = last_lines(raw, budget, secrets, whole=end - want <= start, min_length=min_length)
    set_extra(settings["marker"] + "\n" + text)


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
    name_process(SUPERVISOR_NAME)
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
        directory, script_fd = copy_script(data, settings["sha256"], bool(settings.get("progress")))
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
    canary = start_canary(directory)
    script = "/proc/{}/fd/{}".format(os.getpid(), script_fd)
    child = run_child([*list(settings["interpreter"]), script, *script_args], blocked, ignored)
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
                elif pid == canary[0] and status is None:  # killed by the script: a new one stands in
                    stop_canary(canary, reap=False)
                    canary = start_canary(directory)
            continue
        reached = reached_canary(canary, signum)
        if reached is None:  # no answer: replace the canary; the signal is taken as the batch shell's alone
            stop_canary(canary)
            canary = start_canary(directory)
        elif reached:
            continue
        with contextlib.suppress(OSError):
            os.kill(child, signum)
    stop_canary(canary)
    os.close(script_fd)
    try:
        report(handle, start, settings)
    finally:
        remove_tree(directory)
        end_like(status)


if __name__ == "__main__":
    main(sys.argv)
