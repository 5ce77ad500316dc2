"""The Slurm Job API client without a transport: what the sync and the async hook share.

As httpx splits ``BaseClient`` (configuration, building requests, reading responses) from ``Client``
and ``AsyncClient`` (sending them), :class:`SlurmClientBase` owns the paths, the request envelope,
reading the answers, mapping errors and the retry policy; a hook adds only a transport: its ``call``
sends one envelope and waits, with ``requests`` or with aiohttp.

A read of several calls (a job from the live queue, else from the history; the states of jobs, else
the job list) is written once, as a *plan*: a generator that yields the :class:`SlurmRequest` it
needs next and is sent its result (or thrown its error). Each hook drives plans with its own
transport (:class:`PlanRun`), so the sync and the async hook cannot drift apart.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import tenacity

from airflow_provider_slurmapi.slurm.api_versions import NEGOTIATE, probe_order, served_by, traits
from airflow_provider_slurmapi.slurm.array import complete_array
from airflow_provider_slurmapi.slurm.cluster import ClusterRef
from airflow_provider_slurmapi.slurm.envelope import HttpMethod, SlurmResponse, encode_request, parse_envelope
from airflow_provider_slurmapi.slurm.errors import (
    ApiConnectionError,
    InvalidArgumentError,
    MalformedRecordError,
    MalformedResponseError,
    SignalOutcomeUnknownError,
    SlurmApiError,
    SlurmError,
    UnauthenticatedError,
    UnsupportedApiVersionError,
)
from airflow_provider_slurmapi.slurm.job import SlurmJob
from airflow_provider_slurmapi.slurm.paths import VERSION_PLACEHOLDER, SlurmPaths, ping_path, resolve_path
from airflow_provider_slurmapi.slurm.readers import (
    CancelOutcome,
    caller_user,
    read_array_task_states,
    read_cancel,
    read_history_job,
    read_job_states,
    read_jobs,
    read_jobs_by_id,
    read_live_job,
    read_partition_names,
)
from airflow_provider_slurmapi.slurm.retry import DEFAULT_RETRY_SECONDS, is_transient, retry_kwargs
from airflow_provider_slurmapi.slurm.states import JobStateInfo
from airflow_provider_slurmapi.slurm.tag import own_tagged

T = TypeVar("T")

DEFAULT_TIMEOUT_SECONDS = 60.0
# Job ids per jobs/state call: ~16 bytes each, so a call is ~160 kB, far below the 1 MB request limit.
MAX_IDS_PER_CALL = 10_000
SUBMIT_TAG_PREFIX = "slurmapi-submit="
# Warnings Slurm gives for an empty answer: routine for look-ups, not worth a user's attention.
_ROUTINE_WARNINGS = ("found nothing", "No job changes since", "Zero jobs to dump")
# Warnings Slurm repeats in every answer (a deprecated API version): worth saying once per client.
_REPEATED_WARNINGS = ("deprecat",)
# The API version negotiated with each cluster (by its callSlurmRestApi URL), once per process.
_NEGOTIATED: dict[str, str] = {}


@dataclass(frozen=True, slots=True)
class SlurmRequest(Generic[T]):
    """One Slurm call and how to read its answer.

    ``retry``: ``None`` retries GET and DELETE on transient failures, never a POST. ``reread``: ask
    again when Slurm garbled the record asked for (:class:`MalformedRecordError`).
    """

    method: HttpMethod
    path: str
    read: Callable[[SlurmResponse], T]
    body: Mapping[str, Any] | None = None
    retry: bool | None = None
    reread: bool = False


Plan = Generator[SlurmRequest[Any], Any, T]
"""A read of one or more calls: yields requests, is sent their results or thrown their errors."""


def one_call(request: SlurmRequest[T]) -> Plan[T]:
    """The plan of a single call."""
    result: T = yield request
    return result


class PlanRun(Generic[T]):
    """Drives a plan: :attr:`request` is what it needs next (``None``: done, see :attr:`result`)."""

    def __init__(self, plan: Plan[T]) -> None:
        self._plan = plan
        self.result: T | None = None
        self.request: SlurmRequest[Any] | None = None
        self._step(lambda: next(plan))

    def feed(self, outcome: object) -> None:
        """The result of :attr:`request`, or the :class:`SlurmApiError` it ended in."""
        if isinstance(outcome, SlurmApiError):
            self._step(lambda: self._plan.throw(outcome))
        else:
            self._step(lambda: self._plan.send(outcome))

    def _step(self, advance: Callable[[], SlurmRequest[Any]]) -> None:
        try:
            self.request = advance()
        except StopIteration as stop:
            self.request, self.result = None, stop.value


class SlurmClientBase:
    """Everything a Slurm Job API client does but send: the hooks add their transport.

    Settings a test or a caller may tune after construction: ``retry_seconds`` (how long transient
    failures of one call are retried), ``retry_initial_wait`` (the first backoff), ``timeout``.
    """

    paths: SlurmPaths
    api_version: str | None
    timeout: float
    retry_seconds: float
    retry_initial_wait: float
    state_endpoint: bool
    # The Linux user the calls run as (``meta.client.user``), from the first slurmctld answer that names it.
    _caller: str | None = None

    def _init_client(self, cluster: ClusterRef, *, timeout: float | None, retry_seconds: float | None) -> None:
        # api_version "auto": paths carry a placeholder until the version is negotiated (resolve_path).
        self.paths = SlurmPaths(cluster.api_version)
        self.api_version = None if cluster.api_version == NEGOTIATE else cluster.api_version
        # Repeated warnings said once per client; the cluster's release checked against the version once.
        self._warned: set[str] = set()
        self._release_checked = False
        self.timeout = float(timeout or DEFAULT_TIMEOUT_SECONDS)
        self.retry_seconds = float(retry_seconds if retry_seconds is not None else DEFAULT_RETRY_SECONDS)
        self.retry_initial_wait = 1.0
        # Whether jobs/state answers here: learnt once per client (see _live_states_plan).
        self.state_endpoint = True

    def _needs_version(self, path: str) -> bool:
        """Whether ``path`` waits for the negotiated version (the hook negotiates, then resolves it)."""
        return self.api_version is None and VERSION_PLACEHOLDER in path

    def _resolved(self, path: str) -> str:
        return resolve_path(path, self.api_version) if self.api_version else path

    @property
    def _logger(self) -> Any:
        """The hook's logger (Airflow's), else this module's."""
        return getattr(self, "log", None) or logging.getLogger(__name__)

    # -- the retry policy ---------------------------------------------------------------------------
    def _retry_kwargs(self) -> dict[str, Any]:
        """Transient failures of a call (never a POST's): bounded exponential backoff with jitter."""
        return retry_kwargs(self.retry_seconds, initial=self.retry_initial_wait, logger=self._logger)

    def _reread_kwargs(self, request: SlurmRequest[Any]) -> dict[str, Any]:
        """Asking again for a record Slurm garbled, when the request allows it; else one attempt."""
        if not request.reread:
            return {"stop": tenacity.stop_after_attempt(1), "reraise": True}
        return {**self._retry_kwargs(), "retry": tenacity.retry_if_exception_type(MalformedRecordError)}

    @staticmethod
    def _retries(method: HttpMethod, retry: bool | None) -> bool:
        """GET and DELETE are retried on transient failures; a POST (it may create something) is not."""
        return method != "POST" if retry is None else retry

    # -- requests and answers -----------------------------------------------------------------------
    @staticmethod
    def _encode(method: HttpMethod, path: str, body: Mapping[str, Any] | None) -> bytes:
        return encode_request(method, path, body)

    @staticmethod
    def _read_answer(
        status: int, content: bytes, *, method: HttpMethod, path: str, cluster: ClusterRef
    ) -> SlurmResponse:
        """Slurm's answer out of the envelope; a 2xx without JSON is a garbled answer."""
        response = parse_envelope(status, content, method=method, path=path, cluster=cluster)
        if response.status < 400 and response.body is None:
            shown = (response.text or "")[:120]
            raise MalformedResponseError(
                f"Slurm answered {method} {path} with HTTP {response.status} but no JSON body ({shown!r})."
            )
        return response

    def _answered(self, response: SlurmResponse) -> SlurmResponse:
        log_slurm_warnings(self._logger, response, self._warned)
        if self._caller is None:
            self._caller = caller_user(response)
        if self.api_version is not None and not self._release_checked:
            self._release_checked = True
            notice = deprecation_notice(self.api_version, slurm_release(response))
            if notice:
                self._logger.warning("%s", notice)
        return response

    def _no_answer(self, cluster: ClusterRef, exc: BaseException) -> ApiConnectionError:
        return ApiConnectionError(
            f"No answer from {cluster.endpoint} within {self.timeout:.0f}s ({type(exc).__name__})."
        )

    @staticmethod
    def _no_token(gcp_conn_id: str, exc: BaseException) -> UnauthenticatedError:
        """A token could not be had: the error names the connection, never the credential."""
        return UnauthenticatedError(
            f"Could not get a Google token for connection {gcp_conn_id!r}: {type(exc).__name__}. "
            "Check the connection's key or impersonation_chain.",
            http_status=401,
        )

    # -- plans: what each read asks, once for both hooks ----------------------------------------------
    def _negotiate_plan(self, cluster: ClusterRef) -> Plan[str]:
        """The newest API version both this provider and the cluster speak, cached per process.

        Pings (cheap: no job is read) in :func:`~airflow_provider_slurmapi.slurm.api_versions.probe_order`
        until one answers; an unknown version answers 404 in plain text. The answer's
        ``meta.slurm.release`` (e.g. 26.05.5) then names, through the version table, the newest version
        that release serves. One call on a cluster that serves the newest version, two on older ones.
        """
        cached = _NEGOTIATED.get(cluster.url)
        if cached is not None:
            return cached
        refused: list[str] = []
        answered: str | None = None
        release = ""
        for row in probe_order():
            if answered is not None and (row.number < traits(answered).number):
                continue
            try:
                response: SlurmResponse = yield SlurmRequest("GET", ping_path(row.name), _as_is)
                response.raise_for_errors()
            except (SlurmError, InvalidArgumentError) as exc:
                # 404: slurmrestd does not serve it; INVALID_ARGUMENT: an envelope that refuses the path.
                if isinstance(exc, InvalidArgumentError) or exc.http_status == 404:
                    refused.append(row.name)
                    continue
                raise
            answered = row.name
            release = slurm_release(response)
            known = served_by(release.rsplit(".", 1)[0]) if release else ()
            if known:
                answered = known[0].name
                break
        if answered is None:
            raise UnsupportedApiVersionError(
                f"Cluster {cluster.cluster_id} serves none of the Slurm REST API versions this provider speaks "
                f"(each of {', '.join(refused)} answered 404). Check the cluster's Slurm release: this provider "
                "supports Slurm 24.11 to 26.05, or set api_version to a version the cluster serves."
            )
        _NEGOTIATED[cluster.url] = answered
        self._logger.info(
            "Slurm REST API version %s negotiated with cluster %s (Slurm %s): the newest both speak.",
            answered,
            cluster.cluster_id,
            release or "release not given",
        )
        return answered

    def _live_job_plan(self, job_id: int) -> Plan[SlurmJob | None]:
        return one_call(SlurmRequest("GET", self.paths.job(job_id), read_live_job, reread=True))

    def _history_job_plan(self, job_id: int) -> Plan[SlurmJob | None]:
        return one_call(SlurmRequest("GET", self.paths.history_job(job_id), read_history_job, reread=True))

    def _job_plan(self, job_id: int) -> Plan[SlurmJob | None]:
        """The job from the live queue, or from the history once it has left it; ``None`` if neither knows it.

        An array whose tasks in the live queue are all over is completed from the history (its
        earlier tasks may have left the queue): one more call, once, at its end.
        """
        job = yield from self._live_job_plan(job_id)
        if job is not None and job.array is not None and job.is_finished:
            return complete_array(job, (yield from self._history_job_plan(job_id)))
        if job is None:
            job = yield from self._history_job_plan(job_id)
        return job

    def _live_jobs_plan(self, job_ids: Sequence[int]) -> Plan[dict[int, SlurmJob]]:
        ids = list(job_ids)
        return one_call(SlurmRequest("GET", self.paths.jobs(), lambda response: read_jobs_by_id(response, ids)))

    def _list_jobs_plan(self, *, history: bool, filters: Mapping[str, Any], own: bool = False) -> Plan[list[SlurmJob]]:
        if own and not (history and filters.get("users")):
            return self._own_jobs_plan(history=history, filters=filters)
        path = self.paths.history_jobs(**filters) if history else self.paths.jobs()
        return one_call(SlurmRequest("GET", path, lambda response: read_jobs(response, history=history)))

    def _own_jobs_plan(self, *, history: bool, filters: Mapping[str, Any]) -> Plan[list[SlurmJob]]:
        """The caller's own jobs: the history filtered by user where Slurm filters (``users=``), the live
        queue filtered here. The caller is the connection's ``slurm_user``, else ``meta.client.user`` of the
        first slurmctld answer that names it (a ping first when none has yet: slurmdbd answers name nobody)."""
        if history:
            if self._caller is None:
                ping: SlurmResponse = yield SlurmRequest("GET", self.paths.ping(), _as_is)
                ping.raise_for_errors()
            path = self.paths.history_jobs(**{**filters, "users": [self._require_caller()]})
            answer: SlurmResponse = yield SlurmRequest("GET", path, _as_is)
            return read_jobs(answer, history=True)
        live: SlurmResponse = yield SlurmRequest("GET", self.paths.jobs(), _as_is)
        jobs = read_jobs(live, history=False)
        user = self._caller or caller_user(live)
        if user is None:
            raise self._no_caller(live)
        return [job for job in jobs if job.user == user]

    def _require_caller(self) -> str:
        if self._caller is None:
            raise self._no_caller(None)
        return self._caller

    @staticmethod
    def _no_caller(response: SlurmResponse | None) -> SlurmApiError:
        where = f"The answer to {response.method} {response.path}" if response is not None else "No answer"
        return SlurmApiError(
            f"{where} does not name the calling user (meta.client.user), so the caller's own jobs cannot be told "
            "apart from other users'. Set the connection extra slurm_user to the Linux user the calls run as, list "
            "every user's jobs explicitly (all_users=True), or name the users (history filters users=[...])."
        )

    def _partitions_plan(self, *, retry: bool | None = None) -> Plan[list[str]]:
        return one_call(SlurmRequest("GET", self.paths.partitions(), read_partition_names, retry=retry))

    def _live_states_plan(
        self, job_ids: Sequence[int], tasks: list[tuple[int, int, JobStateInfo]] | None = None
    ) -> Plan[dict[int, JobStateInfo | SlurmJob]]:
        """States of the given jobs still in the live queue: ``jobs/state`` (chunked), else the ``jobs/`` list.

        The one place that falls back: a cluster without ``jobs/state`` (404, Slurm < 23.11.7) or an
        envelope that refuses query strings is answered from ``jobs/`` (full records, hence
        ``SlurmJob`` values), and this client remembers it. ``tasks`` receives the answer's array task
        entries ``(job id, task id, state)``: an array's id is answered with one entry per task.
        """
        ids = list(job_ids)
        if self.state_endpoint:
            states: dict[int, JobStateInfo | SlurmJob] = {}
            first_entry = len(tasks) if tasks is not None else 0
            try:
                for start in range(0, len(ids), MAX_IDS_PER_CALL):
                    path = self.paths.jobs_state(ids[start : start + MAX_IDS_PER_CALL])
                    response: SlurmResponse = yield SlurmRequest("GET", path, _as_is)
                    if tasks is not None:
                        tasks.extend(read_array_task_states(response))
                    states.update(read_job_states(response))
                return states
            except SlurmApiError as exc:
                why = state_endpoint_refused(exc)
                if why is None:
                    raise
                self._logger.warning("%s; listing jobs/ instead.", why)
                self.state_endpoint = False
                if tasks is not None:
                    del tasks[first_entry:]
        return dict((yield from self._live_jobs_plan(ids)))

    def _later_copies_plan(self, tag: str, keep_job_id: int) -> Plan[list[int]]:
        """Cancel the caller's own jobs carrying ``tag`` that are newer than ``keep_job_id``.

        After a resend, the front end may still carry out an earlier send of the same submit, at any
        time: such a copy carries the task's tag and a higher job id than the job the task watches.
        One read of the live queue (its answer names the caller, ``meta.client.user``); never a job of
        another user. Asked only by a watch whose submit was resent.
        """
        response: SlurmResponse = yield SlurmRequest("GET", self.paths.jobs(), _as_is)
        user = self._caller or caller_user(response)
        if not user:
            self._logger.warning("The live queue's answer names no caller: not looking for copies of tag %s.", tag)
            return []
        copies = [
            job.job_id
            for job in own_tagged(read_jobs(response, history=False), tag, user=user)
            if job.job_id > keep_job_id and not job.is_finished
        ]
        for job_id in copies:
            self._logger.warning(
                "Slurm job %s carries tag %s too: an earlier send of the submit was carried out late. Cancelling "
                "it; the task goes on with job %s.",
                job_id,
                tag,
                keep_job_id,
            )
            yield from self._cancel_plan(job_id)
        return copies

    def _cancel_plan(self, job_id: int, signal: str | None = None) -> Plan[CancelOutcome]:
        """Cancel a job. Cancelling a finished or unknown job is not an error; the outcome says which.

        A plain cancel is retried on transient failures (cancelling twice is harmless); a ``signal``
        never is: Slurm delivers it on every call that reaches it, and a lost answer does not say
        whether it did (:class:`SignalOutcomeUnknownError`).
        """
        path = self.paths.cancel(job_id, signal)
        try:
            outcome: CancelOutcome = yield SlurmRequest("DELETE", path, read_cancel, retry=signal is None)
        except SlurmApiError as exc:
            if signal is not None and is_transient(exc):
                raise signal_not_resent(job_id, signal, exc) from exc
            raise
        self._logger.info("Cancel of Slurm job %s: %s", job_id, outcome.value)
        return outcome


def log_slurm_warnings(logger: Any, response: SlurmResponse, said: set[str] | None = None) -> None:
    """Slurm's ``warnings[]`` in the task log; the routine "nothing found" ones only at debug level.

    Those Slurm repeats in every answer (a deprecated API version) are logged once per ``said`` set.
    """
    for warning in response.warning_messages():
        if said is not None and any(text in warning.lower() for text in _REPEATED_WARNINGS):
            if warning in said:
                continue
            said.add(warning)
        routine = any(text in warning for text in _ROUTINE_WARNINGS)
        (logger.debug if routine else logger.warning)(
            "Slurm warning (%s %s): %s", response.method, response.path, warning
        )


def deprecation_notice(version: str, release: str) -> str | None:
    """What to tell a user whose cluster (Slurm ``release``) deprecates ``version``, from the version table.

    Slurm 26.05.5 deprecates v0.0.42 without saying so in its answers: the table knows.
    """
    row = traits(version)
    if not release or row.deprecated_in is None or _release_key(release) < _release_key(row.deprecated_in):
        return None
    return (
        f"Slurm REST API {row.name} is deprecated in Slurm {row.deprecated_in} (this cluster runs {release}) and "
        f"removed in {row.removed_in}: leave api_version unset to negotiate the newest version both sides speak, "
        "or set a newer one."
    )


def _release_key(release: str) -> tuple[int, ...]:
    """``"26.05.5"`` -> ``(26, 5)``: feature releases compare as numbers."""
    return tuple(int(part) for part in release.split(".")[:2])


def slurm_release(response: SlurmResponse) -> str:
    """``meta.slurm.release`` of an answer (``"26.05.5"``), or ``""``."""
    body = response.body if isinstance(response.body, Mapping) else {}
    meta = body.get("meta")
    slurm = meta.get("slurm") if isinstance(meta, Mapping) else None
    release = slurm.get("release") if isinstance(slurm, Mapping) else None
    return release if isinstance(release, str) and re.fullmatch(r"\d+\.\d+\.\d+", release) else ""


def _as_is(response: SlurmResponse) -> SlurmResponse:
    return response


def state_endpoint_refused(exc: SlurmApiError) -> str | None:
    """Why ``jobs/state`` cannot answer on this cluster, or ``None`` if ``exc`` says something else."""
    if isinstance(exc, InvalidArgumentError):
        return f"The envelope refused jobs/state with a query string ({exc})"
    if isinstance(exc, SlurmError) and exc.http_status == 404:
        return "This cluster has no jobs/state endpoint (Slurm < 23.11.7)"
    return None


def signal_not_resent(job_id: int, signal: str, exc: SlurmApiError) -> SignalOutcomeUnknownError:
    return SignalOutcomeUnknownError(
        f"Sending {signal} to Slurm job {job_id} got no clear answer ({exc}). It was not resent, so the job got "
        "the signal once or not at all: check the job (e.g. its output) before sending it again."
    )


def one_off_tag() -> str:
    """The tag of a submit that names no task instance: found again after a lost answer all the same."""
    return f"{SUBMIT_TAG_PREFIX}{uuid.uuid4().hex[:24]}"


def as_states(live: Mapping[int, JobStateInfo | SlurmJob]) -> dict[int, JobStateInfo]:
    """States only, whether ``jobs/state`` or the ``jobs/`` list answered."""
    return {job_id: value.state_info if isinstance(value, SlurmJob) else value for job_id, value in live.items()}


__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_IDS_PER_CALL",
    "Plan",
    "PlanRun",
    "SlurmClientBase",
    "SlurmRequest",
    "as_states",
    "log_slurm_warnings",
    "one_call",
    "one_off_tag",
    "signal_not_resent",
    "state_endpoint_refused",
]
