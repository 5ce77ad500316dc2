"""Real Slurm is the judge of job keys: what it warns about as unknown, our check refuses; what it takes, we accept.

Each job is sent raw to slurmrestd (no code of the provider on the way), held, and cancelled at once.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError
from airflow_provider_slurmapi.slurm.submit.job_fields import check_job_keys
from airflow_provider_slurmapi.slurm.submit.spec import prepare_submission
from tests.live_slurm.lab import Lab

pytestmark = pytest.mark.slurm

SCRIPT = "#!/bin/bash\ntrue\n"
BASE = {"name": "job-keys-live", "partition": "debug", "hold": True}
TYPOS = {"timelimit": 5, "partiton": "debug", "cpus_per_tasks": 1}


def _send(lab: Lab, version: str, job: dict[str, Any]) -> list[str]:
    """Submit ``job`` raw, held; cancel it; Slurm's "unknown field" warnings."""
    body = {"job": {"current_working_directory": "/tmp", "environment": ["PATH=/bin"], **job}, "script": SCRIPT}
    status, answer = lab.call("POST", f"/slurm/{version}/job/submit", body)
    assert isinstance(answer, dict), (status, answer)
    if answer.get("job_id"):
        lab.cancel(int(answer["job_id"]))
    return [w["description"] for w in answer.get("warnings", []) if "unknown field" in w.get("description", "")]


@pytest.mark.parametrize("version", ["v0.0.41", "v0.0.42"])
def test_slurm_warns_of_each_typo_and_our_check_refuses_it(lab: Lab, version: str) -> None:
    warned = _send(lab, version, {**BASE, **TYPOS, "time_minimum": {"set": True, "number": 1, "numbr": 5}})
    for key in [*TYPOS, "numbr"]:
        assert any(f'"{key}"' in text for text in warned), (key, warned)
    for key, value in TYPOS.items():
        with pytest.raises(ConfigurationError, match="did you mean"):
            check_job_keys({**BASE, key: value}, version)
    with pytest.raises(ConfigurationError, match=r"job\.time_minimum\.numbr"):
        check_job_keys({**BASE, "time_minimum": {"set": True, "numbr": 5}}, version)


@pytest.mark.parametrize(
    "time_limit", ["1:00:00", 60, datetime.timedelta(minutes=30), {"set": True, "number": 5}], ids=str
)
def test_the_keys_users_write_draw_no_warning_and_pass_our_check(lab: Lab, time_limit: Any) -> None:
    job = {
        **BASE,
        "time_limit": time_limit,
        "tres_per_node": "cpu=1",
        "environment": {"PATH": "/usr/bin:/bin"},
        "current_working_directory": "/tmp",
    }
    check_job_keys(job, "v0.0.42")
    prepared = prepare_submission(job, SCRIPT, tag="airflow-ti=live", api_version="v0.0.42")
    assert _send(lab, "v0.0.42", prepared.job) == []


def test_every_warning_of_a_submit_answer_reaches_the_task_log(
    lab: Lab, gateway: Any, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """Slurm's warnings of a submit are never dropped: each one real Slurm gave in the answer the provider
    read (a held job draws some on 24.11 and 26.05) is in the log, at warning level or above."""
    import logging

    from tests.live_slurm.conftest import make_hook

    caplog.set_level(logging.WARNING)
    hook = make_hook(gateway)
    result = hook.submit_job({**BASE, "name": "job-warnings-live", "time_limit": 1}, SCRIPT)
    lab.cancel(result.job_id)
    assert result.warnings, "real Slurm gave this held job no warning: the test would prove nothing"
    logged = caplog.text + "".join(capfd.readouterr())
    assert [w for w in result.warnings if w not in logged] == [], logged
