"""How long the emulator's accounting lags the controller: its ``history_delay``, measured.

    .venv/bin/python bench/history_lag.py [--delay 1.0] [--repeats 3]

A real slurmdbd learns of a job's end a moment after slurmctld; the emulator's ``history_delay``
stands for that. For each side a job (``sleep 0.5``) runs to its end; the time is measured from the
controller's COMPLETED to the history's. The baseline is the same job on an emulator without the
delay, measured in the same run, interleaved. **Goal**: the lag exceeds the baseline's by at least
0.9 of the configured delay (the delay is kept, however slow the machine), and the ratio is shown.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.emulator_proc import GOAL_MISSED  # noqa: E402

TOKEN = "bench-token"
V = "v0.0.42"
SCRIPT = "#!/bin/bash\nsleep 0.5\n"


def _call(session: requests.Session, url: str, method: str, path: str, body: Any = None) -> Any:
    request: dict[str, Any] = {"method": f"HTTP_METHOD_{method}", "path": path}
    if body is not None:
        request["body"] = body
    reply = session.post(url, data=json.dumps(request), headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    envelope = reply.json()
    return envelope.get("structuredBody") or json.loads(envelope.get("body") or "null")


def _lag(delay: float, workdir: Path) -> float:
    """Seconds from the controller's COMPLETED to the history's, on an emulator with ``history_delay=delay``."""
    from slurmapi_emulator import EmulatorConfig, run_emulator

    config = EmulatorConfig(tokens=[TOKEN], min_job_age=0.2, history_delay=delay, workdir=str(workdir))
    with run_emulator(config) as emu, requests.Session() as session:
        url = emu.envelope_url()
        job = {"name": "lag", "partition": "debug", "current_working_directory": str(workdir), "environment": ["A=1"]}
        job_id = _call(session, url, "POST", f"/slurm/{V}/job/submit", {"job": job, "script": SCRIPT})["job_id"]
        emu.wait_for_state(job_id, "COMPLETED", timeout=60)
        ended = time.monotonic()
        while True:
            history = _call(session, url, "GET", f"/slurmdb/{V}/job/{job_id}") or {}
            if [j["state"]["current"] for j in history.get("jobs") or []] == [["COMPLETED"]]:
                return time.monotonic() - ended
            if time.monotonic() - ended > 60:
                raise RuntimeError(f"job {job_id} never reached the history as COMPLETED: {history}")
            time.sleep(0.01)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delay", type=float, default=1.0, help="the emulator's history_delay, in seconds")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    lags: dict[float, list[float]] = {0.0: [], args.delay: []}
    with tempfile.TemporaryDirectory(prefix="slurmapi-bench-history-") as tmp:
        for run in range(args.repeats):
            order = [0.0, args.delay] if run % 2 == 0 else [args.delay, 0.0]  # the sides alternate
            for delay in order:
                workdir = Path(tmp) / f"{delay}-{run}"
                workdir.mkdir()
                lags[delay].append(_lag(delay, workdir))
    baseline, ours = statistics.median(lags[0.0]), statistics.median(lags[args.delay])
    ok = ours - baseline >= 0.9 * args.delay
    print(f"{'side':>22} {'lag s (median)':>15}")
    print(f"{'no delay (baseline)':>22} {baseline:>15.3f}")
    print(f"{f'history_delay={args.delay:g}':>22} {ours:>15.3f}")
    print(f"{'ours - baseline':>22} {ours - baseline:>15.3f}   ratio ours/baseline {ours / max(baseline, 1e-3):.1f}")
    print(f"goal: lag - baseline >= {0.9 * args.delay:.2f}s: {'met' if ok else 'MISSED'}")
    return 0 if ok else GOAL_MISSED


if __name__ == "__main__":
    sys.exit(main())
