"""The job readers' CPU per record, this tree against a baseline commit's, measured in the same run.

    .venv/bin/python bench/reader_cost.py --n 5000 --baseline-ref a54c149

The emulator answers ``GET jobs/`` (full records) and ``GET jobs/state/`` (states) for N held jobs; the
answers' bytes are saved once, then read (``parse_envelope`` and the reader: ``read_jobs``,
``read_job_states``) by each side in its own fresh interpreter: this tree, and the baseline commit's
package (``git archive``) put first on ``PYTHONPATH``. Sides alternate over ``--rounds`` rounds; each
reports its median CPU per record. Part ``readers`` of ``bench/run.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

# Run inside each side's interpreter: argv = answers directory, repeats. Module paths moved since
# the baseline (results.py became readers.py, cluster_ref.py became cluster.py, slurm/envelope.py
# moved under slurm/api/): both are tried.
READ_CODE = r"""
import gc, json, statistics, sys, time
from pathlib import Path
try:
    from airflow_provider_slurmapi.slurm.jobs.readers import read_job_states, read_jobs
except ImportError:
    from airflow_provider_slurmapi.slurm.results import read_job_states, read_jobs
try:
    from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
    ClusterRef("bench-project", "us-central1", "bench-cluster")
except Exception:
    from airflow_provider_slurmapi.slurm.cluster_ref import ClusterRef
try:
    from airflow_provider_slurmapi.slurm.api.envelope import parse_envelope
except ImportError:
    from airflow_provider_slurmapi.slurm.envelope import parse_envelope
import airflow_provider_slurmapi
directory, repeats = Path(sys.argv[1]), int(sys.argv[2])
cluster = ClusterRef("bench-project", "us-central1", "bench-cluster")
out = {"package": airflow_provider_slurmapi.__file__}
for kind, read in (("jobs", lambda r: read_jobs(r, history=False)), ("state", read_job_states)):
    content = (directory / f"{kind}.json").read_bytes()
    times = []
    for _ in range(repeats):
        c0 = time.process_time()
        records = read(parse_envelope(200, content, method="GET", path="/x", cluster=cluster))
        times.append(time.process_time() - c0)
    out[kind] = {"records": len(records), "cpu_per_record": statistics.median(times) / len(records)}
print(json.dumps(out))
"""


def save_answers(directory: Path, n: int) -> None:
    """N held jobs on a fresh emulator; its jobs/ and jobs/state/ envelopes, as bytes."""
    import requests
    from emulator_proc import API_VERSION, STATIC_TOKEN, start_emulator

    with start_emulator(directory / "emulator") as emulator:
        ids = emulator.submit_held_jobs(n)
        headers = {"Authorization": f"Bearer {STATIC_TOKEN}"}
        state_path = f"/slurm/{API_VERSION}/jobs/state/?" + "&".join(f"job_id={i}" for i in ids)
        for kind, path in (("jobs", f"/slurm/{API_VERSION}/jobs/"), ("state", state_path)):
            answer = requests.post(
                emulator.envelope_url(), json={"method": "HTTP_METHOD_GET", "path": path}, headers=headers, timeout=300
            )
            answer.raise_for_status()
            (directory / f"{kind}.json").write_bytes(answer.content)


def baseline_tree(directory: Path, ref: str) -> Path:
    archive = directory / "baseline.tar"
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "-o", str(archive), ref, "airflow_provider_slurmapi"], check=True
    )
    tree = directory / "baseline"
    tree.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def read_once(directory: Path, tree: Path | None, repeats: int) -> dict[str, Any]:
    env = os.environ.copy()
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", READ_CODE, str(directory), str(repeats)],
        cwd=directory,  # not the repository: its package would come before PYTHONPATH
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"reading failed ({'baseline' if tree else 'ours'}):\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=5000, help="held jobs in the answers (default 5000)")
    parser.add_argument("--baseline-ref", default="a54c149", help="the commit whose readers are the baseline")
    parser.add_argument("--rounds", type=int, default=4, help="fresh interpreters per side, alternating")
    parser.add_argument("--repeats", type=int, default=15, help="reads of each answer per interpreter")
    parser.add_argument("--tolerance", type=float, default=1.1, help="ours/baseline at most this (noise)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(BENCH))
    from emulator_proc import GOAL_MISSED

    with tempfile.TemporaryDirectory(prefix="slurmapi-readers-") as name:
        directory = Path(name)
        t0 = time.perf_counter()
        save_answers(directory, args.n)
        tree = baseline_tree(directory, args.baseline_ref)
        runs: dict[str, list[dict[str, Any]]] = {"ours": [], "baseline": []}
        for r in range(args.rounds):
            order = [("ours", None), ("baseline", tree)]
            if r % 2:
                order.reverse()
            for side, side_tree in order:
                runs[side].append(read_once(directory, side_tree, args.repeats))
        if not runs["baseline"][0]["package"].startswith(str(tree)):
            raise RuntimeError(f"the baseline side imported {runs['baseline'][0]['package']}, not {tree}")
    print(f"reader cost per record, N={args.n}, ours against {args.baseline_ref} ({time.perf_counter() - t0:.0f}s)")
    print(f"   {'answer':<12}{'records':>8}{'ours us':>10}{'baseline us':>13}{'ours/baseline':>15}")
    ok = True
    for kind, label in (("jobs", "jobs/"), ("state", "jobs/state/")):
        ours = statistics.median(run[kind]["cpu_per_record"] for run in runs["ours"])
        base = statistics.median(run[kind]["cpu_per_record"] for run in runs["baseline"])
        records = runs["ours"][0][kind]["records"]
        print(f"   {label:<12}{records:>8}{ours * 1e6:>10.2f}{base * 1e6:>13.2f}{ours / base:>15.2f}")
        ok &= ours <= base * args.tolerance
    print(f"   {'PASS' if ok else 'MISS'}: ours at most {args.tolerance:g}x the baseline's cost per record")
    return 0 if ok else GOAL_MISSED


if __name__ == "__main__":
    sys.exit(main())
