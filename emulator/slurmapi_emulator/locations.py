"""Where a call goes: the resource name in the envelope's URL, checked as Google's front end checks it.

``/v1beta1/projects/{project}/locations/{region}/modelDevelopmentClusters/{cluster}:callSlurmRestApi``
(the Slurm Job API's pages). A name that cannot be a resource name (an upper-case or empty id, a
character no id holds) is refused with 400 INVALID_ARGUMENT; a well-formed location that is not a
region, or a cluster that is not served, with 404 NOT_FOUND ("the cluster name is wrong or the cluster
doesn't exist"). So a typo in ``region`` meets the same refusal here as against the real API.
"""

from __future__ import annotations

import json
import re

from .envelope import GoogleFrontEndError

# Google Cloud's regions (cloud.google.com/about/locations, 2025). Training clusters exist in some of
# them only, and which is listed nowhere: each of them passes; a zone, 'global' or a typo is NOT_FOUND.
DEFAULT_REGIONS: tuple[str, ...] = (
    "africa-south1",
    "asia-east1",
    "asia-east2",
    "asia-northeast1",
    "asia-northeast2",
    "asia-northeast3",
    "asia-south1",
    "asia-south2",
    "asia-southeast1",
    "asia-southeast2",
    "australia-southeast1",
    "australia-southeast2",
    "europe-central2",
    "europe-north1",
    "europe-north2",
    "europe-southwest1",
    "europe-west1",
    "europe-west2",
    "europe-west3",
    "europe-west4",
    "europe-west6",
    "europe-west8",
    "europe-west9",
    "europe-west10",
    "europe-west12",
    "me-central1",
    "me-central2",
    "me-west1",
    "northamerica-northeast1",
    "northamerica-northeast2",
    "northamerica-south1",
    "southamerica-east1",
    "southamerica-west1",
    "us-central1",
    "us-east1",
    "us-east4",
    "us-east5",
    "us-south1",
    "us-west1",
    "us-west2",
    "us-west3",
    "us-west4",
)

# Resource ids as Google writes them (a lowercase letter first, then lowercase letters, digits and
# hyphens); a project may also be a number or domain-scoped (example.com:my-project).
_ID = re.compile(r"[a-z][a-z0-9-]{0,62}")
_PROJECT = re.compile(r"[a-z0-9][a-z0-9.:-]{0,99}")
_ID_RULE = "1-63 lowercase letters, digits or hyphens, starting with a letter"


def check_region_name(region: str) -> str:
    """A region the emulator may be told to serve (``--region``); ValueError naming the rule otherwise."""
    if not _ID.fullmatch(region):
        raise ValueError(f"region {region!r} is not a location id: give {_ID_RULE}, e.g. 'us-central1'")
    return region


def resource_name(project: str, region: str, cluster: str) -> str:
    return f"projects/{project}/locations/{region}/modelDevelopmentClusters/{cluster}"


def check_resource(project: str, region: str, cluster: str) -> str:
    """The cluster's resource name if it is well formed; else GoogleFrontEndError 400 naming the bad part."""
    name = resource_name(project, region, cluster)
    for what, value, pattern, rule in (
        ("project", project, _PROJECT, "a project id, a project number or a domain-scoped project id"),
        ("location", region, _ID, f"{_ID_RULE}, e.g. 'us-central1'"),
        ("modelDevelopmentCluster", cluster, _ID, _ID_RULE),
    ):
        if not pattern.fullmatch(value):
            raise GoogleFrontEndError(
                400,
                "INVALID_ARGUMENT",
                f"Invalid resource name {json.dumps(name)}: the {what} id {json.dumps(value)} must be {rule}.",
            )
    return name


def check_served(project: str, region: str, cluster: str, regions: list[str], clusters: list[str]) -> None:
    """GoogleFrontEndError 404 NOT_FOUND for a region or a cluster that is not served (no ``clusters``: any)."""
    if region not in regions:
        raise GoogleFrontEndError(404, "NOT_FOUND", f"Location `projects/{project}/locations/{region}` not found.")
    if clusters and cluster not in clusters:
        raise GoogleFrontEndError(
            404, "NOT_FOUND", f"ModelDevelopmentCluster `{resource_name(project, region, cluster)}` not found."
        )
