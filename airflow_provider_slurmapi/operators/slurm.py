"""Operators that submit, cancel, get and list Slurm jobs through the Slurm Job API.

They are thin: the hook (:mod:`airflow_provider_slurmapi.hooks.slurm`) and the Airflow-free layer
under it (:mod:`airflow_provider_slurmapi.slurm`) do the work. Importing this module loads no Google
library and no aiohttp, so DAG files that use it parse fast.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from airflow_provider_slurmapi._compat import (
    AIRFLOW_V_3_0_PLUS,
    AirflowException,
    AirflowFailException,
    AirflowTaskTimeout,
    ResumableJobMixin,
    conf,
    is_masked,
    redact_text,
    sensitive_name_parts,
)
from airflow_provider_slurmapi.operators.base import (
    SlurmBaseOperator,
    SlurmWatchingBaseOperator,
    fails_permanently,
    is_literal,
    parse_job_id,
    permanent_message,
)
from airflow_provider_slurmapi.slurm.api.cluster import CLUSTER_TEMPLATE_FIELDS
from airflow_provider_slurmapi.slurm.api.errors import (
    ConfigurationError,
    JobNotFoundError,
    SignalOutcomeUnknownError,
    SlurmApiError,
)
from airflow_provider_slurmapi.slurm.client import send_marker
from airflow_provider_slurmapi.slurm.jobs.states import JobState
from airflow_provider_slurmapi.slurm.submit.job_fields import check_job_keys
from airflow_provider_slurmapi.slurm.submit.job_output import Redaction, mentions_progress, sets_extra, wrap_script
from airflow_provider_slurmapi.slurm.submit.sbatch import apply_directives
from airflow_provider_slurmapi.slurm.submit.spec import (
    CLOCK_SKEW_SECONDS,
    DEFAULT_ENVIRONMENT,
    PreparedSubmission,
    parse_time_limit,
    prepare_task_submission,
)
from airflow_provider_slurmapi.slurm.submit.tag import TaskIdentity
from airflow_provider_slurmapi.tag_secret import tag_key
from airflow_provider_slurmapi.triggers.event import event_job, read_event

if TYPE_CHECKING:
    import jinja2

    from airflow_provider_slurmapi._compat import Context
    from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob

# task_state_store key of the submitted job id (Airflow 3.3+, ResumableJobMixin's external_id_key);
# renaming it breaks in-flight retries.
JOB_ID_STATE_KEY = "slurm_job_id"
JOB_ID_XCOM_KEY = "slurm_job_id"


def _seconds(name: str, value: float | timedelta | None) -> float | None:
    """A duration argument as seconds; a clear error for anything but a positive number or timedelta."""
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ValueError(f"{name}={value!r} must be a positive number of seconds or a timedelta, or None for no limit.")
    return float(seconds)


def _task_identity(ti: Any) -> TaskIdentity:
    """The task instance a job is submitted for (its map index -1 when it is not mapped; Airflow may give ``None``)."""
    map_index = getattr(ti, "map_index", -1)
    return TaskIdentity(ti.dag_id, ti.task_id, ti.run_id, -1 if map_index is None else int(map_index))


# A ``script`` of one line ending in one of these is a file of the DAG folder, not the script itself.
SCRIPT_FILE_SUFFIXES: tuple[str, ...] = (".sh", ".sbatch", ".slurm", ".bash")


def is_script_path(script: object) -> bool:
    """A script given as a file of the DAG folder: one line ending in ``.sh``, ``.sbatch``, ``.slurm`` or
    ``.bash``. Anything else is the script itself."""
    return (
        isinstance(script, str) and script.endswith(SCRIPT_FILE_SUFFIXES) and "\n" not in script and "\r" not in script
    )


def read_script_file(jinja_env: jinja2.Environment, path: str, *, field: str = "script") -> str:
    """The text of a script file, found as Airflow finds templates: the DAG's folder, ``template_searchpath``."""
    import jinja2

    try:
        if jinja_env.loader is None:
            raise jinja2.TemplateNotFound(path)
        source, filename, _ = jinja_env.loader.get_source(jinja_env, path)
    except jinja2.TemplateNotFound:
        why = (
            "names the script's file"
            if field == "script_path"
            else f"is one line ending in {', '.join(SCRIPT_FILE_SUFFIXES)}, so it is read as a file"
        )
        folders = _searched_folders(jinja_env.loader)
        searched = f" (searched: {', '.join(folders)})" if folders else " (no folder to search)"
        raise ConfigurationError(
            f"{field}={path!r} {why}, but there is no such file in the DAG's folder or its "
            f"template_searchpath{searched}. Put the file there, or give the script itself (several lines, "
            "starting with '#!')."
        ) from None
    if filename:  # Jinja's loader reads in text mode, which turns \r\n into \n: look at the bytes
        with open(filename, encoding="utf-8", errors="surrogateescape", newline="") as raw:
            check_line_breaks(raw.read(), f"{field}={path!r} (the file {filename})", rendered=False, file=filename)
    return source


def _searched_folders(loader: object) -> list[str]:
    """The folders a Jinja loader reads files from, in order (Airflow's is a FileSystemLoader of the DAG's
    folder and ``template_searchpath``; a ChoiceLoader's loaders are read in turn)."""
    folders: list[str] = []
    for part in [loader, *getattr(loader, "loaders", ())]:
        for folder in getattr(part, "searchpath", ()):
            if str(folder) not in folders:
                folders.append(str(folder))
    return folders


def _check_literal_time_limit(job: object) -> None:
    """``job['time_limit']`` as written in the DAG, checked at parse time; templated, when the task runs."""
    if not isinstance(job, Mapping) or "time_limit" not in job:
        return
    value = job["time_limit"]
    if isinstance(value, timedelta | int | str | Mapping) and "{{" not in repr(value) and "{%" not in repr(value):
        parse_time_limit(value)


def check_line_breaks(text: str, where: str, *, rendered: bool, file: str | None = None) -> None:
    """Refuse DOS line breaks in a script, as ``sbatch`` does; before rendering, any carriage return.

    Slurm's REST API takes a ``\\r\\n`` script, and the job fails on the node (its interpreter is
    ``/bin/bash\\r``), so it is refused before any call, as ``sbatch`` refuses it ("Batch script
    contains DOS line breaks"). A template's source (``rendered=False``) may hold no ``\\r`` at all:
    Jinja turns every ``\\r`` into a line break, so the script would not reach Slurm as written.
    """
    fix = f"dos2unix {file}" if file else "script.replace('\\r\\n', '\\n')"
    if "\r\n" in text:
        line = text[: text.index("\r\n")].count("\n") + 1
        raise ConfigurationError(
            f"{where} has DOS line breaks (\\r\\n), the first at the end of line {line}: sbatch refuses such "
            "a script ('Batch script contains DOS line breaks'), and Slurm's REST API takes it, to fail on the "
            f"node (bad interpreter '/bin/bash\\r'). Give it Unix line breaks (\\n): {fix}, or your editor's "
            "LF setting (in git, '*.sh text eol=lf' in .gitattributes)."
        )
    if not rendered and "\r" in text:
        line = text[: text.index("\r")].count("\n") + 1
        raise ConfigurationError(
            f"{where} has a carriage return (\\r) on line {line} that ends no line: Airflow renders the script "
            "with Jinja, which would turn it into a line break, so the script would not reach Slurm as "
            "written. Write it as the shell's escape instead, e.g. printf '\\r'."
        )


def _check_literal_job_keys(job: object, api_version: str) -> None:
    """The keys of ``job`` as written in the DAG, checked at parse time: Jinja renders values, never keys,
    so a dict's keys are literal (a job that is itself a template or an ``XComArg`` is checked when the
    task runs). With ``api_version="auto"`` only keys no version knows are refused here; the version
    spoken decides the rest when the task runs."""
    if isinstance(job, Mapping):
        check_job_keys(job, api_version)


def _check_script_form(script: object) -> None:
    """Refuse one line that is neither a script nor a script file, naming the rule that reads files."""
    if not isinstance(script, str) or not script.strip() or "\n" in script.strip() or script.lstrip().startswith("#!"):
        return  # a script (prepare_submission checks the rest)
    raise ConfigurationError(
        f"script={script[:80]!r} is one line that does not start with '#!', so it is neither a batch script "
        f"nor a script file: only one line ending in {', '.join(SCRIPT_FILE_SUFFIXES)} is read from the DAG's "
        "folder. Rename the file, pass script_path='...' for a file of any name, or give the script itself "
        "(starting with '#!/bin/bash')."
    )


class SlurmSubmitJobOperator(ResumableJobMixin, SlurmWatchingBaseOperator):
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

    On Airflow 3.3+ this is Airflow's ``ResumableJobMixin``: the job id is saved in the task state
    store before the wait, and a retry reattaches through it; the tag lookup covers what the store
    cannot (a worker lost between the submit and the save, and Airflow before 3.3).

    :param job: Slurm job description fields, named as Slurm names them (``name``, ``partition``,
        ``tres_per_node``, ``time_limit`` in minutes or ``{"set": True, "number": N}``...). Templated.
        ``current_working_directory`` and ``environment`` get documented defaults if missing (logged).
    :param script: the batch script (``#!/bin/bash...``), or a file of the DAG folder (or
        ``template_searchpath``): one line ending in ``.sh``, ``.sbatch``, ``.slurm`` or ``.bash``, read
        and rendered as a template. Templated; only the value written in the DAG file (or given to
        ``expand``) is read as a path, never a value rendered from ``dag_run.conf``, and no other field
        is ever read from a file. Give either ``script`` or ``script_path``.
    :param script_path: the file of the batch script, whatever its name (``"jobs/train.py.tmpl"``),
        found as ``script`` files are: the DAG's folder, then ``template_searchpath``. Read and rendered
        as a template when the task runs. Not templated: the DAG's author names the file.
    :param wait_for_completion: wait for the job to end; if False, return once it is submitted.
    :param deferrable: wait in the triggerer (default: ``[operators] default_deferrable``).
    :param poll_interval: seconds between polls.
    :param cancel_on_kill: cancel the job when the task is killed, times out or is marked by a user.
    :param reattach_on_restart: look for this task instance's job before submitting (the stored job
        id on Airflow 3.3+, as ``ResumableJobMixin``'s ``durable``, then the tag). ``False`` always
        submits a new job.
    :param missing_grace_seconds: how long a job may be in neither the live queue nor the history
        (accounting records arrive late) before the task fails.
    :param outage_tolerance_seconds: how long the wait rides out an API outage (UNAVAILABLE, 5xx, no
        connection; warned about every few minutes) before the task fails; the job runs on, and a retry
        reattaches to it. Permanent errors (permission denied, unknown cluster) fail at once.
    :param report_output: wrap the script so that its last lines of output (stderr, or stdout when both
        go to one file; at most 1,024 bytes) reach the task's failure message, through the job's
        ``extra`` field, and ``slurm_progress "message"`` is on its PATH. The script itself runs
        unchanged with its own interpreter; every node needs ``python3``. Any user of the cluster can
        read a job's ``extra`` unless ``PrivateData`` hides jobs: values of sensitive variables are
        redacted on the node (see docs/job-output.md). ``False`` submits the script byte for byte.
        Default: ``[slurmapi] report_output``, which is ``False`` unless set.
    :param log_progress: log each new progress message of the job (``Slurm job 4242: epoch 3/10``).
        Default: when the script calls ``slurm_progress`` (with ``report_output``) or sets ``Extra=``
        itself (which needs no wrapper).
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
    external_id_key = JOB_ID_STATE_KEY
    # Airflow's template_ext would read *every* templated string ending in ".sh" from a file: a job
    # name "train.sh" or an inline script whose last line runs "./run.sh". Only ``script`` is ever
    # read from a file, and only when it is a path as written in the DAG (see ``_script_file``).
    template_ext: Sequence[str] = ()
    template_fields_renderers = {"job": "json", "script": "bash"}
    ui_color = "#d9ecf2"
    # The script is the DAG's own argument, so a literal one is checked when the DAG is parsed
    # (``@task.slurm`` holds a placeholder until its function returns the script: checked then).
    script_written_in_dag: bool = True

    def __init__(
        self,
        *,
        script: str | None = None,
        script_path: str | None = None,
        job: dict[str, Any] | None = None,
        wait_for_completion: bool = True,
        poll_interval: float = 30.0,
        cancel_on_kill: bool = True,
        reattach_on_restart: bool = True,
        report_output: bool | None = None,
        log_progress: bool | None = None,
        sbatch_directives: bool = True,
        openlineage_inject_parent_job_info: bool | None = None,
        pending_timeout: float | timedelta | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(cancel_on_kill=cancel_on_kill, log_progress=log_progress, **kwargs)
        self.watch_settings = replace(self.watch_settings, pending_timeout=_seconds("pending_timeout", pending_timeout))
        self._submitted_at: float | None = None
        self._submitting = False  # a submit is on its way: a kill now must wait for the job's id
        self._killed_while_submitting = False
        # Killed before the task had a job (Airflow 3 runs on after on_kill until its SIGKILL): send none.
        self._killed_before_job = False
        # The submit on its way and its send marker: what a kill's reaper looks for (on_kill).
        self._in_flight: tuple[PreparedSubmission, str] | None = None
        if report_output is None:
            report_output = conf.getboolean("slurmapi", "report_output", fallback=False)
        self.report_output = report_output
        self.sbatch_directives = sbatch_directives
        self.job = job or {}
        if (script is None) == (script_path is None):
            raise ValueError(
                f"Give the batch script as script= (its text, or a file ending in {', '.join(SCRIPT_FILE_SUFFIXES)}) "
                f"or as script_path= (a file of the DAG folder), not {'both' if script_path else 'neither'}."
            )
        self.script_path = script_path
        # The file to read when the task runs: named by the DAG's author, before any rendering, so a
        # value rendered from dag_run.conf is never taken for a path.
        self._script_file: str | None = (
            script_path if script_path is not None else (script if is_script_path(script) else None)
        )
        self.script: str = script if script is not None else str(script_path)
        if self._script_file is None and isinstance(script, str):
            check_line_breaks(script, "script", rendered=False)  # the template's source, as written
        if self.script_written_in_dag and self._script_file is None and is_literal(script):
            _check_script_form(script)  # a one-liner that is neither a script nor a file: at parse time
        _check_literal_job_keys(self.job, self.api_version)  # first: a misspelt key is named as such
        _check_literal_time_limit(self.job)
        self.wait_for_completion = wait_for_completion
        self.poll_interval = poll_interval
        self.reattach_on_restart = reattach_on_restart
        if openlineage_inject_parent_job_info is None:
            openlineage_inject_parent_job_info = conf.getboolean(
                "openlineage", "spark_inject_parent_job_info", fallback=False
            )
        self.openlineage_inject_parent_job_info = openlineage_inject_parent_job_info
        self.job_id: int | None = None
        self._last_job: SlurmJob | None = None
        # One try's choice between an earlier try's job and a new one (see the ResumableJobMixin part).
        self.durable = reattach_on_restart
        self._prepared: PreparedSubmission | None = None
        self._resume_job: SlurmJob | None = None
        self._adopted = False
        self._polled = False

    # -- rendering: the script as written, final newline included --------------------------------
    def render_template(
        self,
        content: Any,
        context: Context,
        jinja_env: jinja2.Environment | None = None,
        seen_oids: set[int] | None = None,
    ) -> Any:
        """Render as Airflow does, but keep a final newline, which Jinja drops by default
        (``keep_trailing_newline=False``): the script reaches Slurm byte for byte.

        Here, not in ``get_template_env``: Airflow's task runner (2.10 to 3.4) and mapped tasks pass the
        DAG's environment in. An overlay of it keeps its loader, macros and filters, and leaves every
        other operator of the DAG rendering as before.
        """
        env = jinja_env or self.get_template_env()
        if not env.keep_trailing_newline:
            env = env.overlay(keep_trailing_newline=True)
        return super().render_template(content, context, env, seen_oids)

    # -- the script file -------------------------------------------------------------------------
    def resolve_template_files(self) -> None:
        """At parse time, read the script file from the DAG folder, as Airflow does for template_ext:
        Airflow then renders its text like any inline script, and shows it in Rendered Template."""
        if self._script_file is not None and self.script == self._script_file:
            with contextlib.suppress(ConfigurationError):  # the task reports it when it runs, with the fix
                self.script = read_script_file(self.get_template_env(), self._script_file, field=self._script_field)
        super().resolve_template_files()

    @property
    def _script_field(self) -> str:
        return "script_path" if self.script_path is not None else "script"

    def read_script(self, context: Context) -> None:
        """Read and render the script file if the parse did not (each task of a mapped one, a missing
        file): through Airflow's public ``render_template``, so its text is rendered exactly once."""
        if self._script_file is None or self.script != self._script_file:
            return
        source = read_script_file(self.get_template_env(), self._script_file, field=self._script_field)
        self.script = self.render_template(source, context)

    # -- submit or reattach -----------------------------------------------------------------------
    @fails_permanently
    def execute(self, context: Context) -> int:
        self.check_cluster_args()
        self.read_script(context)
        self._prepared = self._submission(context)
        self.execute_resumable(context)  # on Airflow 3.3+ it may return poll_until_complete's None
        assert self.job_id is not None
        return self.job_id

    # -- ResumableJobMixin: reconnect through the task state store (Airflow 3.3+), else by tag -----
    def get_job_status(self, external_id: Any, context: Context) -> str:
        """The state of the job id an earlier try stored (Airflow 3.3+), for the mixin's choice:
        pending or running, reattach; completed, its result; ended otherwise or unknown, submit anew."""
        try:
            job = self.hook.get_job(parse_job_id(str(external_id)))
        except (ValueError, TypeError, AirflowException) as exc:
            self.log.warning("Ignoring the stored Slurm job id %r: %s", external_id, exc)
            return "UNKNOWN"
        if job is None:
            self.log.info("Slurm job %s stored by an earlier try is unknown to Slurm.", external_id)
            return "UNKNOWN"
        self._resume_job = job
        self._adopted = not job.state_info.has_ended
        if self._adopted:
            self.log.info(
                "Reattaching to Slurm job %s of this task instance (%s), submitted by an earlier try.",
                job.job_id,
                job.describe(),
            )
        return job.state.value

    def is_job_active(self, status: str) -> bool:
        return self._resume_job is not None and not self._resume_job.state_info.has_ended

    def is_job_succeeded(self, status: str) -> bool:
        return self._resume_job is not None and self._resume_job.succeeded

    def submit_job(self, context: Context) -> int:
        """This try's job: an earlier try's one found by tag if it still runs or completed (the
        fallback where no job id was stored: before Airflow 3.3, or a crash between submit and store),
        else a new one."""
        prepared = self._prepared
        assert prepared is not None and prepared.tag is not None
        previous = self._resume_job  # the stored job, ended: no need to look again
        if previous is None and self.reattach_on_restart:
            previous = self._previous_job(context, prepared.tag, prepared.job.get("name"))
            if previous is not None and previous.succeeded:
                self._resume_job = previous  # get_job_result finishes with it
                return previous.job_id
            if previous is not None and not previous.state_info.has_ended:
                self._adopted = True
                self._resume_job = previous  # the trigger's first view of it (no second read)
                self.log.info(
                    "Reattaching to Slurm job %s of this task instance (%s), submitted by an earlier try.",
                    previous.job_id,
                    previous.describe(),
                )
                return previous.job_id
        if previous is not None:
            self.log.info("Earlier Slurm job %s %s; submitting a new one.", previous.job_id, previous.describe())
        self._adopted = False
        return self._submit(context, prepared)

    def poll_until_complete(self, external_id: Any, context: Context) -> None:
        """Wait for the job (or hand the wait to the triggerer); fails the task unless it COMPLETED."""
        if self._resume_job is not None and self._resume_job.succeeded and not self._adopted:
            self._already_completed(context, self._resume_job)
            return
        job_id = int(external_id)
        self._polled = True
        self.job_id = job_id
        if self._killed_before_job:  # killed while it looked for an earlier try's job, which it found
            self._cancel_on_late_kill(job_id, f"before it reattached to Slurm job {job_id}")
        self.push_xcom(context, JOB_ID_XCOM_KEY, job_id)
        if self.wait_for_completion:
            self._wait(context, job_id, adopted=self._adopted)

    def get_job_result(self, external_id: Any, context: Context) -> int:
        """The task's return value: the job id (a job an earlier try completed is finished here)."""
        if not self._polled and self._resume_job is not None and self._resume_job.succeeded:
            return self._already_completed(context, self._resume_job)
        assert self.job_id is not None
        return self.job_id

    def _already_completed(self, context: Context, job: SlurmJob) -> int:
        self._polled = True
        self.log.info(
            "Slurm job %s of this task instance already COMPLETED; not submitting again. "
            "Use reattach_on_restart=False to force a new job.",
            job.job_id,
        )
        self.push_xcom(context, JOB_ID_XCOM_KEY, job.job_id)
        return self._finish(context, job)

    def _submission(self, context: Context) -> PreparedSubmission:
        """This task instance's submission as sent, tagged; a bad spec fails here, before any call.

        Prepared once: the hook sends it as it is (:meth:`SlurmApiHook.submit_prepared`).
        """
        key = tag_key()  # a deployment without its tag secret fails first, whatever the spec
        task = _task_identity(context["ti"])
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
            job_spec["name"] = f"{task.dag_id}.{task.task_id}"
            self.log.info("job.name was not set; naming the Slurm job %r.", job_spec["name"])
        _check_script_form(self.script)
        if isinstance(self.script, str):  # a value rendered into it, or from XCom, was never looked at
            check_line_breaks(self.script, "script (as rendered)", rendered=True)
        return prepare_task_submission(
            job_spec,
            self.script,
            task,
            key=key,
            add_variables=(lambda names: self._parent_run(context, names))
            if self.openlineage_inject_parent_job_info
            else None,
            # What is sent, so what the 1 MB request limit counts: the wrapped script, or yours byte for byte.
            wrap=(lambda script, job: wrap_script(script, _redaction(job))) if self.report_output else None,
            api_version=self.api_version,
        )

    def _submit(self, context: Context, prepared: PreparedSubmission) -> int:
        """Submit a new job for this task instance and remember its id where a retry looks first."""
        self._submitted_at = self.hook.client.clock.wall()  # its first pending spell begins (pending_timeout)
        marker = send_marker()
        self._in_flight = (prepared, marker)  # before _submitting: a kill from here on may start the reaper
        self._submitting = True
        if self._killed_before_job:  # after _submitting: a kill in between is the reaper's case, not lost
            self._submitting = False
            raise AirflowException(
                "The task was killed before it sent its Slurm job; nothing was submitted (it was killed while it "
                "prepared the job, e.g. while it waited for the tag key)."
            )
        try:
            with _sigterm_waits_for_the_answer(self.on_kill):
                result = self.hook.submit_prepared(prepared, send_marker=marker)
        except AirflowTaskTimeout:  # execution_timeout raised inside the request: the job is never named here
            self.on_kill()
            raise
        finally:
            self._submitting = False
        self.job_id = result.job_id  # from here on, a kill cancels it
        if self._killed_while_submitting:
            self._cancel_on_late_kill(result.job_id)
        self._copies_of = result.send_marker if result.resent else None
        for warning in result.warnings:
            self.log.warning("Slurm accepted job %s with a warning: %s", result.job_id, warning)
        store = context.get("task_state_store")
        if store is not None:
            store.set(JOB_ID_STATE_KEY, result.job_id)
        return result.job_id

    def _parent_run(self, context: Context, names: set[str]) -> dict[str, str] | None:
        """This task's OpenLineage run, as variables for the job's environment (which sets ``names``):
        none when the job sets its own parent run, or without the OpenLineage provider."""
        from airflow_provider_slurmapi.lineage import PARENT_ENV_PREFIXES, parent_run_environment

        if any(name.startswith(PARENT_ENV_PREFIXES) for name in names):
            self.log.info("job.environment already sets OpenLineage parent variables; not adding this task's run.")
            return None
        try:
            variables = parent_run_environment(context)
        except Exception as exc:  # lineage must never fail the job it describes
            self.log.warning("Could not build this task's OpenLineage run (%s); the job gets no parent run.", exc)
            return None
        if variables is None:
            self.log.info(
                "openlineage_inject_parent_job_info is on, but apache-airflow-providers-openlineage is not "
                "installed: the job gets no parent run."
            )
            return None
        self.log.info(
            "OpenLineage parent run in the job's environment: OPENLINEAGE_PARENT_ID=%s",
            variables["OPENLINEAGE_PARENT_ID"],
        )
        return variables

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
        return self.hook.find_job_by_tag(tag, name=name, since=since)

    def _stored_job_id(self, context: Context, *, any_try: bool = False) -> int | None:
        """The job id an earlier try stored (or this try's, with ``any_try``): task state store (Airflow
        3.3+), else its XCom if it survived (none with ``do_xcom_push=False``)."""
        store = context.get("task_state_store")
        stored: Any = store.get(JOB_ID_STATE_KEY) if store is not None else None
        ti = context["ti"]
        if not stored and (any_try or int(getattr(ti, "try_number", 1) or 1) > 1):
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
        if not isinstance(self.script, str):
            return False
        # Unwrapped, slurm_progress is not on the job's PATH; a script that sets Extra= itself needs no wrapper.
        return mentions_progress(self.script) if self.report_output else sets_extra(self.script)

    def _wait(self, context: Context, job_id: int, *, adopted: bool = False) -> int:
        """Wait for the job; ``adopted`` when an earlier try submitted it (see :meth:`_finish`)."""
        pending_since = None if adopted else self._submitted_at  # a job found again: its wait counts from now
        if self.deferrable:
            # No look here: the trigger's batched poll makes the first one, so a deferrable start costs
            # the submit alone (an adopted job hands on the record its lookup read).
            self._defer_wait(
                job_id,
                self._resume_job if adopted else None,
                poll_interval=self.poll_interval,
                timeout=self.execution_timeout,
                pending_since=pending_since,
                method_kwargs={"adopted": True} if adopted else None,
            )
        watch = self._new_watch(job_id, pending_since=pending_since)
        # Deferrable: the first look only, here; the triggerer drives the same plan on from there.
        end = self._follow(self._watch_plan(watch, self.poll_interval))
        assert end.job is not None
        return self._finish(context, end.job, adopted=adopted)

    @fails_permanently
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
        self._push_finished(context, job.job_id, job.to_dict())
        if not job.succeeded:
            raise AirflowException(redact_text(job.failure_message(output_expected=self.report_output)))
        self.log.info("Slurm job %s %s.", job.job_id, job.describe())
        report = job.output_report(expected=True) if self.report_output else None
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
        job_id = self._submit(context, self._submission(context))
        self.job_id = job_id
        self.push_xcom(context, JOB_ID_XCOM_KEY, job_id)
        return self._wait(context, job_id)

    def _lineage(self) -> Any:
        return self.slurm_job_lineage(self.job_id, self._last_job)

    # -- kill -------------------------------------------------------------------------------------
    def _deferred_job_id(self, context: Context) -> int | None:
        return self._stored_job_id(context, any_try=True)

    def on_kill(self) -> None:
        """SIGTERM or execution_timeout on the worker: cancel the job if it may still run."""
        if not self.cancel_on_kill or self._job_over:
            return
        if self.job_id is None:
            if not self._submitting and not self._killed_before_job:
                self._killed_before_job = True
                self.log.info("Task killed before it had a Slurm job: it sends none, and cancels one it finds.")
            if self._submitting and not self._killed_while_submitting:
                # The task runs on until the answer (Airflow 3 calls on_kill and raises nothing; on Airflow 2
                # _sigterm_waits_for_the_answer holds the raise back) and _submit cancels the job it names;
                # a reaper process cancels it if the answer comes after the SIGKILL.
                self._killed_while_submitting = True
                self.log.info("Task killed while its Slurm job was being submitted: cancelling it once Slurm names it.")
                self._start_reaper()
            return
        try:
            outcome = self.hook.cancel_job(self.job_id)
            self.log.info("Task killed: cancel of Slurm job %s answered %s.", self.job_id, outcome.value)
        except SlurmApiError as exc:
            self.log.error("Task killed, but cancelling Slurm job %s failed: %s", self.job_id, exc)

    def _start_reaper(self) -> None:
        """Start the detached process that cancels the submit's job if this one dies before the answer."""
        assert self._in_flight is not None
        prepared, marker = self._in_flight
        try:
            pid = self.hook.start_reaper(
                marker=marker,
                name=prepared.job.get("name"),
                since=int(self._submitted_at or self.hook.client.clock.wall()) - CLOCK_SKEW_SECONDS,
            )
        except Exception as exc:  # on_kill must end; the in-process cancel still runs if the answer comes
            self.log.error("Could not start the process that cancels the job of a killed submit: %s", exc)
        else:
            self.log.info("Process %s cancels the job carrying %s should this task die first.", pid, marker)

    def _cancel_on_late_kill(self, job_id: int, when: str | None = None) -> NoReturn:
        """The task was killed before it knew ``job_id`` (``when``: while it was being submitted, by default):
        cancel it and end the task."""
        when = when or f"while Slurm job {job_id} was being submitted"
        try:
            outcome = self.hook.cancel_job(job_id)
        except SlurmApiError as exc:
            raise AirflowException(f"The task was killed {when}, and cancelling it failed: {exc}") from exc
        raise AirflowException(f"The task was killed {when}; its cancel answered {outcome.value}.")


@contextlib.contextmanager
def _sigterm_waits_for_the_answer(on_kill: Callable[[], None]) -> Iterator[None]:
    """During a submit on Airflow 2: SIGTERM calls ``on_kill`` and no more, so the request is not torn.

    Airflow 2's handler (``TaskInstance._execute_task_with_callbacks``) calls ``on_kill`` and then raises
    inside whatever runs, here the submit's request: the job Slurm makes is never named, so never
    cancelled. Held back, the answer arrives (within the request timeout, or Airflow's SIGKILL after
    ``killed_task_cleanup_time`` ends it and the reaper cancels the job), ``_submit`` cancels the job
    and fails the task. Airflow 3's handler raises nothing: left alone. Signals are set in the main
    thread only.
    """
    if AIRFLOW_V_3_0_PLUS or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda signum, frame: on_kill())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _redaction(job_spec: Mapping[str, Any]) -> Redaction:
    """What the job's wrapper redacts: Airflow's sensitive name parts, and the NAMES of the variables
    whose values Airflow masks (values never go into the script)."""
    parts, min_length = sensitive_name_parts()
    names = []
    environment = job_spec.get("environment")
    entries = environment.items() if isinstance(environment, dict) else environment or []
    for entry in entries:
        name, value = entry if isinstance(entry, tuple) else str(entry).partition("=")[::2]
        if isinstance(value, str) and is_masked(value):
            names.append(str(name))
    return Redaction(names=tuple(sorted(set(names))), parts=parts, min_length=min_length)


class SlurmCancelJobOperator(SlurmBaseOperator):
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
        signal: str | None = None,
        wait_for_termination: bool = True,
        termination_timeout: float = 120.0,
        poll_interval: float = 2.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job_id = job_id
        self.signal = signal
        self.wait_for_termination = wait_for_termination
        self.termination_timeout = termination_timeout
        self.poll_interval = poll_interval

    @fails_permanently
    def execute(self, context: Context) -> dict[str, Any]:
        self.check_cluster_args()
        job_id = parse_job_id(self.job_id)
        try:
            outcome = self.hook.cancel_job(job_id, signal=self.signal)
        except SignalOutcomeUnknownError as exc:
            raise AirflowFailException(str(exc)) from exc  # a task retry would deliver the signal again
        self.log.info("Cancel of Slurm job %s: %s.", job_id, outcome.value)
        if self.wait_for_termination and self.signal is None:
            job = self.hook.wait_for_termination(job_id, self.termination_timeout, poll_seconds=self.poll_interval)
            if job is not None and not job.is_finished:
                raise AirflowException(
                    f"Slurm job {job_id} is still {job.describe()} {self.termination_timeout:.0f}s after the cancel."
                )
        else:
            job = self.hook.get_job(job_id)
        state = job.describe() if job is not None else None
        if job is not None:
            self.log.info("Slurm job %s is now %s.", job_id, state)
        return {"job_id": job_id, "outcome": outcome.value, "state": job.state.value if job else None}


class SlurmGetJobOperator(SlurmBaseOperator):
    """Get one job (live queue, then history). Returns the job as a JSON-serializable dict.

    :param job_id: the Slurm job id. Templated.
    """

    template_fields: Sequence[str] = ("job_id", *CLUSTER_TEMPLATE_FIELDS)

    def __init__(
        self,
        *,
        job_id: int | str,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job_id = job_id

    @fails_permanently
    def execute(self, context: Context) -> dict[str, Any]:
        self.check_cluster_args()
        job_id = parse_job_id(self.job_id)
        job = self.hook.get_job(job_id)
        if job is None:
            raise AirflowException(str(JobNotFoundError(job_id)))
        self.log.info("Slurm job %s: %s", job_id, job.describe())
        return job.to_dict()


# How many jobs SlurmListJobsOperator returns (to XCom) at most, unless told otherwise.
DEFAULT_LIST_LIMIT = 1000


class SlurmListJobsOperator(SlurmBaseOperator):
    """List the caller's own jobs of the live queue, or of the accounting history. Returns a list of job
    dicts, newest first, at most ``limit`` of them.

    The caller is the Slurm account the Slurm Job API runs the calls as: the connection extra
    ``slurm_user``, else the account the provider learned from a job it submitted through this connection
    to this cluster (never ``meta.client.user``). Where neither is known the task fails naming the fixes,
    never returning a silently empty list. On a shared cluster every other user's jobs are their data:
    they are listed only when asked for, with ``all_users=True`` or the history's ``users`` filter.

    :param history: list from ``/slurmdb`` (finished jobs too) instead of the live queue.
    :param filters: ``/slurmdb`` filters, e.g. ``{"job_name": "train", "start_time": 1700000000}``
        (lists become repeated parameters). Only with ``history=True``. ``users`` names whose jobs are
        listed, instead of the caller's own.
    :param states: keep only jobs in these base states (e.g. ``["RUNNING", "PENDING"]``).
    :param name: keep only jobs with this name.
    :param all_users: list every user's jobs, not only the caller's own. Templated.
    :param limit: return at most this many jobs, the newest (by submit time) first; the log says how
        many more there were. ``None``: no limit. Templated.
    """

    template_fields: Sequence[str] = ("filters", "states", "name", "all_users", "limit", *CLUSTER_TEMPLATE_FIELDS)

    def __init__(
        self,
        *,
        history: bool = False,
        filters: dict[str, Any] | None = None,
        states: Sequence[str] | None = None,
        name: str | None = None,
        all_users: bool = False,
        limit: int | None = DEFAULT_LIST_LIMIT,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if filters and not history:
            raise ValueError(
                f"filters={filters!r} only apply to the history: pass history=True, or use states=/name= "
                "to filter the live queue."
            )
        self.history = history
        self.filters = filters or {}
        self.states = states
        self.name = name
        self.all_users = all_users
        self.limit = limit

    @fails_permanently
    def execute(self, context: Context) -> list[dict[str, Any]]:
        self.check_cluster_args()
        limit = _check_limit(self.limit)
        all_users = _check_flag("all_users", self.all_users)
        jobs = self.hook.list_jobs(history=self.history, own=not all_users, **self.filters)
        if self.states:
            wanted = {s.upper() for s in self.states}
            jobs = [job for job in jobs if job.state.value in wanted]
        if self.name:
            jobs = [job for job in jobs if job.name == self.name]
        jobs.sort(key=lambda job: (job.submit_time or 0, job.job_id), reverse=True)
        whose = "every user's" if all_users or (self.history and self.filters.get("users")) else "the caller's own"
        where = "history" if self.history else "live queue"
        if limit is not None and len(jobs) > limit:
            self.log.info(
                "%d Slurm job(s) (%s) in the %s; returning the newest %d (limit).", len(jobs), whose, where, limit
            )
            jobs = jobs[:limit]
        else:
            self.log.info("%d Slurm job(s) (%s) listed from the %s.", len(jobs), whose, where)
        return [job.to_dict() for job in jobs]


def _check_limit(limit: object) -> int | None:
    """``limit`` as rendered: None, or a positive int (a rendered template gives text)."""
    if limit is None:
        return None
    text = str(limit).strip()
    if isinstance(limit, bool) or not text.isascii() or not text.isdigit() or int(text) < 1:
        raise ConfigurationError(f"limit={limit!r} must be a positive whole number of jobs, or None for no limit.")
    return int(text)


def _check_flag(field: str, value: object) -> bool:
    """A boolean argument as rendered (a template renders "True"/"False" as text)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigurationError(f"{field}={value!r} must be True or False.")
