"""Strict checks of what names a cluster, an endpoint and a job, before anything is sent.

``region``, ``project_id``, ``cluster_id`` and ``job_id`` are often templated from ``dag_run.conf``,
which anyone who may trigger a DAG controls. They end up in the URL that carries the bearer token:
a region such as ``us-central1.attacker.example#`` would move the host, a project id with ``?`` or
``#`` would rewrite the path. So each is held to Google's (or Slurm's) own format here, before any
credential is fetched, and the endpoint may carry nothing but a scheme, a host and a port.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import SplitResult, urlsplit

from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError

# Google Cloud regions: ``us-central1``, ``europe-west4``, ``northamerica-northeast1``.
_REGION_RE = re.compile(r"[a-z]{2,20}-[a-z]{2,20}[1-9][0-9]?")
_ZONE_RE = re.compile(r"([a-z]{2,20}-[a-z]{2,20}[1-9][0-9]?)-[a-z]")
# Project ids: 6-30 characters, a lowercase letter first, no trailing hyphen.
_PROJECT_ID = r"[a-z][a-z0-9-]{4,28}[a-z0-9]"
# Domain-scoped project ids (``example.com:my-project``): a DNS name, a colon, a project id. Neither
# part can hold ``/ ? # % @ \`` or a ``..`` segment, so the URL path cannot be steered.
_DNS_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DOMAIN = rf"(?:{_DNS_LABEL}\.)+[a-z]{{2,63}}"
_PROJECT_RE = re.compile(rf"{_PROJECT_ID}|[1-9][0-9]{{0,19}}|{_DOMAIN}:{_PROJECT_ID}")
MAX_PROJECT_LENGTH = 100
# Vertex AI resource ids: a lowercase letter first, then lowercase letters, digits and hyphens.
_CLUSTER_RE = re.compile(r"[a-z][a-z0-9-]{0,62}")
# Slurm job ids are unsigned 32-bit numbers; 0 is "no job".
MAX_JOB_ID = 2**32 - 1

# Only these may be reached over plain http: the token never leaves the machine.
_LOOPBACK_NAMES = frozenset({"localhost"})
_HOST_RE = re.compile(rf"(?:{_DNS_LABEL}\.)*{_DNS_LABEL}\.?")
_ENDPOINT_EXAMPLE = (
    "Use e.g. 'https://us-central1-aiplatform.googleapis.com' or, for the local emulator, 'http://127.0.0.1:8080'."
)


def _shown(value: object, limit: int = 80) -> str:
    """``repr`` of a value, cut short: values from ``dag_run.conf`` may be long."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def check_region(region: object) -> str:
    """A Google Cloud region such as ``us-central1``; nothing that could move the API host."""
    if isinstance(region, str) and _REGION_RE.fullmatch(region):
        return region
    hint = ""
    zone = _ZONE_RE.fullmatch(region) if isinstance(region, str) else None
    if zone:
        hint = f" {region!r} is a zone; its region is {zone.group(1)!r}."
    elif region == "global":
        hint = " Training clusters live in a region, not in 'global'."
    raise ConfigurationError(
        f"region={_shown(region)} is not a Google Cloud region: give your training cluster's region, "
        f"lowercase, e.g. 'us-central1', 'europe-west4' or 'northamerica-northeast1'.{hint}"
    )


def check_project_id(project_id: object, *, field: str = "project_id") -> str:
    """A project id (``my-project``), project number (``123456789012``) or ``example.com:my-project``."""
    if isinstance(project_id, str) and len(project_id) <= MAX_PROJECT_LENGTH and _PROJECT_RE.fullmatch(project_id):
        return project_id
    raise ConfigurationError(
        f"{field}={_shown(project_id)} is not a Google Cloud project id: give 6-30 lowercase letters, digits "
        "or hyphens starting with a letter (e.g. 'my-project'), a project number (digits), or a "
        "domain-scoped id such as 'example.com:my-project'."
    )


def check_cluster_id(cluster_id: object) -> str:
    """A training cluster's id as Vertex AI writes resource ids: ``my-training-cluster``."""
    if isinstance(cluster_id, str) and _CLUSTER_RE.fullmatch(cluster_id):
        return cluster_id
    raise ConfigurationError(
        f"cluster_id={_shown(cluster_id)} is not a training cluster id: give the cluster's id as the "
        "console shows it, 1-63 lowercase letters, digits or hyphens starting with a letter "
        "(e.g. 'my-training-cluster'), not its full resource name."
    )


def check_job_id(value: object, *, field: str = "job_id", hint: str = "") -> int:
    """A Slurm job id as an int: a positive whole number in ASCII digits, nothing else.

    ``5_3`` (Slurm reads it as array task 3 of job 5), ``1.2`` (a step), ``7.9``, ``True`` and
    non-ASCII digits such as ``"٣"`` are refused rather than rounded or reinterpreted.
    """
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():
            number = int(text)
    if number is None or not 1 <= number <= MAX_JOB_ID:
        raise ConfigurationError(
            f"{field}={_shown(value)} is not a Slurm job id: give a positive whole number such as 4242 "
            "(ASCII digits only; array tasks like '5_3' and steps like '5.1' are not job ids)."
            + (f" {hint}" if hint else "")
        )
    return number


def default_endpoint(region: str) -> str:
    return f"https://{check_region(region)}-aiplatform.googleapis.com"


def default_host(region: str) -> str:
    """The only host a call may go to when no ``api_endpoint`` is set."""
    return f"{check_region(region)}-aiplatform.googleapis.com"


def check_endpoint(endpoint: object) -> str:
    """Return ``scheme://host[:port]`` without a trailing slash, or refuse the endpoint.

    Refused: userinfo (``requests`` would swap the bearer token for Basic auth, and the password
    would show in errors and in a trigger's serialized form), a query, a fragment, a path, and plain
    ``http://`` to anything but a loopback IP literal or ``localhost`` (a token must never cross a
    network in clear; other names, even ``localhost.localdomain``, resolve through DNS). Error
    messages show only the scheme and host, never what was removed.
    """
    scheme, authority, rest = _split_endpoint_text(endpoint)
    origin = f"{scheme}://{authority}"
    try:
        parts = urlsplit(f"{scheme}://{rest}")
    except ValueError:  # e.g. a bracketed host that is not an IPv6 address
        raise ConfigurationError(f"api_endpoint={origin!r} is not a URL. {_ENDPOINT_EXAMPLE}") from None
    _check_endpoint_parts(parts, origin, authority, rest)
    return f"{parts.scheme}://{parts.netloc}"


def _split_endpoint_text(endpoint: object) -> tuple[str, str, str]:
    """The checks on the raw text, before any parsing: a URL at all, an http(s) scheme, no credentials,
    only printable ASCII. Returns the scheme, the authority and what follows ``://``."""
    if not isinstance(endpoint, str) or "://" not in endpoint:
        shown = _shown(_without_secrets(endpoint)) if isinstance(endpoint, str) else f"<a {type(endpoint).__name__}>"
        raise ConfigurationError(f"api_endpoint={shown} is not a URL. {_ENDPOINT_EXAMPLE}")
    scheme, _, rest = endpoint.partition("://")
    if scheme.lower() not in ("http", "https"):
        raise ConfigurationError(f"api_endpoint={_shown(_without_secrets(endpoint))} is not a URL. {_ENDPOINT_EXAMPLE}")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in authority:
        host = authority.rpartition("@")[2]
        raise ConfigurationError(
            f"api_endpoint='{scheme}://<credentials removed>@{host}...' carries credentials before the host. "
            "Remove them: the Google Cloud connection supplies the credentials (a bearer token). "
            f"{_ENDPOINT_EXAMPLE}"
        )
    if not endpoint.isascii() or any(c.isspace() or not c.isprintable() or c in "\\%" for c in endpoint):
        raise ConfigurationError(
            f"api_endpoint={_shown(f'{scheme}://{authority}')}... holds spaces, control or non-ASCII characters, "
            f"'%' or '\\'. {_ENDPOINT_EXAMPLE}"
        )
    return scheme, authority, rest


def _check_endpoint_parts(parts: SplitResult, origin: str, authority: str, rest: str) -> None:
    """The checks on the parsed URL: only scheme, host and port; a valid host; plain http to loopback only."""
    if "?" in rest or "#" in rest:
        raise ConfigurationError(
            f"api_endpoint={origin!r} has a query or a fragment (removed from this message): give only "
            f"scheme, host and port. {_ENDPOINT_EXAMPLE}"
        )
    if parts.path not in ("", "/"):
        raise ConfigurationError(
            f"api_endpoint={origin!r} has a path ({_shown(parts.path)}): give only scheme, host and port; "
            f"the provider adds '/v1beta1/projects/...'. {_ENDPOINT_EXAMPLE}"
        )
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not host or port == -1 or not _valid_host(host, authority):
        raise ConfigurationError(f"api_endpoint={origin!r} is not a URL. {_ENDPOINT_EXAMPLE}")
    if parts.scheme == "http" and not _is_loopback(host):
        raise ConfigurationError(
            f"api_endpoint={origin!r} uses plain http to a host that is not a loopback address; the bearer token "
            "would travel unencrypted. Use https, or http only to 127.0.0.1 (127.0.0.0/8), [::1] or localhost."
        )


def _without_secrets(text: str) -> str:
    """An endpoint as it may be shown: no query or fragment, nothing before an '@'."""
    text = re.split(r"[?#]", text, maxsplit=1)[0]
    return "<credentials removed>@" + text.rpartition("@")[2] if "@" in text else text


def _valid_host(host: str, authority: str) -> bool:
    if authority.startswith("["):
        try:
            return ipaddress.ip_address(host).version == 6
        except ValueError:
            return False
    return bool(_HOST_RE.fullmatch(host))


def _is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
