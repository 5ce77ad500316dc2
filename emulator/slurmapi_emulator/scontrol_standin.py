"""A stand-in for ``scontrol`` on the PATH of the emulator's jobs: ``scontrol update JobId=N Extra=...``.

Real Slurm lets a job write into its own record (``Extra``, ``Comment``) from inside; the emulator's
jobs do the same through this command, which writes the value into a file of the emulator's state
directory that the model reads back (:meth:`Job.refresh_record`). It keeps Slurm 24.11's limit (1,024
bytes) and its error text and exit status, as measured in the lab.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

EXTRA_LIMIT_BYTES = 1024
TOO_LONG = "Pathname of a file, directory or other parameter too long"
STATE_DIR_ENV = "SLURMAPI_EMULATOR_STATE_DIR"


def record_file(state_dir: Path, job_id: int, field: str) -> Path:
    return state_dir / f"job{job_id}.{field}"


def main(argv: list[str]) -> int:
    if not argv or argv[0].lower() != "update":
        print("scontrol (emulator): only 'update JobId=N Extra=...|Comment=...' is emulated", file=sys.stderr)
        return 1
    job_id: str | None = None
    updates: dict[str, str] = {}
    for arg in argv[1:]:
        key, sep, value = arg.partition("=")
        if not sep:
            print(f"Invalid input: {arg}\nRequest aborted", file=sys.stderr)
            return 1
        if key.lower() in ("jobid", "job"):
            job_id = value
        elif key.lower() in ("extra", "comment"):
            updates[key.lower()] = value
        else:
            print(f"Update of this parameter is not supported: {arg}\nRequest aborted", file=sys.stderr)
            return 1
    own = os.environ.get("SLURM_JOB_ID", "")
    state_dir = os.environ.get(STATE_DIR_ENV, "")
    if not job_id or not job_id.isdigit() or job_id != own or not state_dir:
        print(f"Invalid job id specified for job {job_id}", file=sys.stderr)
        return 1
    for value in updates.values():
        if len(value.encode("utf-8", "surrogateescape")) > EXTRA_LIMIT_BYTES:
            print(f"{TOO_LONG} for job {job_id}", file=sys.stderr)
            return 1
    for field, value in updates.items():
        path = record_file(Path(state_dir), int(job_id), field)
        tmp = path.with_name(path.name + f".{os.getpid()}")
        tmp.write_bytes(value.encode("utf-8", "surrogateescape"))
        os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
