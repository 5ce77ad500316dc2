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

   - Airflow 2.10/2.11: read and created through the ORM. Creation is an INSERT that the database's
     unique key on the variable's name settles: of two workers racing, one inserts and both read its
     value back.
   - Airflow 3.x: workers have no database; read and created through the Task SDK (the execution
     API). Its ``Variable.set`` is an upsert, so the key is written and then read back, and the value
     read back is the one used: only two first-ever uses within the same few milliseconds can still
     tag with different keys (then a retry of the loser cannot find its job by tag; on 3.3+ it still
     finds it by the job id kept in the task state store).

A key that cannot be had (no Variable store reachable) raises :class:`ConfigurationError` saying how
to set one; nothing is guessed. A process keeps the key once it has read it from the shared place.
"""

from __future__ import annotations

import logging
import secrets
import threading
from typing import Any

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS, conf
from airflow_provider_slurmapi.slurm.errors import ConfigurationError

log = logging.getLogger(__name__)

VARIABLE_KEY = "slurmapi_tag_secret"
_FIX = (
    "Set [slurmapi] tag_secret (AIRFLOW__SLURMAPI__TAG_SECRET) to the same long random secret on every "
    "Airflow component, or let the task read and create the Airflow Variable "
    f"{VARIABLE_KEY!r} (or provide it through a secrets backend: AIRFLOW_VAR_{VARIABLE_KEY.upper()})."
)

_lock = threading.Lock()
_cached: bytes | None = None


def tag_key() -> bytes:
    """The key of :func:`~airflow_provider_slurmapi.slurm.tag.task_tag` in this deployment."""
    global _cached
    own = (conf.get("slurmapi", "tag_secret", fallback="") or "").strip()
    if own:
        return own.encode()
    with _lock:
        if _cached is None:
            _cached = _shared_key().encode()
        return _cached


def forget_cached_key() -> None:
    """Drop this process's copy (tests; a deployment that replaced the Variable)."""
    global _cached
    with _lock:
        _cached = None


def _shared_key() -> str:
    try:
        value = _read_or_create_v3() if AIRFLOW_V_3_0_PLUS else _read_or_create_v2()
    except ConfigurationError:
        raise
    except Exception as exc:
        raise ConfigurationError(
            f"The Slurm task tags need a secret key, and the Airflow Variable {VARIABLE_KEY!r} that keeps it "
            f"could not be read or created ({type(exc).__name__}: {exc}). {_FIX}"
        ) from exc
    if not value.strip():
        raise ConfigurationError(f"The Airflow Variable {VARIABLE_KEY!r} is empty. {_FIX}")
    return value.strip()


def _new_key() -> str:
    return secrets.token_urlsafe(32)


def _read_or_create_v3() -> str:
    """Through the Task SDK: read; if absent, write a random key and use what is read back."""
    from airflow.sdk import Variable

    value: Any = Variable.get(VARIABLE_KEY, default=None)
    if value is None:
        log.info("Creating the Airflow Variable %s: the random key of this deployment's Slurm task tags.", VARIABLE_KEY)
        Variable.set(VARIABLE_KEY, _new_key(), description=_DESCRIPTION)
        value = Variable.get(VARIABLE_KEY)
    return str(value)


def _read_or_create_v2() -> str:
    """Through the ORM: read; if absent, INSERT a random key (the unique name settles a race) and read back."""
    from airflow.models import Variable
    from sqlalchemy.exc import IntegrityError

    value: Any = Variable.get(VARIABLE_KEY, default_var=None)
    if value is not None:
        return str(value)
    from airflow.utils.session import create_session

    log.info("Creating the Airflow Variable %s: the random key of this deployment's Slurm task tags.", VARIABLE_KEY)
    try:
        with create_session() as session:
            session.add(Variable(key=VARIABLE_KEY, val=_new_key(), description=_DESCRIPTION))
    except IntegrityError:
        log.info("Another process created the Airflow Variable %s first: using its key.", VARIABLE_KEY)
    return str(Variable.get(VARIABLE_KEY))


_DESCRIPTION = (
    "Random key of the Slurm task tags (airflow-provider-slurmapi), created once. Keep it secret; "
    "replacing it makes retries unable to recognise jobs submitted before."
)

__all__ = ["VARIABLE_KEY", "forget_cached_key", "tag_key"]
