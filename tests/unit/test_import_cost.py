"""What a DAG file pays at parse time: our operator, sensor and trigger modules load no heavy library.

Checked in a fresh interpreter. ``import airflow.sdk`` itself (provider discovery) already loads the
``google.cloud`` namespace package and ``airflow.providers.google``'s ``__init__``/``get_provider_info``;
our modules must add nothing heavy on top of that, and nothing of the hooks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

OUR_MODULES = (
    "airflow_provider_slurmapi.operators.slurm",
    "airflow_provider_slurmapi.sensors.slurm",
    "airflow_provider_slurmapi.triggers.slurm",
)
# Never loaded at all by a DAG file that uses our operators.
FORBIDDEN = (
    "google.auth",
    "google.oauth2",
    "google.api_core",
    "google.cloud.aiplatform",
    "aiohttp",
    "requests",
    "airflow.providers.google.common",
    "airflow.providers.google.cloud",
    "airflow_provider_slurmapi.hooks",
    "airflow_provider_slurmapi.hooks.slurm",
)
# Not added by our modules on top of what ``import airflow.sdk`` loads.
NOT_ADDED = ("google", "aiohttp", "airflow.providers.google", "grpc", "proto", "requests", "urllib3")

CODE = """
import json, sys
import airflow.sdk
before = set(sys.modules)
for name in {modules!r}:
    __import__(name)
print(json.dumps({{"added": sorted(set(sys.modules) - before), "all": sorted(sys.modules)}}))
"""


def test_operator_sensor_and_trigger_modules_import_nothing_heavy() -> None:
    env = {**os.environ, "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING"}
    result = subprocess.run(
        [sys.executable, "-c", CODE.format(modules=OUR_MODULES)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(result.stdout.strip().splitlines()[-1])
    loaded, added = set(data["all"]), data["added"]
    assert set(OUR_MODULES) <= loaded
    assert not [m for m in loaded if m in FORBIDDEN or m.startswith(tuple(f"{f}." for f in FORBIDDEN))]
    assert not [m for m in added if m in NOT_ADDED or m.startswith(tuple(f"{p}." for p in NOT_ADDED))]
