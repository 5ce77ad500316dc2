"""The secret that keys the task tags: random, made once, kept by the deployment, shared by every component.

The tag is public (every cluster user can read a job's ``comment``) and is an HMAC over ids that are
public too. So its key must be a secret of its own: keyed with another secret of the deployment
(Airflow's ``[api] secret_key``, a Fernet key), the tag would let anyone test guesses of that secret
offline. And it must never be a constant, a default or a per-process value: a key anyone can know
lets them pre-create a job that a retry would adopt; a key per process lets no retry recognise its
earlier job.

Where the key comes from, in this order:

1. ``[slurmapi] tag_secret`` (``AIRFLOW__SLURMAPI__TAG_SECRET``), when set: for deployments that
   manage their secrets themselves.
2. Else the Airflow Variable :data:`VARIABLE_KEY`, holding a random key that the first task to need
   it creates. Variables are the one store that every component which runs task code already reads,
   on every Airflow version, with no setup; the name contains ``secret``, so Airflow masks the value
   in the UI and in logs; a secrets backend may hold it instead (``AIRFLOW_VAR_SLURMAPI_TAG_SECRET``).

   - Airflow 2.10/2.11: read through the secrets backends, the metastore last; created through the ORM.
     Creation is an INSERT that the database's unique key on the variable's name settles: of two workers
     racing, one inserts and both read its value back.
   - Airflow 3.x: workers have no database; read through the secrets backends, the execution API asked
     directly, and created with the Task SDK's ``Variable.set``. That is an upsert, with no create-if-absent:
     every task that read "absent" before the first write lands writes a key of its own, and the last
     write wins. A key used before that last write would tag a job with a key the deployment no longer
     holds. So a created key carries the time it was made (``<unix seconds>.<random>``), and a key that
     may be that recent is not used until it has stood unchanged :data:`SETTLE_SECONDS` since this task
     first read it, on this task's clock (read again; a newer key starts the wait again). Every write of
     the race comes from a read made before the first write landed, so the race is over once the settle
     outlasts a write's way to the database. The stamp comes from the creator's clock: a key is "recent"
     when stamped less than :data:`SETTLE_SECONDS` + :data:`STAMP_SKEW_SECONDS` ago or in the future,
     and the first task to see one stand records it (Variable :data:`SETTLED_VARIABLE_KEY`), so that
     a key stamped by a fast clock costs one settle, not one per task until its stamp is reached.

   The key is created ONLY when every store answered "absent". Airflow's own ``Variable.get`` turns any
   read error into "absent" (a secrets backend that raises is logged and skipped; on 3.x every execution
   API error becomes ``None``), and writing then would replace the deployment's key. So a failed read is
   retried (:data:`READ_ATTEMPTS`) and then fails the try with :class:`TagKeyUnreadableError`.

A key that cannot be had (no Variable store reachable) raises :class:`ConfigurationError` saying how
to set one; nothing is guessed. A blank key, or one shorter than :data:`MIN_KEY_LENGTH`, from either
place is refused the same way. A process keeps the key once it has read it from the shared place.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS, conf
from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError

log = logging.getLogger(__name__)

VARIABLE_KEY = "slurmapi_tag_secret"
_FIX = (
    "Set [slurmapi] tag_secret (AIRFLOW__SLURMAPI__TAG_SECRET) to the same random secret of at least 32 "
    "characters on every Airflow component, or let the task read and create the Airflow Variable "
    f"{VARIABLE_KEY!r} (or provide it through a secrets backend: AIRFLOW_VAR_{VARIABLE_KEY.upper()})."
)

_lock = threading.Lock()
_cached: bytes | None = None

MIN_KEY_LENGTH = 32
"""The shortest key accepted, in characters. 32 characters hold 128 random bits when written in hex (and
192 in ``secrets.token_urlsafe``'s alphabet): below that an offline guess of the key from public tags
gets within reach. The key this module creates is 54 characters: the time it was made and 43 random ones (256 bits)."""

READ_ATTEMPTS = 4
"""Reads of a Variable store that fails before the try fails: after 0.5, 1 and 2 s (3.5 s in all), so a
restart of the API server or a dropped connection is waited out, and a store that stays down fails the
try quickly with the fix (the task's retries then try again)."""
READ_BACKOFF_SECONDS = 0.5

SETTLE_SECONDS = 20.0
"""Airflow 3: how long a created key must stand unchanged before a task uses it. The racing writes all
follow reads made before the first write landed; each reaches the database within one execution API
round trip (seconds under load), so they are over well before this. Only the tasks of the first-use wave
wait (this long, once, until one of them records the key settled); a key stamped more than this plus
:data:`STAMP_SKEW_SECONDS` ago, or one the deployment set, is used at once."""
SETTLE_ROUNDS = 5
"""Airflow 3: keys seen to replace one another before the try fails (its retry reads again)."""
STAMP_SKEW_SECONDS = 120.0
"""Airflow 3: how far the clock of the task that created a key may be behind this task's. A key is
used at once only when its stamp is older than :data:`SETTLE_SECONDS` plus this: a creator whose clock
is up to this far behind cannot make a key still being written look settled. Clocks synchronised by
NTP (every Google Cloud VM, Composer) differ by milliseconds; this leaves room for a host whose clock
drifted. A creator further behind than this may still race (``[slurmapi] tag_secret`` rules it out)."""
SETTLED_VARIABLE_KEY = "slurmapi_tag_secret_settled"
"""Airflow 3: the Variable in which the first task to see a recent key stand :data:`SETTLE_SECONDS`
records it (a digest, never the key), so that later tasks use it after one more read."""

_STAMPED = re.compile(r"(?P<made>[0-9]{10})\.[A-Za-z0-9_-]{43}")

_GENERATE = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"


class TagKeyUnreadableError(ConfigurationError):
    """The key's Variable store could not be read; the key may well exist, so none is created.

    Not permanent: the task's retries read again (a bad key, by contrast, is a plain
    :class:`ConfigurationError` that no retry fixes).
    """

    permanent = False


class _Unreadable(Exception):
    """One read failed (not "absent"): the store, and why."""


def tag_key() -> bytes:
    """The key of :func:`~airflow_provider_slurmapi.slurm.submit.tag.task_tag` in this deployment."""
    global _cached
    configured = conf.get("slurmapi", "tag_secret", fallback="") or ""
    if configured:
        return _checked(configured, "the option [slurmapi] tag_secret (AIRFLOW__SLURMAPI__TAG_SECRET)").encode()
    with _lock:
        if _cached is None:
            _cached = _shared_key().encode()
        return _cached


def forget_cached_key() -> None:
    """Drop this process's copy (tests; a deployment that replaced the Variable)."""
    global _cached
    with _lock:
        _cached = None


def _checked(value: str, source: str) -> str:
    """``value`` without surrounding blanks, refused when blank or shorter than :data:`MIN_KEY_LENGTH`."""
    key = value.strip()
    if not key:
        problem = "is empty" if not value else "holds only blanks"
    elif len(key) < MIN_KEY_LENGTH:
        problem = f"is {len(key)} characters long, shorter than the {MIN_KEY_LENGTH} a tag key needs"
    else:
        return key
    raise ConfigurationError(
        f"The key of the Slurm task tags, {source}, {problem}. Set it to a random secret of at least "
        f"{MIN_KEY_LENGTH} characters, the same on every Airflow component (for example the output of {_GENERATE})"
        + (
            f", or delete the Variable {VARIABLE_KEY!r} so that the next task creates one. Replacing a key that "
            "tagged jobs before makes their retries unable to find those jobs."
            if "Variable" in source
            else "."
        )
    )


def _shared_key() -> str:
    """The key from the Variable store: read (retrying a failed read), created only if it is absent."""
    source = f"the Airflow Variable {VARIABLE_KEY!r}"
    read, create = (_read_v3, _create_v3) if AIRFLOW_V_3_0_PLUS else (_read_v2, _create_v2)
    value = _read_with_retries(read)
    if value is None:
        log.info("Creating the Airflow Variable %s: the random key of this deployment's Slurm task tags.", VARIABLE_KEY)
        started = time.monotonic()
        try:
            create(_new_key())
        except Exception as exc:
            raise TagKeyUnreadableError(
                f"The Slurm task tags need a secret key; {source} does not exist and could not be created "
                f"({type(exc).__name__}: {exc}). {_FIX}"
            ) from exc
        took = time.monotonic() - started
        if AIRFLOW_V_3_0_PLUS and took > SETTLE_SECONDS / 2:
            log.warning(
                "Writing the Airflow Variable %s took %.1f s: so late a write may replace a key that other tasks "
                "already tag jobs with. Set [slurmapi] tag_secret to rule this out.",
                VARIABLE_KEY,
                took,
            )
        value = _read_with_retries(read)  # what the store holds: another worker may have written first
        if value is None:
            raise TagKeyUnreadableError(
                f"The Slurm task tags need a secret key; {source} was created but reads back as absent. {_FIX}"
            )
    if AIRFLOW_V_3_0_PLUS:
        value = _settled(value, read, record=_SettledRecord(_read_settled_v3, _write_settled_v3))
    return _checked(value, source)


class _SettledRecord:
    """Which recent key a task has already seen stand (Variable :data:`SETTLED_VARIABLE_KEY`): a digest of
    the key, so the record tells nothing of it. Best effort both ways: a record that cannot be read or
    written only costs a wait, never a key used too early."""

    def __init__(
        self, read: Callable[[], str | None] = lambda: None, write: Callable[[str], None] = lambda digest: None
    ) -> None:
        self._read, self._write = read, write

    @staticmethod
    def digest(value: str) -> str:
        return hashlib.sha256(b"slurmapi tag key settled\x00" + value.encode()).hexdigest()[:32]

    def holds(self, value: str) -> bool:
        try:
            return self._read() == self.digest(value)
        except Exception as exc:  # an unreadable record: settle as if there were none
            log.info("Could not read the Airflow Variable %s (%s): settling the key.", SETTLED_VARIABLE_KEY, exc)
            return False

    def keep(self, value: str) -> None:
        try:
            self._write(self.digest(value))
        except Exception as exc:  # the next tasks settle it again
            log.info("Could not write the Airflow Variable %s: %s", SETTLED_VARIABLE_KEY, exc)


def _settled(
    value: str,
    read: Callable[[], str | None],
    *,
    record: _SettledRecord | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """``value``, once it may no longer be replaced (Airflow 3's upsert: a task that read "absent" before
    ``value`` was written may still be writing its own): at once when its stamp is older than
    :data:`SETTLE_SECONDS` + :data:`STAMP_SKEW_SECONDS` on this ``clock``, or ``record`` says another
    task saw it stand; else once it has stood unchanged :data:`SETTLE_SECONDS` since this read, which
    holds whatever the creator's clock said (a stamp in the future counts as made now)."""
    record = record or _SettledRecord()
    for _ in range(SETTLE_ROUNDS):
        made = _made_at(value)
        if made is None:
            return value  # set by the deployment (or made before keys carried their time): nothing races it
        age = clock() - made
        if age >= SETTLE_SECONDS + STAMP_SKEW_SECONDS or record.holds(value):
            return value
        log.info(
            "The Airflow Variable %s holds a key stamped %s; waiting %.1f s for other first uses to finish writing.",
            VARIABLE_KEY,
            f"{age:.1f} s ago" if age >= 0 else f"{-age:.1f} s ahead of this clock",
            SETTLE_SECONDS,
        )
        sleep(SETTLE_SECONDS)
        now = _read_with_retries(read)
        if now == value:
            record.keep(value)
            return value
        if now is None:
            raise TagKeyUnreadableError(
                f"The Airflow Variable {VARIABLE_KEY!r}, which keeps the key of the Slurm task tags, was deleted "
                f"while its first uses settled; no job was tagged with it. {_FIX}"
            )
        log.info("Another task wrote the Airflow Variable %s meanwhile: using its key.", VARIABLE_KEY)
        value = now
    raise TagKeyUnreadableError(
        f"The Airflow Variable {VARIABLE_KEY!r}, which keeps the key of the Slurm task tags, was replaced "
        f"{SETTLE_ROUNDS} times while this task waited for it to settle; no job was tagged. Retry the task; "
        f"if something keeps rewriting the Variable, stop it, or {_FIX[0].lower()}{_FIX[1:]}"
    )


def _made_at(value: str) -> float | None:
    """When a key this module created was made (its prefix); ``None`` for any other value."""
    match = _STAMPED.fullmatch(value.strip())
    return float(match["made"]) if match else None


def _read_with_retries(read: Callable[[], str | None]) -> str | None:
    """``read()``: the value, or ``None`` only when the store said the Variable does not exist."""
    delay = READ_BACKOFF_SECONDS
    for attempt in range(1, READ_ATTEMPTS + 1):
        try:
            return read()
        except _Unreadable as exc:
            if attempt == READ_ATTEMPTS:
                raise TagKeyUnreadableError(
                    f"The Airflow Variable {VARIABLE_KEY!r}, which keeps the key of the Slurm task tags, could not "
                    f"be read ({READ_ATTEMPTS} attempts): {exc}. No new key is made while the existing one may be "
                    f"there. Fix the Variable store (API server, database or secrets backend), then retry the task; "
                    f"or {_FIX[0].lower()}{_FIX[1:]}"
                ) from exc.__cause__
            log.warning(
                "Reading the Airflow Variable %s failed (%s); trying again in %.1f s.", VARIABLE_KEY, exc, delay
            )
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")  # pragma: no cover


def _from_backends(
    backends: Sequence[Any],
    stand_in: tuple[type, Callable[[], str | None]] | None = None,
    key: str = VARIABLE_KEY,
) -> str | None:
    """The value from the first secrets backend that has it, in Airflow's order; ``stand_in`` (a backend
    class, a reader) reads in place of that backend (the one of Airflow's own Variables, whose "absent"
    Airflow cannot tell from "could not be read"). A backend that raises is a failed read, never "absent"
    (Airflow logs it and moves on, which would let a key held there be replaced)."""
    for backend in backends:
        name = type(backend).__name__
        try:
            if stand_in is not None and isinstance(backend, stand_in[0]):
                value = stand_in[1]()
            else:
                value = backend.get_variable(key=key)
        except _Unreadable:
            raise
        except Exception as exc:
            raise _Unreadable(f"the secrets backend {name} raised {type(exc).__name__}: {exc}") from exc
        if value is not None:
            return str(value)
    return None


def _new_key(made: float | None = None) -> str:
    """``<unix seconds>.<256 random bits>``: the time (``made``, default now) lets a task tell a key still
    being settled (Airflow 3). Rounded up, so that no wait is cut short by the fraction of a second."""
    return f"{math.ceil(time.time() if made is None else made):010d}.{secrets.token_urlsafe(32)}"


def _read_v3(key: str = VARIABLE_KEY) -> str | None:
    """Airflow 3: the secrets backends of a worker, with the execution API asked directly.

    The Task SDK's ``Variable.get`` (and its ``ExecutionAPISecretsBackend``) answers ``None`` for any
    error, so the GetVariable message is sent here and its answer read: a ``VariableResult`` is the value,
    an ``ErrorResponse`` of type ``VARIABLE_NOT_FOUND`` means absent (the API server answered 404), and
    anything else (another ``ErrorResponse``, or the ``AirflowRuntimeError`` the supervisor's
    ``API_SERVER_ERROR`` becomes) is a failed read. The same on 3.1.8, 3.2.2, 3.3.2 and 3.4.0b2.
    """
    from airflow.sdk.execution_time import task_runner
    from airflow.sdk.execution_time.secrets.execution_api import ExecutionAPISecretsBackend
    from airflow.sdk.execution_time.supervisor import ensure_secrets_backend_loaded

    if getattr(task_runner, "SUPERVISOR_COMMS", None) is None:
        raise ConfigurationError(
            f"The Slurm task tags need a secret key, and the Airflow Variable {VARIABLE_KEY!r} that keeps it can "
            f"only be read inside a running task on Airflow 3. {_FIX}"
        )
    return _from_backends(
        ensure_secrets_backend_loaded(), (ExecutionAPISecretsBackend, lambda: _read_execution_api(key)), key
    )


def _read_execution_api(key: str = VARIABLE_KEY) -> str | None:
    from airflow.sdk.exceptions import AirflowRuntimeError, ErrorType
    from airflow.sdk.execution_time import task_runner
    from airflow.sdk.execution_time.comms import ErrorResponse, GetVariable, VariableResult

    try:
        answer = task_runner.SUPERVISOR_COMMS.send(GetVariable(key=key))
    except AirflowRuntimeError as exc:
        raise _Unreadable(f"the execution API answered {exc.error.error.value}") from exc
    except Exception as exc:
        raise _Unreadable(f"asking the execution API failed: {type(exc).__name__}") from exc
    if isinstance(answer, VariableResult):
        return "" if answer.value is None else str(answer.value)
    if isinstance(answer, ErrorResponse) and answer.error == ErrorType.VARIABLE_NOT_FOUND:
        return None
    kind = answer.error.value if isinstance(answer, ErrorResponse) else type(answer).__name__
    raise _Unreadable(f"the execution API answered {kind}")


def _create_v3(key: str) -> None:
    from airflow.sdk import Variable

    Variable.set(VARIABLE_KEY, key, description=_DESCRIPTION)


def _read_settled_v3() -> str | None:
    return _read_v3(SETTLED_VARIABLE_KEY)


def _write_settled_v3(digest: str) -> None:
    from airflow.sdk import Variable

    Variable.set(SETTLED_VARIABLE_KEY, digest, description=_SETTLED_DESCRIPTION)


def _read_v2() -> str | None:
    """Airflow 2.10/2.11: the secrets backends in Airflow's order; the metastore's answers a database
    error with an exception, which is a failed read here (``Variable.get`` would log it and say absent)."""
    from airflow.configuration import ensure_secrets_loaded

    return _from_backends(ensure_secrets_loaded())


def _create_v2(key: str) -> None:
    """INSERT; of two workers racing, the database's unique key on the name lets one win, and both
    read its value back. It never replaces a key: the row exists, the INSERT fails."""
    from airflow.models import Variable
    from airflow.utils.session import create_session
    from sqlalchemy.exc import IntegrityError

    try:
        with create_session() as session:
            session.add(Variable(key=VARIABLE_KEY, val=key, description=_DESCRIPTION))
    except IntegrityError:
        log.info("Another process created the Airflow Variable %s first: using its key.", VARIABLE_KEY)


_DESCRIPTION = (
    "Random key of the Slurm task tags (airflow-provider-slurmapi), created once. Keep it secret; "
    "replacing it makes retries unable to recognise jobs submitted before."
)

_SETTLED_DESCRIPTION = (
    f"Digest of the Slurm task tag key in {VARIABLE_KEY!r} once a task saw it stand unchanged "
    "(airflow-provider-slurmapi): later tasks need not wait for it. Safe to delete."
)

__all__ = ["MIN_KEY_LENGTH", "VARIABLE_KEY", "TagKeyUnreadableError", "forget_cached_key", "tag_key"]
