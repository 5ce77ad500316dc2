"""Hooks for the Slurm Job API: :class:`SlurmApiHook` (sync) and :class:`SlurmApiAsyncHook` (triggers).

Both get their credentials from an Airflow Google Cloud connection through the Google provider's
``GoogleBaseHook``, so every form it supports works: Application Default Credentials, a key file
path, key JSON in ``keyfile_dict``, ``impersonation_chain``. Connection extra ``api_endpoint``
(or the ``api_endpoint`` argument) points them elsewhere than ``https://{region}-aiplatform.googleapis.com``,
e.g. at a private endpoint or the local ``slurmapi-emulator``.

Why these libraries: google-auth's ``AuthorizedSession`` keeps one pooled ``requests`` session and
refreshes the token only when it expires; aiohttp is what the triggerer's event loop speaks;
tenacity gives bounded exponential backoff with jitter.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

import tenacity
from airflow.providers.google.common.hooks.base_google import GoogleBaseAsyncHook, GoogleBaseHook

from airflow_provider_slurmapi.slurm.array import complete_array
from airflow_provider_slurmapi.slurm.cluster import check_cluster_args, check_project_id
from airflow_provider_slurmapi.slurm.envelope import (
    ClusterRef,
    HttpMethod,
    SlurmResponse,
    encode_request,
    parse_envelope,
)
from airflow_provider_slurmapi.slurm.errors import (
    ApiConnectionError,
    ConfigurationError,
    InvalidArgumentError,
    MalformedRecordError,
    MalformedResponseError,
    SignalOutcomeUnknownError,
    SlurmApiError,
    SubmitOutcomeUnknownError,
    UnauthenticatedError,
)
from airflow_provider_slurmapi.slurm.job import SlurmJob
from airflow_provider_slurmapi.slurm.results import (
    CancelOutcome,
    SubmitResult,
    newest_tagged,
    own_tagged,
    read_array_task_states,
    read_cancel,
    read_history_job,
    read_job_states,
    read_jobs,
    read_jobs_by_id,
    read_live_job,
    read_submit,
)
from airflow_provider_slurmapi.slurm.retry import DEFAULT_RETRY_SECONDS, is_transient, retry_kwargs
from airflow_provider_slurmapi.slurm.spec import CLOCK_SKEW_SECONDS, PreparedSubmission, prepare_submission
from airflow_provider_slurmapi.slurm.states import JobStateInfo
from airflow_provider_slurmapi.slurm.versions import DEFAULT_API_VERSION, SlurmPaths

if TYPE_CHECKING:
    import aiohttp
    import requests
    from google.auth.credentials import Credentials

DEFAULT_TIMEOUT_SECONDS = 60.0
# How far back the history is searched for a job carrying a task's tag.
TAG_LOOKBACK_SECONDS = 7 * 24 * 3600
# After a lost submit answer, how much longer than the request timeout the service may still act on it.
SUBMIT_SETTLE_MARGIN_SECONDS = 30.0
_SUBMIT_TAG_PREFIX = "slurmapi-submit="


class SlurmApiHook(GoogleBaseHook):
    """Calls the Slurm Job API of one training cluster.

    :param region: the cluster's region, e.g. ``us-central1``.
    :param cluster_id: the training cluster's id.
    :param project_id: the cluster's project; default: the connection's project.
    :param gcp_conn_id: an Airflow Google Cloud connection.
    :param api_version: the Slurm REST version to speak (``v0.0.40`` to ``v0.0.44``).
    :param impersonation_chain: a service account (or chain) to impersonate.
    :param api_endpoint: overrides the endpoint (also connection extra ``api_endpoint``).
    :param timeout: seconds to wait for one answer (default: connection extra ``request_timeout``, else 60).
    :param retry_seconds: how long transient failures of one call are retried before giving up
        (default: connection extra ``retry_seconds``, else 300). A watch rides out longer outages.
    :param submit_settle_seconds: after a lost submit answer, how long the job is looked for before the
        submit is sent again (default: connection extra ``submit_settle_seconds``, else the request
        timeout plus 30 s): longer than the service may take to carry out a submit it got.
    """

    conn_name_attr = "gcp_conn_id"
    default_conn_name = "google_cloud_default"
    conn_type = "google_cloud_platform"
    hook_name = "Google Cloud"

    def __init__(
        self,
        *,
        region: str,
        cluster_id: str,
        project_id: str | None = None,
        gcp_conn_id: str = "google_cloud_default",
        api_version: str = DEFAULT_API_VERSION,
        impersonation_chain: str | Sequence[str] | None = None,
        api_endpoint: str | None = None,
        timeout: float | None = None,
        retry_seconds: float | None = None,
        submit_settle_seconds: float | None = None,
        **kwargs: Any,
    ) -> None:
        # They decide where the token goes: checked before the connection is even read.
        check_cluster_args(region=region, cluster_id=cluster_id, project_id=project_id, api_endpoint=api_endpoint)
        super().__init__(gcp_conn_id=gcp_conn_id, impersonation_chain=impersonation_chain, **kwargs)
        self.paths = SlurmPaths(api_version)
        self.region = region
        self.cluster_id = cluster_id
        self._project_id_arg = project_id
        self._api_endpoint_arg = api_endpoint
        self.timeout = float(timeout or self._get_field("request_timeout") or DEFAULT_TIMEOUT_SECONDS)
        configured = retry_seconds if retry_seconds is not None else self._get_field("retry_seconds")
        self.retry_seconds = float(configured if configured not in (None, "") else DEFAULT_RETRY_SECONDS)
        settle = submit_settle_seconds or self._get_field("submit_settle_seconds")
        self.submit_settle_seconds = float(settle) if settle else self.timeout + SUBMIT_SETTLE_MARGIN_SECONDS
        self.retry_initial_wait = 1.0
        self._retrying_policy: tenacity.Retrying | None = None
        self._retrying_for: tuple[float, float] | None = None

    def _retry_kwargs(self) -> dict[str, Any]:
        return retry_kwargs(self.retry_seconds, initial=self.retry_initial_wait, logger=self.log)

    def _retrying(self) -> tenacity.Retrying:
        """One retry policy per hook (its per-call state is thread-local in tenacity), rebuilt if tuned."""
        key = (self.retry_seconds, self.retry_initial_wait)
        if self._retrying_for != key:
            self._retrying_policy = tenacity.Retrying(**self._retry_kwargs())
            self._retrying_for = key
        assert self._retrying_policy is not None
        return self._retrying_policy

    def __repr__(self) -> str:
        return f"<SlurmApiHook conn={self.gcp_conn_id!r} cluster={self.region}/{self.cluster_id}>"

    # -- where and how calls go -------------------------------------------------------------------
    @cached_property
    def cluster(self) -> ClusterRef:
        project = self._project_id_arg or self.project_id
        if not project:
            raise ConfigurationError(
                f"project_id is not set and connection {self.gcp_conn_id!r} names no project: pass "
                "project_id=... or set the connection's project."
            )
        if not self._project_id_arg:
            check_project_id(project, field=f"the project of connection {self.gcp_conn_id!r}")
        endpoint = self._api_endpoint_arg or self._get_field("api_endpoint") or ""
        return ClusterRef(project_id=project, region=self.region, cluster_id=self.cluster_id, endpoint=endpoint)

    @cached_property
    def session(self) -> requests.Session:
        """One pooled session whose token google-auth refreshes only when it has expired."""
        from google.auth.transport.requests import AuthorizedSession

        _ = self.cluster  # the connection's project and endpoint are checked before any credential
        return AuthorizedSession(self._session_credentials)

    @cached_property
    def _session_credentials(self) -> Credentials:
        """One credential for both sessions: a token refreshed by one is the other's too."""
        return self.get_credentials()

    @cached_property
    def submit_session(self) -> requests.Session:
        """The session of submits: same credentials, but it never re-sends a request on a 401.

        ``AuthorizedSession`` refreshes the token and sends the request again on 401, which for a submit
        could start a second job: a 401 on submit is handled as a lost answer instead.
        """
        from google.auth.transport.requests import AuthorizedSession

        return AuthorizedSession(self._session_credentials, refresh_status_codes=())

    def _post(self, data: bytes, *, session: requests.Session | None = None) -> tuple[int, bytes]:
        import requests
        from google.auth.exceptions import RefreshError, TransportError

        url = self.cluster.url
        try:
            response = (session or self.session).post(
                url,
                data=data,
                headers={"Content-Type": "application/json"},
                timeout=self.timeout,
            )
        except RefreshError as exc:
            raise UnauthenticatedError(
                f"Could not get a Google token for connection {self.gcp_conn_id!r}: {type(exc).__name__}. "
                "Check the connection's key or impersonation_chain.",
                http_status=401,
            ) from None
        except (requests.ConnectionError, requests.Timeout, TransportError) as exc:
            raise ApiConnectionError(
                f"No answer from {self.cluster.endpoint} within {self.timeout:.0f}s ({type(exc).__name__})."
            ) from exc
        return response.status_code, response.content

    def call(
        self, method: HttpMethod, path: str, body: Mapping[str, Any] | None = None, *, retry: bool | None = None
    ) -> SlurmResponse:
        """One raw Slurm call through the envelope: Slurm's status and parsed body (or text).

        GET and DELETE are retried on transient failures; POST is not (see :meth:`submit_job`).
        Slurm's ``warnings[]`` are logged; ``errors[]`` are left to the caller
        (:meth:`SlurmResponse.raise_for_errors`).
        """
        data = encode_request(method, path, body)
        retry = method != "POST" if retry is None else retry

        # A POST may create something: it goes through the session that never re-sends on 401.
        session = self.submit_session if method == "POST" else None

        def attempt() -> SlurmResponse:
            status, content = self._post(data, session=session)
            return _check_json(parse_envelope(status, content, method=method, path=path, cluster=self.cluster))

        response = self._retrying()(attempt) if retry else attempt()
        _log_slurm_warnings(self.log, response)
        return response

    # -- jobs -------------------------------------------------------------------------------------
    def submit_job(
        self,
        job: Mapping[str, Any] | None,
        script: str | None,
        *,
        tag: str | None = None,
        comment: str | None = None,
        earlier_job_id: int | None = None,
    ) -> SubmitResult:
        """Submit a batch job with exactly one call; never start two copies of it.

        Every job carries a tag in its ``comment`` (the task instance's, or a one-off one). A submit
        whose answer is lost (no answer, 5xx, UNAVAILABLE, 401) is followed by look-ups of the tag, and
        resent only if no job carries it once the service can no longer be acting on it (see
        ``submit_settle_seconds``). ``earlier_job_id``: a job of an earlier try with the same tag,
        never taken for this submit's.
        """
        prepared = prepare_submission(job, script, tag=tag or _one_off_tag(), comment=comment)
        for note in prepared.notes:
            self.log.info("%s", note)
        return self._submit_prepared(prepared, earlier_job_id=earlier_job_id)

    def _submit_prepared(self, prepared: PreparedSubmission, *, earlier_job_id: int | None = None) -> SubmitResult:
        """Send the submit once; on a lost answer, look for the job until the settle window is over first.

        A lost answer (no answer, 5xx, UNAVAILABLE, 429, a garbled one, or a 401) does not say whether
        Slurm created the job, and the service may still act on it after the client gave up. The submit
        is sent again only when lookups have found no job with its tag for ``submit_settle_seconds``
        after it was sent; after any resend the tag is looked up again and, should two jobs carry it,
        the newer is cancelled.
        """
        assert prepared.tag
        deadline = time.monotonic() + max(self.retry_seconds, self.submit_settle_seconds)
        since = int(time.time()) - CLOCK_SKEW_SECONDS
        resent = False
        while True:
            sent = time.monotonic()
            try:
                result = self._send_submit(prepared)
            except SlurmApiError as exc:
                if not _answer_lost(exc):
                    raise
                found = self._settle_lost_submit(prepared, exc, sent, since, earlier_job_id)
                if found is not None:
                    return SubmitResult(job_id=found.job_id)
                if time.monotonic() >= deadline:
                    raise
                resent = True
                continue
            self.log.info("Submitted Slurm job %s to %s", result.job_id, self.cluster)
            if resent:
                result = self._drop_duplicate_jobs(prepared, result, since, earlier_job_id)
            return result

    def _send_submit(self, prepared: PreparedSubmission) -> SubmitResult:
        """One POST of ``job/submit``, through the session that never re-sends it."""
        path = self.paths.submit()
        data = encode_request("POST", path, prepared.payload)
        status, content = self._post(data, session=self.submit_session)
        if status == 401:
            raise _SubmitTokenRefused(
                "The submit was answered 401 (token refused); its outcome is treated as unknown.", http_status=401
            )
        response = _check_json(parse_envelope(status, content, method="POST", path=path, cluster=self.cluster))
        _log_slurm_warnings(self.log, response)
        return read_submit(response)

    def _settle_lost_submit(
        self, prepared: PreparedSubmission, exc: SlurmApiError, sent: float, since: int, earlier_job_id: int | None
    ) -> SlurmJob | None:
        """Look for the job of a lost submit until ``submit_settle_seconds`` after it was sent."""
        assert prepared.tag
        settled_at = sent + self.submit_settle_seconds
        pause = min(10.0, max(0.5, self.submit_settle_seconds / 4))
        self.log.warning(
            "The answer to the submit was lost (%s). Looking for tag %s for up to %.0fs before sending it again.",
            exc,
            prepared.tag,
            max(0.0, settled_at - time.monotonic()),
        )
        while True:
            looked_at = time.monotonic()
            found = self._find_after_lost_answer(prepared, since, earlier_job_id)
            if found is not None:
                return found
            if looked_at >= settled_at:
                self.log.warning(
                    "No job carries tag %s %.0fs after the lost submit: sending it again.",
                    prepared.tag,
                    looked_at - sent,
                )
                return None
            time.sleep(min(pause, max(0.0, settled_at - time.monotonic())))

    def _find_after_lost_answer(
        self, prepared: PreparedSubmission, since: int, earlier_job_id: int | None = None
    ) -> SlurmJob | None:
        assert prepared.tag
        try:
            jobs = self._tagged_everywhere(prepared.tag, name=prepared.job.get("name"), since=since)
        except SlurmApiError as exc:
            raise SubmitOutcomeUnknownError(
                f"The answer to a submit was lost and looking for its tag {prepared.tag} failed too ({exc}). "
                "Not resending, to avoid a second copy of the job: check the cluster's queue for that tag."
            ) from exc
        jobs = [job for job in jobs if earlier_job_id is None or job.job_id > earlier_job_id]
        found = jobs[0] if jobs else None
        if found is not None:
            self.log.warning(
                "The answer to the submit was lost, but Slurm job %s carries its tag %s: using it, not resending.",
                found.job_id,
                prepared.tag,
            )
        return found

    def _drop_duplicate_jobs(
        self, prepared: PreparedSubmission, result: SubmitResult, since: int, earlier_job_id: int | None
    ) -> SubmitResult:
        """After a resend: if the lost submit was carried out after all, keep the older job, cancel the newer."""
        assert prepared.tag
        try:
            jobs = self._tagged_everywhere(prepared.tag, name=prepared.job.get("name"), since=since)
        except SlurmApiError as exc:
            self.log.warning("Could not look for a second job with tag %s after the resend: %s", prepared.tag, exc)
            return result
        jobs = [job for job in jobs if earlier_job_id is None or job.job_id > earlier_job_id]
        if len(jobs) < 2:
            return result
        keep, extra = jobs[0], jobs[1:]
        for job in extra:
            self.log.warning(
                "Slurm jobs %s and %s both carry tag %s (the lost submit was carried out after all): "
                "cancelling the newer, %s.",
                keep.job_id,
                job.job_id,
                prepared.tag,
                job.job_id,
            )
            self.cancel_job(job.job_id)
        return SubmitResult(job_id=keep.job_id, warnings=result.warnings if keep.job_id == result.job_id else [])

    def _tagged_everywhere(self, tag: str, *, name: str | None, since: int) -> list[SlurmJob]:
        """This task's jobs submitted since ``since``, from the live queue and the history, oldest first."""
        live = read_jobs(self.call("GET", self.paths.jobs()), history=False)
        path = self.paths.history_jobs(job_name=name, start_time=since)
        history = read_jobs(self.call("GET", path), history=True)
        return own_tagged([*live, *history], tag, since=since)

    def find_job_by_tag(
        self,
        tag: str,
        *,
        name: str | None = None,
        since: int | None = None,
        user: str | None = None,
    ) -> SlurmJob | None:
        """The newest job of the submitting user that carries ``tag``, by the narrowest means that answers.

        The history first, filtered by job name, user (when known) and a time window: its answer
        grows with this task's jobs, not with the cluster. The live queue (every job of the cluster)
        only when the history cannot answer: no accounting storage, an error, or records without
        comments (the cluster does not store them: ``AccountingStoreFlags=job_comment`` is not set).
        """
        start = since if since is not None else int(time.time()) - TAG_LOOKBACK_SECONDS
        path = self.paths.history_jobs(job_name=name, start_time=start, users=[user] if user else None)
        try:
            history = read_jobs(self.call("GET", path), history=True)
        except SlurmApiError as exc:
            self.log.warning("The history cannot answer (%s); looking for tag %s in the live queue.", exc, tag)
        else:
            if not history:
                return None
            if not any(job.comment for job in history):
                self.log.info("The history keeps no job comments; looking for tag %s in the live queue.", tag)
            elif all(job.comment or job.is_finished for job in history):
                return newest_tagged(history, tag, user=user)
            else:
                # slurmdbd stores a job's comment when the job ends (AccountingStoreFlags=job_comment): a
                # job still pending or running shows none there, so its tag is read from the live queue.
                live = read_jobs(self.call("GET", self.paths.jobs()), history=False)
                return newest_tagged([*history, *live], tag, user=user)
        return newest_tagged(read_jobs(self.call("GET", self.paths.jobs()), history=False), tag, user=user)

    def get_live_job(self, job_id: int) -> SlurmJob | None:
        return self._reread(lambda: read_live_job(self.call("GET", self.paths.job(job_id))))

    def get_history_job(self, job_id: int) -> SlurmJob | None:
        return self._reread(lambda: read_history_job(self.call("GET", self.paths.history_job(job_id))))

    def _reread(self, read: Callable[[], SlurmJob | None]) -> SlurmJob | None:
        """Ask again when Slurm garbled the job's record (:class:`MalformedRecordError`), like any garbled answer."""
        kwargs = {**self._retry_kwargs(), "retry": tenacity.retry_if_exception_type(MalformedRecordError)}
        return tenacity.Retrying(**kwargs)(read)

    def get_job(self, job_id: int) -> SlurmJob | None:
        """The job from the live queue, or from the history once it has left it; ``None`` if neither knows it.

        An array whose tasks in the live queue are all over is completed from the history (its
        earlier tasks may have left the queue): one more call, once, at its end.
        """
        job = self.get_live_job(job_id)
        if job is not None and job.array is not None and job.is_finished:
            return complete_array(job, self.get_history_job(job_id))
        return job if job is not None else self.get_history_job(job_id)

    def get_live_jobs(self, job_ids: Sequence[int]) -> dict[int, SlurmJob]:
        """The given jobs still in the live queue, full records, from one ``jobs/`` list."""
        return read_jobs_by_id(self.call("GET", self.paths.jobs()), job_ids)

    def get_job_states(self, job_ids: Sequence[int]) -> dict[int, JobStateInfo]:
        """States of the given jobs still in the live queue, in one call (``jobs/state``, else ``jobs/``)."""
        try:
            return read_job_states(self.call("GET", self.paths.jobs_state(job_ids)))
        except InvalidArgumentError:  # the envelope refuses query strings
            return {job_id: job.state_info for job_id, job in self.get_live_jobs(job_ids).items()}

    def list_jobs(self, *, history: bool = False, **filters: Any) -> list[SlurmJob]:
        """Jobs of the live queue, or (``history=True``) of the accounting history with its filters."""
        path = self.paths.history_jobs(**filters) if history else self.paths.jobs()
        return read_jobs(self.call("GET", path), history=history)

    def cancel_job(self, job_id: int, *, signal: str | None = None) -> CancelOutcome:
        """Cancel a job. Cancelling a finished or unknown job is not an error; the outcome says which.

        A plain cancel is retried on transient failures (cancelling twice is harmless); a ``signal``
        never is: Slurm delivers it on every call that reaches it, and a lost answer does not say
        whether it did.
        """
        path = self.paths.cancel(job_id, signal)
        try:
            outcome = read_cancel(self.call("DELETE", path, retry=signal is None))
        except SlurmApiError as exc:
            if signal is not None and is_transient(exc):
                raise _signal_not_resent(job_id, signal, exc) from exc
            raise
        self.log.info("Cancel of Slurm job %s: %s", job_id, outcome.value)
        return outcome


# Warnings Slurm gives for an empty answer: routine for look-ups, not worth a user's attention.
_ROUTINE_WARNINGS = ("found nothing", "No job changes since", "Zero jobs to dump")


def _log_slurm_warnings(logger: Any, response: SlurmResponse) -> None:
    """Slurm's ``warnings[]`` in the task log; the routine "nothing found" ones only at debug level."""
    for warning in response.warning_messages():
        routine = any(text in warning for text in _ROUTINE_WARNINGS)
        (logger.debug if routine else logger.warning)(
            "Slurm warning (%s %s): %s", response.method, response.path, warning
        )


def _check_json(response: SlurmResponse) -> SlurmResponse:
    """Slurm answers every successful call with JSON; a 2xx without it is a garbled answer."""
    if response.status < 400 and response.body is None:
        preview = (response.text or "")[:120]
        raise MalformedResponseError(
            f"Slurm answered {response.method} {response.path} with HTTP {response.status} but no JSON body "
            f"({preview!r})."
        )
    return response


class _SubmitTokenRefused(UnauthenticatedError):
    """A 401 answer to a submit: the submit session does not re-send it, the lost-answer path decides."""


def _answer_lost(exc: SlurmApiError) -> bool:
    """Whether a submit's failure leaves its outcome unknown (the job may exist)."""
    return is_transient(exc) or isinstance(exc, _SubmitTokenRefused)


def _signal_not_resent(job_id: int, signal: str | None, exc: SlurmApiError) -> SignalOutcomeUnknownError:
    return SignalOutcomeUnknownError(
        f"Sending {signal} to Slurm job {job_id} got no clear answer ({exc}). It was not resent, so the job got "
        "the signal once or not at all: check the job (e.g. its output) before sending it again."
    )


def _one_off_tag() -> str:
    return f"{_SUBMIT_TAG_PREFIX}{uuid.uuid4().hex[:24]}"


class SlurmApiAsyncHook(GoogleBaseAsyncHook):
    """The async twin of :class:`SlurmApiHook`, for triggers: one aiohttp session, one token.

    The sync hook is built once (in a thread: it reads the connection) only to obtain credentials;
    the token is refreshed in a thread when google-auth says it is no longer valid, behind a lock, so
    many coroutines sharing this hook refresh it once.
    """

    sync_hook_class = SlurmApiHook

    def __init__(
        self,
        *,
        region: str,
        cluster_id: str,
        project_id: str | None = None,
        gcp_conn_id: str = "google_cloud_default",
        api_version: str = DEFAULT_API_VERSION,
        impersonation_chain: str | Sequence[str] | None = None,
        api_endpoint: str | None = None,
        timeout: float | None = None,
        retry_seconds: float | None = None,
    ) -> None:
        check_cluster_args(region=region, cluster_id=cluster_id, project_id=project_id, api_endpoint=api_endpoint)
        super().__init__(
            region=region,
            cluster_id=cluster_id,
            project_id=project_id,
            gcp_conn_id=gcp_conn_id,
            api_version=api_version,
            impersonation_chain=impersonation_chain,
            api_endpoint=api_endpoint,
            timeout=timeout,
            retry_seconds=retry_seconds,
        )
        self.paths = SlurmPaths(api_version)
        self.timeout = timeout or DEFAULT_TIMEOUT_SECONDS
        self.retry_seconds = retry_seconds if retry_seconds is not None else DEFAULT_RETRY_SECONDS
        self.retry_initial_wait = 1.0
        self._session: aiohttp.ClientSession | None = None
        self._credentials: Credentials | None = None
        self._cluster: ClusterRef | None = None
        self._token_lock = asyncio.Lock()
        # Many coroutines (e.g. a hundred cancels at once) read the connection once, not once each.
        self._prepare_lock = asyncio.Lock()

    def _retry_kwargs(self) -> dict[str, Any]:
        return retry_kwargs(self.retry_seconds, initial=self.retry_initial_wait, logger=self.log)

    def __repr__(self) -> str:
        return f"<SlurmApiAsyncHook {self._hook_kwargs.get('region')}/{self._hook_kwargs.get('cluster_id')}>"

    async def _prepare(self) -> ClusterRef:
        if self._cluster is None:
            async with self._prepare_lock:
                if self._cluster is None:
                    sync_hook: SlurmApiHook = await self.get_sync_hook()
                    credentials = await asyncio.to_thread(sync_hook.get_credentials)
                    self.timeout = sync_hook.timeout
                    self.retry_seconds = sync_hook.retry_seconds  # the argument, else the connection's extra
                    self._credentials = credentials
                    self._cluster = await asyncio.to_thread(lambda: sync_hook.cluster)
        return self._cluster

    async def _token(self, *, force: bool = False) -> str:
        await self._prepare()
        credentials = self._credentials
        assert credentials is not None
        async with self._token_lock:
            if force or not credentials.valid:
                from google.auth.transport.requests import Request

                try:
                    await asyncio.to_thread(credentials.refresh, Request())
                except Exception as exc:
                    raise UnauthenticatedError(
                        f"Could not get a Google token for connection {self._hook_kwargs['gcp_conn_id']!r}: "
                        f"{type(exc).__name__}. Check the connection's key or impersonation_chain.",
                        http_status=401,
                    ) from None
            return str(credentials.token)

    async def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            import aiohttp

            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self._session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def __aenter__(self) -> SlurmApiAsyncHook:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _post(self, data: bytes, *, force_refresh: bool = False) -> tuple[int, bytes]:
        import aiohttp

        cluster = await self._prepare()
        token = await self._token(force=force_refresh)
        session = await self._get_session()
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
        try:
            async with session.post(cluster.url, data=data, headers=headers) as response:
                return response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ApiConnectionError(
                f"No answer from {cluster.endpoint} within {self.timeout:.0f}s ({type(exc).__name__})."
            ) from exc

    async def call(
        self, method: HttpMethod, path: str, body: Mapping[str, Any] | None = None, *, retry: bool | None = None
    ) -> SlurmResponse:
        """Async twin of :meth:`SlurmApiHook.call`; a 401 refreshes the token once and tries again.

        Never for a POST: a request that may create something is not re-sent by the transport; the
        token is refreshed for the next call and the 401 goes to the caller.
        """
        data = encode_request(method, path, body)
        cluster = await self._prepare()
        retry = method != "POST" if retry is None else retry

        async def attempt() -> SlurmResponse:
            status, content = await self._post(data)
            if status == 401 and method == "POST":
                await self._token(force=True)
            elif status == 401:
                status, content = await self._post(data, force_refresh=True)
            return _check_json(parse_envelope(status, content, method=method, path=path, cluster=cluster))

        if retry:
            response: SlurmResponse = await tenacity.AsyncRetrying(**self._retry_kwargs())(attempt)
        else:
            response = await attempt()
        _log_slurm_warnings(self.log, response)
        return response

    async def get_job(self, job_id: int) -> SlurmJob | None:
        job = read_live_job(await self.call("GET", self.paths.job(job_id)))
        if job is not None and job.array is not None and job.is_finished:
            return complete_array(job, await self.get_history_job(job_id))
        if job is None:
            job = read_history_job(await self.call("GET", self.paths.history_job(job_id)))
        return job

    async def get_history_job(self, job_id: int) -> SlurmJob | None:
        return read_history_job(await self.call("GET", self.paths.history_job(job_id)))

    async def get_job_states(
        self,
        job_ids: Sequence[int],
        *,
        use_state_endpoint: bool = True,
        tasks: list[tuple[int, int, JobStateInfo]] | None = None,
    ) -> dict[int, JobStateInfo]:
        """States of the given jobs still in the live queue, in one call (``jobs/state``, else ``jobs/``).

        ``tasks`` receives the answer's array task entries ``(job id, task id, state)``: an array's id
        is answered with one entry per task, ``"<job id>_<task id>"``.
        """
        if use_state_endpoint:
            response = await self.call("GET", self.paths.jobs_state(job_ids))
            if tasks is not None:
                tasks.extend(read_array_task_states(response))
            return read_job_states(response)
        return {job_id: job.state_info for job_id, job in (await self.get_live_jobs(job_ids)).items()}

    async def get_live_jobs(self, job_ids: Sequence[int]) -> dict[int, SlurmJob]:
        """The given jobs still in the live queue, full records, from one ``jobs/`` list."""
        return read_jobs_by_id(await self.call("GET", self.paths.jobs()), job_ids)

    async def cancel_job(self, job_id: int, *, signal: str | None = None) -> CancelOutcome:
        """Async twin of :meth:`SlurmApiHook.cancel_job`: a signal is never resent."""
        path = self.paths.cancel(job_id, signal)
        try:
            outcome = read_cancel(await self.call("DELETE", path, retry=signal is None))
        except SlurmApiError as exc:
            if signal is not None and is_transient(exc):
                raise _signal_not_resent(job_id, signal, exc) from exc
            raise
        self.log.info("Cancel of Slurm job %s: %s", job_id, outcome.value)
        return outcome


__all__ = ["SlurmApiAsyncHook", "SlurmApiHook"]
