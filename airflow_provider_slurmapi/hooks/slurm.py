"""Hooks for the Slurm Job API: :class:`SlurmApiHook` (sync) and :class:`SlurmApiAsyncHook` (triggers).

Both get their credentials from an Airflow Google Cloud connection through the Google provider's
``GoogleBaseHook``, so every form it supports works: Application Default Credentials, a key file
path, key JSON in ``keyfile_dict``, ``impersonation_chain``. Connection extra ``api_endpoint``
(or the ``api_endpoint`` argument) points them elsewhere than ``https://{region}-aiplatform.googleapis.com``,
e.g. at a private endpoint or the local ``slurmapi-emulator``.

What a call is (paths, envelope, reading answers, errors, retries, the reads of several calls) lives
once in :class:`~airflow_provider_slurmapi.slurm.client.SlurmClientBase`; the two hooks here add only
their transport, as httpx's ``Client`` and ``AsyncClient`` do to its ``BaseClient``. Why these
libraries: google-auth's ``AuthorizedSession`` keeps one pooled ``requests`` session and refreshes the
token only when it expires; aiohttp is what the triggerer's event loop speaks; tenacity gives bounded
exponential backoff with jitter.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar, Unpack, cast

import tenacity
from airflow.providers.google.common.hooks.base_google import GoogleBaseAsyncHook, GoogleBaseHook

from airflow_provider_slurmapi.slurm.accounting import Accounting, not_recorded, pick_record, read_accounting
from airflow_provider_slurmapi.slurm.client import (
    Plan,
    PlanRun,
    SlurmClientBase,
    SlurmRequest,
    as_states,
    one_off_tag,
)
from airflow_provider_slurmapi.slurm.cluster import ClusterArgs, ClusterRef, cluster_ref
from airflow_provider_slurmapi.slurm.envelope import HttpMethod, SlurmResponse
from airflow_provider_slurmapi.slurm.errors import (
    MalformedResponseError,
    SlurmApiError,
    SubmitOutcomeUnknownError,
    SubmitRejectedError,
    UnauthenticatedError,
)
from airflow_provider_slurmapi.slurm.job import SlurmJob
from airflow_provider_slurmapi.slurm.readers import (
    ESLURM_INVALID_JOB_ID,
    CancelOutcome,
    SubmitResult,
    read_jobs,
    read_submit,
)
from airflow_provider_slurmapi.slurm.retry import is_transient
from airflow_provider_slurmapi.slurm.spec import CLOCK_SKEW_SECONDS, PreparedSubmission, prepare_submission
from airflow_provider_slurmapi.slurm.states import JobStateInfo
from airflow_provider_slurmapi.slurm.tag import newest_tagged, own_tagged

if TYPE_CHECKING:
    import aiohttp
    import requests
    from google.auth.credentials import Credentials

T = TypeVar("T")

# How often a finished job's accounting record is looked for while slurmdbd has not recorded it yet.
ACCOUNTING_POLL_SECONDS = 2.0
# How far back the history is searched for a job carrying a task's tag.
TAG_LOOKBACK_SECONDS = 7 * 24 * 3600
# After a lost submit answer, how much longer than the request timeout the service may still act on it.
SUBMIT_SETTLE_MARGIN_SECONDS = 30.0


class SlurmApiHook(GoogleBaseHook, SlurmClientBase):
    """Calls the Slurm Job API of one training cluster.

    :param region: the cluster's region, e.g. ``us-central1``.
    :param cluster_id: the training cluster's id.
    :param project_id: the cluster's project; default: the connection's project.
    :param gcp_conn_id: an Airflow Google Cloud connection.
    :param api_version: the Slurm REST version to speak (``v0.0.40`` to ``v0.0.45``); default ``"auto"``:
        the newest version both this provider and the cluster speak, negotiated once per cluster and process.
    :param impersonation_chain: a service account (or chain) to impersonate.
    :param api_endpoint: overrides the endpoint (also connection extra ``api_endpoint``).
    :param cluster: all of the above in one :class:`~airflow_provider_slurmapi.slurm.cluster.ClusterRef`
        (what operators and triggers hand over); arguments given beside it override its values.
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
        cluster: ClusterRef | None = None,
        timeout: float | None = None,
        retry_seconds: float | None = None,
        submit_settle_seconds: float | None = None,
        **cluster_args: Unpack[ClusterArgs],
    ) -> None:
        # They decide where the token goes: checked before the connection is even read.
        ref = cluster_ref(cluster, **cluster_args)
        chain = list(ref.impersonation_chain) if ref.impersonation_chain else None
        super().__init__(gcp_conn_id=ref.gcp_conn_id, impersonation_chain=chain)
        self.cluster_ref = ref
        configured = retry_seconds if retry_seconds is not None else self._get_field("retry_seconds")
        self._init_client(
            ref,
            timeout=timeout or self._get_field("request_timeout"),
            retry_seconds=None if configured in (None, "") else float(configured),
        )
        # The Linux user the API runs the calls as, when its answers do not say it right (see caller_user).
        self._caller = str(self._get_field("slurm_user") or "").strip() or None
        settle = submit_settle_seconds or self._get_field("submit_settle_seconds")
        self.submit_settle_seconds = float(settle) if settle else self.timeout + SUBMIT_SETTLE_MARGIN_SECONDS
        self._retrying_policy: tenacity.Retrying | None = None
        self._retrying_for: tuple[float, float] | None = None

    def _retrying(self) -> tenacity.Retrying:
        """One retry policy per hook (its per-call state is thread-local in tenacity), rebuilt if tuned."""
        key = (self.retry_seconds, self.retry_initial_wait)
        if self._retrying_for != key:
            self._retrying_policy = tenacity.Retrying(**self._retry_kwargs())
            self._retrying_for = key
        assert self._retrying_policy is not None
        return self._retrying_policy

    def __repr__(self) -> str:
        return (
            f"<SlurmApiHook conn={self.gcp_conn_id!r} cluster={self.cluster_ref.region}/{self.cluster_ref.cluster_id}>"
        )

    # -- the transport ------------------------------------------------------------------------------
    @cached_property
    def cluster(self) -> ClusterRef:
        """The cluster with the connection's project and endpoint where none was given."""
        ref = self.cluster_ref
        return ref.with_connection(
            project_id=ref.project_id or self.project_id, api_endpoint=self._get_field("api_endpoint")
        )

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

        try:
            response = (session or self.session).post(
                self.cluster.url,
                data=data,
                headers={"Content-Type": "application/json"},
                timeout=self.timeout,
            )
        except RefreshError as exc:
            raise self._no_token(self.gcp_conn_id, exc) from None
        except (requests.ConnectionError, requests.Timeout, TransportError) as exc:
            raise self._no_answer(self.cluster, exc) from exc
        return response.status_code, response.content

    def call(
        self, method: HttpMethod, path: str, body: Mapping[str, Any] | None = None, *, retry: bool | None = None
    ) -> SlurmResponse:
        """One raw Slurm call through the envelope: Slurm's status and parsed body (or text).

        GET and DELETE are retried on transient failures; POST is not (see :meth:`submit_job`).
        Slurm's ``warnings[]`` are logged; ``errors[]`` are left to the caller
        (:meth:`SlurmResponse.raise_for_errors`).
        """
        path = self._versioned(path)
        data = self._encode(method, path, body)
        # A POST may create something: it goes through the session that never re-sends on 401.
        session = self.submit_session if method == "POST" else None

        def attempt() -> SlurmResponse:
            status, content = self._post(data, session=session)
            return self._read_answer(status, content, method=method, path=path, cluster=self.cluster)

        return self._answered(self._retrying()(attempt) if self._retries(method, retry) else attempt())

    def _versioned(self, path: str) -> str:
        """``path`` in the API version of this hook, negotiated first if it is ``"auto"``."""
        if self._needs_version(path):
            self.api_version = self._run(self._negotiate_plan(self.cluster))
        return self._resolved(path)

    def _run(self, plan: Plan[T]) -> T:
        """Carry out a read of the client core, one call at a time."""
        run = PlanRun(plan)
        while run.request is not None:
            run.feed(self._outcome(run.request))
        return cast(T, run.result)

    def _outcome(self, request: SlurmRequest[Any]) -> Any:
        """The request's result, or the Slurm API error it ended in (handed back to its plan)."""
        try:
            return tenacity.Retrying(**self._reread_kwargs(request))(
                lambda: request.read(self.call(request.method, request.path, request.body, retry=request.retry))
            )
        except SlurmApiError as exc:
            return exc

    # -- jobs ---------------------------------------------------------------------------------------
    def get_live_job(self, job_id: int) -> SlurmJob | None:
        """The job from the live queue; ``None`` once it has left it."""
        return self._run(self._live_job_plan(job_id))

    def get_history_job(self, job_id: int) -> SlurmJob | None:
        """The job's newest record in the accounting history; ``None`` if it has none."""
        return self._run(self._history_job_plan(job_id))

    def get_job(self, job_id: int) -> SlurmJob | None:
        """The job from the live queue, or from the history once it has left it; ``None`` if neither knows it."""
        return self._run(self._job_plan(job_id))

    def get_live_jobs(self, job_ids: Sequence[int]) -> dict[int, SlurmJob]:
        """The given jobs still in the live queue, full records, from one ``jobs/`` list."""
        return self._run(self._live_jobs_plan(job_ids))

    def get_live_states(
        self, job_ids: Sequence[int], *, tasks: list[tuple[int, int, JobStateInfo]] | None = None
    ) -> dict[int, JobStateInfo | SlurmJob]:
        """The given jobs still in the live queue: ``jobs/state``, else (remembered) the ``jobs/`` list's records."""
        return self._run(self._live_states_plan(job_ids, tasks))

    def get_job_states(
        self, job_ids: Sequence[int], *, tasks: list[tuple[int, int, JobStateInfo]] | None = None
    ) -> dict[int, JobStateInfo]:
        """States of the given jobs still in the live queue, in one call (``jobs/state``, else ``jobs/``)."""
        return as_states(self.get_live_states(job_ids, tasks=tasks))

    def list_jobs(self, *, history: bool = False, own: bool = False, **filters: Any) -> list[SlurmJob]:
        """Jobs of the live queue, or (``history=True``) of the accounting history with its filters;
        ``own``: only the calling user's (unless the history ``users`` filter names whose)."""
        return self._run(self._list_jobs_plan(history=history, filters=filters, own=own))

    def list_partitions(self) -> list[str]:
        """The names of the cluster's partitions (``GET /slurm/{v}/partitions/``)."""
        return self._run(self._partitions_plan())

    def cancel_job(self, job_id: int, *, signal: str | None = None) -> CancelOutcome:
        """Cancel a job; a finished or unknown job is not an error. A ``signal`` is never resent."""
        return self._run(self._cancel_plan(job_id, signal))

    def cancel_later_copies(self, tag: str, keep_job_id: int) -> list[int]:
        """After a resent submit: cancel the caller's jobs with ``tag`` newer than ``keep_job_id`` (their ids)."""
        return self._run(self._later_copies_plan(tag, keep_job_id))

    # -- submit: exactly one job --------------------------------------------------------------------
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
        prepared = prepare_submission(job, script, tag=tag or one_off_tag(), comment=comment)
        return self.submit_prepared(prepared, earlier_job_id=earlier_job_id)

    def submit_prepared(self, prepared: PreparedSubmission, *, earlier_job_id: int | None = None) -> SubmitResult:
        """:meth:`submit_job` of a submission already prepared (and so checked) by
        :func:`~airflow_provider_slurmapi.slurm.spec.prepare_submission`, e.g. by an operator to fail early.

        Sent as it is; one prepared without a tag gets a one-off tag first (a lost answer is settled by it).
        """
        if not prepared.tag:
            tagged = prepare_submission(prepared.job, prepared.payload.get("script"), tag=one_off_tag())
            prepared = PreparedSubmission(payload=tagged.payload, notes=prepared.notes, tag=tagged.tag)
        for note in prepared.notes:
            self.log.info("%s", note)
        try:
            return self._submit_prepared(prepared, earlier_job_id=earlier_job_id)
        except SubmitRejectedError as exc:
            if exc.kind == "partition":
                exc.name_partitions(self._partition_names_for_message())
            raise

    def _partition_names_for_message(self) -> list[str]:
        """The partitions, to name them in an error; never fails (the error being reported matters more)."""
        try:
            return self._run(self._partitions_plan(retry=False))
        except Exception as exc:
            self.log.warning("Could not list the cluster's partitions: %s", exc)
            return []

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
                    return SubmitResult(job_id=found.job_id, resent=resent)
                if time.monotonic() >= deadline:
                    raise
                resent = True
                continue
            self.log.info("Submitted Slurm job %s to %s", result.job_id, self.cluster)
            if resent:
                result = replace(self._drop_duplicate_jobs(prepared, result, since, earlier_job_id), resent=True)
            return result

    def _send_submit(self, prepared: PreparedSubmission) -> SubmitResult:
        """One POST of ``job/submit``, through the session that never re-sends it."""
        path = self._versioned(self.paths.submit())
        status, content = self._post(self._encode("POST", path, prepared.payload), session=self.submit_session)
        if status == 401:
            raise _SubmitTokenRefused(
                "The submit was answered 401 (token refused); its outcome is treated as unknown.", http_status=401
            )
        return read_submit(
            self._answered(self._read_answer(status, content, method="POST", path=path, cluster=self.cluster))
        )

    # -- who we are on the cluster -------------------------------------------------------------------
    def caller_user(self) -> str:
        """The caller's own Linux account on the cluster: every job this deployment submits is owned by it.

        The Slurm Job API runs every call as the caller's account and every slurmctld answer names it
        (``meta.client.user``). Learned from an answer already read, else from one small call.
        Connection extra ``slurm_user`` overrides it: a plain slurmrestd with ``rest_auth/jwt`` over TCP
        answers ``root`` there whoever the token's user is (seen on Slurm 24.11).
        """
        if self._caller is None:
            self.call("GET", self.paths.partitions())
        if self._caller is None:
            raise MalformedResponseError(
                f"The answers of {self.cluster} do not name their caller (meta.client.user is empty): the "
                "provider cannot tell its own Slurm jobs from other users' jobs, so it adopts none. Check that "
                "the endpoint is the Slurm Job API (or a slurmrestd that authenticates each caller)."
            )
        return self._caller

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
        user = self.caller_user()
        path = self.paths.history_jobs(job_name=name, start_time=since, users=[user])
        history = read_jobs(self.call("GET", path), history=True)
        return own_tagged([*live, *history], tag, user=user, since=since)

    def find_job_by_tag(
        self,
        tag: str,
        *,
        name: str | None = None,
        since: int | None = None,
        user: str | None = None,
    ) -> SlurmJob | None:
        """The newest job of the caller's own user that carries ``tag``, by the narrowest means that answers.

        The history first, filtered by job name, user and a time window: its answer grows with this
        task's jobs, not with the cluster. The live queue (every job of the cluster) only when the
        history cannot answer: no accounting storage, an error, or records without comments (the
        cluster does not store them: ``AccountingStoreFlags=job_comment`` is not set). A job of another
        user is never returned, whatever its comment (``user`` defaults to :meth:`caller_user`; a
        different ``user`` narrows nothing further, it must be the caller's).
        """
        own = self.caller_user()
        if user is not None and user != own:
            self.log.warning("Job owner %s is not the caller %s: looking for the caller's own jobs only.", user, own)
        user = own
        start = since if since is not None else int(time.time()) - TAG_LOOKBACK_SECONDS
        path = self.paths.history_jobs(job_name=name, start_time=start, users=[user])
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

    def get_accounting(self, job_id: int) -> Accounting | None:
        """The history's summary of a finished job; ``None`` while it has no finished record of it.

        One call, not retried here: :meth:`wait_for_accounting` looks again.
        """
        response = self.call("GET", self.paths.history_job(job_id), retry=False)
        if response.has_error(ESLURM_INVALID_JOB_ID):
            return None
        response.raise_for_errors()
        return read_accounting(pick_record(response.body, job_id), job_id)

    def wait_for_accounting(
        self, job_id: int, wait_seconds: float, *, poll_seconds: float = ACCOUNTING_POLL_SECONDS
    ) -> tuple[str, dict[str, Any]]:
        """The accounting line and XCom value of a finished job, looked for up to ``wait_seconds``.

        slurmdbd records a job a little after it ends: until then the history has no finished record.
        Never raises for a Slurm or API error: the line then says why there is no summary.
        """
        started = time.monotonic()
        while True:
            try:
                accounting = self.get_accounting(job_id)
            except SlurmApiError as exc:
                if not is_transient(exc) or time.monotonic() - started >= wait_seconds:
                    return not_recorded(job_id, time.monotonic() - started, f"the history could not be read ({exc})")
                accounting = None
            if accounting is not None:
                return accounting.describe(), accounting.to_dict()
            waited = time.monotonic() - started
            if waited >= wait_seconds:
                return not_recorded(job_id, waited)
            time.sleep(min(poll_seconds, max(0.0, wait_seconds - waited)))


class _SubmitTokenRefused(UnauthenticatedError):
    """A 401 answer to a submit: the submit session does not re-send it, the lost-answer path decides."""


def _answer_lost(exc: SlurmApiError) -> bool:
    """Whether a submit's failure leaves its outcome unknown (the job may exist)."""
    return is_transient(exc) or isinstance(exc, _SubmitTokenRefused)


class SlurmApiAsyncHook(GoogleBaseAsyncHook, SlurmClientBase):
    """The async twin of :class:`SlurmApiHook`, for triggers: one aiohttp session, one token.

    The same client core; only the transport differs. The sync hook is built once (in a thread: it
    reads the connection) only to obtain credentials and settings; the token is refreshed in a thread
    when google-auth says it is no longer valid, behind a lock, so many coroutines sharing this hook
    refresh it once.
    """

    sync_hook_class = SlurmApiHook

    def __init__(
        self,
        *,
        cluster: ClusterRef | None = None,
        timeout: float | None = None,
        retry_seconds: float | None = None,
        **cluster_args: Unpack[ClusterArgs],
    ) -> None:
        ref = cluster_ref(cluster, **cluster_args)
        super().__init__(cluster=ref, gcp_conn_id=ref.gcp_conn_id, timeout=timeout, retry_seconds=retry_seconds)
        self.cluster_ref = ref
        self._init_client(ref, timeout=timeout, retry_seconds=retry_seconds)
        self._session: aiohttp.ClientSession | None = None
        self._credentials: Credentials | None = None
        self._cluster: ClusterRef | None = None
        self._token_lock = asyncio.Lock()
        # Many coroutines (e.g. a hundred cancels at once) read the connection once, not once each.
        self._prepare_lock = asyncio.Lock()
        self._version_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"<SlurmApiAsyncHook {self.cluster_ref.region}/{self.cluster_ref.cluster_id}>"

    # -- the transport ------------------------------------------------------------------------------
    async def _prepare(self) -> ClusterRef:
        if self._cluster is None:
            async with self._prepare_lock:
                if self._cluster is None:
                    sync_hook: SlurmApiHook = await self.get_sync_hook()
                    credentials = await asyncio.to_thread(sync_hook.get_credentials)
                    self.timeout = sync_hook.timeout
                    self.retry_seconds = sync_hook.retry_seconds  # the argument, else the connection's extra
                    self._caller = self._caller or sync_hook._caller  # connection extra slurm_user
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
                    raise self._no_token(self.cluster_ref.gcp_conn_id, exc) from None
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
            raise self._no_answer(cluster, exc) from exc

    async def call(
        self, method: HttpMethod, path: str, body: Mapping[str, Any] | None = None, *, retry: bool | None = None
    ) -> SlurmResponse:
        """Async twin of :meth:`SlurmApiHook.call`; a 401 refreshes the token once and tries again.

        Never for a POST: a request that may create something is not re-sent by the transport; the
        token is refreshed for the next call and the 401 goes to the caller.
        """
        cluster = await self._prepare()
        if self._needs_version(path):
            async with self._version_lock:
                if self.api_version is None:
                    self.api_version = await self._run(self._negotiate_plan(cluster))
        path = self._resolved(path)
        data = self._encode(method, path, body)

        async def attempt() -> SlurmResponse:
            status, content = await self._post(data)
            if status == 401 and method == "POST":
                await self._token(force=True)
            elif status == 401:
                status, content = await self._post(data, force_refresh=True)
            return self._read_answer(status, content, method=method, path=path, cluster=cluster)

        if self._retries(method, retry):
            response: SlurmResponse = await tenacity.AsyncRetrying(**self._retry_kwargs())(attempt)
        else:
            response = await attempt()
        return self._answered(response)

    async def _run(self, plan: Plan[T]) -> T:
        """Carry out a read of the client core, one call at a time."""
        run = PlanRun(plan)
        while run.request is not None:
            run.feed(await self._outcome(run.request))
        return cast(T, run.result)

    async def _outcome(self, request: SlurmRequest[Any]) -> Any:
        """The request's result, or the Slurm API error it ended in (handed back to its plan)."""

        async def attempt() -> Any:
            return request.read(await self.call(request.method, request.path, request.body, retry=request.retry))

        try:
            return await tenacity.AsyncRetrying(**self._reread_kwargs(request))(attempt)
        except SlurmApiError as exc:
            return exc

    # -- jobs: the sync hook's reads, awaited ---------------------------------------------------------
    async def get_live_job(self, job_id: int) -> SlurmJob | None:
        return await self._run(self._live_job_plan(job_id))

    async def get_history_job(self, job_id: int) -> SlurmJob | None:
        return await self._run(self._history_job_plan(job_id))

    async def get_job(self, job_id: int) -> SlurmJob | None:
        return await self._run(self._job_plan(job_id))

    async def get_live_jobs(self, job_ids: Sequence[int]) -> dict[int, SlurmJob]:
        return await self._run(self._live_jobs_plan(job_ids))

    async def get_live_states(
        self, job_ids: Sequence[int], *, tasks: list[tuple[int, int, JobStateInfo]] | None = None
    ) -> dict[int, JobStateInfo | SlurmJob]:
        return await self._run(self._live_states_plan(job_ids, tasks))

    async def get_job_states(
        self, job_ids: Sequence[int], *, tasks: list[tuple[int, int, JobStateInfo]] | None = None
    ) -> dict[int, JobStateInfo]:
        return as_states(await self.get_live_states(job_ids, tasks=tasks))

    async def list_jobs(self, *, history: bool = False, own: bool = False, **filters: Any) -> list[SlurmJob]:
        return await self._run(self._list_jobs_plan(history=history, filters=filters, own=own))

    async def list_partitions(self) -> list[str]:
        return await self._run(self._partitions_plan())

    async def cancel_job(self, job_id: int, *, signal: str | None = None) -> CancelOutcome:
        return await self._run(self._cancel_plan(job_id, signal))

    async def cancel_later_copies(self, tag: str, keep_job_id: int) -> list[int]:
        """See :meth:`SlurmApiHook.cancel_later_copies`."""
        return await self._run(self._later_copies_plan(tag, keep_job_id))


__all__ = ["SlurmApiAsyncHook", "SlurmApiHook"]
