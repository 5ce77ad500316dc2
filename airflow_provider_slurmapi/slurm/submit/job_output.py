"""Seeing inside a job without SSH: its last lines of output and its progress, through its own record.

The Slurm REST API cannot read files, but a job can write into its own record and the API reads it
back: ``scontrol update JobId=$SLURM_JOB_ID Extra=...`` works from inside a batch job as the job's
user, and ``GET /slurm/{v}/job/{id}`` returns the new ``extra`` at once. Slurm keeps at most
:data:`EXTRA_LIMIT_BYTES` bytes there (more is refused: "Pathname of a file, directory or other
parameter too long").

:func:`wrap_script` turns the user's batch script into one whose batch shell hands over to a
supervisor (:mod:`~airflow_provider_slurmapi.slurm.node.job_supervisor`, run by the node's ``python3``) that

- runs the script, byte for byte and checked, with its own ``#!`` interpreter; the ``#SBATCH`` lines
  are copied to the top, right after ``#!``, and nothing of the user's text is ever rewritten;
- ends exactly as the script ended (exit code, or death by the same signal) and passes on the signals
  Slurm sent to the batch shell alone, never a second copy of one the script got itself;
- puts ``slurm_progress "message"`` on the job's ``PATH``;
- at the end writes ``airflow-output:`` and the last lines of the job's standard error (its output,
  when both go to one file) into ``extra``, at most 1,024 bytes, with control sequences stripped and
  the values of the job's sensitive environment variables redacted.

Where the node has no ``python3`` at a system path (:data:`PYTHON_PATHS`, never the job's ``PATH``), the
batch shell runs the script with ``exec`` (from a checked copy, unlinked before it starts), and ``extra``
says that python3 was missing instead of the output. See ``docs/job-output.md``.

:func:`~airflow_provider_slurmapi.slurm.jobs.extra.read_extra` (the job side, which imports nothing of this
module) splits what a job record's ``extra`` says into that output and a progress message.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_slurmapi.slurm.jobs.extra import OUTPUT_MARKER
from airflow_provider_slurmapi.slurm.submit.sbatch import directive_lines

EXTRA_LIMIT_BYTES = 1024
PROGRESS_COMMAND = "slurm_progress"


# The batch shell's part: sh reads it up to `exit` and never further, so what follows it (the
# supervisor's source, then the user's script, byte for byte) is data. Nothing of the user's text is
# ever put through a substitution: the #SBATCH lines and the script are joined to the filled template.
_SHELL = r"""# Wrapped by airflow-provider-slurmapi (report_output=True; False submits the script untouched).
# The script at the end of this file runs unchanged with its own interpreter, under a supervisor that
# reports its last lines of output into this job's Extra field. See docs/job-output.md.
_sa_py=; _sa_why="no python3 at @@PYTHON_LIST@@"
for _sa_p in @@PYTHONS@@; do
  if [ -f "$_sa_p" ] && [ -x "$_sa_p" ]; then _sa_py=$_sa_p; break; fi
done
if [ -n "${_SLURMAPI_NO_PYTHON-}" ]; then
  _sa_why="$_sa_py lacks the modules the supervisor needs"; unset _SLURMAPI_NO_PYTHON; _sa_py=
fi
if [ -n "$_sa_py" ]; then
  _sa_blk=0; _sa_ign=0
  while IFS= read -r _sa_line; do
    case $_sa_line in SigBlk:*) _sa_blk=${_sa_line#SigBlk:} ;; SigIgn:*) _sa_ign=${_sa_line#SigIgn:} ;; esac
  done < /proc/$$/status
  exec "$_sa_py" -I -S -c \
    'import sys;f=open(sys.argv[1],"rb");f.seek(@@START@@);exec(compile(f.read(@@LENGTH@@),"slurmapi","exec"))' \
    "$0" "$_sa_blk" "$_sa_ign" "${LC_CTYPE+1}" "${LC_CTYPE-}" @@SETTINGS@@ -- "$@"
fi
# No usable python3 at a system path on this node: the script runs as it would unwrapped (exec), from a
# checked copy that is unlinked before it starts (it runs from fd 9), and its output is not reported.
_sa_extra() {
  if [ -n "$SLURM_JOB_ID" ] && command -v scontrol >/dev/null 2>&1; then
    scontrol update JobId="$SLURM_JOB_ID" Extra="@@MARKER@@
airflow-provider-slurmapi: $*" >/dev/null 2>&1
  fi
}
_sa_fail() {
  echo "airflow-provider-slurmapi: $*" >&2
  _sa_extra "$@"
  exit 125
}
_sa_dir=$(mktemp -d "${TMPDIR:-/tmp}/slurmapi-job.XXXXXX") ||
  _sa_fail "cannot create a directory in ${TMPDIR:-/tmp} for the job's script; it did not run."
if ! tail -c @@SIZE@@ "$0" > "$_sa_dir/slurm_script" 2>/dev/null ||
   ! command exec 9< "$_sa_dir/slurm_script" ||
   [ "$(cksum <&9)" != "@@CKSUM@@ @@SIZE@@" ]; then
  rm -rf "$_sa_dir"
  _sa_fail "the job's script could not be copied whole into ${TMPDIR:-/tmp}; it did not run." \
    "Free space there, set TMPDIR to another directory, or submit with report_output=False."
fi
rm -rf "$_sa_dir"
_sa_extra "$_sa_why on node ${SLURMD_NODENAME:-?}: the script ran, its output is not reported." \
  "Install python3 (3.6 or newer) there, or submit with report_output=False."
exec @@INTERPRETER@@ /dev/fd/9 "$@"
exit 125
"""

# Where the supervisor's python3 is looked for, in this order: fixed system paths, never the job's PATH
# (which the job's environment sets). A test may pass others to wrap_script; a job cannot.
PYTHON_PATHS: tuple[str, ...] = (
    "/usr/bin/python3",
    "/usr/local/bin/python3",
    "/bin/python3",
    "/usr/libexec/platform-python",
)


def interpreter_of(script: str) -> list[str]:
    """The ``#!`` line as the kernel reads it: the interpreter and at most one argument (the rest of the line)."""
    first = script.lstrip().split("\n", 1)[0]
    if not first.startswith("#!"):
        raise ValueError(f"The script starts with {first[:30]!r}, not with an interpreter line such as '#!/bin/bash'.")
    parts = re.split(r"[ \t]", first[2:].strip(" \t\r"), maxsplit=1)
    if not parts[0]:
        raise ValueError(f"The interpreter line {first!r} names no interpreter, e.g. '#!/bin/bash'.")
    argument = parts[1].strip(" \t") if len(parts) > 1 else ""
    return [parts[0], argument] if argument else [parts[0]]


def sbatch_lines(script: str) -> list[str]:
    """The ``#SBATCH`` lines Slurm would read: those of the comment block right after ``#!``."""
    return [line for _, line in directive_lines(script)]


@dataclass(frozen=True, slots=True)
class Redaction:
    """What the supervisor redacts from the output before it leaves the node: values, never given here.

    ``names``: variables whose values are secret (the operator knows which values Airflow masks);
    ``parts``: name parts that make a variable sensitive (Airflow's secrets masker's list), matched as
    Airflow matches them; values shorter than ``min_length`` are left, as Airflow's masker leaves them.
    """

    names: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()
    min_length: int = 1


def posix_cksum(data: bytes) -> int:
    """The CRC that POSIX ``cksum`` prints for ``data`` (the fallback checks its copy with it)."""
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _CKSUM_TABLE[((crc >> 24) ^ byte) & 0xFF]
    length = len(data)
    while length:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _CKSUM_TABLE[((crc >> 24) ^ length) & 0xFF]
        length >>= 8
    return ~crc & 0xFFFFFFFF


def _cksum_table() -> tuple[int, ...]:
    table = []
    for index in range(256):
        crc = index << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else (crc << 1)
        table.append(crc & 0xFFFFFFFF)
    return tuple(table)


_CKSUM_TABLE = _cksum_table()


def _fill(template: str, values: dict[str, str]) -> str:
    """Our own template with its placeholders filled; only ever called on the provider's text."""
    for key, value in values.items():
        template = template.replace(key, value)
    if "@@" in template:
        raise AssertionError(f"unfilled placeholder in {template!r}")
    return template


def wrap_script(
    script: str, redaction: Redaction | None = None, *, python_paths: tuple[str, ...] = PYTHON_PATHS
) -> str:
    """The batch script that runs ``script`` unchanged under the supervisor and reports its last output.

    Layout: ``#!/bin/sh``, the script's ``#SBATCH`` lines (copied as they are), the shell part (which
    hands over, with ``exec``, to python3 on the supervisor, or to the script itself where there is no python3), the
    supervisor's source, and last the script, byte for byte. The supervisor finds itself and the
    script by byte offsets and checks the script's SHA-256. ``python_paths``: where the node's python3
    is looked for (absolute paths, in order); set by the DAG's code, never by the job's environment.
    """
    for path in python_paths:
        if not re.fullmatch(r"/[A-Za-z0-9._+/-]+", path):
            raise ValueError(
                f"python_paths: {path!r} is not an absolute path of letters, digits and ._+-/; "
                "give e.g. '/usr/bin/python3'."
            )
    interpreter = interpreter_of(script)
    redaction = redaction or Redaction()
    data = script.encode("utf-8", "surrogateescape")
    supervisor = SUPERVISOR_SOURCE.encode()
    settings = {
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "interpreter": interpreter,
        "marker": OUTPUT_MARKER,
        "budget": EXTRA_LIMIT_BYTES - len(OUTPUT_MARKER.encode()) - 1,
        "progress": True,
        "names": list(redaction.names),
        "parts": [part.lower() for part in redaction.parts],
        "min_length": max(1, redaction.min_length),
    }
    head = "#!/bin/sh\n" + "".join(f"{line}\n" for line in sbatch_lines(script))
    values = {
        "@@SETTINGS@@": shlex.quote(json.dumps(settings, separators=(",", ":"))),
        "@@MARKER@@": OUTPUT_MARKER,
        "@@PYTHONS@@": " ".join(shlex.quote(path) for path in python_paths),
        "@@PYTHON_LIST@@": ", ".join(python_paths),
        "@@SIZE@@": str(len(data)),
        "@@CKSUM@@": str(posix_cksum(data)),
        "@@INTERPRETER@@": " ".join(shlex.quote(part) for part in interpreter),
        "@@LENGTH@@": str(len(supervisor)),
        "@@START@@": " " * 12,
    }
    shell = _fill(_SHELL, values).encode()
    start = len(head.encode("utf-8", "surrogateescape")) + len(shell)
    shell = _fill(_SHELL, {**values, "@@START@@": f"{start:12d}"}).encode()
    wrapped = head.encode("utf-8", "surrogateescape") + shell + supervisor + data
    return wrapped.decode("utf-8", "surrogateescape")


SUPERVISOR_MODULE = "airflow_provider_slurmapi.slurm.node.job_supervisor"
# An import of one of the provider's modules in the supervisor: wrap_script puts that module's text there.
_PROVIDER_IMPORT = re.compile(r"^from (airflow_provider_slurmapi(?:\.\w+)+) import [^\n]*$", re.MULTILINE)


def _module_text(name: str) -> str:
    """The source of one of the provider's modules, found without importing it (the supervisor is not)."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ImportError(f"the supervisor needs {name}, which this installation lacks")
    return Path(spec.origin).read_text(encoding="utf-8")


def _supervisor_source() -> str:
    """The supervisor as the node runs it: one file, each provider import replaced by that module's text."""
    source = _PROVIDER_IMPORT.sub(lambda found: _module_text(found[1]).rstrip("\n"), _module_text(SUPERVISOR_MODULE))
    return source if source.endswith("\n") else source + "\n"


SUPERVISOR_SOURCE = _supervisor_source()


def mentions_progress(script: str) -> bool:
    """Whether a script sets progress messages (calls ``slurm_progress`` or sets ``Extra=`` itself)."""
    return PROGRESS_COMMAND in script or sets_extra(script)


def sets_extra(script: str) -> bool:
    """Whether a script sets its job's ``Extra=`` itself (``scontrol update``): progress without the wrapper."""
    return re.search(r"(?i)\bextra=", script) is not None
