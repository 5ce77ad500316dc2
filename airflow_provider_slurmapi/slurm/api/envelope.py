"""The ``callSlurmRestApi`` envelope: building requests and reading answers.

Every Slurm call is one ``POST .../modelDevelopmentClusters/{cluster}:callSlurmRestApi`` whose JSON
body names the Slurm method, path and body. The answer carries Slurm's HTTP status and Slurm's body,
either as a JSON *string* in ``body`` (the English documentation) or as an object in
``structuredBody`` (the Portuguese one); both are read here. Slurm answers some errors in plain text,
which is kept as :attr:`SlurmResponse.text`.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from airflow_provider_slurmapi.slurm.api.api_versions import served_by_text
from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef
from airflow_provider_slurmapi.slurm.api.errors import (
    ClusterNotFoundError,
    ConfigurationError,
    EnvelopeError,
    InvalidArgumentError,
    MalformedResponseError,
    PermissionDeniedError,
    RequestTooLargeError,
    SlurmError,
    TransientApiError,
    UnauthenticatedError,
)
from airflow_provider_slurmapi.slurm.api.values import as_int, clean_text, preview

log = logging.getLogger(__name__)

HttpMethod = Literal["GET", "POST", "DELETE"]
MAX_REQUEST_BYTES = 1024 * 1024
RUN_PERMISSION = "aiplatform.googleapis.com/modelDevelopmentClusters.run"
TRANSIENT_HTTP_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def encode_request(method: HttpMethod, path: str, body: Mapping[str, Any] | None = None) -> bytes:
    """The envelope request as bytes, refused here if it would be 1 MB or more."""
    if method not in ("GET", "POST", "DELETE"):
        raise ConfigurationError(f"method={method!r} is not one of GET, POST, DELETE.")
    if not path.startswith(("/slurm/", "/slurmdb/")):
        raise ConfigurationError(f"path={path!r} must start with /slurm/ or /slurmdb/.")
    request: dict[str, Any] = {"method": f"HTTP_METHOD_{method}", "path": path}
    if body is not None:
        request["body"] = body
    data = json.dumps(request, separators=(",", ":")).encode()
    if len(data) >= MAX_REQUEST_BYTES:
        raise RequestTooLargeError(
            f"The request to {path} is {len(data):,} bytes; the Slurm Job API refuses requests of 1 MB "
            f"({MAX_REQUEST_BYTES:,} bytes) or more. Nothing was sent. Put the script on the cluster's "
            "shared storage and submit a short wrapper that calls it (e.g. 'script=\"#!/bin/bash\\n"
            "exec /shared/train.sh\\n\"')."
        )
    return data


@dataclass(slots=True)
class SlurmResponse:
    """Slurm's answer to one call: its HTTP status, and its body as JSON or as plain text."""

    method: str
    path: str
    status: int
    body: dict[str, Any] | None = None
    text: str | None = None

    @property
    def errors(self) -> list[dict[str, Any]]:
        """Slurm's ``errors[]``, each as a dict; odd entries (a bare string, a number) are wrapped, not dropped."""
        return _entries(self.body, "errors")

    @property
    def warnings(self) -> list[dict[str, Any]]:
        """Slurm's ``warnings[]``, each as a dict, read like :attr:`errors`."""
        return _entries(self.body, "warnings")

    def has_error(self, error_number: int) -> bool:
        return any(as_int(e.get("error_number")) == error_number for e in self.errors)

    def warning_messages(self) -> list[str]:
        return [_entry_text(w, "description") or preview(w) for w in self.warnings]

    def error_summary(self) -> str:
        """Slurm's errors as ``2000 Invalid partition name specified (Batch job submission failed)``."""
        texts = [describe_slurm_error(e) for e in self.errors]
        if not texts and self.text:
            texts = [_shorten(clean_text(self.text.strip()))]
        return "; ".join(texts) or "no error text"

    @property
    def path_not_served(self) -> bool:
        """slurmrestd's plain-text 404 for a path it does not serve (e.g. an API version it no longer speaks)."""
        return self.status == 404 and bool(self.text) and "Unable find requested URL" in str(self.text)

    def raise_for_errors(self) -> SlurmResponse:
        """Raise :class:`SlurmError` if Slurm reported errors or an HTTP error status."""
        if self.errors or self.status >= 400:
            message = f"Slurm answered HTTP {self.status} to {self.method} {self.path}: {self.error_summary()}"
            if self.path_not_served:
                message += (
                    ". The cluster does not serve this path: check api_version, or leave it unset to "
                    f"negotiate ({served_by_text()})."
                )
            raise SlurmError(message, http_status=self.status, path=self.path, errors=self.errors, text=self.text)
        return self


def _entries(body: Any, key: str) -> list[dict[str, Any]]:
    """``body[key]`` as a list of dicts: Slurm sends a list of objects; anything else is wrapped."""
    value = body.get(key) if isinstance(body, Mapping) else None
    if value is None or value is False or (isinstance(value, list | dict | str) and not value):
        return []
    items = value if isinstance(value, list) else [value]
    entries: list[dict[str, Any]] = []
    for item in items[:_MAX_ENTRIES]:
        if isinstance(item, Mapping):
            entries.append(dict(item))
        elif isinstance(item, str):
            entries.append({"description": clean_text(item)})
        else:
            entries.append({"description": preview(item)})
    return entries


def _entry_text(entry: Mapping[str, Any], key: str) -> str:
    value = entry.get(key)
    if value is None or isinstance(value, bool):
        return ""
    if isinstance(value, str):
        return _shorten(clean_text(value).strip())
    return preview(value)


def _shorten(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


_MAX_ENTRIES = 20


def describe_slurm_error(error: Mapping[str, Any]) -> str:
    """One of Slurm's ``errors[]`` as ``NUMBER ERROR (DESCRIPTION)``, whatever the entry holds."""
    if not isinstance(error, Mapping):
        return preview(error)
    number = as_int(error.get("error_number"))
    text = _entry_text(error, "error")
    description = _entry_text(error, "description")
    head = " ".join(str(p) for p in (number, text) if p not in (None, ""))
    if description and description != text:
        return f"{head} ({description})" if head else description
    return head or description or preview(error)


class _TooDeep(ValueError):
    """JSON nested deeper than Python's parser can follow."""


def _load_json(data: str | bytes) -> Any:
    """``json.loads`` that fails only with ``ValueError``.

    Nesting too deep for the parser is a :class:`_TooDeep`; an integer of thousands of digits (which
    Python refuses to convert) is read as an infinite float, so that only its own field is refused
    by the readers, not the whole answer.
    """
    with _collector_paused():
        return _decode(data)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while an answer is decoded.

    Decoding allocates a container per record (15,000 for a ``jobs/state`` answer of 5,000 jobs), all of
    them reachable, so a collection in the middle can free none of them; but it is triggered by their
    number, and in a triggerer holding thousands of triggers a full collection walks the whole heap:
    about 150 ms with the event loop blocked, every few rounds. The collector runs again afterwards, as
    usual, once the answer's objects have mostly been freed.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _decode(data: str | bytes) -> Any:
    try:
        return json.loads(data)
    except RecursionError:
        raise _TooDeep("JSON nested too deeply") from None
    except ValueError as exc:
        if "integer string conversion" not in str(exc):
            raise
    try:
        return json.loads(data, parse_int=_bounded_int)
    except RecursionError:
        raise _TooDeep("JSON nested too deeply") from None


def _bounded_int(digits: str) -> int | float:
    if len(digits) <= 40:
        return int(digits)
    return -math.inf if digits.startswith("-") else math.inf


def parse_envelope(http_status: int, content: bytes, *, method: str, path: str, cluster: ClusterRef) -> SlurmResponse:
    """Read the HTTP answer of one envelope call; raise the matching error for envelope failures.

    Anything that is not the envelope's shape (not JSON, nested too deep, a ``status`` that is not
    an HTTP status, a ``structuredBody`` that is not an object) is a :class:`MalformedResponseError`.
    """
    if http_status != 200:
        raise envelope_error(http_status, content, path=path, cluster=cluster)
    try:
        payload = _load_json(content)
    except ValueError as exc:
        raise MalformedResponseError(
            f"The Slurm Job API answered {method} {path} with something that is not JSON ({exc}; "
            f"{_preview(content)!r}): check api_endpoint ({cluster.endpoint})."
        ) from None
    if not isinstance(payload, dict) or "status" not in payload:
        raise MalformedResponseError(
            f"The Slurm Job API answered {method} {path} without the envelope's 'status' field "
            f"({_preview(content)!r}): check api_endpoint ({cluster.endpoint})."
        )
    status = as_int(payload["status"])
    if status is None or not 100 <= status <= 599:
        raise MalformedResponseError(
            f"The envelope's 'status' is not an HTTP status ({preview(payload['status'])}): check api_endpoint "
            f"({cluster.endpoint})."
        )
    response = SlurmResponse(method=method, path=path, status=status)
    structured = payload.get("structuredBody")
    raw_body = payload.get("body")
    if structured is not None and not isinstance(structured, dict):
        raise MalformedResponseError(
            f"The envelope's 'structuredBody' for {method} {path} is not a JSON object "
            f"({preview(structured)}): check api_endpoint ({cluster.endpoint})."
        )
    if raw_body is not None and not isinstance(raw_body, str | dict):
        raise MalformedResponseError(
            f"The envelope's 'body' for {method} {path} is neither Slurm's JSON text nor an object "
            f"({preview(raw_body)}): check api_endpoint ({cluster.endpoint})."
        )
    if isinstance(structured, dict):
        response.body = structured
    elif isinstance(raw_body, dict):
        response.body = raw_body
    elif isinstance(raw_body, str) and raw_body.strip():
        try:
            parsed = _load_json(raw_body)
        except _TooDeep:
            raise MalformedResponseError(
                f"Slurm's answer to {method} {path} is JSON nested too deeply to read "
                f"({_preview(raw_body.encode('utf-8', 'replace'))!r})."
            ) from None
        except ValueError:
            response.text = raw_body
        else:
            if isinstance(parsed, dict):
                response.body = parsed
            else:
                response.text = raw_body
    return response


def envelope_error(http_status: int, content: bytes, *, path: str, cluster: ClusterRef) -> EnvelopeError:
    """Map a non-200 envelope answer to an error that says what to fix."""
    status_name, api_message = "", ""
    try:
        payload = _load_json(content)
        error = payload.get("error") if isinstance(payload, dict) else None
        if isinstance(error, dict):
            status_name = _entry_text(error, "status")
            api_message = _entry_text(error, "message")
    except ValueError:
        api_message = _preview(content)
    said = f"{http_status} {status_name}".strip() + (f": {api_message}" if api_message else "")
    kwargs: dict[str, Any] = {"http_status": http_status, "status": status_name, "api_message": api_message}
    if http_status == 401 or status_name == "UNAUTHENTICATED":
        return UnauthenticatedError(
            f"The Slurm Job API refused the credentials ({said}). Check the Airflow Google Cloud "
            "connection (key, impersonation_chain) and that its token has not expired.",
            **kwargs,
        )
    if http_status == 403 or status_name == "PERMISSION_DENIED":
        return PermissionDeniedError(
            f"Permission denied on {cluster.resource_name} ({said}). The connection's principal needs "
            f"the permission {RUN_PERMISSION} (e.g. role roles/aiplatform.user) on project "
            f"{cluster.project_id}.",
            **kwargs,
        )
    if status_name == "NOT_FOUND" or (http_status == 404 and not status_name):
        return ClusterNotFoundError(
            f"No training cluster at {cluster} ({said}). Check project_id, region and cluster_id "
            f"(endpoint {cluster.endpoint}).",
            **kwargs,
        )
    if http_status in TRANSIENT_HTTP_STATUSES or status_name in ("UNAVAILABLE", "RESOURCE_EXHAUSTED"):
        return TransientApiError(
            f"The Slurm Job API is unavailable for {cluster} ({said}); retry after a wait.", **kwargs
        )
    if http_status == 400 or status_name == "INVALID_ARGUMENT":
        return InvalidArgumentError(
            f"The Slurm Job API rejected the request for path {path} ({said}). Check the path and "
            f"api_version, and that the request is under 1 MB.",
            **kwargs,
        )
    return EnvelopeError(f"The Slurm Job API answered {said} for path {path}.", **kwargs)


def _preview(content: bytes, limit: int = 200) -> str:
    text = clean_text(content.decode("utf-8", "replace")).strip()
    return text if len(text) <= limit else text[:limit] + "..."
