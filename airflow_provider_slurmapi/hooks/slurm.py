"""Hooks for the Slurm Job API: :class:`SlurmApiHook` (sync) and :class:`SlurmApiAsyncHook` (triggers).

Both get their credentials from an Airflow Google Cloud connection through the Google provider's
``GoogleBaseHook``, so every form it supports works: Application Default Credentials, a key file
path, key JSON in ``keyfile_dict``, ``impersonation_chain``. Connection extra ``api_endpoint``
(or the ``api_endpoint`` argument) points them elsewhere than ``https://{region}-aiplatform.googleapis.com``,
e.g. at a private endpoint or the local ``slurmapi-emulator``.

What a call is (paths, envelope, reading answers, errors, the retry layer, the 401 rule) and every
flow of several calls (submit-once, the tag lookup, the accounting wait, cancel-and-confirm) live
once in :class:`~airflow_provider_slurmapi.slurm.client.SlurmClient`, carried out by the drivers of
:mod:`~airflow_provider_slurmapi.slurm.api.plans`. The two hooks here are thin adapters: each reads the
connection (the same :func:`connection_settings` for both), builds a transport (post one envelope,
refresh the token: :class:`SessionTransport`, :class:`AiohttpTransport`) and a clock, and holds a client
built with them (``hook.client``), as an httpx client is built with ``transport=``. The async hook builds
nothing from the sync one.
Why these libraries: google-auth's ``AuthorizedSession`` keeps one pooled ``requests``
session and refreshes the token only when it expires; aiohttp is what the triggerer's event loop speaks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar, Unpack
from urllib.parse import urlsplit

from airflow.providers.google.common.hooks.base_google import GoogleBaseAsyncHook, GoogleBaseHook

from airflow_provider_slurmapi.account_store import account_store, variable_name, version_store, version_variable_name
from airflow_provider_slurmapi.slurm.api.cluster import ClusterArgs, ClusterRef, cluster_ref
from airflow_provider_slurmapi.slurm.api.envelope import HttpMethod, SlurmResponse
from airflow_provider_slurmapi.slurm.api.errors import SlurmApiError
from airflow_provider_slurmapi.slurm.api.plans import AsyncClock, Clock, LoopClock, Plan, Send, SystemClock
from airflow_provider_slurmapi.slurm.client import (
    ACCOUNTING_POLL_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    SUBMIT_SETTLE_MARGIN_SECONDS,
    SlurmClient,
    SubmitOptions,
    no_answer,
    no_token,
    not_sent,
)
from airflow_provider_slurmapi.slurm.jobs.accounting import Accounting
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob
from airflow_provider_slurmapi.slurm.jobs.readers import CancelOutcome, SubmitResult
from airflow_provider_slurmapi.slurm.jobs.states import JobStateInfo
from airflow_provider_slurmapi.slurm.submit.spec import PreparedSubmission

if TYPE_CHECKING:
    import aiohttp
    import requests
    from google.auth.credentials import Credentials

T = TypeVar("T")


class EndpointRedirectError(SlurmApiError):
    """The endpoint answered a redirect (3xx): the Slurm Job API never does, so no retry or version helps."""

    permanent = True

    def __init__(self, message: str, *, http_status: int) -> None:
        super().__init__(message)
        self.http_status = http_status


def redirect_error(cluster: ClusterRef, status: int, location: str | None) -> EndpointRedirectError:
    """A 3xx answer: the Slurm Job API never redirects, so the endpoint is wrong (or something sits in front).

    The error names the endpoint and where the answer pointed (its scheme and host only: a redirect's
    path or query may carry anything); the envelope was not sent there.
    """
    target = "nowhere"
    if location:
        parts = urlsplit(location)
        target = f"{parts.scheme}://{parts.hostname}" if parts.scheme and parts.hostname else "a relative path"
    return EndpointRedirectError(
        f"The Slurm Job API endpoint {cluster.endpoint} answered HTTP {status}, a redirect to {target}. "
        "The API never redirects, so the request was not sent again there: check the connection's "
        "api_endpoint (or the proxy in front of it).",
        http_status=status,
    )


@dataclass(frozen=True)
class ConnectionSettings:
    """What a hook reads from its Airflow connection, the same for both hooks (arguments win over extras)."""

    timeout: float
    retry_seconds: float | None
    submit_settle_seconds: float | None
    slurm_user: str


def connection_settings(
    google: GoogleBaseHook,
    *,
    timeout: float | None = None,
    retry_seconds: float | None = None,
    submit_settle_seconds: float | None = None,
) -> ConnectionSettings:
    """The client settings of ``google``'s connection: each argument, else its connection extra, else the default."""
    retry = retry_seconds if retry_seconds is not None else google._get_field("retry_seconds")
    settle = submit_settle_seconds or google._get_field("submit_settle_seconds")
    return ConnectionSettings(
        timeout=float(timeout or google._get_field("request_timeout") or DEFAULT_TIMEOUT_SECONDS),
        retry_seconds=None if retry in (None, "") else float(retry),
        submit_settle_seconds=float(settle) if settle else None,
        slurm_user=str(google._get_field("slurm_user") or "").strip(),
    )


def connection_cluster(google: GoogleBaseHook, ref: ClusterRef) -> ClusterRef:
    """The cluster with the connection's project and endpoint where none was given."""
    return ref.with_connection(
        project_id=ref.project_id or google.project_id, api_endpoint=google._get_field("api_endpoint")
    )


def adopt_connection(
    client: SlurmClient[Any], settings: ConnectionSettings, where: Callable[[], ClusterRef] | None
) -> None:
    """Hand a client its connection's settings and (``where``: the cluster their Variables are named by)
    the deployment's stores of the learned account and the negotiated version (both hooks, one way)."""
    client.timeout = settings.timeout
    if settings.retry_seconds is not None:
        client.retry_seconds = settings.retry_seconds
    client.submit_settle_seconds = settings.submit_settle_seconds or settings.timeout + SUBMIT_SETTLE_MARGIN_SECONDS
    # The Linux user the API runs the calls as, if the connection says it (see caller_user); else the
    # provider learns it from its own jobs and keeps it for this connection and cluster.
    if settings.slurm_user:
        client._account, client._account_from = settings.slurm_user, "the connection's extra slurm_user"
    if where is None:
        return
    cluster = where
    if not settings.slurm_user:
        client.load_account, client.keep_account = account_store(lambda: _account_variable(cluster()))
    if client.api_version is None:  # "auto": negotiated once per deployment and cluster, then kept
        client.load_version, client.keep_version = version_store(lambda: _version_variable(cluster()))


def _account_variable(ref: ClusterRef) -> str:
    """The Airflow Variable that keeps the account of this connection on this cluster."""
    return variable_name(ref.gcp_conn_id, ref.project_id, ref.region, ref.cluster_id)


def _version_variable(ref: ClusterRef) -> str:
    """The Airflow Variable that keeps the API version negotiated with this cluster."""
    return version_variable_name(ref.endpoint, ref.project_id, ref.region, ref.cluster_id)


def token_failure(gcp_conn_id: str, cluster: ClusterRef, timeout: float, exc: BaseException) -> SlurmApiError:
    """Why a token could not be had, as both transports say it. No answer from the token endpoint, or an
    answer google-auth marks ``retryable`` (a 5xx, after its own retries), is transient: retried as
    "No answer" within the call's budget, and ridden out by a watch. Anything else (a bad key, a refused
    impersonation) is final and names the connection, never the credential."""
    from google.auth.exceptions import TransportError

    if isinstance(exc, TransportError) or getattr(exc, "retryable", False) is True:
        return no_answer(cluster, timeout, exc)
    return no_token(gcp_conn_id, exc)


def _wrapped(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps, outermost first: urllib3's ``reason``, the cause or context, the first argument."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        inner = (getattr(current, "reason", None), current.__cause__, current.__context__, *current.args[:1])
        current = next((e for e in inner if isinstance(e, BaseException)), None)


def _in_handshake(error: BaseException) -> bool:
    """Whether a TLS error came from the handshake, before the request was written: a certificate is only
    checked there, and any other TLS error counts only if raised by ``do_handshake`` itself."""
    import ssl

    if isinstance(error, ssl.SSLCertVerificationError):
        return True
    frame = error.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and frame.tb_frame.f_code.co_name == "do_handshake"


def unsent_by_requests(exc: BaseException) -> BaseException | None:
    """The connect-time failure of a ``requests`` error if the request was never sent, else ``None``.

    Never sent: urllib3 could not open the connection (``NewConnectionError``, its ``NameResolutionError``,
    ``ConnectTimeoutError``) or the TLS handshake failed. Returned is the socket's or TLS's own error (a
    ``socket.gaierror``, ``ConnectionRefusedError``, ``ssl.SSLError``...). A proxy's failure is left as no
    answer: the host it would name is not the one that failed.
    """
    import ssl

    import requests
    from urllib3.exceptions import ConnectTimeoutError

    if not isinstance(exc, requests.ConnectionError) or isinstance(exc, requests.exceptions.ProxyError):
        return None
    chain = list(_wrapped(exc))
    tls = next((e for e in chain if isinstance(e, ssl.SSLError)), None)
    if tls is not None or isinstance(exc, requests.exceptions.SSLError):
        return tls if tls is not None and _in_handshake(tls) else None
    for at, error in enumerate(chain):
        if isinstance(error, ConnectTimeoutError):  # NewConnectionError is one too (urllib3's own tree)
            return next((e for e in chain[at + 1 :] if isinstance(e, OSError)), error)
    return None


def unsent_by_aiohttp(exc: BaseException) -> BaseException | None:
    """The connect-time failure of an aiohttp error if the request was never sent, else ``None``.

    aiohttp raises ``ClientConnectorError`` (``ClientConnectorDNSError`` since 3.10, the TLS ones
    ``ClientConnectorCertificateError`` and ``ClientConnectorSSLError``) only while it opens the
    connection; its ``os_error`` is the socket's or TLS's own error. A proxy's is left as no answer.
    """
    import aiohttp

    if not isinstance(exc, aiohttp.ClientConnectorError) or isinstance(exc, aiohttp.ClientProxyConnectionError):
        return None
    certificate = getattr(exc, "certificate_error", None)  # aiohttp < 3.10 gives it no os_error
    if isinstance(certificate, BaseException):
        return certificate
    try:
        return exc.os_error
    except AttributeError:
        return exc.__cause__ or exc


class SessionTransport:
    """The sync transport: one pooled google-auth session; posts one envelope, refreshes the token.

    It never sends a request again by itself on a 401 (``AuthorizedSession`` would, which for a submit
    could start a second job): the client core's one 401 rule decides (``SlurmClient._answer``).
    """

    def __init__(
        self,
        cluster: Callable[[], ClusterRef],
        credentials: Callable[[], Credentials],
        *,
        timeout: Callable[[], float],
        gcp_conn_id: str,
    ) -> None:
        self._cluster, self._get_credentials, self._timeout, self.gcp_conn_id = (
            cluster,
            credentials,
            timeout,
            gcp_conn_id,
        )

    @cached_property
    def credentials(self) -> Credentials:
        return self._get_credentials()

    @cached_property
    def session(self) -> requests.Session:
        from google.auth.transport.requests import AuthorizedSession

        _ = self._cluster()  # the connection's project and endpoint are checked before any credential
        return AuthorizedSession(self.credentials, refresh_status_codes=())

    def send(self, envelope: Send) -> tuple[int, bytes]:
        import requests
        from google.auth.exceptions import RefreshError, TransportError

        cluster = self._cluster()
        try:
            response = self.session.post(
                cluster.url,
                data=envelope.data,
                headers={"Content-Type": "application/json"},
                timeout=self._timeout(),
                allow_redirects=False,  # the API never redirects: never post the envelope again elsewhere
            )
        except RefreshError as exc:
            raise token_failure(self.gcp_conn_id, cluster, self._timeout(), exc) from None
        except (requests.ConnectionError, requests.Timeout, TransportError) as exc:
            unsent = unsent_by_requests(exc)
            if unsent is not None:
                raise not_sent(cluster, unsent) from exc
            raise no_answer(cluster, self._timeout(), exc) from exc
        if response.is_redirect or 300 <= response.status_code < 400:
            response.close()
            raise redirect_error(cluster, response.status_code, response.headers.get("Location"))
        return response.status_code, response.content

    def refresh(self) -> None:
        from google.auth.transport.requests import Request

        try:
            self.credentials.refresh(Request())
        except Exception as exc:
            raise token_failure(self.gcp_conn_id, self._cluster(), self._timeout(), exc) from None


class AiohttpTransport:
    """The async transport: one aiohttp session and one token, refreshed in a thread behind a lock, so
    many coroutines sharing it refresh it once."""

    def __init__(
        self,
        prepare: Callable[[], Awaitable[tuple[ClusterRef, Credentials]]],
        *,
        timeout: Callable[[], float],
        gcp_conn_id: str,
    ) -> None:
        self._prepare, self._timeout, self.gcp_conn_id = prepare, timeout, gcp_conn_id
        self.session: aiohttp.ClientSession | None = None
        self._token_lock = asyncio.Lock()

    async def token(self, *, force: bool = False) -> str:
        cluster, credentials = await self._prepare()
        async with self._token_lock:
            if force or not credentials.valid:
                from google.auth.transport.requests import Request

                try:
                    await asyncio.to_thread(credentials.refresh, Request())
                except Exception as exc:
                    raise token_failure(self.gcp_conn_id, cluster, self._timeout(), exc) from None
            return str(credentials.token)

    async def _get_session(self) -> aiohttp.ClientSession:
        if self.session is None or self.session.closed:
            import aiohttp

            self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout()))
        return self.session

    async def close(self) -> None:
        if self.session is not None and not self.session.closed:
            await self.session.close()
        self.session = None

    async def send(self, envelope: Send) -> tuple[int, bytes]:
        import aiohttp

        cluster, _ = await self._prepare()
        token = await self.token()
        session = await self._get_session()
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
        try:
            # The API never redirects: never post the envelope again elsewhere.
            async with session.post(
                cluster.url, data=envelope.data, headers=headers, allow_redirects=False
            ) as response:
                if 300 <= response.status < 400:
                    raise redirect_error(cluster, response.status, response.headers.get("Location"))
                return response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            unsent = unsent_by_aiohttp(exc)
            if unsent is not None:
                raise not_sent(cluster, unsent) from exc
            raise no_answer(cluster, self._timeout(), exc) from exc

    async def refresh(self) -> None:
        await self.token(force=True)


# What the hooks held themselves before they held a client: read and set on ``hook.client`` now.
CLIENT_ATTRIBUTES = frozenset(
    {"api_version", "clock", "paths", "retry_initial_wait", "retry_seconds", "state_endpoint", "submit_settle_seconds"}
)


class _HoldsClient:
    """Both hooks: a setting that is the client's, read or set on the hook, is an error naming
    ``hook.client``, never a silently ignored attribute (a caller of an earlier release tuned the hook)."""

    def __getattr__(self, name: str) -> Any:
        if name in CLIENT_ATTRIBUTES:
            raise AttributeError(_moved(type(self).__name__, name))
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in CLIENT_ATTRIBUTES:
            raise AttributeError(_moved(type(self).__name__, name))
        super().__setattr__(name, value)


def _moved(hook: str, name: str) -> str:
    return f"{hook}.{name} is its client's setting: use hook.client.{name} (the hooks hold a SlurmClient)."


class SlurmApiHook(_HoldsClient, GoogleBaseHook):
    """Calls the Slurm Job API of one training cluster.

    :param region: the cluster's region, e.g. ``us-central1``.
    :param cluster_id: the training cluster's id.
    :param project_id: the cluster's project; default: the connection's project.
    :param gcp_conn_id: an Airflow Google Cloud connection.
    :param api_version: the Slurm REST version to speak (one of ``slurm/api/api_versions.py``); default ``"auto"``:
        the newest version both this provider and the cluster speak, negotiated once per deployment and cluster
        (kept in an Airflow Variable; negotiated again if the cluster stops serving it).
    :param impersonation_chain: a service account (or chain) to impersonate.
    :param api_endpoint: overrides the endpoint (also connection extra ``api_endpoint``).
    :param cluster: all of the above in one :class:`~airflow_provider_slurmapi.slurm.api.cluster.ClusterRef`
        (what operators and triggers hand over); arguments given beside it override its values.
    :param timeout: seconds to wait for one answer (default: connection extra ``request_timeout``, else 60).
    :param retry_seconds: how long transient failures of one call are retried before giving up
        (default: connection extra ``retry_seconds``, else 300). A watch rides out longer outages.
    :param submit_settle_seconds: after a lost submit answer, how long the job is looked for before the
        submit is sent again (default: connection extra ``submit_settle_seconds``, else the request
        timeout plus 30 s): longer than the service may take to carry out a submit it got.

    The hook holds its :class:`~airflow_provider_slurmapi.slurm.client.SlurmClient` as ``client``, built with
    its transport and a blocking clock: settings (``client.retry_seconds``, ``client.timeout``...) and the
    clock the operators' and sensors' waits sleep on (``client.clock``) are read and tuned there.
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
        transport = SessionTransport(
            lambda: self.cluster,
            self.get_credentials,
            timeout=lambda: self.client.timeout,
            gcp_conn_id=ref.gcp_conn_id,
        )
        # Every wait of this hook (retry backoff, settle, accounting) waits with the client's clock, blocking:
        # the operators' and sensors' waits sleep on it too (a test's fake one).
        self.client: SlurmClient[Clock] = SlurmClient(
            ref, transport=transport, clock=SystemClock(), target=lambda: self.cluster, logger=self.log
        )
        settings = connection_settings(
            self, timeout=timeout, retry_seconds=retry_seconds, submit_settle_seconds=submit_settle_seconds
        )
        adopt_connection(self.client, settings, lambda: self.cluster)

    def __repr__(self) -> str:
        return (
            f"<SlurmApiHook conn={self.gcp_conn_id!r} cluster={self.cluster_ref.region}/{self.cluster_ref.cluster_id}>"
        )

    # -- the transport ------------------------------------------------------------------------------
    @cached_property
    def cluster(self) -> ClusterRef:
        """The cluster with the connection's project and endpoint where none was given."""
        return connection_cluster(self, self.cluster_ref)

    @property
    def session(self) -> requests.Session:
        """The transport's pooled session (google-auth refreshes its token when it has expired)."""
        return self._transport.session

    @session.setter
    def session(self, session: requests.Session) -> None:
        """Another session for the transport (a test's, serving recorded answers)."""
        self._transport.session = session

    @property
    def _transport(self) -> SessionTransport:
        assert isinstance(self.client.transport, SessionTransport), "a test's transport has no session"
        return self.client.transport

    def _run(self, plan: Plan[T]) -> T:
        return self.client.run(plan)

    def call(
        self, method: HttpMethod, path: str, body: Mapping[str, Any] | None = None, *, retry: bool | None = None
    ) -> SlurmResponse:
        """One raw Slurm call through the envelope: Slurm's status and parsed body (or text).

        GET and DELETE are retried on transient failures; POST is not (see :meth:`submit_job`).
        Slurm's ``warnings[]`` are logged; ``errors[]`` are left to the caller
        (:meth:`SlurmResponse.raise_for_errors`).
        """
        return self._run(self.client.call_plan(method, path, body, retry))

    # -- jobs ---------------------------------------------------------------------------------------
    def get_live_job(self, job_id: int) -> SlurmJob | None:
        """The job from the live queue; ``None`` once it has left it."""
        return self._run(self.client.live_job_plan(job_id))

    def get_history_job(self, job_id: int) -> SlurmJob | None:
        """The job's newest record in the accounting history; ``None`` if it has none."""
        return self._run(self.client.history_job_plan(job_id))

    def get_job(self, job_id: int) -> SlurmJob | None:
        """The job from the live queue, or from the history once it has left it; ``None`` if neither knows it."""
        return self._run(self.client.job_plan(job_id))

    def get_live_states(
        self, job_ids: Sequence[int], *, tasks: list[tuple[int, int, JobStateInfo]] | None = None
    ) -> dict[int, JobStateInfo | SlurmJob]:
        """The given jobs still in the live queue: ``jobs/state``, else (remembered) the ``jobs/`` list's records."""
        return self._run(self.client.live_states_plan(job_ids, tasks))

    def list_jobs(self, *, history: bool = False, own: bool = False, **filters: Any) -> list[SlurmJob]:
        """Jobs of the live queue, or (``history=True``) of the accounting history with its filters;
        ``own``: only the calling user's (unless the history ``users`` filter names whose)."""
        return self._run(self.client.list_jobs_plan(history=history, filters=filters, own=own))

    def cancel_job(self, job_id: int, *, signal: str | None = None) -> CancelOutcome:
        """Cancel a job; a finished or unknown job is not an error. A ``signal`` is never resent."""
        return self._run(self.client.cancel_plan(job_id, signal))

    def get_live_jobs(self, job_ids: Sequence[int]) -> dict[int, SlurmJob]:
        """Full records of the given jobs still in the live queue, from one ``jobs/`` list."""
        return self._run(self.client.live_jobs_plan(job_ids))

    def cancel_later_copies(self, marker: str, keep_job_id: int) -> list[int]:
        """After a resent submit: cancel our jobs with its send ``marker`` newer than ``keep_job_id`` (their ids)."""
        return self._run(self.client.later_copies_plan(marker, keep_job_id))

    # -- submit: exactly one job --------------------------------------------------------------------
    def submit_job(
        self, job: Mapping[str, Any] | None, script: str | None, **options: Unpack[SubmitOptions]
    ) -> SubmitResult:
        """Submit a batch job with exactly one call; never start two copies of it.

        Every job carries a tag in its ``comment`` (the task instance's, or a one-off one) and the send
        marker of this submit. A submit whose answer is lost (no answer, 5xx, UNAVAILABLE, 401) is
        followed by look-ups of the marker, and resent only if no job carries it once the service can
        no longer be acting on it (see ``submit_settle_seconds``). Another try's job never counts.
        """
        return self._run(self.client.submit_job_plan(job, script, **options))

    def submit_prepared(self, prepared: PreparedSubmission, *, send_marker: str | None = None) -> SubmitResult:
        """:meth:`submit_job` of a submission already prepared (and so checked) by
        :func:`~airflow_provider_slurmapi.slurm.submit.spec.prepare_submission`, e.g. by an operator to fail early.

        Sent as it is; one prepared without a tag gets a one-off tag first (a lost answer is settled by it).
        ``send_marker`` is this submit's marker when the caller must know it first (a kill's reaper looks
        for it); else a new one is made.
        """
        return self._run(self.client.submit_plan(prepared, send_marker))

    def start_reaper(self, *, marker: str, name: str | None, since: int) -> int:
        """Start a detached process that cancels the job of a submit on its way (its process id).

        For a task killed during a submit: the process outlives the task, looks for our job carrying
        the submit's send ``marker`` (submitted since ``since``) until the settle window is over and
        cancels it (:mod:`~airflow_provider_slurmapi.slurm.reaper`). It gets this hook's
        current access token on its stdin, never anything else of the connection.
        """
        from airflow_provider_slurmapi.slurm.reaper import ReapOrder, spawn

        credentials = self._transport.credentials
        if not credentials.valid:
            self._transport.refresh()
        cluster = self.cluster
        order = ReapOrder(
            project_id=str(cluster.project_id),
            region=cluster.region,
            cluster_id=cluster.cluster_id,
            api_endpoint=cluster.api_endpoint,
            api_version=self.client.api_version or cluster.api_version,
            marker=marker,
            name=name,
            since=since,
            deadline=self.client.clock.wall() + self.client.submit_settle_seconds,
            timeout=self.client.timeout,
            account=self.client.known_account(),
            token=str(credentials.token),
        )
        return spawn(order)

    def caller_user(self) -> str:
        """The caller's own Linux account on the cluster: every job this deployment submits is owned by it.

        The connection extra ``slurm_user``, else the owner of a job this provider submitted through this
        connection to this cluster (learned once, kept in an Airflow Variable). Never ``meta.client.user``:
        a plain slurmrestd with ``rest_auth/jwt`` answers ``root`` there whoever the token's user is.
        Raises :class:`~airflow_provider_slurmapi.slurm.api.errors.ConfigurationError` naming the fixes when unknown.
        """
        return self.client.require_account()

    def find_job_by_tag(self, tag: str, *, name: str | None = None, since: int | None = None) -> SlurmJob | None:
        """The newest of our own jobs that carries ``tag`` (``since``: epoch seconds, default a week back).
        See ``SlurmClient.our_jobs_plan`` for how our own jobs are told from other users'."""
        return self._run(self.client.find_by_tag_plan(tag, name=name, since=since))

    def get_accounting(self, job_id: int) -> Accounting | None:
        """The history's summary of a finished job; ``None`` while it has no finished record of it."""
        return self._run(self.client.accounting_plan(job_id))

    def wait_for_accounting(
        self, job_id: int, wait_seconds: float, *, poll_seconds: float = ACCOUNTING_POLL_SECONDS
    ) -> tuple[str, dict[str, Any]]:
        """The accounting line and XCom value of a finished job, looked for up to ``wait_seconds``.

        Never raises for a Slurm or API error: the line then says why there is no summary.
        """
        return self._run(self.client.wait_for_accounting_plan(job_id, wait_seconds, poll_seconds))

    def wait_for_termination(self, job_id: int, timeout: float, *, poll_seconds: float) -> SlurmJob | None:
        """The job once it has finished (Slurm cancels asynchronously), looked for up to ``timeout`` seconds on
        the hook's clock; its last record if it has not by then, ``None`` if Slurm knows it nowhere."""
        return self._run(self.client.wait_for_termination_plan(job_id, timeout, poll_seconds))


class SlurmApiAsyncHook(_HoldsClient, GoogleBaseAsyncHook):
    """The async twin of :class:`SlurmApiHook`, for triggers: it holds the same client core (``client``, the
    same plans), built with an aiohttp transport and the event loop's clock. It reads its connection as the
    sync hook does (:func:`connection_settings`, in a thread, once for many coroutines) through the Google
    provider's own ``GoogleBaseHook``: it builds nothing from :class:`SlurmApiHook`.

    :param api_version_hint: with ``api_version="auto"``, a version an earlier process spoke with this
        cluster (a deferred task's): spoken without negotiating, and negotiated again if no longer served.
    """

    sync_hook_class = GoogleBaseHook

    def __init__(
        self,
        *,
        cluster: ClusterRef | None = None,
        timeout: float | None = None,
        retry_seconds: float | None = None,
        submit_settle_seconds: float | None = None,
        api_version_hint: str | None = None,
        **cluster_args: Unpack[ClusterArgs],
    ) -> None:
        ref = cluster_ref(cluster, **cluster_args)
        chain = list(ref.impersonation_chain) if ref.impersonation_chain else None
        super().__init__(gcp_conn_id=ref.gcp_conn_id, impersonation_chain=chain)
        self.cluster_ref = ref
        self._arguments = {
            "timeout": timeout,
            "retry_seconds": retry_seconds,
            "submit_settle_seconds": submit_settle_seconds,
        }
        transport = AiohttpTransport(self._prepare, timeout=lambda: self.client.timeout, gcp_conn_id=ref.gcp_conn_id)
        self.client: SlurmClient[AsyncClock] = SlurmClient(
            ref,
            transport=transport,
            clock=LoopClock(),
            target=self._target,
            logger=self.log,
            offload=self._offload,
            timeout=timeout,
            retry_seconds=retry_seconds,
        )
        if self.client.api_version is None and api_version_hint is not None:
            # "auto", and the deferring task's version is known: spoken as a kept one is (no negotiation;
            # negotiated again if the cluster no longer serves it).
            self.client.load_version = lambda: api_version_hint
        self._credentials: Credentials | None = None
        self._cluster: ClusterRef | None = None
        # Many coroutines (e.g. a hundred cancels at once) read the connection once, not once each.
        self._prepare_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"<SlurmApiAsyncHook {self.cluster_ref.region}/{self.cluster_ref.cluster_id}>"

    async def _prepare(self) -> tuple[ClusterRef, Credentials]:
        """The connection read once (in a thread: it may block): settings, cluster and credentials."""
        if self._cluster is None or self._credentials is None:
            async with self._prepare_lock:
                if self._cluster is None or self._credentials is None:
                    google: GoogleBaseHook = await self.get_sync_hook()

                    def read() -> tuple[ClusterRef, Credentials]:
                        settings = connection_settings(google, **self._arguments)
                        cluster = connection_cluster(google, self.cluster_ref)
                        # No Variable stores in the triggerer (as before): its one client per cluster (the
                        # poller's) negotiates once per triggerer process; tasks keep the version.
                        adopt_connection(self.client, settings, None)
                        return cluster, google.get_credentials()

                    self._cluster, self._credentials = await self._offload(read)
        assert self._cluster is not None and self._credentials is not None
        return self._cluster, self._credentials

    async def _offload(self, call: Callable[[], T]) -> T:
        """Blocking reads (connection, Variables) as Airflow wants them from a trigger: ``sync_to_async``
        (on Airflow 3 the Task SDK's calls then reach the triggerer's supervisor from its thread)."""
        from asgiref.sync import sync_to_async

        return await sync_to_async(call)()

    def _target(self) -> ClusterRef:
        """The cluster the client's transport reaches (the connection's, read by :meth:`_prepare`)."""
        assert self._cluster is not None, "the hook is prepared before any plan runs"
        return self._cluster

    async def close(self) -> None:
        await self._transport.close()

    @property
    def _session(self) -> aiohttp.ClientSession | None:
        """The transport's aiohttp session, once a call opened it (``None`` before and after close)."""
        return self._transport.session

    @property
    def _transport(self) -> AiohttpTransport:
        assert isinstance(self.client.transport, AiohttpTransport), "a test's transport has no session"
        return self.client.transport

    async def __aenter__(self) -> SlurmApiAsyncHook:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _run(self, plan: Plan[T]) -> T:
        await self._prepare()
        return await self.client.arun(plan)

    async def call(
        self, method: HttpMethod, path: str, body: Mapping[str, Any] | None = None, *, retry: bool | None = None
    ) -> SlurmResponse:
        """Async twin of :meth:`SlurmApiHook.call`, under the same retry layer and 401 rule."""
        return await self._run(self.client.call_plan(method, path, body, retry))

    # -- the sync hook's reads and flows, awaited: same plans -----------------------------------------
    async def get_live_job(self, job_id: int) -> SlurmJob | None:
        return await self._run(self.client.live_job_plan(job_id))

    async def get_history_job(self, job_id: int) -> SlurmJob | None:
        return await self._run(self.client.history_job_plan(job_id))

    async def get_job(self, job_id: int) -> SlurmJob | None:
        return await self._run(self.client.job_plan(job_id))

    async def get_live_jobs(self, job_ids: Sequence[int]) -> dict[int, SlurmJob]:
        """Full records of the given jobs still in the live queue, from one ``jobs/`` list (the poller's first read)."""
        return await self._run(self.client.live_jobs_plan(job_ids))

    async def get_live_states(
        self, job_ids: Sequence[int], *, tasks: list[tuple[int, int, JobStateInfo]] | None = None
    ) -> dict[int, JobStateInfo | SlurmJob]:
        return await self._run(self.client.live_states_plan(job_ids, tasks))

    async def list_jobs(self, *, history: bool = False, own: bool = False, **filters: Any) -> list[SlurmJob]:
        return await self._run(self.client.list_jobs_plan(history=history, filters=filters, own=own))

    async def cancel_job(self, job_id: int, *, signal: str | None = None) -> CancelOutcome:
        return await self._run(self.client.cancel_plan(job_id, signal))

    async def cancel_later_copies(self, marker: str, keep_job_id: int) -> list[int]:
        return await self._run(self.client.later_copies_plan(marker, keep_job_id))

    async def submit_job(
        self, job: Mapping[str, Any] | None, script: str | None, **options: Unpack[SubmitOptions]
    ) -> SubmitResult:
        return await self._run(self.client.submit_job_plan(job, script, **options))

    async def submit_prepared(self, prepared: PreparedSubmission, *, send_marker: str | None = None) -> SubmitResult:
        return await self._run(self.client.submit_plan(prepared, send_marker))

    async def caller_user(self) -> str:
        await self._prepare()
        return self.client.require_account()

    async def find_job_by_tag(self, tag: str, *, name: str | None = None, since: int | None = None) -> SlurmJob | None:
        return await self._run(self.client.find_by_tag_plan(tag, name=name, since=since))

    async def get_accounting(self, job_id: int) -> Accounting | None:
        return await self._run(self.client.accounting_plan(job_id))

    async def wait_for_accounting(
        self, job_id: int, wait_seconds: float, *, poll_seconds: float = ACCOUNTING_POLL_SECONDS
    ) -> tuple[str, dict[str, Any]]:
        return await self._run(self.client.wait_for_accounting_plan(job_id, wait_seconds, poll_seconds))

    async def wait_for_termination(self, job_id: int, timeout: float, *, poll_seconds: float) -> SlurmJob | None:
        return await self._run(self.client.wait_for_termination_plan(job_id, timeout, poll_seconds))


__all__ = ["SlurmApiAsyncHook", "SlurmApiHook"]
