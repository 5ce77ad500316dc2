"""The `callSlurmRestApi` envelope: request validation, Google-style errors, answer encoding.

Kept apart from the HTTP server so the envelope's rules (what is INVALID_ARGUMENT, how a Slurm
answer is wrapped in `body` or `structuredBody`) read in one place.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .slurm_api import BackendAnswer

if TYPE_CHECKING:  # config imports locations, which imports this module
    from .config import EnvelopeMode

MAX_REQUEST_BYTES = 1_048_576
# The front end reads the envelope with protobuf's JSON parser, which refuses nesting deeper than 100.
MAX_NESTING = 100
METHODS = {"HTTP_METHOD_GET": "GET", "HTTP_METHOD_POST": "POST", "HTTP_METHOD_DELETE": "DELETE"}
REQUEST_FIELDS = {"method", "path", "body"}
RUN_PERMISSION = "aiplatform.googleapis.com/modelDevelopmentClusters.run"
_JOB_PATH = re.compile(r"^/slurm/[^/]+/job/[^/?]+/?$")


class GoogleFrontEndError(Exception):
    """An error the Google front end answers itself, before Slurm is reached: a Google API error
    (`{"error": {"code", "message", "status"}}`, see :func:`google_error`)."""

    def __init__(self, code: int, status: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.message = message


def google_error(code: int, status: str, message: str) -> web.Response:
    """A Google API error response: `{"error": {"code", "message", "status"}}` with that HTTP code."""
    body = {"error": {"code": code, "message": message, "status": status}}
    headers = {"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/"'} if code == 401 else None
    return web.json_response(body, status=code, headers=headers)


def unauthenticated() -> GoogleFrontEndError:
    return GoogleFrontEndError(
        401,
        "UNAUTHENTICATED",
        "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or "
        "other valid authentication credential. See "
        "https://developers.google.com/identity/sign-in/web/devconsole-project.",
    )


@dataclass(frozen=True)
class SlurmCall:
    """A validated envelope request."""

    method: str  # GET / POST / DELETE
    path: str
    body: Any

    @property
    def kind(self) -> str:
        """The fault/counter category of the call (see faults.MATCHES)."""
        base = self.path.split("?", 1)[0]
        if base.startswith("/slurmdb/"):
            return "slurmdb"
        if self.method == "POST" and base.rstrip("/").endswith("/job/submit"):
            return "submit"
        if base.rstrip("/").endswith("/jobs/state"):
            return "jobs-state"
        if base.rstrip("/").endswith("/jobs"):
            return "jobs"
        if base.rstrip("/").endswith("/partitions"):
            return "partitions"
        if _JOB_PATH.match(base):
            return "job-delete" if self.method == "DELETE" else "job-get"
        return "other"


def parse_request(raw: bytes, *, reject_query_strings: bool) -> SlurmCall:
    """Check an envelope request body the way the Google front end would; raises GoogleFrontEndError."""
    if len(raw) >= MAX_REQUEST_BYTES:
        raise GoogleFrontEndError(
            400, "INVALID_ARGUMENT", f"Request payload size exceeds the limit: {MAX_REQUEST_BYTES} bytes."
        )
    too_deep = GoogleFrontEndError(
        400, "INVALID_ARGUMENT", f"Invalid JSON payload received. Message nesting is deeper than {MAX_NESTING}."
    )
    try:
        data = json.loads(raw) if raw.strip() else {}
    except RecursionError:
        raise too_deep from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise GoogleFrontEndError(400, "INVALID_ARGUMENT", f"Invalid JSON payload received. {exc}") from exc
    if nesting(data) > MAX_NESTING:
        raise too_deep
    where = not_text(data)
    if where is not None:
        place, value = where
        at = _SURROGATE.search(value).start()  # type: ignore[union-attr]  # not_text found one
        shown = ("..." if at > 40 else "") + value[max(0, at - 40) : at + 40] + ("..." if len(value) > at + 40 else "")
        raise GoogleFrontEndError(
            400,
            "INVALID_ARGUMENT",
            f"Invalid JSON payload received. Invalid UTF-8 string at '{place}': "
            f"{json.dumps(shown)} holds a lone surrogate, which is not text.",
        )
    if not isinstance(data, dict):
        raise GoogleFrontEndError(
            400, "INVALID_ARGUMENT", "Invalid JSON payload received. Root element must be a message."
        )
    for key in data:
        if key not in REQUEST_FIELDS:
            raise GoogleFrontEndError(
                400, "INVALID_ARGUMENT", f'Invalid JSON payload received. Unknown name "{key}": Cannot find field.'
            )
    method = data.get("method")
    if method not in METHODS:
        raise GoogleFrontEndError(
            400,
            "INVALID_ARGUMENT",
            f"Invalid value at 'method' (type.googleapis.com/google.cloud.aiplatform."
            f"v1beta1.CallSlurmRestApiRequest.HttpMethod), {json.dumps(method)}; expected one "
            f"of {', '.join(METHODS)}",
        )
    path = data.get("path")
    if not isinstance(path, str) or not (path.startswith("/slurm/") or path.startswith("/slurmdb/")):
        raise GoogleFrontEndError(
            400,
            "INVALID_ARGUMENT",
            f"Invalid path {json.dumps(path)}: it must be a Slurm REST path starting with /slurm/ or /slurmdb/.",
        )
    if reject_query_strings and "?" in path:
        raise GoogleFrontEndError(
            400, "INVALID_ARGUMENT", f"Invalid path {json.dumps(path)}: query strings are not supported."
        )
    body = data.get("body")
    if body is not None and not isinstance(body, dict):
        raise GoogleFrontEndError(
            400, "INVALID_ARGUMENT", "Invalid JSON payload received. 'body' must be a JSON object."
        )
    verb = METHODS[method]
    return SlurmCall(verb, path, body if verb == "POST" else None)


_SURROGATE = re.compile("[\ud800-\udfff]")


def not_text(value: Any) -> tuple[str, str] | None:
    """The first string (or object key) that is not Unicode text, as (its place, e.g.
    ``body.job.environment[1]``, the string); ``None`` if there is none.

    JSON may spell a lone surrogate (``"\\ud800"``) and Python reads it, but it is no character: the
    front end reads the envelope as a protocol buffer, whose strings must be UTF-8, and refuses it.
    Caught here, it never reaches a path the emulator opens or a file it writes.
    """
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        place, item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return place, item
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                if _SURROGATE.search(key):
                    return f"{place}.{key}".lstrip("."), key
                stack.append((f"{place}.{key}".lstrip("."), child))
        elif isinstance(item, list):
            stack.extend((f"{place}[{index}]", child) for index, child in reversed(list(enumerate(item))))
    return None


def nesting(value: Any) -> int:
    """How deep lists and objects nest in a parsed JSON value, counted without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            depth += 1
            deepest = max(deepest, depth)
            stack.extend((child, depth) for child in item if isinstance(child, dict | list))
    return deepest


def encode_answer(resp: BackendAnswer, mode: EnvelopeMode) -> str:
    """Wrap a Slurm answer: `body` as a string, or `structuredBody` as an object if it is JSON."""
    if mode == "structured" and resp.is_json:
        return f'{{"status":{resp.status},"structuredBody":{resp.text}}}'
    return f'{{"status":{resp.status},"body":{json.dumps(resp.text)}}}'
