"""What may name a cluster, an endpoint and a job: Google's and Slurm's own formats, nothing more.

Through ``ClusterRef`` (what every hook builds its URL from), ``SlurmPaths`` and ``SlurmJobTrigger``,
so the tests hold for the code that sends, not only for the validators.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError
from airflow_provider_slurmapi.slurm.api.paths import SlurmPaths
from airflow_provider_slurmapi.slurm.api.validation import check_endpoint
from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger

GOOD = {"project_id": "demo-project", "region": "us-central1", "cluster_id": "demo-cluster"}


@pytest.mark.parametrize("region", ["us-central1", "europe-west4", "northamerica-northeast1", "me-central2"])
def test_google_regions_are_accepted_and_are_the_host(region: str) -> None:
    ref = ClusterRef(**{**GOOD, "region": region})
    assert urlsplit(ref.url).hostname == f"{region}-aiplatform.googleapis.com"


def test_region_with_hash_refused() -> None:
    with pytest.raises(ConfigurationError) as info:
        ClusterRef(**{**GOOD, "region": "us-central1.attacker.example#"})
    message = str(info.value)
    assert message.startswith("region='us-central1.attacker.example#' is not a Google Cloud region")
    assert "'us-central1'" in message  # the fix: what a region looks like


@pytest.mark.parametrize(
    "region",
    [
        "host:443?",
        "127.0.0.1:8080#",
        "us-central1\n",
        "US-CENTRAL1",
        "us-central1.",
        "us_central1",
        "us-central1/x",
        "us-central1@evil",
        "",
        "global",
        "us-central",
        "us-central1-a",
        "us-ce\u0274tral1",
        None,
        7,
    ],
    ids=repr,
)
def test_regions_that_are_not_google_regions_are_refused(region: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"^region="):
        ClusterRef(**{**GOOD, "region": region})


def test_a_zone_given_as_region_gets_its_region_in_the_message() -> None:
    with pytest.raises(ConfigurationError, match="its region is 'us-central1'"):
        ClusterRef(**{**GOOD, "region": "us-central1-a"})


@pytest.mark.parametrize(
    "project_id", ["my-project", "proj-1", "a" * 30, "123456789012", "example.com:my-project", "a.b.example.org:p-1234"]
)
def test_project_ids_numbers_and_domain_scoped_ids_are_accepted(project_id: str) -> None:
    ref = ClusterRef(**{**GOOD, "project_id": project_id})
    parts = urlsplit(ref.url)
    assert parts.hostname == "us-central1-aiplatform.googleapis.com"
    assert parts.path.split("/")[3] == project_id and not parts.query and not parts.fragment


@pytest.mark.parametrize(
    "project_id",
    [
        "demo-project?alt=x",
        "demo-project#",
        "demo-project:callSlurmRestApi",
        "demo-project\n",
        "proj",  # too short
        "a" * 31,
        "1project",
        "project-",
        "My-Project",
        "example.com:my-project/..",
        "..:my-project",
        "example.com:",
        ":my-project",
        "0123",
        "",
        None,
    ],
    ids=repr,
)
def test_bad_project_ids_are_refused(project_id: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"^project_id="):
        _ = ClusterRef(**{**GOOD, "project_id": project_id}).url  # None or "": the connection's, none here


@pytest.mark.parametrize(
    "cluster_id",
    ["demo-cluster:cancel", "demo?alt=media", "demo#", "Demo", "1cluster", "a" * 64, "x\ny", "c/d", "", None],
    ids=repr,
)
def test_bad_cluster_ids_are_refused(cluster_id: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"^cluster_id="):
        ClusterRef(**{**GOOD, "cluster_id": cluster_id})


_LABEL = st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)
_REGION = st.from_regex(r"[a-z]{2,6}-[a-z]{2,8}[1-9]", fullmatch=True)
_PROJECT = st.from_regex(r"[a-z][a-z0-9-]{4,12}[a-z0-9]", fullmatch=True)
_TAILS = st.sampled_from(["#", "?", ":443", ".evil.example", "/", "\n", "@x", "%23", "\\", ":v", "/..", " "])


def _near(valid: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Valid values, random text, and valid values with something that could steer a URL around them."""
    spliced = st.builds(lambda head, tail, back: head + tail if back else tail + head, valid, _TAILS, st.booleans())
    return st.one_of(valid, st.text(max_size=40), spliced)


@settings(max_examples=150, deadline=None)
@given(region=_near(_REGION), project=_near(_PROJECT), cluster=_near(_LABEL))
def test_any_accepted_input_keeps_the_google_host(region: str, project: str, cluster: str) -> None:
    """Whatever the three strings are: refused, or the URL goes to {region}-aiplatform.googleapis.com."""
    try:
        url = ClusterRef(project_id=project, region=region, cluster_id=cluster).url
    except ConfigurationError:
        return
    parts = urlsplit(url)
    assert parts.scheme == "https" and parts.port is None
    assert parts.hostname == f"{region}-aiplatform.googleapis.com"
    assert parts.path == (
        f"/v1beta1/projects/{project}/locations/{region}/modelDevelopmentClusters/{cluster}:callSlurmRestApi"
    )
    assert not parts.query and not parts.fragment and not parts.username


@settings(max_examples=100, deadline=None)
@given(region=_REGION, cluster=_LABEL)
def test_well_formed_regions_and_clusters_are_accepted(region: str, cluster: str) -> None:
    assert ClusterRef(project_id="demo-project", region=region, cluster_id=cluster).region == region


# -- api_endpoint ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("https://us-central1-aiplatform.googleapis.com", "https://us-central1-aiplatform.googleapis.com"),
        ("https://private.example.com:8443/", "https://private.example.com:8443"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
        ("http://127.9.9.9:1", "http://127.9.9.9:1"),
        ("http://[::1]:9", "http://[::1]:9"),
        ("http://localhost:9", "http://localhost:9"),
    ],
)
def test_endpoints_with_only_scheme_host_and_port_are_accepted(endpoint: str, expected: str) -> None:
    assert check_endpoint(endpoint) == expected


def test_endpoint_with_userinfo_refused_without_echoing_it() -> None:
    for endpoint in ("https://user:hunter2@example.com", "http://hunter2@127.0.0.1:8080/x?y#z"):
        with pytest.raises(ConfigurationError, match="credentials") as info:
            check_endpoint(endpoint)
        assert "hunter2" not in str(info.value) and "user" not in str(info.value)
    with pytest.raises(ConfigurationError) as info:
        SlurmJobTrigger(5, **GOOD, api_endpoint="https://user:hunter2@example.com")
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(
    ("endpoint", "says"),
    [
        ("https://example.com/v1beta1", "has a path"),
        ("https://example.com/x/", "has a path"),
        ("https://example.com?key=hunter2", "query or a fragment"),
        ("https://example.com/?", "query or a fragment"),
        ("https://example.com#frag", "query or a fragment"),
        ("http://10.0.0.5:8080", "unencrypted"),
        ("http://localhost.localdomain:8080", "unencrypted"),
        ("http://localhost.:8080", "unencrypted"),
        ("http://127.0.0.1.nip.io:8080", "unencrypted"),
        ("http://0.0.0.0:8080", "unencrypted"),
        ("us-central1-aiplatform.googleapis.com", "not a URL"),
        ("ftp://example.com", "not a URL"),
        ("https://exa mple.com", "spaces"),
        ("https://example.com\\@evil.com", "credentials"),
        ("https://ex%61mple.com", "'%'"),
        ("https://example.com:99999", "not a URL"),
        ("https://[zz::1]", "not a URL"),
        ("https://", "not a URL"),
    ],
)
def test_endpoints_with_more_than_an_origin_or_clear_http_are_refused(endpoint: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=r"^api_endpoint=") as info:
        check_endpoint(endpoint)
    assert says in str(info.value)
    assert "hunter2" not in str(info.value)


_SECRET = "Zq9-secret-Zq9"


@settings(max_examples=150, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https", "HTTPS", "ftp", "", "http:"]),
    host=st.sampled_from(["127.0.0.1:8080", "example.com", "[::1]", "", "h@x", "exa mple"]),
    where=st.sampled_from(["userinfo", "user", "query", "fragment", "query-no-slash"]),
    noise=st.text(alphabet="/?#@:%\\ ", max_size=3),
)
def test_no_endpoint_error_repeats_credentials_or_queries(scheme: str, host: str, where: str, noise: str) -> None:
    endpoint = {
        "userinfo": f"{scheme}://me:{_SECRET}@{host}{noise}",
        "user": f"{scheme}://{_SECRET}@{host}/{noise}",
        "query": f"{scheme}://{host}/?key={_SECRET}{noise}",
        "fragment": f"{scheme}://{host}{noise}#{_SECRET}",
        "query-no-slash": f"{scheme}://{host}?{_SECRET}",
    }[where]
    with pytest.raises(ConfigurationError) as info:
        check_endpoint(endpoint)
    assert _SECRET not in str(info.value)


# -- job ids -----------------------------------------------------------------------------------------
BAD_JOB_IDS: list[Any] = ["5_3", "1.2", True, False, 7.9, 7.0, "\u0663", "\uff15", 0, -1, "-1", "", " ", None, "5 6"]


@pytest.mark.parametrize("job_id", BAD_JOB_IDS, ids=repr)
def test_job_ids_are_positive_ascii_integers_in_paths(job_id: Any) -> None:
    paths = SlurmPaths("v0.0.42")
    for build in (paths.job, paths.history_job, paths.cancel, lambda j: paths.jobs_state([1, j])):
        with pytest.raises(ConfigurationError, match=r"^job_id=.*positive whole number"):
            build(job_id)


@pytest.mark.parametrize("job_id", BAD_JOB_IDS, ids=repr)
def test_trigger_refuses_a_job_id_that_is_not_a_positive_integer(job_id: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"^job_id="):
        SlurmJobTrigger(job_id, **GOOD)


def test_good_job_ids_are_read_as_ints() -> None:
    paths = SlurmPaths("v0.0.42")
    assert paths.job("42") == paths.job(42) == "/slurm/v0.0.42/job/42"
    assert paths.job(" 42\n") == "/slurm/v0.0.42/job/42"  # a rendered template's newline
    assert SlurmJobTrigger("42", **GOOD).serialize()[1]["job_id"] == 42


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("region", "us-central1.attacker.example#"),
        ("project_id", "demo-project?x"),
        ("cluster_id", "demo:cancel"),
        ("api_endpoint", "http://10.0.0.1"),
    ],
)
def test_trigger_refuses_hostile_cluster_args(field: str, value: str) -> None:
    """A trigger is rebuilt from its serialized kwargs in the triggerer, which checks them again."""
    kwargs = {**GOOD, field: value}
    with pytest.raises(ConfigurationError, match=rf"^{field}="):
        SlurmJobTrigger(5, **kwargs)
