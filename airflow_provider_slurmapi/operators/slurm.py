"""Operators that submit, cancel, get and list Slurm jobs through the Slurm Job API.

They are thin: the hook (:mod:`airflow_provider_slurmapi.hooks.slurm`) and the Airflow-free layer
under it (:mod:`airflow_provider_slurmapi.slurm`) do the work. Importing this module loads no Google
library and no aiohttp, so DAG files that use it parse fast.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_slurmapi._compat import AirflowException, AirflowFailException, BaseOperator, conf, redact_text
from airflow_provider_slurmapi.cluster_task import (
    CLUSTER_TEMPLATE_FIELDS,
    DEFAULT_ACCOUNTING_WAIT_SECONDS,
    SlurmClusterMixin,
    default_deferrable,
    fails_fast,
    parse_job_id,
    permanent_message,
)
from airflow_provider_slurmapi.deferral import cancel_after_deferral_timeout, deferral_deadline
from airflow_provider_slurmapi.slurm.errors import (
    ConfigurationError,
    JobNotFoundError,
    SignalOutcomeUnknownError,
    SlurmApiError,
)
from airflow_provider_slurmapi.slurm.job_output import mentions_progress, wrap_script
from airflow_provider_slurmapi.slurm.sbatch import apply_directives
from airflow_provider_slurmapi.slurm.spec import (
    CLOCK_SKEW_SECONDS,
    DEFAULT_ENVIRONMENT,
    PreparedSubmission,
    add_environment,
    environment_names,
    prepare_submission,
    task_comment,
    task_tag,
)
from airflow_provider_slurmapi.slurm.states import JobState
from airflow_provider_slurmapi.slurm.versions import DEFAULT_API_VERSION
from airflow_provider_slurmapi.slurm.watch import (
    DEFAULT_MISSING_GRACE_SECONDS,
    DEFAULT_OUTAGE_TOLERANCE_SECONDS,
    JobWatch,
    WatchStep,
)
from airflow_provider_slurmapi.tag_secret import tag_key
from airflow_provider_slurmapi.triggers.event import event_job, read_event

if TYPE_CHECKING:
    import jinja2

    from airflow_provider_slurmapi._compat import Context
    from airflow_provider_slurmapi.slurm.job import SlurmJob

# task_state_store key of the submitted job id (Airflow 3.3+); renaming it breaks in-flight retries.
JOB_ID_STATE_KEY = "slurm_job_id"
JOB_ID_XCOM_KEY = "slurm_job_id"
JOB_XCOM_KEY = "slurm_job"


def _seconds(name: str, value: float | timedelta | None) -> float | None:
    """A duration argument as seconds; a clear error for anything but a positive number or timedelta."""
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ValueError(f"{name}={value!r} must be a positive number of seconds or a timedelta, or None for no limit.")
    return float(seconds)


def _map_index(ti: Any) -> int:
    """The task instance's map index, -1 when it is not mapped (Airflow may give ``None``)."""
    map_index = getattr(ti, "map_index", -1)
    return -1 if map_index is None else int(map_index)


def is_script_path(script: object) -> bool:
    """A script given as a file of the DAG folder: one line ending in ``.sh``. Anything else is the script."""
    return isinstance(script, str) and script.endswith(".sh") and "\n" not in script and "\r" not in script


def read_script_file(jinja_env: jinja2.Environment, path: str) -> str:
    """The text of a script file, found as Airflow finds templates: the DAG's folder, ``template_searchpath``."""
    import jinja2

    try:
        if jinja_env.loader is None:
            raise jinja2.TemplateNotFound(path)
        source: str = jinja_env.loader.get_source(jinja_env, path)[0]
    except jinja2.TemplateNotFound:
        raise ConfigurationError(
            f"script={path!r} is one line ending in .sh, so it is read as a file, but there is no such file in "
            "the DAG's folder or its template_searchpath. Put the file there, or give the script itself "
            "(several lines, starting with '#!')."
        ) from None
    return source


class SlurmSubmitJobOperator(SlurmClusterMixin, BaseOperator):
    """Submit a Slurm batch job and (by default) wait until it is over.

    The job id goes to XCom at once (key ``slurm_job_id``) and is the task's return value. COMPLETED
    succeeds; any other finished state fails the task with Slurm's state, reason and exit code or
    signal. With ``deferrable=True`` the wait runs in the triggerer, not in a worker slot.

    Each job's ``comment`` carries a tag naming its task instance (``airflow dag=... task=... run=...
    airflow-ti=<hash>``; a comment you set is kept, the tag appended). With ``reattach_on_restart``, a
    retry or a restarted worker first looks for this task instance's job: pending or running, it waits
    on it; completed, it succeeds with its id; failed or cancelled (even while still completing), it
    submits anew. A job it waits on that is then cancelled (clearing a deferred task on Airflow 3.3+
    cancels the earlier try's job from the triggerer, maybe after the new try found it running) is
    replaced by one new job, once.

    :param job: Slurm job description fields, named as Slurm names them (``name``, ``partition``,
        ``tres_per_node``, ``time_limit`` in minutes or ``{"set": True, "number": N}``...). Templated.
        ``current_working_directory`` and ``environment`` get documented defaults if missing (logged).
    :param script: the batch script (``#!/bin/bash...``), or a file of the DAG folder (or
        ``template_searchpath``): one line ending in ``.sh``, read and rendered as a template. Templated;
        no other field is ever read from a file.
    :param wait_for_completion: wait for the job to end; if False, return once it is submitted.
    :param deferrable: wait in the triggerer (default: ``[operators] default_deferrable``).
    :param poll_interval: seconds between polls.
    :param cancel_on_kill: cancel the job when the task is killed, times out or is marked by a user.
    :param reattach_on_restart: look for this task instance's job before submitting.
    :param missing_grace_seconds: how long a job may be in neither the live queue nor the history
        (accounting records arrive late) before the task fails.
    :param outage_tolerance_seconds: how long the wait rides out an API outage (UNAVAILABLE, 5xx, no
        connection; warned about every few minutes) before the task fails; the job runs on, and a retry
        reattaches to it. Permanent errors (permission denied, unknown cluster) fail at once.
    :param report_output: wrap the script so that its last lines of output (stderr, or stdout when both
        go to one file; at most 1,024 bytes) reach the task's failure message, through the job's
        ``extra`` field, and ``slurm_progress "message"`` is on its PATH. The script itself runs
        unchanged with its own interpreter. ``False`` submits the script byte for byte.
    :param log_progress: log each new progress message of the job (``Slurm job 4242: epoch 3/10``).
        Default: when ``report_output`` and the script calls ``slurm_progress`` or sets ``Extra=``.
    :param array_fail_fast: for a job array (``job={"array": "0-9%2"}``), cancel its remaining tasks at
        the first failed task. Either way the task waits for every task of the array and succeeds only
        when all of them COMPLETED.
    :param sbatch_directives: read the ``#SBATCH`` lines at the top of the script, as ``sbatch`` does,
        into job fields; a field also set in ``job`` keeps the ``job`` value (logged). An option the
        REST API cannot express fails the task before anything is sent. ``False`` leaves the lines
        as comments.
    :param openlineage_inject_parent_job_info: put this task's OpenLineage run (and its DAG run, the
        root) into the job's environment (``OPENLINEAGE_PARENT_ID``...), so training code that emits
        lineage links to the task. Default: ``[openlineage] spark_inject_parent_job_info``, as the
        Dataproc and Spark operators. Needs ``apache-airflow-providers-openlineage``; without it the
        job runs without them (logged). Variables the job already sets are kept.
    :param accounting_wait_seconds: when the job has ended, how long to wait for its record in the
        accounting history (slurmdbd lags a little) for the summary logged in one line and put in XCom
        ``slurm_job["accounting"]``: elapsed time, nodes, allocated TRES, node- and GPU-hours, MaxRSS,
        exit code or signal, requeues. ``None``: no summary. Never fails the task.
    :param pending_timeout: seconds (or a ``timedelta``) the job may stay pending, after its submission
        and again after each requeue, like Nextflow's ``maxSubmitAwait``: then the job is cancelled and
        the task fails with the last pending reason, in a way its retries handle (a retry submits anew).
        ``None``: no limit. A job pending for a reason no wait can clear (``DependencyNeverSatisfied``,
        ``BadConstraints``... see ``FINAL_PENDING_REASONS``) is cancelled and fails the task at once,
        without its retries, whatever this is.
    """

    template_fields: Sequence[str] = ("job", "script", *CLUSTER_TEMPLATE_FIELDS)
    # Airflow's template_ext would read *every* templated string ending in ".sh" from a file: a job
    # name "train.sh" or an inline script whose last line runs "./run.sh". Only ``script`` is ever
    # read from a file, and only when it is a path (see ``is_script_path``).
    template_ext: Sequence[str] = ()
    template_fields_renderers = {"job": "json", "script": "bash"}
    ui_color = "#d9ecf2"

    def __init__(
        self,
        *,
        script: str,
        region: str,
        cluster_id: str,
        job: dict[str, Any] | None = None,
        project_id: str | None = None,
        gcp_conn_id: str = "google_cloud_default",
        api_version: str = DEFAULT_API_VERSION,
        impersonation_chain: str | Sequence[str] | None = None,
        api_endpoint: str | None = None,
        wait_for_completion: bool = True,
        deferrable: bool | None = None,
        poll_interval: float = 30.0,
        cancel_on_kill: bool = True,
        reattach_on_restart: bool = True,
        missing_grace_seconds: float = DEFAULT_MISSING_GRACE_SECONDS,
        outage_tolerance_seconds: float = DEFAULT_OUTAGE_TOLERANCE_SECONDS,
        report_output: bool = True,
        log_progress: bool | None = None,
        array_fail_fast: bool = False,
        sbatch_directives: bool = True,
        openlineage_inject_parent_job_info: bool | None = None,
        accounting_wait_seconds: float | None = DEFAULT_ACCOUNTING_WAIT_SECONDS,
        pending_timeout: float | timedelta | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._set_cluster_args(
            region=region,
            cluster_id=cluster_id,
            project_id=project_id,
            gcp_conn_id=gcp_conn_id,
            api_version=api_version,
            impersonation_chain=impersonation_chain,
            api_endpoint=api_endpoint,
        )
        self.pending_timeout = _seconds("pending_timeout", pending_timeout)
        self._submitted_at: float | None = None
        self.outage_tolerance_seconds = outage_tolerance_seconds
        self.report_output = report_output
        self.log_progress = log_progress
        self.array_fail_fast = array_fail_fast
        self.sbatch_directives = sbatch_directives
        self.accounting_wait_seconds = accounting_wait_seconds
        self.job = job or {}
        self.script = script
        self.wait_for_completion = wait_for_completion
        self.deferrable = default_deferrable() if deferrable is None else deferrable
        self.poll_interval = poll_interval
        self.cancel_on_kill = cancel_on_kill
        self.reattach_on_restart = reattach_on_restart
        self.missing_grace_seconds = missing_grace_seconds
        if openlineage_inject_parent_job_info is None:
            openlineage_inject_parent_job_info = conf.getboolean(
                "openlineage", "spark_inject_parent_job_info", fallback=False
            )
        self.openlineage_inject_parent_job_info = openlineage_inject_parent_job_info
        self.job_id: int | None = None
        self._job_over = False
        self._last_job: SlurmJob | None = None

    # -- the script file -------------------------------------------------------------------------
    def resolve_template_files(self) -> None:
        """At parse time, read a ``script`` path from the DAG folder, as Airflow does for template_ext."""
        if is_script_path(self.script):
            with contextlib.suppress(ConfigurationError):  # rendering the task reports it, with the fix
                self.script = read_script_file(self.get_template_env(), self.script)
        super().resolve_template_files()

    @fails_fast
    def _do_render_template_fields(
        self,
        parent: Any,
        template_fields: Iterable[str],
        context: Context,
        jinja_env: jinja2.Environment,
        seen_oids: set[int],
    ) -> None:
        """Read a ``script`` path from the DAG folder, then render every field as Airflow does.

        This is the method Airflow calls for a plain task and for each task of a mapped one, on 2.11
        and 3.x, so the file's text is rendered exactly once, like any inline script.
        """
        if parent is self and "script" in template_fields and is_script_path(self.script):
            self.script = read_script_file(jinja_env, self.script)
        super()._do_render_template_fields(parent, template_fields, context, jinja_env, seen_oids)

    # -- submit or reattach -----------------------------------------------------------------------
    @fails_fast
    def execute(self, context: Context) -> int:
        self.check_cluster_args()
        ti = context["ti"]
        prepared = self._submission(context)
        tag = prepared.tag
        assert tag is not None
        previous = self._previous_job(context, tag, prepared.job.get("name")) if self.reattach_on_restart else None
        if previous is not None and previous.succeeded:
            self.log.info(
                "Slurm job %s of this task instance already COMPLETED (tag %s); not submitting again. "
                "Use reattach_on_restart=False to force a new job.",
                previous.job_id,
                tag,
            )
            ti.xcom_push(key=JOB_ID_XCOM_KEY, value=previous.job_id)
            return self._finish(context, previous)
        adopted = previous is not None and not previous.state_info.has_ended
        if previous is not None and adopted:
            self.log.info(
                "Reattaching to Slurm job %s of this task instance (%s), submitted by an earlier try.",
                previous.job_id,
                previous.describe(),
            )
            job_id = previous.job_id
        else:
            if previous is not None:
                self.log.info("Earlier Slurm job %s %s; submitting a new one.", previous.job_id, previous.describe())
            job_id = self._submit(context, prepared, earlier=previous.job_id if previous else None)
        self.job_id = job_id
        ti.xcom_push(key=JOB_ID_XCOM_KEY, value=job_id)
        if not self.wait_for_completion:
            return job_id
        return self._wait(context, job_id, adopted=adopted)

    def _submission(self, context: Context) -> PreparedSubmission:
        """This task instance's submission as sent, tagged; a bad spec fails here, before any call.

        Prepared once: the hook sends it as it is (:meth:`SlurmApiHook.submit_prepared`).
        """
        ti = context["ti"]
        tag = task_tag(ti.dag_id, ti.task_id, ti.run_id, _map_index(ti), key=tag_key())
        job_spec = dict(self.job)
        if self.sbatch_directives:
            directives = apply_directives(
                job_spec, self.script, api_version=self.api_version, default_environment=DEFAULT_ENVIRONMENT
            )
            job_spec = directives.job
            if directives.applied:
                self.log.info("From the script's #SBATCH lines: %s.", ", ".join(directives.applied))
            for note in directives.notes:
                self.log.info("%s", note)
        if not job_spec.get("name"):
            job_spec["name"] = f"{ti.dag_id}.{ti.task_id}"
            self.log.info("job.name was not set; naming the Slurm job %r.", job_spec["name"])
        if self.openlineage_inject_parent_job_info:
            job_spec = self._with_parent_run(context, job_spec)
        comment = task_comment(tag, ti.dag_id, ti.task_id, ti.run_id, _map_index(ti))
        # What is sent, so what the 1 MB request limit counts: the wrapped script, or yours byte for byte.
        wrap = wrap_script if self.report_output else None
        return prepare_submission(job_spec, self.script, tag=tag, comment=comment, wrap=wrap)

    def _submit(self, context: Context, prepared: PreparedSubmission, *, earlier: int | None) -> int:
        """Submit a new job for this task instance and remember its id where a retry looks first."""
        self._submitted_at = time.time()  # its first pending spell begins (pending_timeout)
        result = self.hook.submit_prepared(prepared, earlier_job_id=earlier)
        for warning in result.warnings:
            self.log.warning("Slurm accepted job %s with a warning: %s", result.job_id, warning)
        store = context.get("task_state_store")
        if store is not None:
            store.set(JOB_ID_STATE_KEY, result.job_id)
        return result.job_id

    def _with_parent_run(self, context: Context, job_spec: dict[str, Any]) -> dict[str, Any]:
        """``job_spec`` with this task's OpenLineage run in its environment, when the provider is installed."""
        from airflow_provider_slurmapi.lineage import PARENT_ENV_PREFIXES, parent_run_environment

        try:
            names = environment_names(job_spec)
        except ConfigurationError:
            return job_spec  # prepare_submission says what is wrong with the environment
        if any(name.startswith(PARENT_ENV_PREFIXES) for name in names):
            self.log.info("job.environment already sets OpenLineage parent variables; not adding this task's run.")
            return job_spec
        try:
            variables = parent_run_environment(context)
        except Exception as exc:  # lineage must never fail the job it describes
            self.log.warning("Could not build this task's OpenLineage run (%s); the job gets no parent run.", exc)
            return job_spec
        if variables is None:
            self.log.info(
                "openlineage_inject_parent_job_info is on, but apache-airflow-providers-openlineage is not "
                "installed: the job gets no parent run."
            )
            return job_spec
        self.log.info(
            "OpenLineage parent run in the job's environment: OPENLINEAGE_PARENT_ID=%s",
            variables["OPENLINEAGE_PARENT_ID"],
        )
        return add_environment(job_spec, variables)

    def _previous_job(self, context: Context, tag: str, name: str | None) -> SlurmJob | None:
        """The job an earlier try of this task instance started, by the narrowest means that answers.

        A first try (try 1, no stored job id) has none: it costs no call. A retry asks for the stored
        job id (task state store on Airflow 3.3+, else the earlier try's XCom where it survives), then
        the history filtered by job name, user and the run's time window; the hook turns to the live
        queue only when the history cannot answer.
        """
        ti = context["ti"]
        stored = self._stored_job_id(context)
        if stored is not None:
            job = self.hook.get_job(stored)
            if job is not None:
                return job
            self.log.info("Slurm job %s stored by an earlier try is unknown to Slurm; looking for tag %s.", stored, tag)
        elif int(getattr(ti, "try_number", 1) or 1) <= 1:
            return None
        dag_run = context.get("dag_run")
        started = getattr(dag_run, "start_date", None)
        since = int(started.timestamp()) - CLOCK_SKEW_SECONDS if started is not None else None
        found = self.hook.find_job_by_tag(tag, name=name, since=since)
        if found is not None and found.array_job_id and found.array is None:  # one task's record: read the array
            return self.hook.get_job(found.array_job_id) or found
        return found

    def _stored_job_id(self, context: Context) -> int | None:
        """The job id an earlier try stored: task state store (Airflow 3.3+), else its XCom if it survived."""
        store = context.get("task_state_store")
        stored: Any = store.get(JOB_ID_STATE_KEY) if store is not None else None
        ti = context["ti"]
        if not stored and int(getattr(ti, "try_number", 1) or 1) > 1:
            stored = ti.xcom_pull(task_ids=ti.task_id, key=JOB_ID_XCOM_KEY, map_indexes=ti.map_index)
        if not stored:
            return None
        try:
            return parse_job_id(str(stored))
        except (ValueError, TypeError, AirflowException) as exc:
            self.log.warning("Ignoring the stored Slurm job id %r: %s", stored, exc)
            return None

    # -- wait -------------------------------------------------------------------------------------
    @property
    def _log_progress(self) -> bool:
        if self.log_progress is not None:
            return self.log_progress
        return self.report_output and isinstance(self.script, str) and mentions_progress(self.script)

    def _wait(self, context: Context, job_id: int, *, adopted: bool = False) -> int:
        """Wait for the job; ``adopted`` when an earlier try submitted it (see :meth:`_finish`)."""
        pending_since = None if adopted else self._submitted_at  # a job found again: its wait counts from now
        watch = JobWatch(
            job_id,
            missing_grace_seconds=self.missing_grace_seconds,
            outage_tolerance_seconds=self.outage_tolerance_seconds,
            log_progress=self._log_progress,
            array_fail_fast=self.array_fail_fast,
            pending_timeout=self.pending_timeout,
            pending_since=pending_since,
        )
        step = self._look(watch, job_id)
        if step.finished and step.job is not None:
            return self._finish(context, step.job, adopted=adopted)
        if self.deferrable:
            from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger

            deadline, backstop = deferral_deadline(self.execution_timeout)
            self.defer(
                trigger=SlurmJobTrigger(
                    job_id=job_id,
                    poll_interval=self.poll_interval,
                    cancel_on_kill=self.cancel_on_kill,
                    missing_grace_seconds=self.missing_grace_seconds,
                    outage_tolerance_seconds=self.outage_tolerance_seconds,
                    deadline=deadline,
                    last_seen=step.job.to_dict() if step.job is not None else None,
                    log_progress=self._log_progress,
                    array_fail_fast=self.array_fail_fast,
                    pending_timeout=self.pending_timeout,
                    pending_since=pending_since,
                    cluster=self.cluster,
                ),
                method_name="execute_complete",
                kwargs={"adopted": True} if adopted else None,
                timeout=backstop,
            )
        while not step.finished:
            time.sleep(self.poll_interval)
            step = self._look(watch, job_id)
        assert step.job is not None
        return self._finish(context, step.job, adopted=adopted)

    def _look(self, watch: JobWatch, job_id: int) -> WatchStep:
        """One poll: the watch judges the answer, or the error (an outage is waited out, up to its budget)."""
        try:
            job = self.hook.get_job(job_id)
        except SlurmApiError as exc:
            step = watch.observe_error(exc)
        else:
            step = watch.observe(job)
        step.log_to(self.log, redact_text)
        if step.cancel_array:
            self.hook.cancel_job(job_id)
        if step.give_up is not None:  # it can never start, or pended too long: cancel, then fail
            if self.cancel_on_kill:
                outcome = self.hook.cancel_job(job_id)
                self.log.info("Cancelled Slurm job %s (%s): %s.", job_id, type(step.give_up).__name__, outcome.value)
            self._job_over = True
            raise step.give_up
        return step

    @fails_fast
    def execute_complete(self, context: Context, event: dict[str, Any], adopted: bool = False) -> int:
        """Resume after the trigger fired: succeed on COMPLETED, else fail with Slurm's reason."""
        payload = read_event(event)
        self.job_id = payload["job_id"]
        if payload["status"] == "error":
            message = f"Watching Slurm job {self.job_id} failed: {payload['message']}"
            if payload["permanent"]:
                raise AirflowFailException(permanent_message(message))
            raise AirflowException(message)
        if payload["status"] == "timeout":  # the trigger has cancelled the job (with cancel_on_kill)
            self._job_over = True
            raise AirflowException(payload["message"])
        job = event_job(payload)
        assert job is not None  # a finished event always carries its job (read_event checked it)
        return self._finish(context, job, adopted=adopted)

    def _finish(self, context: Context, job: SlurmJob, *, adopted: bool = False) -> int:
        if adopted and job.is_finished and job.state is JobState.CANCELLED:
            return self._replace_cancelled(context, job)
        self._job_over = True
        self.job_id = job.job_id
        self._last_job = job
        record = job.to_dict()
        record["requeues"] = job.restart_count or 0
        record["accounting"] = self.report_accounting(
            job.job_id, self.accounting_wait_seconds, array=job.array is not None
        )
        context["ti"].xcom_push(key=JOB_XCOM_KEY, value=record)
        if not job.succeeded:
            raise AirflowException(redact_text(job.failure_message(output_expected=self.report_output)))
        self.log.info("Slurm job %s %s.", job.job_id, job.describe())
        report = job.output_report(expected=self.report_output)
        if report:
            self.log.debug("%s", redact_text(report))
        return job.job_id

    def _replace_cancelled(self, context: Context, job: SlurmJob) -> int:
        """An earlier try's job, cancelled after this try reattached to it: submit this try's own job.

        Clearing a deferred task on Airflow 3.3+ cancels its job from the triggerer while the new try
        may already be starting: a new try can see the job still running, reattach, and then see it
        cancelled. The cancel was meant for the earlier try, so this try submits its own job, once
        (a job it submitted itself is never replaced). A job cancelled by hand during such a try is
        replaced too, as a retry after a cancel would.
        """
        self.log.warning(
            "Slurm job %s of an earlier try was cancelled after this try reattached to it (%s); submitting a new one.",
            job.job_id,
            job.describe(),
        )
        job_id = self._submit(context, self._submission(context), earlier=job.job_id)
        self.job_id = job_id
        context["ti"].xcom_push(key=JOB_ID_XCOM_KEY, value=job_id)
        return self._wait(context, job_id)

    # -- lineage ----------------------------------------------------------------------------------
    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The run facet ``slurmJob``: the cluster and the job (called by the OpenLineage listener)."""
        return self.slurm_job_lineage(self.job_id, self._last_job)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        """As on completion; no job id when the task failed before a job existed."""
        return self.slurm_job_lineage(self.job_id, self._last_job)

    # -- kill -------------------------------------------------------------------------------------
    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """A deferral that timed out cancels the job (when ``cancel_on_kill``), then fails as usual."""
        if self.cancel_on_kill:
            ti = context["ti"]
            job_id = ti.xcom_pull(task_ids=ti.task_id, key=JOB_ID_XCOM_KEY, map_indexes=ti.map_index)
            cancel_after_deferral_timeout(self, next_method, next_kwargs, parse_job_id(job_id) if job_id else None)
        return super().resume_execution(next_method, next_kwargs, context)

    def on_kill(self) -> None:
        """SIGTERM or execution_timeout on the worker: cancel the job if it may still run."""
        if self.job_id is None or not self.cancel_on_kill or self._job_over:
            return
        try:
            outcome = self.hook.cancel_job(self.job_id)
            self.log.info("Task killed: cancel of Slurm job %s answered %s.", self.job_id, outcome.value)
        except SlurmApiError as exc:
            self.log.error("Task killed, but cancelling Slurm job %s failed: %s", self.job_id, exc)


class SlurmCancelJobOperator(SlurmClusterMixin, BaseOperator):
    """Cancel a Slurm job; cancelling a finished or unknown job succeeds and says so.

    Slurm cancels asynchronously; with ``wait_for_termination`` the task waits (up to
    ``termination_timeout`` seconds) until the job has left RUNNING/PENDING. Returns
    ``{"job_id", "outcome", "state"}``.

    :param job_id: the Slurm job id. Templated (e.g. ``{{ ti.xcom_pull('submit') }}``).
    :param signal: send this signal instead of cancelling (``SIGTERM``, ``SIGUSR1``...). Sent once:
        if its answer is lost, the task fails without a retry (a retry would deliver it again).
    """

    template_fields: Sequence[str] = ("job_id", "signal", *CLUSTER_TEMPLATE_FIELDS)

    def __init__(
        self,
        *,
        job_id: int | str,
        region: str,
        cluster_id: str,
        signal: str | None = None,
        wait_for_termination: bool = True,
        termination_timeout: float = 120.0,
        poll_interval: float = 2.0,
        project_id: str | None = None,
        gcp_conn_id: str = "google_cloud_default",
        api_version: str = DEFAULT_API_VERSION,
        impersonation_chain: str | Sequence[str] | None = None,
        api_endpoint: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._set_cluster_args(
            region=region,
            cluster_id=cluster_id,
            project_id=project_id,
            gcp_conn_id=gcp_conn_id,
            api_version=api_version,
            impersonation_chain=impersonation_chain,
            api_endpoint=api_endpoint,
        )
        self.job_id = job_id
        self.signal = signal
        self.wait_for_termination = wait_for_termination
        self.termination_timeout = termination_timeout
        self.poll_interval = poll_interval

    @fails_fast
    def execute(self, context: Context) -> dict[str, Any]:
        self.check_cluster_args()
        job_id = parse_job_id(self.job_id)
        try:
            outcome = self.hook.cancel_job(job_id, signal=self.signal)
        except SignalOutcomeUnknownError as exc:
            raise AirflowFailException(str(exc)) from exc  # a task retry would deliver the signal again
        self.log.info("Cancel of Slurm job %s: %s.", job_id, outcome.value)
        job = self.hook.get_job(job_id)
        if self.wait_for_termination and self.signal is None:
            deadline = time.monotonic() + self.termination_timeout
            while job is not None and not job.is_finished and time.monotonic() < deadline:
                time.sleep(self.poll_interval)
                job = self.hook.get_job(job_id)
            if job is not None and not job.is_finished:
                raise AirflowException(
                    f"Slurm job {job_id} is still {job.describe()} {self.termination_timeout:.0f}s after the cancel."
                )
        state = job.describe() if job is not None else None
        if job is not None:
            self.log.info("Slurm job %s is now %s.", job_id, state)
        return {"job_id": job_id, "outcome": outcome.value, "state": job.state.value if job else None}


class SlurmGetJobOperator(SlurmClusterMixin, BaseOperator):
    """Get one job (live queue, then history). Returns the job as a JSON-serializable dict.

    :param job_id: the Slurm job id. Templated.
    """

    template_fields: Sequence[str] = ("job_id", *CLUSTER_TEMPLATE_FIELDS)

    def __init__(
        self,
        *,
        job_id: int | str,
        region: str,
        cluster_id: str,
        project_id: str | None = None,
        gcp_conn_id: str = "google_cloud_default",
        api_version: str = DEFAULT_API_VERSION,
        impersonation_chain: str | Sequence[str] | None = None,
        api_endpoint: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._set_cluster_args(
            region=region,
            cluster_id=cluster_id,
            project_id=project_id,
            gcp_conn_id=gcp_conn_id,
            api_version=api_version,
            impersonation_chain=impersonation_chain,
            api_endpoint=api_endpoint,
        )
        self.job_id = job_id

    @fails_fast
    def execute(self, context: Context) -> dict[str, Any]:
        self.check_cluster_args()
        job_id = parse_job_id(self.job_id)
        job = self.hook.get_job(job_id)
        if job is None:
            raise AirflowException(str(JobNotFoundError(job_id)))
        self.log.info("Slurm job %s: %s", job_id, job.describe())
        return job.to_dict()


class SlurmListJobsOperator(SlurmClusterMixin, BaseOperator):
    """List jobs of the live queue, or of the accounting history. Returns a list of job dicts.

    :param history: list from ``/slurmdb`` (finished jobs too) instead of the live queue.
    :param filters: ``/slurmdb`` filters, e.g. ``{"users": ["alice"], "job_name": "train",
        "start_time": 1700000000}`` (lists become repeated parameters). Only with ``history=True``.
    :param states: keep only jobs in these base states (e.g. ``["RUNNING", "PENDING"]``).
    :param name: keep only jobs with this name.
    """

    template_fields: Sequence[str] = ("filters", "states", "name", *CLUSTER_TEMPLATE_FIELDS)

    def __init__(
        self,
        *,
        region: str,
        cluster_id: str,
        history: bool = False,
        filters: dict[str, Any] | None = None,
        states: Sequence[str] | None = None,
        name: str | None = None,
        project_id: str | None = None,
        gcp_conn_id: str = "google_cloud_default",
        api_version: str = DEFAULT_API_VERSION,
        impersonation_chain: str | Sequence[str] | None = None,
        api_endpoint: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._set_cluster_args(
            region=region,
            cluster_id=cluster_id,
            project_id=project_id,
            gcp_conn_id=gcp_conn_id,
            api_version=api_version,
            impersonation_chain=impersonation_chain,
            api_endpoint=api_endpoint,
        )
        if filters and not history:
            raise ValueError(
                f"filters={filters!r} only apply to the history: pass history=True, or use states=/name= "
                "to filter the live queue."
            )
        self.history = history
        self.filters = filters or {}
        self.states = states
        self.name = name

    @fails_fast
    def execute(self, context: Context) -> list[dict[str, Any]]:
        self.check_cluster_args()
        jobs = self.hook.list_jobs(history=self.history, **self.filters)
        if self.states:
            wanted = {s.upper() for s in self.states}
            jobs = [job for job in jobs if job.state.value in wanted]
        if self.name:
            jobs = [job for job in jobs if job.name == self.name]
        self.log.info("%d Slurm job(s) listed from the %s.", len(jobs), "history" if self.history else "live queue")
        return [job.to_dict() for job in jobs]
