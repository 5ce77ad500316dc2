"""The resource name in the envelope's URL, checked as the Slurm Job API checks it: a malformed name
gets 400 INVALID_ARGUMENT, a region that is not one (or not served) and a cluster that is not served
get 404 NOT_FOUND, each in the google.rpc Status shape ``{"error": {"code", "message", "status"}}``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
import requests
from slurmapi_emulator import EmulatorConfig, EmulatorHandle
from slurmapi_emulator.locations import DEFAULT_REGIONS

from .conftest import TOKEN, V

PING = {"method": "HTTP_METHOD_GET", "path": f"/slurm/{V}/ping"}


def call(emu: EmulatorHandle, project: str, region: str, cluster: str) -> requests.Response:
    url = f"{emu.url}/v1beta1/projects/{project}/locations/{region}/modelDevelopmentClusters/{cluster}:callSlurmRestApi"
    return requests.post(url, data=json.dumps(PING), headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)


def google_error(resp: requests.Response) -> dict[str, Any]:
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "status"}, body
    assert body["error"]["code"] == resp.status_code
    return dict(body["error"])


@pytest.mark.parametrize("region", ["us-central1", "europe-west4", "northamerica-northeast1", "asia-southeast1"])
def test_a_google_cloud_region_is_served_by_default(emu: EmulatorHandle, region: str) -> None:
    resp = call(emu, "demo-project", region, "cluster-1")
    assert resp.status_code == 200 and resp.json()["status"] == 200, resp.text


@pytest.mark.parametrize("region", ["us-centrl1", "us-central1-a", "global", "us-central9", "mars-north1"])
def test_a_well_formed_location_that_is_not_a_region_gets_404_not_found(emu: EmulatorHandle, region: str) -> None:
    resp = call(emu, "demo-project", region, "cluster-1")
    assert resp.status_code == 404
    error = google_error(resp)
    assert error["status"] == "NOT_FOUND"
    assert error["message"] == f"Location `projects/demo-project/locations/{region}` not found.", error
    assert emu.calls()["last"][-1]["slurm_status"] is None, "Slurm was called"


@pytest.mark.parametrize(
    ("project", "region", "cluster", "named"),
    [
        ("demo-project", "US-CENTRAL1", "cluster-1", 'location id "US-CENTRAL1"'),
        ("demo-project", "us_central1", "cluster-1", 'location id "us_central1"'),
        ("demo-project", "us-central1", "Cluster-1", 'modelDevelopmentCluster id "Cluster-1"'),
        ("demo-project", "us-central1", "1cluster", 'modelDevelopmentCluster id "1cluster"'),
        ("demo-project", "us-central1", "", 'modelDevelopmentCluster id ""'),
        ("demo-project", "us-central1", "my_cluster", 'modelDevelopmentCluster id "my_cluster"'),
        ("demo-project", "us-central1", "c" * 64, "modelDevelopmentCluster id"),
        ("demo-project", "us-central1", "a%20b", 'modelDevelopmentCluster id "a b"'),
        ("Demo Project", "us-central1", "cluster-1", 'project id "Demo Project"'),
        ("demo-project", "us-central1", "clu%2Fster", 'modelDevelopmentCluster id "clu/ster"'),
    ],
)
def test_a_malformed_resource_name_gets_400_invalid_argument_naming_the_part(
    emu: EmulatorHandle, project: str, region: str, cluster: str, named: str
) -> None:
    resp = call(emu, project, region, cluster)
    assert resp.status_code == 400, resp.text
    error = google_error(resp)
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["message"].startswith("Invalid resource name ") and named in error["message"], error
    assert emu.jobs() == []


def test_regions_and_clusters_can_be_set(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(regions=["europe-west4"], clusters=["train-a"])
    assert call(emu, "demo-project", "europe-west4", "train-a").status_code == 200
    assert google_error(call(emu, "demo-project", "us-central1", "train-a"))["status"] == "NOT_FOUND"
    missing = google_error(call(emu, "demo-project", "europe-west4", "train-b"))
    assert missing["message"] == (
        "ModelDevelopmentCluster `projects/demo-project/locations/europe-west4/modelDevelopmentClusters/train-b` "
        "not found."
    )
    assert google_error(call(emu, "demo-project", "europe-west4", "Train-B"))["status"] == "INVALID_ARGUMENT"


def test_an_unknown_region_is_not_found_before_any_fault_or_slurm_call(
    make_emulator: Callable[..., EmulatorHandle],
) -> None:
    emu = make_emulator(faults=["unavailable*5"])
    assert call(emu, "demo-project", "us-centrl1", "c").status_code == 404
    assert len(emu.faults()) == 1 and emu.faults()[0]["remaining"] == 5, emu.faults()


def test_the_credentials_check_comes_first(emu: EmulatorHandle) -> None:
    url = f"{emu.url}/v1beta1/projects/P/locations/X/modelDevelopmentClusters/Y:callSlurmRestApi"
    assert requests.post(url, data=json.dumps(PING), timeout=30).status_code == 401


@pytest.mark.parametrize("regions", [[], ["US-CENTRAL1"], ["us-central1", "europe west4"]])
def test_a_region_list_that_cannot_be_served_is_refused_at_start(regions: list[str]) -> None:
    with pytest.raises(ValueError, match="region"):
        EmulatorConfig(tokens=[TOKEN], regions=regions).validate()


def test_the_cli_takes_regions_and_defaults_to_google_clouds() -> None:
    from slurmapi_emulator.cli import build_parser, config_from_args

    parse = build_parser().parse_args
    assert config_from_args(parse([])).regions == list(DEFAULT_REGIONS)
    assert config_from_args(parse(["--region", "europe-west4", "--region", "me-west1"])).regions == [
        "europe-west4",
        "me-west1",
    ]
    refused = subprocess.run(
        [sys.executable, "-m", "slurmapi_emulator", "--token", "t", "--port", "0", "--region", "Europe"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "region 'Europe' is not a location id" in refused.stderr


def test_the_default_regions_are_distinct_and_well_formed() -> None:
    assert len(set(DEFAULT_REGIONS)) == len(DEFAULT_REGIONS) >= 40
    assert "us-central1" in DEFAULT_REGIONS
