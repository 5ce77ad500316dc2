"""Seeing inside a job without SSH: its last lines of output and its progress, through its own record.

The Slurm REST API cannot read files, but a job can write into its own record and the API reads it
back: ``scontrol update JobId=$SLURM_JOB_ID Extra=...`` works from inside a batch job as the job's
user, and ``GET /slurm/{v}/job/{id}`` returns the new ``extra`` at once. Slurm keeps at most
:data:`EXTRA_LIMIT_BYTES` bytes there (more is refused: "Pathname of a file, directory or other
parameter too long").

:func:`wrap_script` turns the user's batch script into one that

- keeps the ``#!`` interpreter of the script (bash, ``/usr/bin/env python3``...) by running the script,
  byte for byte, through it, and keeps its ``#SBATCH`` lines at the top, right after ``#!``;
- keeps the exit code and the signal the job ends with, and forwards the signals Slurm sends to the
  batch shell alone (``scancel --batch``, ``--signal=B:...``);
- puts ``slurm_progress "message"`` on the job's ``PATH`` (any language can run it, or call
  ``scontrol update JobId=$SLURM_JOB_ID Extra="message"`` itself);
- at the end writes ``airflow-output:`` and the last lines of the job's standard error (its output,
  when both go to one file) into ``extra``, at most 1,024 bytes. Where ``scontrol`` is missing or the
  update fails, nothing changes for the job.

:func:`read_extra` splits what a job record's ``extra`` says into that output and a progress message.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass

from airflow_provider_slurmapi.slurm.sbatch import directive_lines
from airflow_provider_slurmapi.slurm.values import clean_text

EXTRA_LIMIT_BYTES = 1024
OUTPUT_MARKER = "airflow-output:"
PROGRESS_COMMAND = "slurm_progress"

# Signals Slurm may send to the batch shell alone; the wrapper passes them on to the script.
FORWARDED_SIGNALS = ("HUP", "INT", "QUIT", "USR1", "USR2", "ALRM", "TERM")

_WRAPPER = r"""#!/bin/sh
@@SBATCH@@# Wrapped by airflow-provider-slurmapi (report_output=True; False submits the script untouched).
# The script below runs unchanged with its own interpreter; when it ends, its last lines of output go
# into this job's Extra field for the Airflow task log. `slurm_progress "message"` sets a progress line.
_sa_dir=
_sa_progress=
for _sa_base in "${TMPDIR:-/tmp}" /tmp /dev/shm "$HOME"; do
  _sa_try=$(mktemp -d "$_sa_base/slurmapi-job.XXXXXX" 2>/dev/null) || continue
  mkdir "$_sa_try/bin" && cat > "$_sa_try/bin/@@PROGRESS@@" <<'SLURMAPI_PROGRESS_END'
#!/bin/sh
# @@PROGRESS@@ MESSAGE...: show MESSAGE as this job's progress in the Airflow task log (Slurm's Extra field).
_m=$(printf '%s' "$*" | tr -d '\000')
if [ "$(printf '%s' "$_m" | wc -c)" -gt @@LIMIT@@ ]; then
  _m=$(printf '%s' "$_m" | head -c @@LIMIT@@ | LC_ALL=C sed "\$s/$(printf '[\300-\367][\200-\277]*')\$//")
fi
if [ -z "$SLURM_JOB_ID" ] || ! scontrol update JobId="$SLURM_JOB_ID" Extra="$_m" >/dev/null 2>&1; then
  echo "@@PROGRESS@@: could not set the progress message (no scontrol, or its update failed)" >&2
fi
exit 0
SLURMAPI_PROGRESS_END
  chmod 700 "$_sa_try/bin/@@PROGRESS@@" 2>/dev/null
  if SLURM_JOB_ID= "$_sa_try/bin/@@PROGRESS@@" 2>/dev/null; then
    [ -n "$_sa_dir" ] && rm -rf "$_sa_dir"
    _sa_dir=$_sa_try; _sa_progress=1; break
  fi
  if [ -z "$_sa_dir" ]; then _sa_dir=$_sa_try; else rm -rf "$_sa_try"; fi
done
if [ -z "$_sa_dir" ]; then
  echo "airflow-provider-slurmapi: no writable directory (TMPDIR, /tmp, /dev/shm, HOME) for the job's" \
    "script; submit it with report_output=False." >&2
  exit 1
fi
[ -n "$_sa_progress" ] && PATH=$_sa_dir/bin:$PATH && export PATH
cat > "$_sa_dir/slurm_script" <<'@@DELIM@@'
@@SCRIPT@@
@@DELIM@@
chmod 700 "$_sa_dir/slurm_script"
_sa_out=
for _sa_fd in 2 1; do
  if [ -f "/proc/$$/fd/$_sa_fd" ] && _sa_start=$(wc -c < "/proc/$$/fd/$_sa_fd" 2>/dev/null); then
    _sa_out=/proc/$$/fd/$_sa_fd; break
  fi
done
_sa_reset=
env --default-signal=INT,QUIT true 2>/dev/null && _sa_reset="env --default-signal=INT,QUIT"
exec 3<&0
$_sa_reset @@INTERPRETER@@ "$_sa_dir/slurm_script" "$@" 0<&3 3<&- &
_sa_child=$!
exec 3<&-
for _sa_sig in @@SIGNALS@@; do
  trap "kill -s $_sa_sig \$_sa_child 2>/dev/null" "$_sa_sig"
done
# A trapped signal interrupts `wait`: wait again until the script is over.
wait "$_sa_child" 2>/dev/null; _sa_rc=$?
while kill -0 "$_sa_child" 2>/dev/null; do wait "$_sa_child" 2>/dev/null; _sa_rc=$?; done
# sh reports a script killed by signal N as 128+N: the wrapper then dies of the same signal.
_sa_signal=0
[ "$_sa_rc" -gt 128 ] && [ "$_sa_rc" -lt 160 ] && _sa_signal=$((_sa_rc - 128))
if [ -n "$_sa_out" ] && [ -n "$SLURM_JOB_ID" ] && command -v scontrol >/dev/null 2>&1; then
  _sa_end=$(wc -c < "$_sa_out" 2>/dev/null) || _sa_end=0
  _sa_n=$((_sa_end - _sa_start)); [ "$_sa_n" -lt 0 ] && _sa_n=$((_sa_end))
  _sa_cr=$(printf '\r')
  # Over budget: drop the first, cut line (or the cut bytes of a character). Keep what a terminal shows of
  # a line rewritten with carriage returns (progress bars).
  _sa_cut="s/^//"
  if [ "$_sa_n" -gt @@BUDGET@@ ]; then
    _sa_n=@@BUDGET@@; _sa_cut="1{\$!d;};1s/^$(printf '[\200-\277]')*//"
  fi
  _sa_text=$(tail -c "$_sa_n" < "$_sa_out" | tr -d '\000' |
    LC_ALL=C sed -e "$_sa_cut" -e "s/$_sa_cr\$//" -e "s/.*$_sa_cr//")
  scontrol update JobId="$SLURM_JOB_ID" Extra="@@MARKER@@
$_sa_text" >/dev/null 2>&1
fi
rm -rf "$_sa_dir"
trap - @@SIGNALS@@
if [ "$_sa_signal" -ne 0 ]; then
  kill "-$_sa_signal" $$
fi
exit "$_sa_rc"
"""


@dataclass(frozen=True, slots=True)
class ExtraReport:
    """What a job's ``extra`` says: its last output (at the end) or its latest progress message."""

    output: str | None = None
    progress: str | None = None


def read_extra(extra: str | None) -> ExtraReport:
    """Split ``extra`` into the wrapper's output report or a progress message (anything else set there)."""
    if not isinstance(extra, str) or not extra.strip():
        return ExtraReport()
    extra = clean_text(extra)  # a log line must be writable: no lone surrogates
    if extra.startswith(OUTPUT_MARKER):
        return ExtraReport(output=extra[len(OUTPUT_MARKER) :].strip("\n"))
    return ExtraReport(progress=extra.strip())


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


def wrap_script(script: str) -> str:
    """The batch script that runs ``script`` unchanged and reports its last output into ``extra``."""
    interpreter = interpreter_of(script)
    digest = hashlib.sha256(script.encode()).hexdigest()[:16]
    delimiter = f"SLURMAPI_END_OF_SCRIPT_{digest}"
    lines = set(script.split("\n"))
    while delimiter in lines:  # cannot happen by chance; a script quoting its own hash gets a longer one
        delimiter += "_"
    sbatch = "".join(f"{line}\n" for line in sbatch_lines(script))
    body = script[:-1] if script.endswith("\n") else script
    budget = EXTRA_LIMIT_BYTES - len(OUTPUT_MARKER.encode()) - 1
    replacements = {
        "@@SBATCH@@": sbatch,
        "@@PROGRESS@@": PROGRESS_COMMAND,
        "@@LIMIT@@": str(EXTRA_LIMIT_BYTES),
        "@@BUDGET@@": str(budget),
        "@@MARKER@@": OUTPUT_MARKER,
        "@@INTERPRETER@@": " ".join(shlex.quote(part) for part in interpreter),
        "@@SIGNALS@@": " ".join(FORWARDED_SIGNALS),
        "@@DELIM@@": delimiter,
    }
    wrapper = _WRAPPER
    for key, value in replacements.items():
        wrapper = wrapper.replace(key, value)
    # Last, so that nothing in the user's script is taken for a placeholder.
    return wrapper.replace("@@SCRIPT@@", body)


def mentions_progress(script: str) -> bool:
    """Whether a script sets progress messages (calls ``slurm_progress`` or sets ``Extra=`` itself)."""
    return PROGRESS_COMMAND in script or re.search(r"(?i)\bextra=", script) is not None
