"""Adding variables to a job's environment (the OpenLineage parent run): the job's own values win,
both forms of ``environment`` are read, and a job without one keeps a ``PATH``."""

from __future__ import annotations

import pytest

from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError
from airflow_provider_slurmapi.slurm.submit.spec import (
    DEFAULT_ENVIRONMENT,
    add_environment,
    environment_names,
    prepare_submission,
)

ADDED = {"OPENLINEAGE_PARENT_ID": "ns/dag.task/run", "OPENLINEAGE_PARENT_RUN_ID": "run"}


@pytest.mark.parametrize(
    "environment",
    [{"PATH": "/bin", "OPENLINEAGE_PARENT_RUN_ID": "mine"}, ["PATH=/bin", "OPENLINEAGE_PARENT_RUN_ID=mine"]],
    ids=["dict", "list"],
)
def test_the_jobs_own_values_win_and_the_rest_is_added(environment: object) -> None:
    job = {"name": "train", "environment": environment}
    added = add_environment(job, ADDED)
    assert added["environment"] == [
        "PATH=/bin",
        "OPENLINEAGE_PARENT_RUN_ID=mine",
        "OPENLINEAGE_PARENT_ID=ns/dag.task/run",
    ]
    assert job["environment"] == environment  # the caller's job is not changed
    assert environment_names(job) == {"PATH", "OPENLINEAGE_PARENT_RUN_ID"}
    prepare_submission(added, "#!/bin/bash\necho\n")  # still a valid job


@pytest.mark.parametrize("environment", [None, {}, []])
def test_a_job_without_an_environment_keeps_the_default_path(environment: object) -> None:
    added = add_environment({"environment": environment}, ADDED)
    assert added["environment"] == [
        *DEFAULT_ENVIRONMENT,
        "OPENLINEAGE_PARENT_ID=ns/dag.task/run",
        "OPENLINEAGE_PARENT_RUN_ID=run",
    ]
    assert environment_names({"environment": environment}) == set()


def test_a_bad_environment_is_reported_without_its_values() -> None:
    with pytest.raises(ConfigurationError, match=r"job\.environment") as info:
        add_environment({"environment": ["PATH=/bin", "=s3cret-value"]}, ADDED)
    assert "#1" in str(info.value)
    assert "s3cret" not in str(info.value)
