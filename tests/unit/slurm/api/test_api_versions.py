"""The table of API versions: what each version does, how "auto" paths are resolved, what 26.05 answers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from airflow_provider_slurmapi.slurm.api.api_versions import (
    API_VERSIONS,
    NEGOTIATE,
    NEWEST_FIRST,
    probe_order,
    served_by,
    traits,
)
from airflow_provider_slurmapi.slurm.api.envelope import SlurmResponse
from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError, UnsupportedApiVersionError
from airflow_provider_slurmapi.slurm.api.paths import VERSION_PLACEHOLDER, SlurmPaths, resolve_path
from airflow_provider_slurmapi.slurm.client import deprecation_notice
from airflow_provider_slurmapi.slurm.jobs.readers import read_history_job, read_live_job
from airflow_provider_slurmapi.slurm.jobs.states import parse_job_state

SLURM_26_05 = Path(__file__).resolve().parents[3] / "fixtures" / "slurm-26.05"


def test_v0_0_45_is_supported_and_each_release_serves_what_slurm_says() -> None:
    assert traits("v0.0.45").has_requeue_endpoint
    assert [row.name for row in served_by("24.11")] == ["v0.0.42", "v0.0.41", "v0.0.40"]
    assert [row.name for row in served_by("26.05")] == ["v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42"]
    assert [row.name for row in NEWEST_FIRST] == sorted((row.name for row in API_VERSIONS), reverse=True)


def test_negotiation_pings_the_newest_then_the_version_most_releases_serve() -> None:
    assert [row.name for row in probe_order()][:2] == ["v0.0.45", "v0.0.42"]
    assert sorted(row.name for row in probe_order()) == sorted(row.name for row in API_VERSIONS)


@pytest.mark.parametrize(
    ("version", "match"),
    [
        ("v0.0.39", r"v0\.0\.40 or newer"),
        ("v0.0.46", r"knows versions up to v0\.0\.45; upgrade it"),
        ("0.0.42", r"Leave it unset \('auto'"),
        ("", r"26\.05 serves v0\.0\.42-v0\.0\.45"),
    ],
)
def test_an_unknown_version_is_refused_with_what_is_supported(version: str, match: str) -> None:
    with pytest.raises(UnsupportedApiVersionError, match=match) as info:
        SlurmPaths(version)
    assert isinstance(info.value, ConfigurationError)


def test_auto_paths_wait_for_the_version_and_then_take_its_filter_form() -> None:
    paths = SlurmPaths(NEGOTIATE)
    assert paths.job(7) == f"/slurm/{VERSION_PLACEHOLDER}/job/7"
    with pytest.raises(ConfigurationError, match="job_id="):
        paths.job("5?signal=KILL")  # checked when built: a bad id costs no call, not even a negotiation
    since = int(time.time()) - 600
    auto = paths.history_jobs(job_name="t", start_time=since)
    assert resolve_path(auto, "v0.0.45", now=since + 600) == f"/slurmdb/v0.0.45/jobs/?job_name=t&start_time={since}"
    assert resolve_path(auto, "v0.0.45", now=since + 600) == SlurmPaths("v0.0.45").history_jobs(
        job_name="t", start_time=since
    )
    old = resolve_path(auto, "v0.0.41", now=since + 600)
    assert old.startswith("/slurmdb/v0.0.41/jobs/?job_name=t&start_time=now-") and old.endswith("seconds")


def test_a_deprecated_version_is_named_only_where_the_release_deprecates_it() -> None:
    assert deprecation_notice("v0.0.42", "24.11.5") is None
    assert deprecation_notice("v0.0.45", "26.05.5") is None
    notice = deprecation_notice("v0.0.42", "26.05.5")
    assert notice is not None and "removed in 26.11" in notice and "leave api_version unset" in notice
    assert deprecation_notice("v0.0.42", "") is None


def _answer(name: str, path: str) -> SlurmResponse:
    return SlurmResponse("GET", path, 200, json.loads((SLURM_26_05 / name).read_text()))


def test_the_output_paths_are_the_expanded_ones_from_v0_0_43_on() -> None:
    """Real Slurm 26.05.5: standard_output is the pattern slurm-%j.out; the task shows the path."""
    live = read_live_job(_answer("live_job_completed_v0.0.45.json", "/slurm/v0.0.45/job/3"))
    history = read_history_job(_answer("history_job_completed_v0.0.45.json", "/slurmdb/v0.0.45/job/3"))
    assert live is not None and history is not None
    assert live.stdout == history.stdout == "/tmp/slurm-3.out"
    assert live.succeeded and history.succeeded


def test_a_failed_job_being_expedited_back_into_the_queue_is_not_over() -> None:
    """Slurm 25.11+ (v0.0.44+): FAILED with flag EXPEDITING is a job requeued at once (EXPEDITED_REQUEUE)."""
    expediting = parse_job_state(["FAILED", "EXPEDITING"])
    assert not expediting.is_finished and not expediting.has_ended
    assert parse_job_state(["FAILED"]).has_ended
