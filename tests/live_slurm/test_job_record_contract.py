"""Contract: a job writing its own record (``scontrol update JobId=$SLURM_JOB_ID Extra=...``), emulator vs real Slurm.

The same script runs on the plain emulator (its ``scontrol`` stand-in) and on the lab: the 1,024-byte
limit, Slurm's error text and exit status for 1,025 bytes, and ``extra`` as the live record shows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLUSTER, connection_uri_env
from tests.live_slurm.conftest import make_hook
from tests.live_slurm.lab import SLURM_RELEASE
from tests.waiting import wait_until

pytestmark = pytest.mark.slurm

SCRIPT = r"""#!/bin/bash
err=$(scontrol update JobId=$SLURM_JOB_ID Extra="$(head -c 1025 /dev/zero | tr '\0' x)" 2>&1); rc1025=$?
scontrol update JobId=$SLURM_JOB_ID Extra="$(head -c 1024 /dev/zero | tr '\0' y)"; rc1024=$?
sleep 6
other=$(scontrol update JobId=$((SLURM_JOB_ID + 100000)) Extra=x 2>&1); rcother=$?
scontrol update JobId=$SLURM_JOB_ID Extra="rc1025=$rc1025 rc1024=$rc1024 rcother=$rcother
err=${err//$SLURM_JOB_ID/N}
other=${other//$((SLURM_JOB_ID + 100000))/M}"
"""


def _run(hook: Any, cwd: str) -> tuple[list[str], str]:
    """Submit SCRIPT; the distinct ``extra`` values seen while it ran, and the final one."""
    spec = {"name": "record-contract", "partition": "debug", "current_working_directory": cwd}
    job_id = hook.submit_job(spec, SCRIPT).job_id
    seen: list[str] = []

    def finished() -> Any:
        job = hook.get_live_job(job_id)
        assert job is not None, f"job {job_id} left the live queue before it was read"
        if job.extra and (not seen or seen[-1] != job.extra):
            seen.append(job.extra)
        return job if job.is_finished else None

    job = wait_until(finished, f"job {job_id} finished (extra seen: {seen})", timeout=120, every=0.3)
    return seen, job.extra or ""


def test_emulator_and_slurm_agree_on_a_job_writing_its_own_record(
    gateway: Any, emulator_factory: Any, credentials_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook

    real_seen, real_final = _run(make_hook(gateway), "/tmp")
    emulator = emulator_factory(min_job_age=60.0, slurm_release=SLURM_RELEASE)
    monkeypatch.setenv("AIRFLOW_CONN_EMULATOR", connection_uri_env(emulator, credentials_file))
    emu_seen, emu_final = _run(SlurmApiHook(gcp_conn_id="emulator", **CLUSTER), str(emulator.config.workdir))

    assert real_final == (
        "rc1025=1 rc1024=0 rcother=1\n"
        "err=Pathname of a file, directory or other parameter too long for job N\n"
        "other=Invalid job id specified for job M"
    ), real_final
    assert emu_final == real_final
    assert "y" * 1024 in real_seen and "y" * 1024 in emu_seen, "the 1,024-byte value is kept whole"
