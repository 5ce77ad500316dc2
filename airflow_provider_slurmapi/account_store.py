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

Read and written as the tag key is (:mod:`airflow_provider_slurmapi.tag_secret`): through the ORM on
Airflow 2.10/2.11, through the Task SDK on 3.x. The core gets plain callbacks; it stays Airflow-free.
A failure to read or write is the caller's to log: the account is a help (the lookups also establish
it from the oldest job carrying a marker only this deployment can make), never a reason to fail.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS

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


def load(name: str) -> str | None:
    """The account kept in Variable ``name``; ``None`` if none is kept."""
    value: Any
    if AIRFLOW_V_3_0_PLUS:
        from airflow.sdk import Variable as SdkVariable

        value = SdkVariable.get(name, default=None)
    else:
        from airflow.models import Variable

        value = Variable.get(name, default_var=None)
    text = str(value).strip() if value is not None else ""
    return text or None


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
    return (lambda: load(where())), (lambda version: keep(where(), version, _VERSION_DESCRIPTION))


__all__ = [
    "VARIABLE_PREFIX",
    "VERSION_VARIABLE_PREFIX",
    "account_store",
    "keep",
    "load",
    "variable_name",
    "version_store",
    "version_variable_name",
]
