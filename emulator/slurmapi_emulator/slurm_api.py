"""slurmrestd's paths, parameters and answers, served from the emulated cluster.

Given the (method, path, body) that arrived inside an envelope, this module answers exactly what
slurmrestd 24.11 would: the HTTP status, and a JSON body (or the plain text slurmrestd uses for
some errors). Big list answers are assembled from cached per-job JSON text.
"""

from __future__ import annotations

import pwd
import re
import signal
import time
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import unquote

from .jobdesc import SubmitRejected, parse_submit
from .model import Cluster, Job, parse_array
from .render import history_job, history_visible, live_job_json, partition_record, state_entry_json
from .slurm_json import (
    BASE_STATES,
    NOT_FOUND_TEXT,
    PARSE_ERROR_TEXT,
    JsonDict,
    dumps,
    error_entry,
    local_iso,
    meta,
    num,
    unset,
    warning_entry,
)
from .versions import DEFAULT_SLURM_RELEASE, release_name, versions_of, wire

# Slurm's relative times in query filters, e.g. "now-3600seconds" (what v0.0.40/41 accept).
_RELATIVE_TIME = re.compile(r"^now(?:-([0-9]{1,12})(seconds|minutes|hours|days)?)?$")
_TIME_UNITS = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400}

_PATH_RE = re.compile(r"^/(slurm|slurmdb)/(v\d+\.\d+\.\d+)(/[^?]*)?$")
_JOB_RE = re.compile(r"^/job/([^/]+)/?$")
# what slurmrestd accepts as a job id: JOB, JOB_TASK (array), JOB.STEP, JOB+OFFSET (HetJob)
_SELECTED_STEP_RE = re.compile(r"^([0-9]+)(?:([_.+])([0-9]+|batch|extern|interactive))?$")
MAX_JOB_ID = 0x03FF0000
# slurmrestd 24.11 cannot parse a job id of 0 or from here up (422, "Failure parsing parameters").
UNPARSABLE_JOB_ID = 0xFFFFFFFD
_ZERO_NUM = dumps(num(0))
_SUBMIT_SOURCE = "slurm_submit_batch_job()"


@dataclass(frozen=True)
class BackendAnswer:
    """What a Slurm backend (the local model or a real slurmrestd) answered: HTTP status and body text
    (JSON or plain text), before the envelope wraps it."""

    status: int
    text: str
    is_json: bool = True


class SlurmBackend(Protocol):
    """Anything that can answer a Slurm REST call: the local model or a real slurmrestd."""

    async def call(self, method: str, path: str, body: Any) -> BackendAnswer: ...

    async def close(self) -> None: ...


def text_response(status: int, text: str) -> BackendAnswer:
    """A plain-text answer, as slurmrestd sends for routing and query-syntax errors."""
    return BackendAnswer(status, text, is_json=False)


def split_query(path: str) -> tuple[str, str]:
    """Separate a path from its raw (still percent-encoded) query string."""
    base, _, query = path.partition("?")
    return base, query


class QueryError(ValueError):
    """A query parameter no Slurm field could hold: the message names the parameter and why."""


_PERCENT_RE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def parse_query(raw: str) -> list[tuple[str, str]] | None:
    """Repeated `key=value` pairs; None if a raw comma makes slurmrestd refuse the query.

    Raises :class:`QueryError` for a pair that cannot be text: a ``%`` not followed by two hex digits,
    percent-escapes that are not UTF-8, or a NUL or other control character (C strings end at NUL).
    """
    if "," in raw:
        return None
    pairs = []
    for part in filter(None, raw.split("&")):
        key, _, value = part.partition("=")
        name = _query_text(key, "a parameter name", "")
        pairs.append((name, _query_text(value, f"parameter {name!r}", name)))
    return pairs


def _query_text(raw: str, what: str, name: str) -> str:
    shown = raw if len(raw) <= 40 else raw[:40] + "..."
    if _PERCENT_RE.search(raw):
        raise QueryError(f"{what} has a '%' not followed by two hex digits ({shown!r}): percent-encode it as %25.")
    try:
        text = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise QueryError(f"{what} is not UTF-8 once percent-decoded ({shown!r}).") from None
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in text):
        raise QueryError(f"{what} holds a NUL or another control character ({shown!r}); remove it.")
    return text


def _values(params: list[tuple[str, str]], key: str) -> list[str]:
    return [v for k, v in params if k == key]


def _selection_warnings(kind: str | None) -> list[JsonDict]:
    """slurmrestd shows the whole job for an array task or step id, with a warning."""
    if kind == "_":
        return [
            warning_entry(
                "Job array Ids are not currently supported for job searches. Showing all jobs in array instead.",
                "_handle_job_get",
            )
        ]
    if kind == ".":
        return [
            warning_entry("Job steps are not supported for job searches. Showing whole job instead.", "_handle_job_get")
        ]
    return []


def _already_done(step_id: str, job_id: int) -> JsonDict:
    """A cancel's status entry for an array task that had already ended (Slurm 24.11 lists each)."""
    text = "Job/step already completing or completed"
    return {
        "error": {"string": text, "code": 2021, "message": text},
        "step_id": step_id,
        "job_id": num(job_id),
        "federation": {"sibling": ""},
    }


def unsigned(text: str, limit: int = 2**64) -> int | None:
    """An ASCII decimal below ``limit`` (Slurm's parsers read at most 64 bits); ``None`` for anything else.

    Never ``int()`` of unchecked text: ``str.isdigit`` accepts "²" and other non-ASCII digits, and Python refuses to
    convert more than 4300 digits, and either would end a request in a traceback.
    """
    text = text.strip()
    if not text.isascii() or not text.isdigit() or len(text.lstrip("0")) > 20:
        return None
    number = int(text)
    return number if number < limit else None


def _parse_signal(text: str) -> int | None:
    text = text.strip().upper()
    if text.isascii() and text.isdigit():
        return unsigned(text, 65)
    name = text if text.startswith("SIG") else f"SIG{text}"
    try:
        return int(signal.Signals[name])
    except KeyError:
        return None


class SlurmModelApi:
    """slurmrestd in front of the emulated cluster."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        slurm_release: str = DEFAULT_SLURM_RELEASE,
        versions: tuple[str, ...] | None = None,
        meta_user: str | None = None,
    ) -> None:
        self.cluster = cluster
        # What meta.client.user says (config meta_client_user); the jobs stay the cluster user's.
        self.meta_user = cluster.user if meta_user is None else meta_user
        self._meta_text: dict[tuple[str, bool], str] = {}
        # What this cluster serves: the versions of the Slurm release it acts as, unless chosen otherwise.
        self.versions = versions if versions is not None else versions_of(slurm_release)
        self.release = release_name(slurm_release)

    async def close(self) -> None:
        """Nothing to release; the cluster is shut down by the server."""

    # ---------------------------------------------------------------- helpers
    def _meta(self, version: str, slurmdb: bool) -> str:
        key = (version, slurmdb)
        text = self._meta_text.get(key)
        if text is None:
            text = dumps(
                meta(
                    version,
                    slurmdb=slurmdb,
                    user=self.meta_user,
                    group=self.cluster.group,
                    cluster=self.cluster.cluster_name,
                    release=self.release,
                )
            )
            self._meta_text[key] = text
        return text

    def _meta_obj(self, version: str, slurmdb: bool) -> JsonDict:
        return meta(
            version,
            slurmdb=slurmdb,
            user=self.meta_user,
            group=self.cluster.group,
            cluster=self.cluster.cluster_name,
            release=self.release,
        )

    def _errors(
        self,
        status: int,
        version: str,
        errors: list[JsonDict],
        warnings: list[JsonDict] | None = None,
        *,
        slurmdb: bool = False,
    ) -> BackendAnswer:
        body = {"errors": errors, "warnings": warnings or [], "meta": self._meta_obj(version, slurmdb)}
        return BackendAnswer(status, dumps(body))

    def _bad_query(
        self,
        version: str,
        source: str,
        description: str = "Rejecting request. Failure parsing query parameters",
        *,
        slurmdb: bool = False,
    ) -> BackendAnswer:
        return self._errors(422, version, [error_entry(9000, description, source)], slurmdb=slurmdb)

    @staticmethod
    def _job_id(text: str) -> int | None:
        number = unsigned(text, 2**32)
        return number if number else None

    # ---------------------------------------------------------------- dispatch
    async def call(self, method: str, path: str, body: Any) -> BackendAnswer:
        """Answer one Slurm REST call as slurmrestd would."""
        base, raw_query = split_query(path)
        match = _PATH_RE.match(base)
        if not match or match.group(2) not in self.versions:
            return text_response(404, NOT_FOUND_TEXT)
        try:
            params = parse_query(raw_query)
        except QueryError as exc:
            return text_response(400, f"{PARSE_ERROR_TEXT} {exc}")
        if params is None:
            return text_response(400, PARSE_ERROR_TEXT)
        service, version, rest = match.group(1), match.group(2), (match.group(3) or "/")
        try:
            if service == "slurm":
                return self._slurm(method, version, rest, params, body)
            return self._slurmdb(method, version, rest, params)
        except (ValueError, OverflowError) as exc:
            if not params:
                raise
            # A value the handlers could not use (a date or number out of range): never a bare 500.
            names = ", ".join(sorted({name for name, _ in params}))
            return self._bad_query(
                version,
                "op_handler_jobs" if "jobs" in rest else "op_handler_job",
                f"Rejecting request. Failure parsing query parameters ({names}): {type(exc).__name__}",
                slurmdb=service == "slurmdb",
            )

    def _slurm(self, method: str, version: str, rest: str, params: list[tuple[str, str]], body: Any) -> BackendAnswer:
        if rest in ("/ping", "/ping/") and method == "GET":
            return self._ping(version)
        if rest in ("/job/submit", "/job/submit/") and method == "POST":
            return self._submit(version, body)
        if rest in ("/partitions", "/partitions/") and method == "GET":
            return self._partitions(version)
        if rest in ("/jobs", "/jobs/") and method == "GET":
            return self._jobs(version, params)
        if rest in ("/jobs/state", "/jobs/state/") and method == "GET":
            return self._jobs_state(version, params)
        job_match = _JOB_RE.match(rest)
        if job_match and method in ("GET", "DELETE"):
            selected = _SELECTED_STEP_RE.match(job_match.group(1))
            if selected is None:
                return self._bad_query(version, "op_handler_job", "Rejecting request. Failure parsing parameters")
            job_id = unsigned(selected.group(1), UNPARSABLE_JOB_ID) or 0
            if not job_id:
                return self._bad_query(version, "op_handler_job", "Rejecting request. Failure parsing parameters")
            if job_id >= MAX_JOB_ID:
                errors = [error_entry(2017, f"Invalid JobID={job_id} rejected", "op_handler_job")]
                return self._errors(404, version, errors)
            if method == "GET":
                return self._job_get(version, job_id, _selection_warnings(selected.group(2)))
            return self._job_delete(version, job_id, params)
        return text_response(404, NOT_FOUND_TEXT)

    def _slurmdb(self, method: str, version: str, rest: str, params: list[tuple[str, str]]) -> BackendAnswer:
        if method != "GET":
            return text_response(404, NOT_FOUND_TEXT)
        if rest in ("/ping", "/ping/"):
            body = {
                "pings": [{"hostname": "localhost", "responding": True, "latency": 120, "primary": True}],
                "meta": self._meta_obj(version, True),
                "errors": [],
                "warnings": [],
            }
            return BackendAnswer(200, dumps(body))
        if rest in ("/jobs", "/jobs/"):
            return self._db_jobs(version, params)
        job_match = _JOB_RE.match(rest)
        if job_match:
            job_id = self._job_id(job_match.group(1))
            if job_id is None:
                return self._bad_query(
                    version, "op_handler_job", "Rejecting request. Failure parsing parameters", slurmdb=True
                )
            return self._db_answer(version, self._history_of(job_id), time.time() - self.cluster.history_delay)
        return text_response(404, NOT_FOUND_TEXT)

    # ---------------------------------------------------------------- /slurm
    def _ping(self, version: str) -> BackendAnswer:
        ping: JsonDict = {
            "hostname": "localhost",
            "pinged": "UP",
            "responding": True,
            "latency": 850,
            "mode": "primary",
            "primary": True,
        }
        shape = wire(version)
        if not shape.ping_has_responding:
            del ping["responding"], ping["primary"]
        if not shape.ping_has_pinged:  # v0.0.45: "status" in place of "pinged" and "mode"
            del ping["pinged"], ping["mode"]
            ping["status"] = "No error"
        body = {"pings": [ping], "meta": self._meta_obj(version, False), "errors": [], "warnings": []}
        return BackendAnswer(200, dumps(body))

    def _partitions(self, version: str) -> BackendAnswer:
        cluster = self.cluster
        records = [
            partition_record(name, cpus=cluster.total_cpus, gpus=cluster.total_gpus) for name in cluster.partitions
        ]
        body = {
            "partitions": records,
            "last_update": num(int(cluster.last_update)),
            "meta": self._meta_obj(version, False),
            "errors": [],
            "warnings": [],
        }
        return BackendAnswer(200, dumps(body))

    def _submit(self, version: str, body: Any) -> BackendAnswer:
        cluster = self.cluster
        try:
            req, warnings = parse_submit(body, version)
        except SubmitRejected as exc:
            return self._errors(exc.status, version, exc.errors, exc.warnings)
        partition = req.partition or cluster.partitions[0]
        if partition not in cluster.partitions:
            return self._errors(
                500, version, [error_entry(2000, "Batch job submission failed", _SUBMIT_SOURCE)], warnings
            )
        if req.array is not None:
            try:
                parse_array(req.array)
            except ValueError:
                errors = [error_entry(2081, "Batch job submission failed", _SUBMIT_SOURCE)]
                errors[0]["error"] = "Invalid job array specification"
                return self._errors(500, version, errors, warnings)
        if not req.cwd or not req.environment:
            cluster.use_job_id()  # slurmctld creates the record, fails writing the files, drops it
            return self._errors(
                500, version, [error_entry(2019, "Batch job submission failed", _SUBMIT_SOURCE)], warnings
            )
        if req.nodes > 1 or req.cpus > cluster.total_cpus or req.gpus > cluster.total_gpus:
            cluster.create_job(req, partition, bad_constraints=True)
            return self._errors(
                500, version, [error_entry(2014, "Batch job submission failed", _SUBMIT_SOURCE)], warnings
            )
        job = cluster.create_job(req, partition)
        if req.hold:
            held = "Job is in held state, pending scheduler release"
            warnings += [
                warning_entry(f"Job submission resulted in non-zero return code: {held}", _SUBMIT_SOURCE),
                warning_entry(held, _SUBMIT_SOURCE),
            ]
        answer: JsonDict = {"job_id": job.job_id, "step_id": "batch", "job_submit_user_msg": ""}
        if wire(version).submit_answers_result:
            answer["result"] = {
                "job_id": job.job_id,
                "step_id": "batch",
                "error_code": 0,
                "error": "",
                "job_submit_user_msg": "",
            }
        answer.update(meta=self._meta_obj(version, False), errors=[], warnings=warnings)
        return BackendAnswer(200, dumps(answer))

    def _job_list(
        self, version: str, fragments: list[str], last_update: int, *, warnings: str = "[]", errors: str = "[]"
    ) -> str:
        return (
            '{"jobs":['
            + ",".join(fragments)
            + '],"last_backfill":'
            + _ZERO_NUM
            + ',"last_update":'
            + dumps(num(last_update))
            + ',"meta":'
            + self._meta(version, False)
            + ',"errors":'
            + errors
            + ',"warnings":'
            + warnings
            + "}"
        )

    def _render(self, job: Job, version: str) -> str:
        return live_job_json(job, version, self.cluster.cluster_name, self.cluster.total_cpus)

    def _job_get(self, version: str, job_id: int, warnings: list[JsonDict]) -> BackendAnswer:
        job = self.cluster.live.get(job_id)
        warn = dumps(warnings)
        if job is None:
            errors = dumps([error_entry(2017, f"Unable to query JobId={job_id}", "_handle_job_get")])
            return BackendAnswer(404, self._job_list(version, [], 0, errors=errors, warnings=warn))
        members = self.cluster.array_members(job_id) if job.array_job_id == job_id else [job]
        fragments = [self._render(member, version) for member in members]
        return BackendAnswer(200, self._job_list(version, fragments, self.cluster.last_update, warnings=warn))

    def _jobs(self, version: str, params: list[tuple[str, str]]) -> BackendAnswer:
        update = _values(params, "update_time")
        if update:
            parsed = unsigned(update[-1])
            if parsed is None:
                return self._bad_query(version, "op_handler_jobs")
            since = parsed
            if since >= self.cluster.last_update:
                warning = warning_entry(
                    f"No job changes since update_time[{since}]={local_iso(since)}", "op_handler_jobs"
                )
                return BackendAnswer(200, self._job_list(version, [], 0, warnings=dumps([warning])))
        fragments = [self._render(job, version) for job in self.cluster.live.values()]
        return BackendAnswer(200, self._job_list(version, fragments, self.cluster.last_update))

    def _jobs_state(self, version: str, params: list[tuple[str, str]]) -> BackendAnswer:
        live = self.cluster.live
        wanted = _values(params, "job_id")
        if wanted:
            ids: dict[int, None] = {}
            for text in wanted:
                job_id = self._job_id(text.strip())
                if job_id is None:
                    return self._bad_query(version, "op_handler_job_states", "Rejecting request. Failure parsing query")
                ids[job_id] = None
            jobs: list[Job] = []
            for i in ids:
                job = live.get(i)
                if job is not None and job.array_job_id == i:  # an array's id names all its tasks
                    jobs.extend(member for member in self.cluster.array_members(i) if member not in jobs)
                elif job is not None and job not in jobs:
                    jobs.append(job)
        else:
            jobs = list(live.values())
        text = (
            '{"jobs":['
            + ",".join(state_entry_json(job) for job in jobs)
            + '],"meta":'
            + self._meta(version, False)
            + ',"errors":[],"warnings":[]}'
        )
        return BackendAnswer(200, text)

    def _job_delete(self, version: str, job_id: int, params: list[tuple[str, str]]) -> BackendAnswer:
        sig = signal.SIGKILL
        sig_values = _values(params, "signal")
        if sig_values:
            parsed = _parse_signal(sig_values[-1])
            if parsed is None:
                return self._bad_query(version, "op_handler_job", f'Unknown signal "{sig_values[-1]}"')
            sig = signal.Signals(parsed) if parsed in signal.valid_signals() else signal.SIGKILL
        job = self.cluster.live.get(job_id)
        code = 0
        task_status: list[JsonDict] = []
        if job is not None and job.array_job_id == job_id:  # the array's id: every task of it
            for member in self.cluster.array_members(job_id):
                if member.finished and not member.is_array_meta:
                    task_status.append(_already_done(f"{job_id}_{member.array_task_id}", member.job_id))
            if not self.cluster.cancel_array(job_id, sig):
                code = 2021
        elif job is None:
            code = 2017
        elif not self.cluster.cancel(job, sig):
            code = 2021
        if not wire(version).cancel_answers_status:  # v0.0.40/41 answer openapi_resp, without status[]
            texts = {2017: "Invalid job id specified", 2021: "Job/step already completing or completed"}
            warnings = [warning_entry(f"JobId={job_id}: {texts[code]}", "_signal_job")] if code else []
            body = {"meta": self._meta_obj(version, False), "errors": [], "warnings": warnings}
            return BackendAnswer(200, dumps(body))
        status: list[JsonDict] = [] if code else task_status
        if code:
            text = "Invalid job id specified" if code == 2017 else "Job/step already completing or completed"
            status.append(
                {
                    "error": {"string": text, "code": code, "message": text},
                    "step_id": str(job_id),
                    "job_id": num(job_id) if code == 2021 else unset(),
                    "federation": {"sibling": ""},
                }
            )
        body = {"status": status, "meta": self._meta_obj(version, False), "errors": [], "warnings": []}
        return BackendAnswer(200, dumps(body))

    # ---------------------------------------------------------------- /slurmdb
    def _history_of(self, job_id: int) -> list[Job]:
        """``slurmdb/job/{id}``: the job, or for an array's id every record of the array."""
        job = self.cluster.jobs.get(job_id)
        if job is None:
            return []
        if job.array_job_id == job_id:
            return sorted((j for j in self.cluster.jobs.values() if j.array_job_id == job_id), key=lambda j: j.job_id)
        return [job]

    def _db_answer(
        self, version: str, jobs: list[Job], as_of: float, *, status: int = 200, errors: list[JsonDict] | None = None
    ) -> BackendAnswer:
        visible = [job for job in jobs if history_visible(job, as_of)]
        warnings = []
        if not visible:
            warnings.append(
                warning_entry(f"slurmdb_jobs_get(0x{id(self) & 0xFFFFFFFFFFFF:x}) found nothing", "_dump_jobs")
            )
        rendered = [
            history_job(job, version, self.cluster.cluster_name, as_of, comments=self.cluster.history_comments)
            for job in visible
        ]
        body = {"jobs": rendered, "meta": self._meta_obj(version, True), "errors": errors or [], "warnings": warnings}
        return BackendAnswer(status, dumps(body))

    def _db_jobs(self, version: str, params: list[tuple[str, str]]) -> BackendAnswer:
        as_of = time.time() - self.cluster.history_delay
        users = _values(params, "users")
        for user in users:
            if user == self.cluster.user:  # the jobs' owner (config job_user): an account of the cluster
                continue
            try:
                pwd.getpwnam(user)
            except KeyError:
                return self._errors(
                    422,
                    version,
                    [
                        error_entry(2166, f"Unable to resolve user: {user}", "#/users[0]/"),
                        error_entry(9000, "Rejecting request. Failure parsing query parameters", "op_handler_jobs"),
                    ],
                    slurmdb=True,
                )
        names = set(_values(params, "job_name"))
        window: list[int | None] = []
        for key in ("start_time", "end_time"):
            values = _values(params, key)
            if not values:
                window.append(None)
                continue
            text = values[-1].strip()
            relative = _RELATIVE_TIME.match(text)
            if relative:
                amount = int(relative.group(1) or 0) * _TIME_UNITS[relative.group(2) or "seconds"]
                window.append(int(time.time()) - amount)
            elif unsigned(text) is not None and wire(version).history_time_filter == "unix":
                window.append(unsigned(text))
            elif unsigned(text) is not None:  # like real 24.11: these versions refuse a Unix time here
                return self._errors(
                    422,
                    version,
                    [
                        error_entry(9202, f"Parsing of {text} for timestamp failed", f"#/{key}/"),
                        error_entry(9000, "Rejecting request. Failure parsing query parameters", "op_handler_jobs"),
                    ],
                    slurmdb=True,
                )
            else:
                return self._bad_query(version, "op_handler_jobs", slurmdb=True)
        start_time, end_time = window
        states = [s.strip().upper() for s in _values(params, "state")]
        errors: list[JsonDict] = []
        bad = [s for s in states if s not in BASE_STATES]
        if bad:
            errors.append(error_entry(9207, f'Unknown flag "{bad[0]}"', "#/state[0][0]/"))
            states = []
        jobs = []
        for job in self.cluster.jobs.values():
            if users and job.user not in users:
                continue
            if names and job.name not in names:
                continue
            ended = job.end is not None and job.end <= as_of
            if (start_time is not None or end_time is not None) and not (
                job.submit <= (end_time if end_time is not None else as_of)
                and (not ended or int(job.end or 0) >= (start_time or 0))
            ):
                continue
            if states:
                started = job.start is not None and job.start <= as_of
                current = job.state if ended else ("RUNNING" if started else "PENDING")
                if current not in states:
                    continue
                if (start_time is None or end_time is None) and ended:
                    continue  # without a window, slurmdbd looks at "now": finished jobs do not match
            jobs.append(job)
        return self._db_answer(version, jobs, as_of, status=500 if errors else 200, errors=errors)
