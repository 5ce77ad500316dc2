"""``make demo``: run the first example DAG end to end against the local emulator.

Starts ``slurmapi-emulator`` (the console command users run too) on a free port with a generated
service-account key, points ``google_cloud_default`` at it, migrates a throw-away Airflow database in
``.demo/airflow`` and runs ``example_dags/example_slurm_submit.py`` with ``dag.test()`` (deferrable:
the trigger runs in the same process). Prints SUCCESS or the failure, and stops the emulator.

The demo's deployment sets its own tag key (``[slurmapi] tag_secret``, a fresh random one per run, as a
deployment that manages its secrets does: docs/security.md): without one, the first task of an Airflow 3
deployment creates the key and waits 20 s for it to settle (tag_secret.SETTLE_SECONDS), which a demo
of one task need not show.

A run that succeeded but logged an error or a traceback is a failure too: a user's first run must be
clean. ``SLURMAPI_DEMO_DIR`` puts the demo's files elsewhere than ``.demo`` (the tests use it).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = Path(os.environ.get("SLURMAPI_DEMO_DIR") or REPO / ".demo")
BIN = Path(sys.executable).parent
# An ERROR or CRITICAL line of Airflow's (structlog: "[error   ]") or of stdlib logging, or a traceback.
_PROBLEM = re.compile(r"\[(?:error|critical)\s*\]|^(?:ERROR|CRITICAL)\b|Traceback \(most recent call last\)", re.M)


def log_problems(text: str) -> list[str]:
    """The lines of a run's log that say something went wrong."""
    return [line for line in text.splitlines() if _PROBLEM.search(line)]


def main() -> int:
    DEMO.mkdir(exist_ok=True)
    shutil.rmtree(DEMO / "airflow", ignore_errors=True)
    (DEMO / "jobs").mkdir(exist_ok=True)
    credentials = DEMO / "service-account.json"
    emulator = subprocess.Popen(
        [
            str(BIN / "slurmapi-emulator"),
            "--port",
            "0",
            "--write-credentials",
            str(credentials),
            "--workdir",
            str(DEMO / "jobs"),
            "--min-job-age",
            "30",
        ],
        stdout=subprocess.PIPE,
        stderr=open(DEMO / "emulator.log", "w"),  # noqa: SIM115 - closed with the process
        text=True,
    )
    try:
        url = _wait_for_url(emulator)
        print(f"slurmapi-emulator listening on {url} (log: .demo/emulator.log)")
        env = os.environ.copy()
        env.update(
            {
                "AIRFLOW_HOME": str(DEMO / "airflow"),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "example_dags"),
                "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT": json.dumps(
                    {
                        "conn_type": "google_cloud_platform",
                        "extra": {"key_path": str(credentials), "api_endpoint": url, "project": "demo-project"},
                    }
                ),
                "SLURMAPI_WORKDIR": str(DEMO / "jobs"),
                "AIRFLOW__SLURMAPI__TAG_SECRET": secrets.token_urlsafe(32),
            }
        )
        print("Migrating a throw-away Airflow database in .demo/airflow ...")
        subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True)
        print("Running example_dags/example_slurm_submit.py with dag.test() (deferrable) ...")
        run = subprocess.run(
            [sys.executable, str(REPO / "example_dags" / "example_slurm_submit.py")],
            env=env,
            capture_output=True,
            text=True,
        )
        (DEMO / "dag-test.log").write_text(run.stdout + run.stderr)
        shown = [line for line in (run.stdout + run.stderr).splitlines() if "Slurm" in line or "slurm" in line]
        print("\n".join(shown[-15:]))
        problems = log_problems(run.stdout + run.stderr)
        if run.returncode == 0 and problems:
            print("\nFAILED: the run succeeded but logged errors (full log: .demo/dag-test.log):", file=sys.stderr)
            print("\n".join(problems), file=sys.stderr)
            return 1
        if run.returncode == 0:
            print("\nSUCCESS: example_slurm_submit ran end to end against the emulator (full log: .demo/dag-test.log)")
            return 0
        print(f"\nFAILED (exit {run.returncode}); full log: .demo/dag-test.log", file=sys.stderr)
        print((run.stdout + run.stderr)[-3000:], file=sys.stderr)
        return 1
    finally:
        emulator.send_signal(signal.SIGTERM)
        try:
            emulator.wait(timeout=15)
        except subprocess.TimeoutExpired:
            emulator.kill()


def _wait_for_url(process: subprocess.Popen[str], timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            if process.poll() is not None:
                raise SystemExit(f"slurmapi-emulator exited ({process.returncode}); see .demo/emulator.log")
            continue
        for word in line.split():
            if word.startswith("http://"):
                return word.rstrip(".,")
    raise SystemExit("slurmapi-emulator did not print its URL in time; see .demo/emulator.log")


if __name__ == "__main__":
    sys.exit(main())
