"""The client core (``slurm/client.py``) without a hook: its reads of several calls, driven by a transport
that answers each path with a real Slurm 24.11 answer (or the error the envelope gave).

Both hooks and the poller go through these reads; what is checked here holds for all of them.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
from airflow_provider_slurmapi.slurm.api.envelope import SlurmResponse
from airflow_provider_slurmapi.slurm.api.errors import InvalidArgumentError, SlurmApiError, TransientApiError
from airflow_provider_slurmapi.slurm.api.plans import Send
from airflow_provider_slurmapi.slurm.client import SlurmClient
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob
from airflow_provider_slurmapi.slurm.jobs.states import JobState, JobStateInfo
from tests.fixtures import fixture_body
from tests.unit.hooks.fake_clock import FakeClock

JOB = 4242
# What slurmrestd answers for a path it does not serve (recorded from Slurm 24.11).
NOT_SERVED = "Unable find requested URL"


class AnsweringTransport:
    """Answers each envelope from a table: path prefix -> Slurm's answer (sent back in the envelope, read by
    the client as any answer) or the error the envelope gave (raised, as a transport raises it)."""

    def __init__(self, answers: dict[str, SlurmResponse | SlurmApiError]) -> None:
        self.answers = answers
        self.sent: list[str] = []

    def send(self, envelope: Send) -> tuple[int, bytes]:
        self.sent.append(envelope.path)
        answer = next(a for prefix, a in self.answers.items() if envelope.path.startswith(prefix))
        if isinstance(answer, SlurmApiError):
            raise answer
        body = {"structuredBody": answer.body} if answer.body is not None else {"body": answer.text or ""}
        return 200, json.dumps({"status": answer.status, **body}).encode()

    def refresh(self) -> None:
        raise AssertionError("no token here")


def answering_client(
    answers: dict[str, SlurmResponse | SlurmApiError],
) -> tuple[SlurmClient[FakeClock], AnsweringTransport]:
    """The client core with every request answered from ``answers`` (and the transport, which records the paths)."""
    transport = AnsweringTransport(answers)
    cluster = ClusterRef("demo-project", "us-central1", "demo-cluster", api_version="v0.0.42")
    return SlurmClient(cluster, transport=transport, clock=FakeClock(), retry_seconds=0), transport


def jobs_answer() -> SlurmResponse:
    record = copy.deepcopy(fixture_body("09_job_A_running")["jobs"][0])
    record["job_id"] = JOB
    return SlurmResponse("GET", "/slurm/v0.0.42/jobs/", 200, {"jobs": [record], "errors": [], "warnings": []})


STATE_PATH = "/slurm/v0.0.42/jobs/state/"
JOBS_PATH = "/slurm/v0.0.42/jobs/"


@pytest.mark.parametrize(
    "refusal",
    [
        SlurmResponse("GET", STATE_PATH, 404, None, text=NOT_SERVED),  # Slurm < 23.11.7: no jobs/state
        InvalidArgumentError("The envelope refused the path's query string.", http_status=400),
    ],
    ids=["no jobs/state (404)", "query string refused"],
)
def test_the_job_list_answers_where_jobs_state_cannot_and_the_client_remembers(refusal: Any) -> None:
    client, transport = answering_client({STATE_PATH: refusal, JOBS_PATH: jobs_answer()})
    tasks: list[tuple[int, int, JobStateInfo]] = []
    live = client.run(client.live_states_plan([JOB, 7], tasks))
    assert list(live) == [JOB] and isinstance(live[JOB], SlurmJob) and live[JOB].state is JobState.RUNNING
    assert [p.split("?")[0] for p in transport.sent] == [STATE_PATH, JOBS_PATH]
    transport.sent.clear()
    client.run(client.live_states_plan([JOB], tasks))
    assert transport.sent == [JOBS_PATH]  # asked once per client, then remembered


def test_any_other_failure_of_jobs_state_is_raised_and_not_taken_for_a_missing_endpoint() -> None:
    client, transport = answering_client(
        {STATE_PATH: TransientApiError("UNAVAILABLE", http_status=503), JOBS_PATH: jobs_answer()}
    )
    with pytest.raises(TransientApiError):
        client.run(client.live_states_plan([JOB]))
    assert client.state_endpoint and all(p.startswith(STATE_PATH) for p in transport.sent)
