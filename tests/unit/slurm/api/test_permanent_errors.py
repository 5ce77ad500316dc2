"""Which errors no retry can fix, judged on real Slurm 24.11 answers (and the lab's, in the slurm suite)."""

from __future__ import annotations

import pytest

from airflow_provider_slurmapi.slurm.api.envelope import SlurmResponse
from airflow_provider_slurmapi.slurm.api.errors import (
    ApiConnectionError,
    ClusterNotFoundError,
    ConfigurationError,
    MalformedResponseError,
    PermissionDeniedError,
    RequestTooLargeError,
    SlurmError,
    SubmitRejectedError,
    TransientApiError,
    UnauthenticatedError,
    is_permanent,
)
from airflow_provider_slurmapi.slurm.jobs.readers import read_partition_names, read_submit
from tests.fixtures import fixture_body, fixture_status


def answer(name: str, method: str = "POST", path: str = "/slurm/v0.0.42/job/submit") -> SlurmResponse:
    return SlurmResponse(method=method, path=path, status=fixture_status(name), body=fixture_body(name))


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("33_submit_unknown_partition", "partition"),
        ("38_submit_too_many_nodes", "resources"),
        ("34_submit_no_script", "spec"),
        ("31_submit_bad_time_limit_string", "spec"),
    ],
)
def test_refused_submits_are_permanent_and_say_what_to_fix(name: str, kind: str) -> None:
    with pytest.raises(SubmitRejectedError) as info:
        read_submit(answer(name))
    assert is_permanent(info.value)
    assert info.value.kind == kind
    message = str(info.value)
    # the fix leads; Slurm's answer ("Slurm answered HTTP 500 ...") follows as the evidence
    assert not message.startswith("Slurm"), message
    assert message.startswith(info.value.fix) and info.value.fix
    assert message.endswith(f"Slurm refused the job ({info.value.answer}).")
    assert "HTTP" not in info.value.fix


def test_the_too_many_nodes_message_keeps_its_fix() -> None:
    with pytest.raises(SubmitRejectedError, match="no node that fits"):
        read_submit(answer("38_submit_too_many_nodes"))


def test_an_io_error_writing_the_script_may_pass_on_a_retry() -> None:
    """2019: slurmctld could not write the script or environment; not a fault of the job."""
    with pytest.raises(SlurmError) as info:
        read_submit(answer("35_submit_no_environment"))
    assert not is_permanent(info.value)


@pytest.mark.parametrize(
    ("number", "kind"),
    [(2045, "account"), (2066, "qos"), (2072, "tres"), (2115, "tres"), (2002, "permission"), (2130, "account")],
)
def test_account_qos_tres_and_access_refusals_are_permanent(number: int, kind: str) -> None:
    body = {"job_id": None, "errors": [{"error_number": number, "error": "x", "description": "y", "source": "z"}]}
    with pytest.raises(SubmitRejectedError) as info:
        read_submit(SlurmResponse(method="POST", path="/slurm/v0.0.42/job/submit", status=500, body=body))
    assert info.value.kind == kind and is_permanent(info.value)


@pytest.mark.parametrize(
    ("error", "permanent"),
    [
        (ConfigurationError("bad spec"), True),
        (RequestTooLargeError("1 MB"), True),
        (PermissionDeniedError("denied", http_status=403), True),
        (ClusterNotFoundError("no cluster", http_status=404), True),
        (TransientApiError("unavailable", http_status=503), False),
        (ApiConnectionError("reset"), False),
        (MalformedResponseError("garbled"), False),
        (UnauthenticatedError("token", http_status=401), False),
        (ValueError("not ours"), False),
    ],
)
def test_is_permanent(error: BaseException, permanent: bool) -> None:
    assert is_permanent(error) is permanent


def test_partition_names_of_a_real_answer_and_odd_entries() -> None:
    assert read_partition_names(answer("05_partitions", "GET", "/slurm/v0.0.42/partitions")) == ["debug"]
    body = {"partitions": [{"name": "gpu"}, {"name": 5}, "x", {"name": ""}, {"name": "a3\ud800"}], "errors": []}
    names = read_partition_names(SlurmResponse(method="GET", path="/p", status=200, body=body))
    assert names[0] == "gpu" and len(names) == 2
    with pytest.raises(MalformedResponseError):
        read_partition_names(SlurmResponse(method="GET", path="/p", status=200, body={"partitions": 7}))


def test_naming_the_partitions_adds_them_once_sorted() -> None:
    with pytest.raises(SubmitRejectedError) as info:
        read_submit(answer("33_submit_unknown_partition"))
    info.value.name_partitions(["gpu", "debug", "gpu", ""])
    message = str(info.value)
    # the fix first, with the names right after it, then Slurm's answer
    assert message.startswith(
        "Set job['partition'] to one of the cluster's partitions (or leave it unset for the default one): the one "
        "given is not a partition of this cluster. The cluster's partitions: debug, gpu. Slurm refused the job "
        "(Slurm answered HTTP 500 to POST "
    ), message
    assert message.endswith("2000 Invalid partition name specified (Batch job submission failed)).")
    assert message.count("The cluster's partitions") == 1
