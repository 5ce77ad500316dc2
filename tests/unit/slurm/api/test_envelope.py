"""The envelope: both answer shapes, plain-text bodies, envelope errors, request limits."""

from __future__ import annotations

import json

import pytest

from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
from airflow_provider_slurmapi.slurm.api.envelope import encode_request, parse_envelope
from airflow_provider_slurmapi.slurm.api.errors import (
    ClusterNotFoundError,
    ConfigurationError,
    InvalidArgumentError,
    MalformedResponseError,
    PermissionDeniedError,
    RequestTooLargeError,
    SlurmError,
    TransientApiError,
    UnauthenticatedError,
)
from airflow_provider_slurmapi.slurm.api.validation import check_endpoint
from tests.fixtures import RESPONSES, fixture_body, fixture_names, fixture_status, fixture_text

CLUSTER = ClusterRef("proj-1", "us-central1", "train-a3")


def _envelope(status: int, *, body: object = None, structured: object = None) -> bytes:
    payload: dict[str, object] = {"status": status}
    if body is not None:
        payload["body"] = body
    if structured is not None:
        payload["structuredBody"] = structured
    return json.dumps(payload).encode()


@pytest.mark.parametrize("name", fixture_names())
def test_every_real_answer_reads_the_same_in_both_shapes(name: str) -> None:
    status = fixture_status(name)
    if (RESPONSES / f"{name}.json").exists():
        body = fixture_body(name)
        as_string = parse_envelope(
            200, _envelope(status, body=json.dumps(body)), method="GET", path="/slurm/x", cluster=CLUSTER
        )
        as_object = parse_envelope(
            200, _envelope(status, structured=body), method="GET", path="/slurm/x", cluster=CLUSTER
        )
        assert as_string.body == as_object.body == body
        assert as_string.status == as_object.status == status
        assert as_string.errors == body.get("errors", [])
    else:
        text = fixture_text(name)
        response = parse_envelope(200, _envelope(status, body=text), method="GET", path="/slurm/x", cluster=CLUSTER)
        assert response.body is None
        assert response.text == text
        if status >= 400:
            with pytest.raises(SlurmError, match=str(status)):
                response.raise_for_errors()


def test_empty_body_and_no_body() -> None:
    for content in (_envelope(200, body=""), _envelope(204)):
        response = parse_envelope(200, content, method="DELETE", path="/slurm/v0.0.42/job/1", cluster=CLUSTER)
        assert response.body is None and response.text is None
        assert response.errors == [] and response.warnings == []


def test_slurm_errors_name_number_text_and_description() -> None:
    body = fixture_body("33_submit_unknown_partition")
    response = parse_envelope(
        200, _envelope(500, structured=body), method="POST", path="/slurm/v0.0.42/job/submit", cluster=CLUSTER
    )
    with pytest.raises(SlurmError) as info:
        response.raise_for_errors()
    assert "2000 Invalid partition name specified (Batch job submission failed)" in str(info.value)
    assert info.value.error_numbers == [2000]


def test_unknown_version_404_text_says_to_check_api_version() -> None:
    text = fixture_text("45_unknown_version_ping_v0.0.39")
    response = parse_envelope(200, _envelope(404, body=text), method="GET", path="/slurm/v0.0.39/ping", cluster=CLUSTER)
    with pytest.raises(SlurmError, match="api_version"):
        response.raise_for_errors()


@pytest.mark.parametrize(
    ("http_status", "status", "error", "must_say"),
    [
        (403, "PERMISSION_DENIED", PermissionDeniedError, "aiplatform.googleapis.com/modelDevelopmentClusters.run"),
        (404, "NOT_FOUND", ClusterNotFoundError, "project=proj-1 region=us-central1 cluster_id=train-a3"),
        (400, "INVALID_ARGUMENT", InvalidArgumentError, "/slurm/v0.0.42/nope"),
        (503, "UNAVAILABLE", TransientApiError, "retry"),
        (429, "RESOURCE_EXHAUSTED", TransientApiError, "retry"),
        (500, "INTERNAL", TransientApiError, "retry"),
        (401, "UNAUTHENTICATED", UnauthenticatedError, "connection"),
    ],
)
def test_envelope_errors_say_what_to_fix(http_status: int, status: str, error: type, must_say: str) -> None:
    content = json.dumps({"error": {"code": http_status, "message": "some error", "status": status}}).encode()
    with pytest.raises(error) as info:
        parse_envelope(http_status, content, method="GET", path="/slurm/v0.0.42/nope", cluster=CLUSTER)
    assert must_say in str(info.value)
    assert info.value.http_status == http_status


@pytest.mark.parametrize("content", [b"<html>oops</html>", b'{"unexpected": true}', b"[1, 2]", b'{"status": "x"}'])
def test_malformed_envelopes_are_clear_errors(content: bytes) -> None:
    with pytest.raises(MalformedResponseError, match="api_endpoint"):
        parse_envelope(200, content, method="GET", path="/slurm/v0.0.42/jobs/", cluster=CLUSTER)


def test_request_of_one_megabyte_is_refused_before_sending_with_the_fix() -> None:
    script = "#!/bin/bash\n" + "echo x\n" * (1024 * 1024 // 7)
    with pytest.raises(RequestTooLargeError, match="shared storage"):
        encode_request("POST", "/slurm/v0.0.42/job/submit", {"job": {}, "script": script})
    small = encode_request("POST", "/slurm/v0.0.42/job/submit", {"job": {}, "script": "#!/bin/bash\n"})
    assert json.loads(small)["method"] == "HTTP_METHOD_POST"
    assert "body" not in json.loads(encode_request("GET", "/slurm/v0.0.42/jobs/"))


def test_url_and_endpoint_rules() -> None:
    assert CLUSTER.url == (
        "https://us-central1-aiplatform.googleapis.com/v1beta1/projects/proj-1/locations/us-central1/"
        "modelDevelopmentClusters/train-a3:callSlurmRestApi"
    )
    assert check_endpoint("http://127.0.0.1:8080/") == "http://127.0.0.1:8080"
    assert check_endpoint("http://[::1]:9") == "http://[::1]:9"
    assert check_endpoint("http://localhost:9") == "http://localhost:9"
    with pytest.raises(ConfigurationError, match="unencrypted"):
        check_endpoint("http://10.0.0.5:8080")
    with pytest.raises(ConfigurationError, match="not a URL"):
        check_endpoint("us-central1-aiplatform.googleapis.com")
    with pytest.raises(ConfigurationError, match="cluster_id"):
        ClusterRef("proj-1", "us-central1", "a/b")
