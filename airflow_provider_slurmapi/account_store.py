"""Where a deployment keeps the Slurm account its calls run as, and each cluster's API version, once learned.

The provider learns the caller's Linux account from its own jobs (the owner of a job whose submit
answer it read: see ``SlurmClient._learn_account``), never from an answer's ``meta.client.user``.
A later task (another process: a listing, a retry after a dead try) needs it before it has submitted
anything, so the account is kept in an Airflow Variable named for the connection and the cluster,
``slurmapi_account_<digest>`` (a digest of connection id, project, region and cluster id: one per
place the calls go, as the same connection may run as different accounts on different clusters).
The API version ``api_version="auto"`` negotiated with a cluster is kept the same way, in
``slurmapi_api_version_<digest>`` (of endpoint, project, region and cluster id), so the version is
negotiated once per deployment and cluster, not once per task process; a kept version the cluster no
longer serves is negotiated again by the client core.

Read as the tag key is (:mod:`airflow_provider_slurmapi.tag_secret`), and written through the ORM on
Airflow 2.10/2.11, through the Task SDK on 3.x. The core gets plain callbacks; it stays Airflow-free.

"Absent" means the Variable does not exist. Airflow's own ``Variable.get`` cannot say so: a secrets
backend that raises is logged and skipped on every version, the metastore's database error too on 2.x,
and on 3.x every execution API error becomes "not found". Deciding then as if nothing were kept lets a
look-up take another user's job for ours (issue 33). So the stores are read here, backend by backend,
a failed read is read again (:data:`READ_ATTEMPTS`), and a store that stays unreadable fails the try
with :class:`KeptValueUnreadableError`, naming the Variable and the fix, before anything is sent. A
failure to write is the caller's to log (the next task learns the value again).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError

log = logging.getLogger(__name__)

VARIABLE_PREFIX = "slurmapi_account_"
VERSION_VARIABLE_PREFIX = "slurmapi_api_version_"
_DESCRIPTION = (
    "The Slurm account the calls of one connection to one cluster run as (airflow-provider-slurmapi), learned "
    "from the owner of a job it submitted. Delete it if that connection now runs as another account."
)


_VERSION_DESCRIPTION = (
    "The Slurm REST API version negotiated with one cluster (airflow-provider-slurmapi, api_version auto). "
    "Renegotiated by itself when the cluster stops serving it; deleting it only costs one negotiation."
)


def _digest_name(prefix: str, *parts: str) -> str:
    where = "\x00".join(parts)
    return prefix + hashlib.sha256(where.encode()).hexdigest()[:16]


def variable_name(gcp_conn_id: str, project_id: str | None, region: str, cluster_id: str) -> str:
    """The Variable that keeps the account of ``gcp_conn_id`` on one cluster."""
    return _digest_name(VARIABLE_PREFIX, gcp_conn_id, project_id or "", region, cluster_id)


def version_variable_name(api_endpoint: str, project_id: str | None, region: str, cluster_id: str) -> str:
    """The Variable that keeps the API version negotiated with one cluster (behind one endpoint)."""
    return _digest_name(VERSION_VARIABLE_PREFIX, api_endpoint, project_id or "", region, cluster_id)


READ_ATTEMPTS = 4
"""Reads of a Variable store that fails before the try fails: after 0.5, 1 and 2 s (3.5 s in all), as for
the tag key: a restart of the API server or a dropped connection is waited out, a store that stays down
fails the try quickly with the fix (the task's retries then read again)."""
READ_BACKOFF_SECONDS = 0.5

_ACCOUNT_WHAT = "the Slurm account the calls of this connection to this cluster run as"
_ACCOUNT_FIX = (
    "or set the connection extra slurm_user to the Linux user the Slurm Job API runs the calls as (then this "
    "Variable is not read)"
)
_VERSION_WHAT = "the Slurm REST API version negotiated with this cluster"
_VERSION_FIX = "or set the task's api_version (e.g. 'v0.0.42') so that no version is negotiated or kept"


class KeptValueUnreadableError(ConfigurationError):
    """A Variable of the provider's could not be read; it may well hold a value, so nothing is decided as
    if it did not. Not permanent: the task's retries read again."""

    permanent = False


class _Unreadable(Exception):
    """One read failed (not "absent"): the store, and why."""


def load(name: str, what: str = _ACCOUNT_WHAT, fix: str = _ACCOUNT_FIX) -> str | None:
    """The value kept in Variable ``name`` (``what`` it keeps, for the error); ``None`` only if the Variable
    does not exist (or is blank). A failed read is tried again, then raises :class:`KeptValueUnreadableError`."""
    delay = READ_BACKOFF_SECONDS
    for attempt in range(1, READ_ATTEMPTS + 1):
        try:
            value = _read(name)
        except _Unreadable as exc:
            if attempt == READ_ATTEMPTS:
                raise KeptValueUnreadableError(
                    f"The Airflow Variable {name!r}, which keeps {what}, could not be read ({READ_ATTEMPTS} attempts): "
                    f"{exc}. Nothing was sent to the cluster: deciding as if nothing were kept could take another "
                    f"user's job for this task's. Fix the Variable store (API server, database or secrets backend), "
                    f"then retry the task; {fix}."
                ) from exc.__cause__
            log.warning("Reading the Airflow Variable %s failed (%s); trying again in %.1f s.", name, exc, delay)
            time.sleep(delay)
            delay *= 2
    text = value.strip() if value is not None else ""
    return text or None


def _read(name: str) -> str | None:
    """One read of Variable ``name`` in Airflow's order of stores: the value, ``None`` if none has it, or
    :class:`_Unreadable`."""
    if not AIRFLOW_V_3_0_PLUS:
        from airflow.configuration import ensure_secrets_loaded

        return _from_backends(name, ensure_secrets_loaded())  # the metastore raises on a database error
    from airflow.sdk.execution_time import task_runner
    from airflow.sdk.execution_time.secrets.execution_api import ExecutionAPISecretsBackend
    from airflow.sdk.execution_time.supervisor import ensure_secrets_backend_loaded

    # Outside a running task (a script, a test) there is no execution API to ask: what the other stores
    # hold (an AIRFLOW_VAR_ environment variable, a secrets backend) is all this process can know.
    in_task = getattr(task_runner, "SUPERVISOR_COMMS", None) is not None
    return _from_backends(
        name,
        ensure_secrets_backend_loaded(),
        (ExecutionAPISecretsBackend, (lambda: _read_execution_api(name)) if in_task else (lambda: None)),
    )


def _from_backends(
    name: str, backends: Sequence[Any], stand_in: tuple[type, Callable[[], str | None]] | None = None
) -> str | None:
    """The value from the first secrets backend that has it; ``stand_in`` (a backend class, a reader) reads
    in place of that backend (the execution API's, whose "absent" the Task SDK cannot tell from "could not
    be read"). A backend that raises is a failed read, never "absent"."""
    for backend in backends:
        try:
            if stand_in is not None and isinstance(backend, stand_in[0]):
                value = stand_in[1]()
            else:
                value = backend.get_variable(key=name)
        except _Unreadable:
            raise
        except Exception as exc:
            kind = type(backend).__name__
            raise _Unreadable(f"the secrets backend {kind} raised {type(exc).__name__}: {exc}") from exc
        if value is not None:
            return str(value)
    return None


def _read_execution_api(name: str) -> str | None:
    """Airflow 3: GetVariable asked of the supervisor directly. A ``VariableResult`` is the value, an
    ``ErrorResponse`` ``VARIABLE_NOT_FOUND`` (the API server's 404) is absent, anything else failed
    (the Task SDK's backend answers ``None`` for all of them). As the tag key reads (3.1 to 3.4)."""
    from airflow.sdk.exceptions import AirflowRuntimeError, ErrorType
    from airflow.sdk.execution_time import task_runner
    from airflow.sdk.execution_time.comms import ErrorResponse, GetVariable, VariableResult

    try:
        answer = task_runner.SUPERVISOR_COMMS.send(GetVariable(key=name))
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


def keep(name: str, account: str, description: str = _DESCRIPTION) -> None:
    """Keep ``account`` (or another value) in Variable ``name``."""
    if AIRFLOW_V_3_0_PLUS:
        from airflow.sdk import Variable as SdkVariable

        SdkVariable.set(name, account, description=description)
    else:
        from airflow.models import Variable

        Variable.set(name, account, description=description)


def account_store(where: Callable[[], str]) -> tuple[Callable[[], str | None], Callable[[str], None]]:
    """The core's two callbacks for the Variable named by ``where()`` (called late: it may read the connection)."""
    return (lambda: load(where())), (lambda account: keep(where(), account))


def version_store(where: Callable[[], str]) -> tuple[Callable[[], str | None], Callable[[str], None]]:
    """The core's two callbacks for the kept API version of the cluster whose Variable ``where()`` names."""
    return (lambda: load(where(), _VERSION_WHAT, _VERSION_FIX)), (
        lambda version: keep(where(), version, _VERSION_DESCRIPTION)
    )


__all__ = [
    "VARIABLE_PREFIX",
    "VERSION_VARIABLE_PREFIX",
    "KeptValueUnreadableError",
    "account_store",
    "keep",
    "load",
    "variable_name",
    "version_store",
    "version_variable_name",
]
