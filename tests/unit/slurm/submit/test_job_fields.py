"""The check of job keys against Slurm's own job description, per API version (issue 34.1)."""

from __future__ import annotations

import datetime
import runpy
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError
from airflow_provider_slurmapi.slurm.submit.job_fields import SCHEMA_FILE, check_job_keys, shipped_versions
from airflow_provider_slurmapi.slurm.submit.sbatch import apply_directives
from airflow_provider_slurmapi.slurm.submit.spec import prepare_submission

REPO = Path(__file__).resolve().parents[4]
VERSIONS = ("v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")
SCRIPT = "#!/bin/bash\nsrun python train.py\n"


def test_the_shipped_extract_is_what_slurms_documents_give() -> None:
    """Re-derived from the fixture documents by the script that made it: the shipped file cannot drift."""
    script = runpy.run_path(str(REPO / "scripts" / "extract_job_fields.py"))
    shipped = (REPO / "airflow_provider_slurmapi" / "slurm" / "submit" / SCHEMA_FILE).read_text()
    assert script["render"](script["extract"]()) == shipped
    assert shipped_versions() == VERSIONS


@pytest.mark.parametrize("version", [*VERSIONS, "auto", None])
@pytest.mark.parametrize(
    ("job", "message"),
    [
        ({"timelimit": 5}, "job key 'timelimit' is not a Slurm job field; did you mean 'time_limit'?"),
        ({"partiton": "a3"}, "job key 'partiton' is not a Slurm job field; did you mean 'partition'?"),
        ({"cpus_per_tasks": 2}, "job key 'cpus_per_tasks' is not a Slurm job field; did you mean 'cpus_per_task'?"),
        (
            {"time_limit": {"numbr": 5}},
            "job key 'time_limit.numbr' (job.time_limit.numbr) is not a Slurm job field; "
            "did you mean 'time_limit.number'? (job.time_limit has infinite, number, set.)",
        ),
        (
            {"crontab": {"line": {"strat": 1}}},
            "job key 'crontab.line.strat' (job.crontab.line.strat) is not a Slurm job field; "
            "did you mean 'crontab.line.start'?",
        ),
        ({"gres": "gpu:8"}, "use tres_per_node='gres/gpu:8'"),
        ({"zqxv": 1}, "job key 'zqxv' is not a Slurm job field, and no field is close"),
        ({7: 1}, "job key 7 of type int is not a Slurm job field: keys are strings."),
    ],
    ids=["top", "partition", "cpus", "nested", "depth-3", "gres", "no-match", "int-key"],
)
def test_an_unknown_key_is_refused_at_every_depth_with_the_nearest_field(job: Any, message: str, version: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        check_job_keys({"partition": "debug", **job}, version)
    assert message in str(caught.value)


@pytest.mark.parametrize("version", [*VERSIONS, "auto"])
@pytest.mark.parametrize(
    "time_limit",
    ["12:00:00", "0-12", "UNLIMITED", 720, datetime.timedelta(hours=2), {"set": True, "number": 5}, {"infinite": True}],
)
def test_the_friendly_forms_and_the_fields_the_provider_adds_are_accepted(time_limit: Any, version: str) -> None:
    job = {
        "name": "train",
        "partition": "a3",
        "time_limit": time_limit,
        "tres_per_node": "gres/gpu:8",
        "environment": {"WANDB_API_KEY": "secret", "PATH": "/usr/bin"},  # a dict: converted, never descended
        "current_working_directory": "/home/u",
        "script": SCRIPT,
    }
    check_job_keys(job, version)
    prepared = prepare_submission(job, None, tag="airflow-ti=abc", comment="airflow dag=d", api_version=version)
    check_job_keys(prepared.job, version)  # what is sent: name, comment, environment list, converted time


def test_a_key_of_other_versions_only_is_refused_for_the_version_spoken_and_accepted_before_it_is_known() -> None:
    check_job_keys({"exclusive": ["user"]}, "v0.0.41")
    check_job_keys({"exclusive": ["user"]}, "auto")  # parse time: the version is not known yet
    with pytest.raises(ConfigurationError) as caught:
        check_job_keys({"exclusive": ["user"]}, "v0.0.42")
    assert "in Slurm REST API v0.0.42 (only v0.0.40, v0.0.41 have it): give shared=['user']" in str(caught.value)
    check_job_keys({"step_id": {}}, "v0.0.44")
    with pytest.raises(ConfigurationError, match=r"only v0\.0\.44, v0\.0\.45 have it"):
        check_job_keys({"step_id": {}}, "v0.0.43")


def test_a_misspelt_environment_never_shows_its_values_and_many_typos_are_named_in_one_error() -> None:
    job: dict[str, Any] = {"environmnet": {"TOKEN": "hunter2-secret"}}
    job.update({f"bogus_{i}": i for i in range(30)})
    with pytest.raises(ConfigurationError) as caught:
        check_job_keys(job, "auto", where="job[1]")
    text = str(caught.value)
    assert "job[1] key 'environmnet' is not a Slurm job field; did you mean 'environment'?" in text
    assert "hunter2" not in text
    assert "(21 more unknown keys not named.)" in text


@pytest.mark.parametrize("version", VERSIONS)
def test_the_fields_sbatch_lines_give_are_fields_of_each_version(version: str) -> None:
    lines = [
        "--job-name=x",
        "--partition=debug",
        "--time=1:00:00",
        "--time-min=30",
        "--nodes=1-2",
        "-n 2",
        "--ntasks-per-node=2",
        "-c 2",
        "--mincpus=2",
        "--mem=500",
        "-o /tmp/o-%j.out",
        "-e /tmp/e.err",
        "--input=/dev/null",
        "--array=0-3%2",
        "-D /var/tmp",
        "-A test",
        "--qos=normal",
        "--exclusive",
        "--requeue",
        "--mail-type=END",
        "--gpus-per-node=2",
        "--constraint=a",
        "--dependency=afterok:1",
        "--begin=now+60",
        "--nice=5",
        "--open-mode=append",
        "--hold",
        "--export=ALL",
        "--comment=c",
    ]
    script = "#!/bin/bash\n" + "".join(f"#SBATCH {line}\n" for line in lines) + "true\n"
    applied = apply_directives({}, script, api_version=version, default_environment=("PATH=/bin",))
    assert len(applied.applied) > 20, applied
    check_job_keys(applied.job, version)
