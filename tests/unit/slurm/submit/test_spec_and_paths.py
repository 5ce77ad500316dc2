"""Job specs are checked and completed before sending; paths are built one way."""

from __future__ import annotations

import datetime
from collections.abc import Mapping

import pytest

from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError, UnsupportedApiVersionError
from airflow_provider_slurmapi.slurm.api.paths import SUPPORTED_API_VERSIONS, SlurmPaths
from airflow_provider_slurmapi.slurm.submit.spec import (
    DEFAULT_WORKING_DIRECTORY,
    parse_time_limit,
    prepare_submission,
    prepare_task_submission,
)
from airflow_provider_slurmapi.slurm.submit.tag import TaskIdentity, carries_tag, task_comment, task_tag

SCRIPT = "#!/bin/bash\necho hi\n"


@pytest.mark.parametrize(
    ("value", "minutes"),
    [
        (720, 720),
        ("720", 720),
        ("12:00:00", 720),
        ("1-00:00:00", 1440),
        ("30:00", 30),
        ("0:30:01", 31),
        (datetime.timedelta(hours=2), 120),
        ({"set": True, "number": 120}, 120),
    ],
)
def test_time_limit_forms(value: object, minutes: int) -> None:
    assert parse_time_limit(value) == {"set": True, "infinite": False, "number": minutes}


def test_unlimited_time_limit() -> None:
    assert parse_time_limit("UNLIMITED")["infinite"] is True


@pytest.mark.parametrize("value", ["abc", -5, 0, True, 1.5, {"set": True}])
def test_bad_time_limits_name_the_field_and_the_fix(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"job\.time_limit=.*(minutes|minute)"):
        parse_time_limit(value)


def test_defaults_are_filled_and_said() -> None:
    prepared = prepare_submission({"name": "t", "time_limit": 5}, SCRIPT)
    assert prepared.job["current_working_directory"] == DEFAULT_WORKING_DIRECTORY
    assert prepared.job["environment"] and all("=" in e for e in prepared.job["environment"])
    assert len(prepared.notes) == 2 and all("not set" in n for n in prepared.notes)
    assert prepared.payload["script"] == SCRIPT
    assert prepared.job["time_limit"]["number"] == 5


def test_given_fields_are_kept_and_environment_dict_converted() -> None:
    prepared = prepare_submission(
        {"current_working_directory": "/home/a", "environment": {"A": "1"}, "tres_per_node": "gres/gpu:8"}, SCRIPT
    )
    assert prepared.notes == []
    assert prepared.job["environment"] == ["A=1"]
    assert prepared.job["tres_per_node"] == "gres/gpu:8"


KEY = b"deployment-secret"


def test_tag_is_keyed_by_the_deployment_secret_and_unpredictable_without_it() -> None:
    import hashlib

    tag = task_tag("dag", "task", "run-1", -1, key=KEY)
    assert tag == task_tag("dag", "task", "run-1", -1, key=KEY) != task_tag("dag", "task", "run-1", 0, key=KEY)
    assert tag != task_tag("dag", "task", "run-1", -1, key=b"another deployment")
    # The old tag was a plain hash of the ids, which any cluster user can compute.
    public = hashlib.sha256(b"dag\x00task\x00run-1\x00-1").hexdigest()
    assert public[:24] not in tag and public[:32] not in tag
    with pytest.raises(ConfigurationError, match="empty"):
        task_tag("dag", "task", "run-1", key=b"")


def test_tag_matches_only_as_a_whole_token() -> None:
    tag = task_tag("dag", "task", "run-1", key=KEY)
    assert carries_tag(f"airflow dag=dag task=task run=run-1 {tag}", tag)
    assert carries_tag(f"my note | {tag}", tag)
    assert not carries_tag(f"x{tag}", tag)
    assert not carries_tag(f"{tag}0", tag)
    assert not carries_tag(f"{tag[:-1]}", tag)
    assert not carries_tag(None, tag)


def test_tag_goes_into_comment_without_clobbering_users_comment() -> None:
    tag = task_tag("dag", "task", "run-1", -1, key=KEY)
    assert tag == task_tag("dag", "task", "run-1", -1, key=KEY) != task_tag("dag", "task", "run-1", 0, key=KEY)
    comment = task_comment(tag, "dag", "task", "run-1")
    assert prepare_submission({}, SCRIPT, tag=tag, comment=comment).job["comment"] == comment
    mine = prepare_submission({"comment": "my note"}, SCRIPT, tag=tag, comment=comment).job["comment"]
    assert mine.startswith("my note") and tag in mine


def test_a_task_submission_carries_the_tag_and_comment_of_its_task_instance() -> None:
    task = TaskIdentity("dag", "task", "run-1", 2)
    prepared = prepare_task_submission({"comment": "my note"}, SCRIPT, task, key=KEY)
    tag = task_tag("dag", "task", "run-1", 2, key=KEY)
    assert prepared.tag == tag != task_tag("dag", "task", "run-1", -1, key=KEY)
    assert prepared.job["comment"] == f"my note | {task_comment(tag, 'dag', 'task', 'run-1', 2)}"
    assert "map=2" in prepared.job["comment"]
    with pytest.raises(ConfigurationError, match="empty"):
        prepare_task_submission({}, SCRIPT, task, key=b"")


def test_a_task_submission_adds_variables_knowing_the_names_the_job_sets() -> None:
    seen: list[set[str]] = []

    def variables(names: set[str]) -> dict[str, str]:
        seen.append(names)
        return {"PARENT": "run-42", "PATH": "/not/this"}

    sent: list[tuple[str, dict[str, object]]] = []

    def wrap(script: str, job: Mapping[str, object]) -> str:
        sent.append((script, dict(job)))
        return script + "# wrapped\n"

    task = TaskIdentity("dag", "task", "run-1")
    job = {"environment": {"PATH": "/bin"}}
    prepared = prepare_task_submission(job, SCRIPT, task, key=KEY, add_variables=variables, wrap=wrap)
    assert seen == [{"PATH"}]
    assert prepared.job["environment"] == ["PATH=/bin", "PARENT=run-42"]  # the job's own PATH is kept
    assert prepared.payload["script"] == SCRIPT + "# wrapped\n"
    assert sent == [(SCRIPT, {"environment": ["PATH=/bin", "PARENT=run-42"]})]  # the job as sent
    assert job == {"environment": {"PATH": "/bin"}}  # the caller's job is not changed


def test_a_task_submission_with_a_bad_environment_asks_for_no_variables_and_shows_no_value() -> None:
    def variables(names: set[str]) -> dict[str, str]:
        raise AssertionError("not asked for an environment that is not valid")

    task = TaskIdentity("dag", "task", "run-1")
    with pytest.raises(ConfigurationError) as failed:
        prepare_task_submission({"environment": ["=s3cret-value"]}, SCRIPT, task, key=KEY, add_variables=variables)
    assert "s3cret-value" not in str(failed.value)


@pytest.mark.parametrize(
    ("job", "script", "message"),
    [
        ({}, "", "non-empty batch script"),
        ({}, "echo hi", "#!/bin/bash"),
        ({"gres": "gpu:8"}, SCRIPT, "tres_per_node"),
        ({"current_working_directory": "relative"}, SCRIPT, "absolute path"),
        ({"environment": "PATH=/bin"}, SCRIPT, "NAME=value"),
        (["not", "a", "dict"], SCRIPT, "must be a dict"),
        ({"script": "#!/bin/sh\nother\n"}, SCRIPT, "given twice"),
    ],
)
def test_bad_specs_are_refused_before_sending(job: object, script: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        prepare_submission(job, script)  # type: ignore[arg-type]


def test_script_inside_job_is_moved_to_top_level() -> None:
    prepared = prepare_submission({"script": SCRIPT}, None)
    assert prepared.payload["script"] == SCRIPT and "script" not in prepared.job


def test_paths() -> None:
    paths = SlurmPaths("v0.0.41")
    assert paths.submit() == "/slurm/v0.0.41/job/submit"
    assert paths.job(7) == "/slurm/v0.0.41/job/7"
    assert paths.cancel(7, "SIGTERM") == "/slurm/v0.0.41/job/7?signal=SIGTERM"
    assert paths.jobs_state([1, 2]) == "/slurm/v0.0.41/jobs/state/?job_id=1&job_id=2"
    assert paths.history_job(7) == "/slurmdb/v0.0.41/job/7"
    assert paths.history_jobs(users=["a", "b"], job_name="x y", start_time=None) == (
        "/slurmdb/v0.0.41/jobs/?users=a&users=b&job_name=x+y"
    )
    assert [SlurmPaths(v).version for v in SUPPORTED_API_VERSIONS] == list(SUPPORTED_API_VERSIONS)


def test_unsupported_versions_say_which_are() -> None:
    with pytest.raises(UnsupportedApiVersionError, match=r"v0\.0\.40.*upgrade"):
        SlurmPaths("v0.0.39")
    with pytest.raises(UnsupportedApiVersionError, match=r"v0\.0\.44"):
        SlurmPaths("0.0.42")


def test_history_time_filters_fit_each_version() -> None:
    """Slurm 24.11 refuses a Unix time in /slurmdb filters on v0.0.40/41 (422, 9202); it takes now-Nseconds."""
    import time

    now = int(time.time())
    old = SlurmPaths("v0.0.40").history_jobs(job_name="t", start_time=now - 600)
    assert "start_time=now-6" in old and "seconds" in old
    assert SlurmPaths("v0.0.41").history_jobs(end_time="now").endswith("end_time=now")
    assert SlurmPaths("v0.0.42").history_jobs(start_time=now) == f"/slurmdb/v0.0.42/jobs/?start_time={now}"
