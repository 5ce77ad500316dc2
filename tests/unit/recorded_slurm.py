"""Real Slurm 24.11 answers served to a hook through its HTTP session: no server, no socket.

Everything of ours runs: the hook encodes the envelope call and posts it, then reads the HTTP status,
the envelope and Slurm's records as in production. Only the transport under ``requests`` is
replaced: a transport adapter answers each envelope call with the recorded answer (``tests/fixtures``)
for its method and path, or with a copy of it where a test needs another state or job id.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import requests
from requests.adapters import BaseAdapter

from tests.fixtures import fixture_body, fixture_status

API_VERSION = "v0.0.42"  # the version the answers were recorded with
ENDPOINT = "http://127.0.0.1:9"  # never dialled: the adapter answers
LIVE_RUNNING = "09_job_A_running"  # job 1, RUNNING
LIVE_COMPLETED = "16_job_A_completed"  # job 1, COMPLETED
LIVE_CANCELLED = "21_job_B_after_cancel_2s"  # job 2, CANCELLED
LIVE_FAILED = "66_job_failed_exit3_live"  # job 11, FAILED, exit code 3
CALLER = "tester"  # the Linux user the hook's calls run as


class RecordedSlurm(BaseAdapter):
    """A ``requests`` transport that answers envelope calls from recorded Slurm answers."""

    def __init__(self) -> None:
        super().__init__()
        # Each route's answers in turn; the last one is given again from then on.
        self.routes: dict[tuple[str, str], list[tuple[int, dict[str, Any]]]] = {}
        self.calls: list[tuple[str, str, Any]] = []
        # The partitions, as the lab's user ``tester`` (whose jobs the recorded history holds) gets them.
        partitions = self.answer("GET", f"/slurm/{API_VERSION}/partitions/", "05_partitions")
        partitions["meta"]["client"].update(user=CALLER, group=CALLER)

    # -- what Slurm answers -----------------------------------------------------------------------
    def answer(self, method: str, path: str, fixture: str, **changes: Any) -> dict[str, Any]:
        """Answer ``method path`` with the recorded answer ``fixture`` (after the answers given before it);
        ``changes`` replace top-level fields."""
        body = copy.deepcopy(fixture_body(fixture))
        body.update(changes)
        self.routes.setdefault((method, path), []).append((fixture_status(fixture), body))
        return body

    def job(self, job_id: int, fixture: str, **fields: Any) -> dict[str, Any]:
        """The live queue knows ``job_id``: the recorded record of ``fixture``, with its id and ``fields`` set."""
        body = self.answer("GET", f"/slurm/{API_VERSION}/job/{job_id}", fixture)
        record = body["jobs"][0]
        record.update(job_id=job_id, **fields)
        return record

    def unknown_job(self, job_id: int) -> None:
        """Neither the live queue nor the history knows ``job_id`` (Slurm's answers for job 999999)."""
        self.answer("GET", f"/slurm/{API_VERSION}/job/{job_id}", "25_job_unknown_999999")
        self.answer("GET", f"/slurmdb/{API_VERSION}/job/{job_id}", "52_slurmdb_job_unknown_999999")

    def accepts_submit(self, job_id: int) -> None:
        """A submit is answered with the new job's id."""
        self.answer("POST", f"/slurm/{API_VERSION}/job/submit", "07_submit_script_toplevel", job_id=job_id)

    # -- what was asked -----------------------------------------------------------------------------
    def submits(self) -> list[dict[str, Any]]:
        """The bodies of the submits sent."""
        return [body for method, path, body in self.calls if method == "POST" and path.endswith("/job/submit")]

    def cancels(self) -> list[str]:
        return [path for method, path, _ in self.calls if method == "DELETE"]

    # -- the transport ------------------------------------------------------------------------------
    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        assert request.body is not None
        envelope = json.loads(request.body)
        method = str(envelope["method"]).removeprefix("HTTP_METHOD_")
        path = str(envelope["path"])
        self.calls.append((method, path, envelope.get("body")))
        answers = self.routes.get((method, path.split("?", 1)[0]))
        if not answers:
            raise AssertionError(f"No recorded answer for {method} {path}; recorded: {sorted(self.routes)}")
        status, body = answers.pop(0) if len(answers) > 1 else answers[0]
        response = requests.Response()
        response.status_code = 200
        response.headers["Content-Type"] = "application/json"
        response._content = json.dumps({"status": status, "body": json.dumps(body)}).encode()
        response.request, response.url = request, str(request.url)
        return response

    def close(self) -> None:
        pass


def answer_of(fixture: str, path: str, **fields: Any) -> Any:
    """The recorded answer ``fixture`` as the hook reads it for ``GET path``, its first job's ``fields`` set."""
    from airflow_provider_slurmapi.slurm.api.envelope import SlurmResponse

    body = copy.deepcopy(fixture_body(fixture))
    body["jobs"][0].update(fields)
    return SlurmResponse(method="GET", path=path, status=fixture_status(fixture), body=body)


def serve(hook: Any, slurm: RecordedSlurm) -> None:
    """Send every call of ``hook`` (its one session) to ``slurm``."""
    session = requests.Session()
    session.mount("http://", slurm)
    session.mount("https://", slurm)
    hook.session = session
