"""The Slurm Job API client: one object built with the transport it sends with, held by both hooks.

As an httpx client is built with ``transport=``, :class:`SlurmClient` is built with its transport
(post one envelope, refresh the token) and its clock: it owns the paths, the request envelope,
reading the answers, mapping errors, the one retry layer, the one 401 rule and the negotiation of
the API version (per client; kept for the deployment through the ``load_version``/``keep_version``
callbacks). A hook builds the transport and clock from its connection and holds the client
(``hook.client``); the client drives every plan with them (:meth:`SlurmClient.run`,
:meth:`SlurmClient.arun`) and reads time only through the clock
(:data:`~airflow_provider_slurmapi.slurm.api.plans.NOW` and :data:`~airflow_provider_slurmapi.slurm.api.plans.WALL`).

Every flow of several calls (a job from the live queue, else from the history; submit-once; the tag
lookup; the accounting wait; cancel-and-confirm) is written once, as a *plan*: a generator that
yields the :class:`SlurmRequest` it needs next (sent its result or thrown its error), a
:class:`~airflow_provider_slurmapi.slurm.api.plans.Sleep`, or :data:`~airflow_provider_slurmapi.slurm.api.plans.NOW`.
The drivers of :mod:`~airflow_provider_slurmapi.slurm.api.plans` carry plans out, so the sync and the
async hook cannot drift apart.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypedDict, TypeVar, Unpack
from urllib.parse import urlsplit

from airflow_provider_slurmapi.slurm.api.api_versions import (
    NEGOTIATE,
    SUPPORTED_API_VERSIONS,
    probe_order,
    served_by,
    traits,
)
from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
from airflow_provider_slurmapi.slurm.api.envelope import HttpMethod, SlurmResponse, encode_request, parse_envelope
from airflow_provider_slurmapi.slurm.api.errors import (
    WRONG_ENDPOINT_REASONS,
    ApiConnectionError,
    ConfigurationError,
    InvalidArgumentError,
    MalformedRecordError,
    MalformedResponseError,
    RequestNotSentError,
    SignalOutcomeUnknownError,
    SlurmApiError,
    SlurmError,
    SubmitOutcomeUnknownError,
    SubmitRejectedError,
    UnauthenticatedError,
    UnsupportedApiVersionError,
    WrongEndpointError,
)
from airflow_provider_slurmapi.slurm.api.paths import VERSION_PLACEHOLDER, SlurmPaths, ping_path, resolve_path
from airflow_provider_slurmapi.slurm.api.plans import (
    NOW,
    REFRESH,
    WALL,
    AsyncClock,
    AsyncTransport,
    Clock,
    Effects,
    Plan,
    Send,
    Sleep,
    SlurmRequest,
    Transport,
    arun_plan,
    effects_of,
    one_call,
    primed,
    run_plan,
)
from airflow_provider_slurmapi.slurm.api.retry import DEFAULT_RETRY_SECONDS, backoff_seconds, is_transient
from airflow_provider_slurmapi.slurm.jobs.accounting import Accounting, not_recorded, pick_record, read_accounting
from airflow_provider_slurmapi.slurm.jobs.array import complete_array
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob
from airflow_provider_slurmapi.slurm.jobs.readers import (
    ESLURM_INVALID_JOB_ID,
    CancelOutcome,
    SubmitResult,
    caller_user,
    read_cancel,
    read_history_job,
    read_jobs,
    read_jobs_by_id,
    read_live_job,
    read_partition_names,
    read_state_entries,
    read_submit,
)
from airflow_provider_slurmapi.slurm.jobs.states import JobStateInfo
from airflow_provider_slurmapi.slurm.submit.job_fields import check_job_keys
from airflow_provider_slurmapi.slurm.submit.spec import CLOCK_SKEW_SECONDS, PreparedSubmission, prepare_submission
from airflow_provider_slurmapi.slurm.submit.tag import carries_tag, own_tagged

if TYPE_CHECKING:
    from airflow_provider_slurmapi.slurm.jobs.watch import StepLogger

T = TypeVar("T")
# The clock a client waits with: a sync hook's blocking one, an async hook's awaitable one.
ClockT = TypeVar("ClockT", bound=Clock | AsyncClock)

DEFAULT_TIMEOUT_SECONDS = 60.0
# Job ids per jobs/state call: ~16 bytes each, so a call is ~160 kB, far below the 1 MB request limit.
MAX_IDS_PER_CALL = 10_000
SUBMIT_TAG_PREFIX = "slurmapi-submit="
# Warnings Slurm gives for an empty answer: routine for look-ups, not worth a user's attention.
_ROUTINE_WARNINGS = ("found nothing", "No job changes since", "Zero jobs to dump")
# Warnings Slurm repeats in every answer (a deprecated API version): worth saying once per client.
_REPEATED_WARNINGS = ("deprecat",)
# How often a finished job's accounting record is looked for while slurmdbd has not recorded it yet.
ACCOUNTING_POLL_SECONDS = 2.0
# How far back the history is searched for a job carrying a task's tag.
TAG_LOOKBACK_SECONDS = 7 * 24 * 3600
# After a lost submit answer, how much longer than the request timeout the service may still act on it.
SUBMIT_SETTLE_MARGIN_SECONDS = 30.0
# The marker of one submit call (all its resends), beside the task's tag in the job's comment.
SEND_MARKER_PREFIX = "slurmapi-send="
# Accounts that run Slurm itself, never a caller of the Job API: a job they own is never taken for ours.
NOT_A_CALLER = frozenset({"root", "slurm", "slurmrestd"})


class SubmitOptions(TypedDict, total=False):
    """How a job is submitted: its task's ``tag`` (else a one-off one) and its ``comment``."""

    tag: str | None
    comment: str | None


class VersionNoLongerServed(SlurmApiError):
    """A kept API version answered "not served" (404): negotiated again and the request sent again."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} is not served")
        self.path = path


class PostTokenRefused(UnauthenticatedError):
    """A 401 answer to a POST: not resent (it may have been carried out); the token is refreshed for the next call."""


class Offload(Protocol):
    """Runs a blocking callback (the stores) off the event loop: ``asyncio.to_thread``, or Airflow's way."""

    def __call__(self, call: Callable[[], T], /) -> Awaitable[T]: ...


class SlurmClient(Generic[ClockT]):
    """A Slurm Job API client: built with what it sends with (``transport``) and waits with (``clock``).

    A hook holds one (``hook.client``), as an httpx client holds its transport. ``target`` gives the
    cluster as the transport reaches it (default: ``cluster``); ``logger`` is where it speaks (default:
    this module's); ``offload`` runs the blocking stores off the event loop for :meth:`arun` (default:
    ``asyncio.to_thread``). Settings a test or a caller may tune after construction: ``retry_seconds``
    (how long transient failures of one call are retried), ``retry_initial_wait`` (the first backoff),
    ``timeout``.
    """

    # The Airflow-side store of the learned account (plain callbacks: the core knows nothing of Airflow).
    load_account: Callable[[], str | None] | None = None
    keep_account: Callable[[str], None] | None = None
    # The Airflow-side store of the negotiated API version, per cluster (same kind of callbacks).
    load_version: Callable[[], str | None] | None = None
    keep_version: Callable[[str], None] | None = None

    def __init__(
        self,
        cluster: ClusterRef,
        *,
        transport: Transport | AsyncTransport,
        clock: ClockT,
        target: Callable[[], ClusterRef] | None = None,
        logger: StepLogger | None = None,
        offload: Offload | None = None,
        timeout: float | None = None,
        retry_seconds: float | None = None,
    ) -> None:
        # What every plan is carried out with: the hook's (its connection's), a test's fakes.
        self.transport: Transport | AsyncTransport = transport
        self.clock: ClockT = clock
        self._target: Callable[[], ClusterRef] = target or (lambda: cluster)
        self._logger: StepLogger = logger or logging.getLogger(__name__)
        self._offload: Offload = offload or asyncio.to_thread
        # api_version "auto": paths carry a placeholder until the version is negotiated (resolve_path).
        self.paths = SlurmPaths(cluster.api_version, wall=lambda: self.clock.wall())
        self.api_version: str | None = None if cluster.api_version == NEGOTIATE else cluster.api_version
        # Negotiation, per client: the kept version is read once; one that came from the store is trusted
        # until an answer confirms it, and a "not served" answer before that negotiates again.
        self._version_loaded = False
        self._kept: str | None = None
        self._version_unconfirmed = False
        self._version_to_keep: str | None = None
        self._version_lock = asyncio.Lock()
        # Repeated warnings said once per client; the cluster's release checked against the version once.
        self._warned: set[str] = set()
        self._release_checked = False
        # Whether the endpoint ever answered this client: until it has, a host that does not resolve (or
        # fails TLS) is a wrong endpoint, not an outage (see _exchange_once).
        self._reached = False
        self.timeout = float(timeout or DEFAULT_TIMEOUT_SECONDS)
        self.retry_seconds = float(retry_seconds if retry_seconds is not None else DEFAULT_RETRY_SECONDS)
        self.retry_initial_wait = 1.0
        # Whether jobs/state answers here: learnt once per client (see live_states_plan).
        self.state_endpoint = True
        # After a lost submit answer, how long the job is looked for before the submit is sent again.
        self.submit_settle_seconds = self.timeout + SUBMIT_SETTLE_MARGIN_SECONDS
        # The caller's Linux account on the cluster (every job it submits is owned by it), and how it is known:
        # the connection's slurm_user, or learned from the provider's own jobs (see _learn_account).
        self._account: str | None = None
        self._account_from = ""
        # Jobs whose submit answer this client read: their owner is the caller's account.
        self._submitted: set[int] = set()
        self._account_loaded = False

    def _needs_version(self, path: str) -> bool:
        """Whether ``path`` waits for the negotiated version (the client negotiates, then resolves it)."""
        return self.api_version is None and VERSION_PLACEHOLDER in path

    # -- driving plans with the client's transport and clock ------------------------------------------
    def run(self, plan: Plan[T]) -> T:
        """Carry out ``plan`` with the sync transport and clock (a sync hook's)."""
        try:
            return run_plan(plan, expand=self._exchange, transport=self.transport, clock=self.clock)  # type: ignore[arg-type]
        finally:
            self._store_version()

    async def arun(self, plan: Plan[T]) -> T:
        """Carry out ``plan`` with the async transport and clock; many coroutines negotiate the version once."""
        if self.api_version is None:
            plan = primed(plan)  # its arguments are checked before the version costs a call
            async with self._version_lock:
                if self.api_version is None:
                    await self._offload(self._kept_version)  # the store may block: not on the loop
                    self.api_version = await self._arun_plan(self._version_plan())
        try:
            return await self._arun_plan(plan)
        finally:
            if self._version_to_keep is not None:
                await self._offload(self._store_version)

    async def _arun_plan(self, plan: Plan[T]) -> T:
        return await arun_plan(plan, expand=self._exchange, transport=self.transport, clock=self.clock)  # type: ignore[arg-type]

    # -- negotiation, per client ----------------------------------------------------------------------
    def _kept_version(self) -> str | None:
        """The version kept for this cluster by an earlier process (read once per client), if any."""
        if not self._version_loaded:
            self._version_loaded = True
            kept: str | None = None
            if self.load_version is not None:
                try:
                    kept = self.load_version()
                except Exception as exc:  # the store is a help, never a reason to fail a call
                    self._logger.warning("Could not read the kept Slurm REST API version: %s", exc)
            self._kept = kept if kept and kept in SUPPORTED_API_VERSIONS else None
        return self._kept

    def _version_plan(self) -> Plan[str]:
        """The version to speak: the kept one (no call), else the negotiated one (to be kept)."""
        kept = self._kept_version()
        if kept is not None:
            self._version_unconfirmed = True
            return kept
        version = yield from self._negotiate_plan(self._target())
        self._version_to_keep = version
        return version

    def _store_version(self) -> None:
        """Keep a newly negotiated version for later processes (called by the drivers, off the plan)."""
        version, self._version_to_keep = self._version_to_keep, None
        if version is None or self.keep_version is None:
            return
        try:
            self.keep_version(version)
        except Exception as exc:
            self._logger.warning("Could not keep the Slurm REST API version %s for later tasks: %s", version, exc)

    def _version_gone(self, path: str) -> None:
        """The kept version is no longer served: forget it, so the next request negotiates afresh."""
        self._logger.warning(
            "The cluster no longer serves the kept Slurm REST API version %s (%s answered 404): negotiating again.",
            self.api_version,
            path,
        )
        self.api_version = None
        self._version_unconfirmed = False
        self._kept = None

    def _resolved(self, path: str, now: float) -> str:
        return resolve_path(path, self.api_version, now=now) if self.api_version else path

    # -- one request: the one retry layer and the one 401 rule -------------------------------------
    def _exchange(self, request: SlurmRequest[Any]) -> Effects[Any]:
        """One request, as effects for a driver: its read result, or the error it ended in.

        The one retry layer: transient failures (:func:`~airflow_provider_slurmapi.slurm.api.retry.is_transient`)
        of a request that may be repeated (GET, DELETE; never a POST unless ``retry``), and a record Slurm
        garbled (:class:`MalformedRecordError`) when the request asks for a ``reread``, are tried again with
        backoff until ``retry_seconds`` after the first attempt: one budget per request, whatever failed.
        A request that was never sent (:class:`RequestNotSentError`: refused, the resolver did not answer)
        may be repeated whatever its method, unless it asks for no retry (``retry=False``); a host that does
        not resolve or fails TLS before the endpoint ever answered this client is a wrong endpoint
        (:class:`WrongEndpointError`), raised at once.
        """
        while True:
            try:
                return (yield from self._exchange_once(request))
            except VersionNoLongerServed as gone:
                self._version_gone(gone.path)

    def _exchange_once(self, request: SlurmRequest[Any]) -> Effects[Any]:
        if self._needs_version(request.path):
            self.api_version = yield from effects_of(self._version_plan(), self._exchange)
        versioned = VERSION_PLACEHOLDER in request.path
        path = self._resolved(request.path, (yield WALL)) if versioned else request.path
        envelope = Send(request.method, path, self._encode(request.method, path, request.body))
        retries = self._retries(request.method, request.retry)
        started: float = yield NOW
        attempt = 0
        while True:
            attempt += 1
            failure: SlurmApiError
            try:
                response = yield from self._answer(envelope)
            except RequestNotSentError as exc:
                if exc.reason in WRONG_ENDPOINT_REASONS and not self._reached:
                    raise wrong_endpoint(exc) from exc
                if request.retry is False or not is_transient(exc):
                    raise
                failure = exc
            except SlurmApiError as exc:
                if not (retries and is_transient(exc)):
                    raise
                failure = exc
            else:
                if versioned and self._version_unconfirmed:
                    if response.path_not_served:  # a kept version the cluster stopped serving
                        raise VersionNoLongerServed(path)
                    self._version_unconfirmed = False
                try:
                    return request.read(response)
                except MalformedRecordError as exc:
                    if not request.reread:
                        raise
                    failure = exc
            now: float = yield NOW
            if now - started >= self.retry_seconds:
                raise failure
            wait = backoff_seconds(attempt, self.retry_initial_wait)
            self._logger.warning("Slurm Job API call failed (%s); retry %d in %.1fs", failure, attempt, wait)
            yield Sleep(wait)

    def _answer(self, envelope: Send) -> Effects[SlurmResponse]:
        """One envelope sent, under the one 401 rule of both hooks.

        A 401 refreshes the token and sends the request once more, except a POST: it may have been
        carried out (a submit could start a second job), so it is not resent; the token is refreshed
        for the next call and :class:`PostTokenRefused` goes to the caller (for a submit: a lost answer).
        """
        status, content = yield envelope
        self._reached = True
        if status == 401:
            yield REFRESH
            if envelope.method == "POST":
                raise PostTokenRefused(
                    f"{envelope.method} {envelope.path} was answered 401 (token refused); it is not resent, as "
                    "its outcome is unknown. The token was refreshed for the next call.",
                    http_status=401,
                )
            status, content = yield envelope
        response = self._read_answer(
            status, content, method=envelope.method, path=envelope.path, cluster=self._target()
        )
        return self._answered(response)

    @staticmethod
    def _retries(method: HttpMethod, retry: bool | None) -> bool:
        """GET and DELETE are retried on transient failures; a POST (it may create something) is not,
        unless it was never sent (see :meth:`_exchange`)."""
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
        named = caller_user(response)
        if named and self._account and named != self._account:  # meta may confirm, never decide
            self._logger.debug(
                "The answer names %s as its caller (meta.client.user); the caller is %s.", named, self._account
            )
        if self.api_version is not None and not self._release_checked:
            self._release_checked = True
            notice = deprecation_notice(self.api_version, slurm_release(response))
            if notice:
                self._logger.warning("%s", notice)
        return response

    # -- plans: what each read asks, once for both hooks ----------------------------------------------
    def _negotiate_plan(self, cluster: ClusterRef) -> Plan[str]:
        """The newest API version both this provider and the cluster speak (this client's; kept by the driver).

        Pings (cheap: no job is read) in :func:`~airflow_provider_slurmapi.slurm.api.api_versions.probe_order`
        until one answers; an unknown version answers 404 in plain text. The answer's
        ``meta.slurm.release`` (e.g. 26.05.5) then names, through the version table, the newest version
        that release serves. One call on a cluster that serves the newest version, two on older ones.
        """
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
        self._logger.info(
            "Slurm REST API version %s negotiated with cluster %s (Slurm %s): the newest both speak.",
            answered,
            cluster.cluster_id,
            release or "release not given",
        )
        return answered

    def call_plan(
        self, method: HttpMethod, path: str, body: Mapping[str, Any] | None, retry: bool | None
    ) -> Plan[SlurmResponse]:
        """One raw call: Slurm's answer as it is (``errors[]`` left to the caller)."""
        return one_call(SlurmRequest(method, path, _as_is, body, retry))

    def live_job_plan(self, job_id: int) -> Plan[SlurmJob | None]:
        job: SlurmJob | None = yield SlurmRequest("GET", self.paths.job(job_id), read_live_job, reread=True)
        return self._owner_seen(job)

    def history_job_plan(self, job_id: int) -> Plan[SlurmJob | None]:
        path = self.paths.history_job(job_id)
        job: SlurmJob | None = yield SlurmRequest("GET", path, read_history_job, reread=True)
        return self._owner_seen(job)

    def job_plan(self, job_id: int) -> Plan[SlurmJob | None]:
        """The job from the live queue, or from the history once it has left it; ``None`` if neither knows it.

        An array whose tasks in the live queue are all over is completed from the history (its
        earlier tasks may have left the queue): one more call, once, at its end.
        """
        job = yield from self.live_job_plan(job_id)
        if job is not None and job.array is not None and job.is_finished:
            return complete_array(job, (yield from self.history_job_plan(job_id)))
        if job is None:
            job = yield from self.history_job_plan(job_id)
        return job

    def live_jobs_plan(self, job_ids: Sequence[int]) -> Plan[dict[int, SlurmJob]]:
        ids = list(job_ids)
        return one_call(SlurmRequest("GET", self.paths.jobs(), lambda response: read_jobs_by_id(response, ids)))

    def list_jobs_plan(self, *, history: bool, filters: Mapping[str, Any], own: bool = False) -> Plan[list[SlurmJob]]:
        if own and not (history and filters.get("users")):
            return self._own_jobs_plan(history=history, filters=filters)
        path = self.paths.history_jobs(**filters) if history else self.paths.jobs()
        return one_call(SlurmRequest("GET", path, lambda response: read_jobs(response, history=history)))

    def _own_jobs_plan(self, *, history: bool, filters: Mapping[str, Any]) -> Plan[list[SlurmJob]]:
        """The caller's own jobs: the history filtered by Slurm (``users=`` the caller's account), the live
        queue filtered here. The account is the connection's ``slurm_user``, else the one the provider
        learned from its own jobs (see :meth:`_learn_account`); never what an answer's ``meta`` says."""
        account = self.require_account()
        if history:
            path = self.paths.history_jobs(**{**filters, "users": [account]})
            listed: list[SlurmJob] = yield SlurmRequest("GET", path, _history_list)
            return listed
        live: list[SlurmJob] = yield SlurmRequest("GET", self.paths.jobs(), _live_list)
        return [job for job in live if job.user == account]

    def require_account(self) -> str:
        """The caller's account, or an error that names the fixes when it is not known yet."""
        account = self.known_account()
        if account is None:
            raise ConfigurationError(
                f"The caller's own jobs on {self._target()} cannot be told from other users' jobs yet: the provider "
                "learns its Linux account from the first job it submits through this connection to this cluster, "
                "and none has been. Set the connection extra slurm_user to the Linux user the calls run as, list "
                "every user's jobs (all_users=True, or the history filter users=[...]), or submit a job first."
            )
        return account

    # -- who we are on the cluster -------------------------------------------------------------------
    def known_account(self) -> str | None:
        """The caller's account if known: the connection's ``slurm_user``, learned here, or kept from before."""
        if self._account is None and not self._account_loaded and self.load_account is not None:
            self._account_loaded = True
            try:
                kept = self.load_account()
            except Exception as exc:  # the store is a help, never a reason to fail a call
                self._logger.warning("Could not read the kept Slurm account of this connection: %s", exc)
                kept = None
            if kept and kept not in NOT_A_CALLER:
                self._account, self._account_from = kept, "kept from an earlier job of this connection"
        return self._account

    def _learn_account(self, user: str | None, how: str) -> None:
        """Take ``user`` as the caller's account: the owner of a job that is ours by a fact the provider
        established itself (its submit answer was read here; or the oldest job carrying a marker only this
        deployment can make). Kept for later tasks through ``keep_account``; the connection's
        ``slurm_user`` is never replaced."""
        if not user or user in NOT_A_CALLER:
            return
        known = self.known_account()
        if known == user:
            return
        if known is not None:
            self._logger.warning(
                "Slurm account %s owns %s, but the caller's account is %s (%s): keeping %s.",
                user,
                how,
                known,
                self._account_from,
                known,
            )
            return
        self._account, self._account_from = user, how
        self._logger.info("The calls run as Slurm account %s: it owns %s.", user, how)
        if self.keep_account is not None:
            try:
                self.keep_account(user)
            except Exception as exc:
                self._logger.warning("Could not keep the Slurm account %s for later tasks: %s", user, exc)

    def _owner_seen(self, job: SlurmJob | None) -> SlurmJob | None:
        """A job read: if this client read its submit answer, its owner is the caller's account."""
        if job is not None and self._account is None and (job.array_job_id or job.job_id) in self._submitted:
            self._learn_account(job.user, f"job {job.job_id}, whose submit answer the provider read")
        return job

    # -- the one lookup of our own jobs --------------------------------------------------------------
    def our_jobs_plan(
        self, marker: str, *, name: str | None = None, since: int | None = None, history: bool = True
    ) -> Plan[list[SlurmJob]]:
        """Our own jobs carrying ``marker`` (a task's tag, or one submit's send marker), oldest first.

        The one lookup of the lost-answer settle, the retry's lookup and the copy sweep. With ``history``
        it asks the history first (by job ``name`` and submit time, and by user when the caller's account
        is known: its answer grows with this task's jobs, not with the cluster), then the live queue
        (every job of the cluster, comments included) unless the history told all (see
        :func:`_history_tells_all`); the sweep asks the live queue only. Ownership is
        decided by facts the provider established itself, never by an answer's ``meta``: the known
        account, else the owner of the OLDEST job carrying the marker. The marker is an HMAC or a random
        value no one can know before the provider's own job showed it, so any copy of it is newer. A
        job owned by an account that cannot be a caller (root, slurm, slurmrestd) never counts, nor one
        of another user carrying a copy of the marker. An array is one job, known by its array's id.
        """
        history_jobs: list[SlurmJob] = []
        if history:
            account = self.known_account()
            start = since if since is not None else int((yield WALL)) - TAG_LOOKBACK_SECONDS
            path = self.paths.history_jobs(job_name=name, start_time=start, users=[account] if account else None)
            try:
                history_jobs = yield SlurmRequest("GET", path, _history_list)
            except SlurmApiError as exc:
                # The live queue keeps every job of the settle window (MinJobAge): it answers alone.
                self._logger.warning("The history cannot answer (%s); looking for %s in the live queue.", exc, marker)
        live_jobs: list[SlurmJob] = []
        if not _history_tells_all(history_jobs, marker):
            live_jobs = yield SlurmRequest("GET", self.paths.jobs(), _live_list)
        jobs = [*live_jobs, *history_jobs]
        marked = [job for job in jobs if job.user and job.user not in NOT_A_CALLER and carries_tag(job.comment, marker)]
        if not marked:
            return []
        owner = self.known_account()
        if owner is None:
            oldest = min(marked, key=_job_key)
            owner = oldest.user or ""
            # Fact (b) holds only if our original shows its marker: an older record whose comment the history
            # did not keep (and that has left the live queue) may be it. Then a different owner cannot be told.
            live_ids = {_job_key(job) for job in live_jobs}
            hiding = {
                job.user
                for job in history_jobs
                if not job.comment
                and _job_key(job) < _job_key(oldest)
                and _job_key(job) not in live_ids
                and (since is None or job.submit_time is None or job.submit_time >= since)
            }
            if hiding - {owner}:
                self._logger.warning(
                    "Slurm job %s is the oldest carrying %s, but older jobs named %s of %s keep no comment in the "
                    "history: which is ours cannot be told, so none is taken. Set the connection extra slurm_user "
                    "to the Linux user the calls run as.",
                    _job_key(oldest),
                    marker,
                    name,
                    ", ".join(sorted(str(user) for user in hiding)),
                )
                return []
            self._learn_account(owner, f"job {_job_key(oldest)}, the oldest carrying {marker}")
        others = sorted({job.job_id for job in marked if job.user != owner})
        if others:
            self._logger.warning(
                "Slurm jobs %s of other users carry %s too: never taken for ours, never cancelled.",
                ", ".join(map(str, others)),
                marker,
            )
        return own_tagged(marked, marker, user=owner, since=since)

    def _copies_plan(self, marker: str, keep_job_id: int | None) -> Plan[tuple[int | None, list[int]]]:
        """The one copy sweep: cancel our unfinished jobs carrying this submit's ``marker`` that are newer
        than ``keep_job_id`` (else than the oldest, which is kept); the job kept and the ids cancelled.

        After a resend, the front end may carry out an earlier send of the same submit at any time: such a
        copy carries the same send marker and a higher job id. The live queue is enough (a copy that has
        ended needs no cancel). A job of another user, or of another try (another marker), is never touched.
        """
        ours = yield from self.our_jobs_plan(marker, history=False)
        keep = keep_job_id if keep_job_id is not None else (ours[0].job_id if ours else None)
        copies = [job.job_id for job in ours if keep is not None and job.job_id > keep and not job.is_finished]
        for job_id in copies:
            self._logger.warning(
                "Slurm job %s carries %s too: an earlier send of the submit was carried out late. Cancelling it; "
                "the task goes on with job %s.",
                job_id,
                marker,
                keep,
            )
            yield from self.cancel_plan(job_id)
        return keep, copies

    def later_copies_plan(self, marker: str, keep_job_id: int) -> Plan[list[int]]:
        """While a job whose submit was resent is watched: cancel its late copies (see :meth:`_copies_plan`)."""
        _, copies = yield from self._copies_plan(marker, keep_job_id)
        return copies

    def find_by_tag_plan(self, tag: str, *, name: str | None, since: int | None) -> Plan[SlurmJob | None]:
        """The newest of our own jobs that carry ``tag`` (a retry looks for an earlier try's job).

        An array is one job: what the lookup found of it is one task's record (known by the array's id),
        so the array is read whole, its state that of all its tasks (else that task's record stands).
        """
        ours = yield from self.our_jobs_plan(tag, name=name, since=since)
        if not ours:
            return None
        found = ours[-1]
        if found.array_job_id and found.array is None:
            whole: SlurmJob | None = yield from self.job_plan(found.array_job_id)
            return whole or found
        return found

    def _partitions_plan(self, *, retry: bool | None = None) -> Plan[list[str]]:
        return one_call(SlurmRequest("GET", self.paths.partitions(), read_partition_names, retry=retry))

    def live_states_plan(
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
                    chunk, entries = read_state_entries(response)
                    states.update(chunk)
                    if tasks is not None:
                        tasks.extend(entries)
                return states
            except SlurmApiError as exc:
                why = state_endpoint_refused(exc)
                if why is None:
                    raise
                self._logger.warning("%s; listing jobs/ instead.", why)
                self.state_endpoint = False
                if tasks is not None:
                    del tasks[first_entry:]
        return dict((yield from self.live_jobs_plan(ids)))

    def cancel_plan(self, job_id: int, signal: str | None = None) -> Plan[CancelOutcome]:
        """Cancel a job. Cancelling a finished or unknown job is not an error; the outcome says which.

        A plain cancel is retried on transient failures (cancelling twice is harmless); a ``signal``
        never is: Slurm delivers it on every call that reaches it, and a lost answer does not say
        whether it did (:class:`SignalOutcomeUnknownError`).
        """
        path = self.paths.cancel(job_id, signal)
        try:
            outcome: CancelOutcome = yield SlurmRequest("DELETE", path, read_cancel, retry=signal is None)
        except SlurmApiError as exc:
            if signal is not None and answer_lost(exc):
                raise signal_not_resent(job_id, signal, exc) from exc
            raise
        self._logger.info("Cancel of Slurm job %s: %s", job_id, outcome.value)
        return outcome

    # -- submit-once: exactly one job ----------------------------------------------------------------
    def submit_job_plan(
        self, job: Mapping[str, Any] | None, script: str | None, **options: Unpack[SubmitOptions]
    ) -> Plan[SubmitResult]:
        """Prepare (check, tag) a batch job and submit it exactly once."""
        tag, comment = options.get("tag"), options.get("comment")
        prepared = prepare_submission(
            job, script, tag=tag or one_off_tag(), comment=comment, api_version=self.api_version
        )
        return self.submit_plan(prepared)

    def submit_plan(self, prepared: PreparedSubmission, marker: str | None = None) -> Plan[SubmitResult]:
        """Submit a prepared batch job exactly once (see ``SlurmApiHook.submit_job``).

        One prepared without a tag gets a one-off tag first. Its job's keys are checked against the
        version spoken, negotiated first if need be (``check_job_keys``). This submit (all its resends) gets its own
        send marker beside the tag (``marker``, else a new one): a lost answer, the copy sweep and a
        killed task's reaper look for it, never for another try's job. A rejected partition is named with
        the cluster's partitions.
        """
        if not prepared.tag:
            tagged = prepare_submission(prepared.job, prepared.payload.get("script"), tag=one_off_tag())
            prepared = PreparedSubmission(payload=tagged.payload, notes=prepared.notes, tag=tagged.tag)
        if self.api_version is None:  # "auto": the version spoken decides the keys Slurm knows (a ping, no job)
            self.api_version = yield from self._version_plan()
        check_job_keys(prepared.job, self.api_version)  # before the job is sent: Slurm would drop them silently
        for note in prepared.notes:
            self._logger.info("%s", note)
        try:
            marker = marker or send_marker()
            return (yield from self._submit_once_plan(with_send_marker(prepared, marker), marker))
        except SubmitRejectedError as exc:
            if exc.kind == "partition":
                exc.name_partitions((yield from self._partition_names_for_message_plan()))
            raise

    def _partition_names_for_message_plan(self) -> Plan[list[str]]:
        """The partitions, to name them in an error; never fails (the error being reported matters more)."""
        try:
            return (yield from self._partitions_plan(retry=False))
        except SlurmApiError as exc:
            self._logger.warning("Could not list the cluster's partitions: %s", exc)
            return []

    def _submit_once_plan(self, prepared: PreparedSubmission, marker: str) -> Plan[SubmitResult]:
        """Send the submit once; on a lost answer, look for the job until the settle window is over first.

        A lost answer (no answer, 5xx, UNAVAILABLE, 429, a garbled one, or a 401) does not say whether
        Slurm created the job, and the service may still act on it after the client gave up. The submit
        is sent again only when lookups have found no job with this submit's send ``marker`` for
        ``submit_settle_seconds`` after it was sent; after any resend the one copy sweep keeps the oldest
        job with the marker and cancels the others.
        """
        deadline = (yield NOW) + max(self.retry_seconds, self.submit_settle_seconds)
        since = int((yield WALL)) - CLOCK_SKEW_SECONDS  # Slurm's wall clock, not a wait
        resent = False
        submit = SlurmRequest("POST", self.paths.submit(), read_submit, body=prepared.payload)
        while True:
            sent: float = yield NOW
            try:
                result: SubmitResult = yield submit
            except SlurmApiError as exc:
                if not answer_lost(exc):
                    raise
                found = yield from self._settle_lost_submit_plan(prepared, marker, exc, sent, since)
                if found is not None:
                    return SubmitResult(job_id=found.job_id, resent=resent, send_marker=marker)
                if (yield NOW) >= deadline:
                    raise
                resent = True
                continue
            self._submitted.add(result.job_id)
            self._logger.info("Submitted Slurm job %s to %s", result.job_id, self._target())
            if self.known_account() is None:
                yield from self._learn_from_submitted_plan(result.job_id)
            result = replace(result, send_marker=marker)
            if resent:
                result = yield from self._drop_duplicate_jobs_plan(marker, result)
            return result

    def _learn_from_submitted_plan(self, job_id: int) -> Plan[None]:
        """The account is not known yet: read the job just submitted once, its owner is the caller's account
        (kept, so this costs one call once per connection and cluster). A failure only leaves it unknown."""
        try:
            yield from self.live_job_plan(job_id)
        except SlurmApiError as exc:
            self._logger.warning("Could not read Slurm job %s to learn the caller's account: %s", job_id, exc)

    def _settle_lost_submit_plan(
        self, prepared: PreparedSubmission, marker: str, exc: SlurmApiError, sent: float, since: int
    ) -> Plan[SlurmJob | None]:
        """Look for the job of a lost submit (its send ``marker``) until ``submit_settle_seconds`` after it was sent."""
        settled_at = sent + self.submit_settle_seconds
        pause = min(10.0, max(0.5, self.submit_settle_seconds / 4))
        self._logger.warning(
            "The answer to the submit was lost (%s). Looking for %s for up to %.0fs before sending it again.",
            exc,
            marker,
            max(0.0, settled_at - (yield NOW)),
        )
        while True:
            looked_at: float = yield NOW
            try:
                ours = yield from self.our_jobs_plan(marker, name=prepared.job.get("name"), since=since)
            except SlurmApiError as exc2:
                raise SubmitOutcomeUnknownError(
                    f"The answer to a submit was lost and looking for its marker {marker} failed too ({exc2}). "
                    "Not resending, to avoid a second copy of the job: check the cluster's queue for that marker."
                ) from exc2
            if ours:
                self._logger.warning(
                    "The submit's answer was lost, but Slurm job %s carries its marker %s: using it, not resending.",
                    ours[0].job_id,
                    marker,
                )
                return ours[0]
            if looked_at >= settled_at:
                self._logger.warning(
                    "No job carries %s %.0fs after the lost submit: sending it again.", marker, looked_at - sent
                )
                return None
            yield Sleep(min(pause, max(0.0, settled_at - (yield NOW))))

    def _drop_duplicate_jobs_plan(self, marker: str, result: SubmitResult) -> Plan[SubmitResult]:
        """After a resend: if the lost send was carried out after all, keep the older job, cancel the newer."""
        try:
            keep, _ = yield from self._copies_plan(marker, None)
        except SlurmApiError as exc:
            self._logger.warning("Could not look for a second job with %s after the resend: %s", marker, exc)
            return replace(result, resent=True)
        if keep is None or keep == result.job_id:
            return replace(result, resent=True)
        return SubmitResult(job_id=keep, resent=True, send_marker=marker)

    # -- the accounting wait -------------------------------------------------------------------------
    def accounting_plan(self, job_id: int) -> Plan[Accounting | None]:
        """The history's summary of a finished job; ``None`` while it has no finished record of it.

        One call, not retried here: :meth:`wait_for_accounting_plan` looks again.
        """

        def read(response: SlurmResponse) -> Accounting | None:
            if response.has_error(ESLURM_INVALID_JOB_ID):
                return None
            response.raise_for_errors()
            return read_accounting(pick_record(response.body, job_id), job_id)

        return one_call(SlurmRequest("GET", self.paths.history_job(job_id), read, retry=False))

    def wait_for_accounting_plan(
        self, job_id: int, wait_seconds: float, poll_seconds: float
    ) -> Plan[tuple[str, dict[str, Any]]]:
        """The accounting line and XCom value of a finished job, looked for up to ``wait_seconds``.

        slurmdbd records a job a little after it ends: until then the history has no finished record.
        Never raises for a Slurm or API error: the line then says why there is no summary.
        """
        started: float = yield NOW
        while True:
            try:
                accounting = yield from self.accounting_plan(job_id)
            except SlurmApiError as exc:
                waited = (yield NOW) - started
                if not is_transient(exc) or waited >= wait_seconds:
                    return not_recorded(job_id, waited, f"the history could not be read ({exc})")
                accounting = None
            if accounting is not None:
                return accounting.describe(), accounting.to_dict()
            waited = (yield NOW) - started
            if waited >= wait_seconds:
                return not_recorded(job_id, waited)
            yield Sleep(min(poll_seconds, max(0.0, wait_seconds - waited)))

    def wait_for_termination_plan(self, job_id: int, timeout: float, poll_seconds: float) -> Plan[SlurmJob | None]:
        """The job once it has finished, looked at every ``poll_seconds`` for up to ``timeout`` seconds.

        Slurm cancels asynchronously: a cancelled job stays RUNNING or COMPLETING a while. When the time is
        up, its last record (still unfinished: the caller says so); ``None`` if Slurm knows it nowhere.
        """
        started: float = yield NOW
        job = yield from self.job_plan(job_id)
        while job is not None and not job.is_finished:
            waited = (yield NOW) - started
            if waited >= timeout:
                break
            yield Sleep(min(poll_seconds, timeout - waited))
            job = yield from self.job_plan(job_id)
        return job


def no_answer(cluster: ClusterRef, timeout: float, exc: BaseException) -> ApiConnectionError:
    """A transport got no answer: the error names the endpoint and the wait."""
    return ApiConnectionError(f"No answer from {cluster.endpoint} within {timeout:.0f}s ({type(exc).__name__}).")


def not_sent(cluster: ClusterRef, cause: BaseException) -> RequestNotSentError:
    """A transport could not send: the error names the host, why (``cause``: the socket's or TLS's own
    error at connect time, before a byte of the request was written) and the likely fix."""
    parts = urlsplit(cluster.endpoint)
    host = parts.hostname or cluster.endpoint
    where = f"{host}:{parts.port}" if parts.port else host
    reason, detail = _not_sent_reason(cause)
    what = {
        "name": "the name does not resolve",
        "resolver": "the name could not be resolved for now",
        "refused": "the connection was refused",
        "tls": "the TLS handshake failed",
        "connect": "no connection could be made",
    }[reason]
    return RequestNotSentError(
        f"Nothing was sent to {where}: {what} ({detail}). {_not_sent_fix(cluster, reason, where)}",
        host=where,
        reason=reason,
    )


def _not_sent_reason(cause: BaseException) -> tuple[str, str]:
    """The reason (one of ``NOT_SENT_REASONS``) and a short detail of a connect-time failure."""
    import socket
    import ssl

    if isinstance(cause, socket.gaierror):
        # EAI_NONAME: NXDOMAIN, the name does not exist; EAI_NODATA: it exists with no address. Anything
        # else (EAI_AGAIN: the resolver did not answer, or failed) may pass.
        no_such_name = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}
        return ("name" if cause.errno in no_such_name else "resolver"), str(cause.strerror or cause)
    if isinstance(cause, ssl.SSLError):  # a certificate refused, or a server that does not speak TLS
        return "tls", str(getattr(cause, "verify_message", None) or cause.reason or cause)
    if isinstance(cause, ConnectionRefusedError):
        return "refused", str(cause.strerror or "connection refused")
    if isinstance(cause, OSError) and cause.strerror:
        return "connect", cause.strerror
    return "connect", str(cause) or type(cause).__name__


def _not_sent_fix(cluster: ClusterRef, reason: str, where: str) -> str:
    """What to check when nothing could be sent: the region, or the ``api_endpoint`` where one is set."""
    if cluster.api_endpoint:
        source = (
            f"api_endpoint={cluster.api_endpoint!r} (the task's api_endpoint argument, else the connection extra "
            "api_endpoint)"
        )
    else:
        source = f"region={cluster.region!r} (without an api_endpoint the host is REGION-aiplatform.googleapis.com)"
    if reason == "name":
        if cluster.api_endpoint:
            return f"The host is that of {source}: check its spelling."
        return (
            f"The host is built from {source}: check that it is your training cluster's region, spelt as the "
            "console shows it (e.g. 'us-central1'); for another endpoint set the connection extra api_endpoint."
        )
    if reason == "resolver":
        return f"The DNS resolver did not answer: check this machine's DNS if it lasts. The host comes from {source}."
    if reason == "refused":
        if cluster.api_endpoint:
            return f"Nothing listens on {where}: start the server behind {source}, or fix its host or port."
        return f"A firewall or proxy on the way refuses it (Google's endpoint does not). The host comes from {source}."
    if reason == "tls":
        if cluster.api_endpoint:
            return (
                f"Check {source}: http:// for a server without TLS (the local emulator), https:// for one whose "
                "certificate this machine trusts (a private CA: REQUESTS_CA_BUNDLE for the sync hook, SSL_CERT_FILE "
                "for the async one)."
            )
        return (
            "Something between this machine and Google answers with a certificate this machine does not trust "
            "(a TLS-inspecting proxy?): trust its CA (REQUESTS_CA_BUNDLE for the sync hook, SSL_CERT_FILE for the "
            f"async one). The host comes from {source}."
        )
    return f"Check the network between this machine and {where} (route, firewall, proxy). The host comes from {source}."


def wrong_endpoint(exc: RequestNotSentError) -> WrongEndpointError:
    """``exc`` at a client's first contact with the endpoint: a configuration mistake, raised at once."""
    return WrongEndpointError(
        f"{exc} The endpoint has never answered this client, so this is a mistake in the configuration, not an outage.",
        host=exc.host,
        reason=exc.reason,
    )


def no_token(gcp_conn_id: str, exc: BaseException) -> UnauthenticatedError:
    """A token could not be had: the error names the connection, never the credential."""
    return UnauthenticatedError(
        f"Could not get a Google token for connection {gcp_conn_id!r}: {type(exc).__name__}. "
        "Check the connection's key or impersonation_chain.",
        http_status=401,
    )


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


def _job_key(job: SlurmJob) -> int:
    """The id a job is known by: its array's for a task of an array."""
    return job.array_job_id or job.job_id


def _history_tells_all(history: Sequence[SlurmJob], marker: str) -> bool:
    """Whether the history's records decide a lookup alone: one carries ``marker``, and every record shows
    its comment or has ended (slurmdbd stores a job's comment when it ends, with AccountingStoreFlags=job_comment,
    so a job still pending or running shows its comment only in the live queue)."""
    return any(carries_tag(job.comment, marker) for job in history) and all(
        job.comment or job.is_finished for job in history
    )


def _as_is(response: SlurmResponse) -> SlurmResponse:
    return response


def _live_list(response: SlurmResponse) -> list[SlurmJob]:
    return read_jobs(response, history=False)


def _history_list(response: SlurmResponse) -> list[SlurmJob]:
    return read_jobs(response, history=True)


def answer_lost(exc: SlurmApiError) -> bool:
    """Whether a request's failure leaves its outcome unknown (a submit's job may exist). A request that was
    never sent (:class:`RequestNotSentError`) has no outcome: it needs no look-up."""
    if isinstance(exc, RequestNotSentError):
        return False
    return is_transient(exc) or isinstance(exc, PostTokenRefused)


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


def send_marker() -> str:
    """A new send marker: one submit call's (all its resends), random, so no one can make it in advance."""
    return f"{SEND_MARKER_PREFIX}{secrets.token_hex(12)}"


def with_send_marker(prepared: PreparedSubmission, marker: str) -> PreparedSubmission:
    """``prepared`` with ``marker`` appended to its job's comment (after the tag and any comment of the user's)."""
    job = dict(prepared.payload.get("job") or {})
    comment = str(job.get("comment") or "").strip()
    job["comment"] = f"{comment} {marker}" if comment else marker
    return replace(prepared, payload={**prepared.payload, "job": job})


def one_off_tag() -> str:
    """The tag of a submit that names no task instance: found again after a lost answer all the same."""
    return f"{SUBMIT_TAG_PREFIX}{uuid.uuid4().hex[:24]}"


def as_states(live: Mapping[int, JobStateInfo | SlurmJob]) -> dict[int, JobStateInfo]:
    """States only, whether ``jobs/state`` or the ``jobs/`` list answered."""
    return {job_id: value.state_info if isinstance(value, SlurmJob) else value for job_id, value in live.items()}


__all__ = [
    "ACCOUNTING_POLL_SECONDS",
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_IDS_PER_CALL",
    "SUBMIT_SETTLE_MARGIN_SECONDS",
    "TAG_LOOKBACK_SECONDS",
    "Offload",
    "Plan",
    "PostTokenRefused",
    "SlurmClient",
    "SlurmRequest",
    "SubmitOptions",
    "VersionNoLongerServed",
    "answer_lost",
    "as_states",
    "log_slurm_warnings",
    "no_answer",
    "no_token",
    "not_sent",
    "one_call",
    "one_off_tag",
    "send_marker",
    "signal_not_resent",
    "state_endpoint_refused",
]
