"""``ClusterRef``: the one description of a cluster, from the operator to the hook, the trigger and the poller.

Seven values say where a call goes and as whom: the connection, the project, region and cluster id,
the Slurm REST version, the service accounts to impersonate and the endpoint. They are checked once,
when the value is made (:mod:`~airflow_provider_slurmapi.slurm.api.validation`: they decide where the bearer
token is sent), and the value is frozen and hashable: the triggers of one cluster share a poller by it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Annotated, Any, TypedDict, Unpack, get_type_hints
from urllib.parse import urlsplit

from airflow_provider_slurmapi.slurm.api.api_versions import NEGOTIATE, check_api_version
from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError
from airflow_provider_slurmapi.slurm.api.validation import (
    check_cluster_id,
    check_endpoint,
    check_project_id,
    check_region,
    default_endpoint,
    default_host,
)

DEFAULT_CONN_ID = "google_cloud_default"
# Marks a cluster argument that operators and the sensor template (``Annotated[..., TEMPLATED]``).
TEMPLATED = "templated"


class ClusterArgs(TypedDict, total=False):
    """The cluster arguments, declared once: their names, types and which are templated.

    Operators, the sensor, the hooks and the trigger take these values under these names (and
    ``serialize()`` stores them), :data:`CLUSTER_ARG_NAMES` and :data:`CLUSTER_TEMPLATE_FIELDS` are
    read from here, and :class:`ClusterRef` checks them. ``None`` is "not given": the default.
    """

    region: Annotated[str | None, TEMPLATED]
    cluster_id: Annotated[str | None, TEMPLATED]
    project_id: Annotated[str | None, TEMPLATED]
    gcp_conn_id: Annotated[str | None, TEMPLATED]
    api_version: str | None
    impersonation_chain: Annotated[str | Sequence[str] | None, TEMPLATED]
    api_endpoint: str | None


def _declared() -> dict[str, bool]:
    """Each cluster argument, in its declared order, and whether it is templated."""
    hints = get_type_hints(ClusterArgs, include_extras=True)
    return {name: TEMPLATED in getattr(hint, "__metadata__", ()) for name, hint in hints.items()}


# The names under which operators, hooks and triggers take these values (and ``serialize()`` stores them).
CLUSTER_ARG_NAMES: tuple[str, ...] = tuple(_declared())
# The cluster arguments every operator and the sensor template.
CLUSTER_TEMPLATE_FIELDS: tuple[str, ...] = tuple(name for name, templated in _declared().items() if templated)


@dataclass(frozen=True, slots=True)
class ClusterRef:
    """Which training cluster, through which connection, endpoint and Slurm REST version.

    ``project_id`` ``None``: the connection's project (see :meth:`with_connection`). ``api_endpoint``
    ``None``: ``https://{region}-aiplatform.googleapis.com``. ``impersonation_chain`` is kept as a
    tuple (one account or a chain, the last one impersonated). Without an ``api_endpoint`` the URL's
    host is exactly ``{region}-aiplatform.googleapis.com``, whatever the inputs were.
    """

    project_id: str | None = None
    region: str = ""
    cluster_id: str = ""
    _: KW_ONLY
    gcp_conn_id: str = DEFAULT_CONN_ID
    api_version: str = NEGOTIATE
    impersonation_chain: tuple[str, ...] | None = None
    api_endpoint: str | None = None
    _url: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_region(self.region)
        check_cluster_id(self.cluster_id)
        if self.project_id in (None, ""):
            object.__setattr__(self, "project_id", None)
        else:
            check_project_id(self.project_id)
        if not isinstance(self.gcp_conn_id, str) or not self.gcp_conn_id:
            raise ConfigurationError(
                f"gcp_conn_id={self.gcp_conn_id!r} is not a connection id: give one, e.g. {DEFAULT_CONN_ID!r}."
            )
        check_api_version(self.api_version)
        object.__setattr__(self, "impersonation_chain", _chain(self.impersonation_chain))
        object.__setattr__(self, "api_endpoint", check_endpoint(self.api_endpoint) if self.api_endpoint else None)
        if self.project_id is not None:
            object.__setattr__(self, "_url", self._checked_url(self.project_id))

    def _checked_url(self, project_id: str) -> str:
        endpoint = self.endpoint
        expected_host = urlsplit(endpoint).hostname if self.api_endpoint else default_host(self.region)
        path = f"/v1beta1/{self.resource_name}:callSlurmRestApi"
        url = f"{endpoint}{path}"
        parts = urlsplit(url)
        if (
            parts.hostname != expected_host
            or f"{parts.scheme}://{parts.netloc}" != endpoint
            or parts.path != path
            or parts.query
            or parts.fragment
        ):
            raise ConfigurationError(
                f"The Slurm Job API URL for {self} would not go to {expected_host}; refusing to send anything."
            )
        return url

    def with_connection(self, *, project_id: str | None, api_endpoint: str | None) -> ClusterRef:
        """This cluster with what the connection adds where nothing was given: its project and endpoint.

        Checked like the rest: the connection's extra is as untrusted as any argument.
        """
        project = self.project_id or project_id
        if not project:
            raise ConfigurationError(
                f"project_id is not set and connection {self.gcp_conn_id!r} names no project: pass "
                "project_id=... or set the connection's project."
            )
        if not self.project_id:
            check_project_id(project, field=f"the project of connection {self.gcp_conn_id!r}")
        return dataclasses.replace(self, project_id=project, api_endpoint=self.api_endpoint or api_endpoint or None)

    @property
    def endpoint(self) -> str:
        """``scheme://host[:port]`` the calls go to."""
        return self.api_endpoint or default_endpoint(self.region)

    @property
    def resource_name(self) -> str:
        return f"projects/{self.project_id}/locations/{self.region}/modelDevelopmentClusters/{self.cluster_id}"

    @property
    def url(self) -> str:
        """The ``callSlurmRestApi`` URL, built and checked once, when the project is known."""
        if not self._url:
            raise ConfigurationError(
                f"project_id=None: no project is known for cluster {self.cluster_id!r}; pass project_id=... "
                "or set the connection's project."
            )
        return self._url

    def as_kwargs(self) -> dict[str, Any]:
        """The seven values under their documented argument names, as ``serialize()`` has always stored
        them: one account as a string, a chain as a list (what JSON keeps)."""
        values = {name: getattr(self, name) for name in CLUSTER_ARG_NAMES}
        chain = self.impersonation_chain
        values["impersonation_chain"] = None if chain is None else chain[0] if len(chain) == 1 else list(chain)
        return values

    def __str__(self) -> str:
        return f"project={self.project_id} region={self.region} cluster_id={self.cluster_id}"


def _chain(chain: object) -> tuple[str, ...] | None:
    """``None``, or the service accounts as a tuple: one account given as a string is a chain of one."""
    if chain is None or chain == "" or chain == ():
        return None
    accounts: Sequence[object] = (chain,) if isinstance(chain, str) else chain if isinstance(chain, Sequence) else ()
    if not accounts or not all(isinstance(a, str) and a.strip() for a in accounts):
        raise ConfigurationError(
            f"impersonation_chain={chain!r} is not a service account or a list of them: give e.g. "
            "'sa@my-project.iam.gserviceaccount.com' or a list whose last account is impersonated."
        )
    return tuple(str(a) for a in accounts)


def cluster_ref(cluster: ClusterRef | None = None, **args: Unpack[ClusterArgs]) -> ClusterRef:
    """``cluster``, or one made of the documented arguments; arguments given beside it override it."""
    given: dict[str, Any] = {name: value for name, value in args.items() if value is not None}
    unknown = set(given) - set(CLUSTER_ARG_NAMES)
    if unknown:
        raise TypeError(f"Not a cluster argument: {', '.join(sorted(unknown))}.")
    if cluster is None:
        if not given.get("region") or not given.get("cluster_id"):
            raise ConfigurationError(
                f"A cluster needs region and cluster_id (got region={args.get('region')!r}, "
                f"cluster_id={args.get('cluster_id')!r}): give the training cluster's region and id."
            )
        return ClusterRef(**given)
    return dataclasses.replace(cluster, **given) if given else cluster


__all__ = [
    "CLUSTER_ARG_NAMES",
    "CLUSTER_TEMPLATE_FIELDS",
    "TEMPLATED",
    "ClusterArgs",
    "ClusterRef",
    "cluster_ref",
]
