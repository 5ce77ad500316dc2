"""The base operators of this provider: what every operator and the sensor share.

:class:`SlurmBaseOperator` takes the seven cluster arguments and builds the hook from them;
:class:`SlurmWatchingBaseOperator` adds how a job is watched (the watch settings), one poll of the job,
the deferral to :class:`~airflow_provider_slurmapi.triggers.slurm.SlurmJobTrigger` and what a finished
job pushes to XCom. Both are ``BaseOperator`` subclasses, so ``default_args``, ``partial()`` and
``expand()`` know their arguments as they know those of the concrete operators.

Kept free of heavy imports: DAG files import operators at parse time, and the hook (Google
libraries, aiohttp) and the trigger are only imported when a task runs.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from airflow_provider_slurmapi._compat import (
    AirflowFailException,
    BaseOperator,
    conf,
    is_deferral_timeout,
    redact_text,
)
from airflow_provider_slurmapi.deferral import cancel_after_deferral_timeout, deferral_deadline
from airflow_provider_slurmapi.slurm.api.api_versions import NEGOTIATE, check_api_version
from airflow_provider_slurmapi.slurm.api.cluster import (
    CLUSTER_ARG_NAMES,
    DEFAULT_CONN_ID,
    ClusterRef,
    cluster_ref,
)
from airflow_provider_slurmapi.slurm.api.errors import is_permanent
from airflow_provider_slurmapi.slurm.api.paths import DEFAULT_API_VERSION
from airflow_provider_slurmapi.slurm.api.validation import check_cluster_id, check_job_id, check_region
from airflow_provider_slurmapi.slurm.jobs.watch import (
    DEFAULT_MISSING_GRACE_SECONDS,
    DEFAULT_OUTAGE_TOLERANCE_SECONDS,
    JobWatch,
    WatchEnd,
    WatchPlan,
    WatchSettings,
    run_watch,
    watch_plan,
)

if TYPE_CHECKING:
    from airflow_provider_slurmapi._compat import Context
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
    from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob

_Method = TypeVar("_Method", bound=Callable[..., Any])


def fails_permanently(method: _Method) -> _Method:
    """Turn an error no retry can fix (:func:`~airflow_provider_slurmapi.slurm.api.errors.is_permanent`:
    a bad spec, a request of 1 MB or more, a missing script file, a partition, account, QoS or TRES
    Slurm refuses, permission denied, an unknown cluster) into ``AirflowFailException``, so the task
    fails without spending its retries. Every other error is raised unchanged and retried as usual."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except Exception as exc:
            if is_permanent(exc):
                raise AirflowFailException(permanent_message(str(exc))) from exc
            raise

    return wrapper  # type: ignore[return-value]


def permanent_message(message: str) -> str:
    """The message of a task failed for good: the error, and why its retries were not used."""
    return f"{message} (Not retried: no retry can fix this.)"


# How long a finished job's accounting record is waited for (slurmdbd records jobs a little after they end).
DEFAULT_ACCOUNTING_WAIT_SECONDS = 30.0


# XCom key of the finished job, with its accounting summary (the submit operator and the sensor).
JOB_XCOM_KEY = "slurm_job"


class SlurmBaseOperator(BaseOperator):
    """Takes the cluster arguments, keeps them as templated attributes, and makes of them, once rendered,
    one :class:`~airflow_provider_slurmapi.slurm.api.cluster.ClusterRef` for the hook and the trigger.

    :param region: the cluster's region (``us-central1``). Templated.
    :param cluster_id: the training cluster's id. Templated.
    :param project_id: its project; ``None``: the connection's. Templated.
    :param gcp_conn_id: the Google Cloud connection. Templated.
    :param api_version: the Slurm REST version (``v0.0.42``...), or the default: negotiated.
    :param impersonation_chain: a service account to impersonate, or a chain. Templated.
    :param api_endpoint: the API's endpoint; ``None``: ``https://{region}-aiplatform.googleapis.com``.
    """

    region: str
    cluster_id: str
    project_id: str | None
    gcp_conn_id: str
    api_version: str
    impersonation_chain: str | Sequence[str] | None
    api_endpoint: str | None

    def __init__(
        self,
        *,
        region: str,
        cluster_id: str,
        project_id: str | None = None,
        gcp_conn_id: str = DEFAULT_CONN_ID,
        api_version: str = DEFAULT_API_VERSION,
        impersonation_chain: str | Sequence[str] | None = None,
        api_endpoint: str | None = None,
        **kwargs: Any,
    ) -> None:
        given = locals()  # the parameters above, read by their declared names (ClusterArgs)
        super().__init__(**kwargs)
        for name in CLUSTER_ARG_NAMES:  # kept as given: templated, they are checked once rendered (:attr:`cluster`)
            setattr(self, name, given[name])
        self.api_version = check_api_version(api_version)
        # A literal mistake fails the DAG's parse (an import error naming the field), not the task's run.
        if is_literal(region):
            check_region(region)
        if is_literal(cluster_id):
            check_cluster_id(cluster_id)

    def check_cluster_args(self) -> None:
        """Refuse rendered cluster arguments that are not well formed (builds :attr:`cluster`).

        Called first thing in ``execute``: the values may come from ``dag_run.conf``, and they decide
        where the bearer token is sent, so nothing (not even a credential) is fetched before this.
        """
        _ = self.cluster

    @cached_property
    def cluster(self) -> ClusterRef:
        """The rendered cluster arguments as one checked value: what the hook and the trigger are given."""
        return cluster_ref(**{name: getattr(self, name) for name in CLUSTER_ARG_NAMES})

    @cached_property
    def hook(self) -> SlurmApiHook:
        from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook

        return SlurmApiHook(cluster=self.cluster)

    def push_xcom(self, context: Any, key: str, value: Any) -> None:
        """Push ``value`` to XCom under ``key``, unless the task has ``do_xcom_push=False``: then nothing
        of the task's goes to XCom (its return value, the job id, the job and its accounting)."""
        if getattr(self, "do_xcom_push", True):
            context["ti"].xcom_push(key=key, value=value)


class SlurmWatchingBaseOperator(SlurmBaseOperator):
    """A task that waits for a Slurm job: the submit operator and the sensor.

    Holds the watch settings, carries out the watch plan through the hook (``_follow``), hands the wait to the
    triggerer (``_defer_wait``, the one place the trigger is built), pushes the finished job to XCom
    and cancels the job when a deferral times out.

    :param deferrable: wait in the triggerer (default: ``[operators] default_deferrable``).
    :param cancel_on_kill: cancel the job when the task is killed; and a job that can never start.
    :param missing_grace_seconds: how long the job may be in neither the live queue nor the history.
    :param outage_tolerance_seconds: how long the wait rides out an API outage before the task fails.
    :param log_progress: log each new progress message the job sets.
    :param array_fail_fast: for a job array, cancel its remaining tasks at the first failed task.
    :param accounting_wait_seconds: once the job has ended, how long to wait for its accounting record,
        logged in one line and pushed in XCom ``slurm_job["accounting"]``. ``None``: no summary.
    """

    def __init__(
        self,
        *,
        deferrable: bool | None = None,
        cancel_on_kill: bool = False,
        missing_grace_seconds: float = DEFAULT_MISSING_GRACE_SECONDS,
        outage_tolerance_seconds: float = DEFAULT_OUTAGE_TOLERANCE_SECONDS,
        log_progress: bool | None = False,
        array_fail_fast: bool = False,
        accounting_wait_seconds: float | None = DEFAULT_ACCOUNTING_WAIT_SECONDS,
        **kwargs: Any,
    ) -> None:
        # The watch settings among the parameters above, read by their declared names (WatchSettings);
        # ``log_progress`` ``None`` is decided when the task runs (:attr:`_log_progress`).
        given = {**locals(), "log_progress": bool(log_progress)}
        super().__init__(**kwargs)
        self.log_progress = log_progress
        self.watch_settings = WatchSettings.from_kwargs(given)
        self.deferrable = default_deferrable() if deferrable is None else deferrable
        self.cancel_on_kill = cancel_on_kill
        self.accounting_wait_seconds = accounting_wait_seconds
        self._job_over = False  # the job has ended, or was given up on: nothing left to cancel on kill
        # Set only when the submit was resent: the tag whose late copies the wait cancels.
        self._copies_of: str | None = None

    @property
    def _log_progress(self) -> bool:
        """Whether each new progress message of the job is logged."""
        return bool(self.log_progress)

    @property
    def _settings(self) -> WatchSettings:
        """The watch settings of this run (``log_progress`` decided)."""
        return replace(self.watch_settings, log_progress=self._log_progress)

    def _new_watch(self, job_id: int, *, pending_since: float | None = None, saved: object = None) -> JobWatch:
        """A watch of ``job_id`` on the hook's clock (see ``WatchSettings.new_watch``)."""
        return self._settings.new_watch(job_id, clock=self.hook.client.clock, pending_since=pending_since, saved=saved)

    def _follow(self, plan: WatchPlan) -> WatchEnd:
        """Carry out a watch plan (:func:`~airflow_provider_slurmapi.slurm.jobs.watch.watch_plan`) through the
        hook, on its clock. A job that can never start, or pended too long, has been cancelled (with
        ``cancel_on_kill``) by the plan: the task fails with why."""
        end = run_watch(plan, self.hook, self.hook.client.clock, self.log, redact_text)
        if end.gave_up is not None:
            self._job_over = True
            raise end.gave_up
        return end

    def _watch_plan(self, watch: JobWatch, interval: float, **how: Any) -> WatchPlan:
        """The watch plan of this task's job (``how``: see ``watch_plan``)."""
        return watch_plan(
            watch, interval=interval, cancel_on_kill=self.cancel_on_kill, copies_of=self._copies_of, **how
        )

    def _defer_wait(
        self,
        job_id: int,
        last: SlurmJob | None,
        *,
        poll_interval: float,
        timeout: timedelta | None,
        pending_since: float | None = None,
        method_kwargs: dict[str, Any] | None = None,
    ) -> NoReturn:
        """Hand the wait for ``job_id`` to the triggerer, which resumes the task in ``execute_complete``.

        ``last``: the job as this process last saw it (the trigger logs only the changes from it);
        ``timeout``: the task's, after which the trigger cancels the job itself (``cancel_on_kill``).
        """
        from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger

        deadline, backstop = deferral_deadline(timeout)
        trigger = SlurmJobTrigger(
            job_id=job_id,
            poll_interval=poll_interval,
            cancel_on_kill=self.cancel_on_kill,
            deadline=deadline,
            last_seen=last.to_dict() if last is not None else None,
            pending_since=pending_since,
            cluster=self.cluster,
            cancel_copies_of=self._copies_of,
            watch=self._settings,
            api_version_hint=self._spoken_version(),
        )
        self.defer(trigger=trigger, method_name="execute_complete", kwargs=method_kwargs, timeout=backstop)

    def _spoken_version(self) -> str | None:
        """The API version this task spoke with the cluster, if it negotiated (or was kept) one: handed to
        the trigger, so that the triggerer does not negotiate again. ``None`` if no call was made here."""
        hook = self.__dict__.get("hook")  # the cached hook, if this task built one; never built for this
        if hook is None or self.cluster.api_version != NEGOTIATE:
            return None
        version: str | None = hook.client.api_version
        return version

    def _push_finished(self, context: Context, job_id: int, record: dict[str, Any]) -> None:
        """XCom ``slurm_job``: the finished job (``record``), its requeues and its accounting summary."""
        array = record.get("array") is not None
        record = {
            **record,
            "requeues": record.get("restart_count") or 0,
            "accounting": self.report_accounting(job_id, self.accounting_wait_seconds, array=array),
        }
        self.push_xcom(context, JOB_XCOM_KEY, record)

    def report_accounting(
        self, job_id: int, wait_seconds: float | None, *, array: bool = False
    ) -> dict[str, Any] | None:
        """Log the job's accounting summary in one line and return it for XCom (``None``: not asked for).

        Never fails the task: no record in time, an error, or an odd record only make the line say so.
        A job array is not summed up (each task has its own record): the line says so.
        """
        if wait_seconds is None:
            return None
        from airflow_provider_slurmapi.slurm.jobs.accounting import not_recorded

        if array:
            line, value = not_recorded(job_id, 0.0, f"a job array: each task has its own record (sacct -j {job_id})")
            self.log.info("%s", line)
            return value
        try:
            line, value = self.hook.wait_for_accounting(job_id, max(0.0, float(wait_seconds)))
        except Exception as exc:  # a summary is a courtesy: it must not fail a job's task
            line, value = not_recorded(job_id, 0.0, f"reading the history failed ({type(exc).__name__}: {exc})")
        self.log.info("%s", line)
        return value

    # -- kill -------------------------------------------------------------------------------------
    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """A deferral that timed out cancels the job (with ``cancel_on_kill``), then fails as usual."""
        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except Exception as exc:
            if self.cancel_on_kill and is_deferral_timeout(exc):
                cancel_after_deferral_timeout(self, self._deferred_job_id(context))
            raise

    def _deferred_job_id(self, context: Context) -> int | None:
        """The job a timed-out deferral waited for (``None``: not known here)."""
        raise NotImplementedError

    # -- lineage ----------------------------------------------------------------------------------
    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The run facet ``slurmJob``: the cluster and the job (called by the OpenLineage listener)."""
        return self._lineage()

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        """As on completion; no job id when the task failed before a job was known."""
        return self._lineage()

    def _lineage(self) -> Any:
        """The facets of this task's job (see ``slurm_job_lineage``)."""
        raise NotImplementedError

    def slurm_job_lineage(self, job_id: int | None, job: SlurmJob | None = None) -> Any:
        """OpenLineage facets naming the cluster and the Slurm job; None without the OpenLineage provider."""
        from airflow_provider_slurmapi.lineage import operator_lineage

        project = self.project_id
        if not project:  # the connection's project, as the hook resolves it (no call to the API)
            with contextlib.suppress(Exception):
                project = self.hook.project_id
        return operator_lineage(
            project_id=project,
            region=self.region,
            cluster_id=self.cluster_id,
            job_id=job.job_id if job is not None else job_id,
            job_name=job.name if job is not None else None,
            state=job.state.value if job is not None else None,
        )


def is_literal(value: object) -> bool:
    """A value written in the DAG as it is, so checked when the DAG is parsed: a string without a Jinja
    expression (``{{``). A templated value, or an ``XComArg``, is checked once rendered, when the task runs."""
    return isinstance(value, str) and "{{" not in value and "{%" not in value


def default_deferrable() -> bool:
    """``[operators] default_deferrable``, as the deferrable operators of Airflow's providers read it."""
    return conf.getboolean("operators", "default_deferrable", fallback=False)


XCOM_JOB_ID_HINT = "If it comes from XCom, check the template, e.g. \"{{ ti.xcom_pull(task_ids='submit') }}\"."


def parse_job_id(value: object) -> int:
    """A job id from an int or a rendered template; a clear error for anything else."""
    return check_job_id(value, hint=XCOM_JOB_ID_HINT)
