"""Access to the real Slurm 24.11 answers in ``shared/slurm-24.11-responses`` (beside the clone)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SLURMAPI_SHARED_DIR", REPO.parent / "shared")).resolve()
RESPONSES = SHARED / "slurm-24.11-responses"


def require_shared() -> None:
    if not RESPONSES.is_dir():
        pytest.fail(f"Slurm fixtures not found at {RESPONSES}: set SLURMAPI_SHARED_DIR to the shared/ folder.")


def fixture_body(name: str) -> dict[str, Any]:
    """The JSON body of a saved answer (``meta`` removed nowhere: as Slurm sent it)."""
    require_shared()
    return json.loads((RESPONSES / f"{name}.json").read_text())


def fixture_text(name: str) -> str:
    require_shared()
    return (RESPONSES / f"{name}.body.txt").read_text()


def fixture_status(name: str) -> int:
    require_shared()
    for line in (RESPONSES / f"{name}.meta").read_text().splitlines():
        if line.startswith("http_status:"):
            return int(line.split(":", 1)[1])
    raise AssertionError(f"no http_status in {name}.meta")


def fixture_names(pattern: str = "*") -> list[str]:
    require_shared()
    return sorted(p.name[: -len(".meta")] for p in RESPONSES.glob(f"{pattern}.meta"))


def type_name(value: Any) -> str:
    """The JSON type of a value, as OpenAPI names it; the contract tests compare answers by it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


OPENAPI = SHARED / "slurm-openapi"
# Which spec file holds each API version (v0.0.41 only exists in slurmrestd 24.11's generated one).
OPENAPI_FILES = {
    "v0.0.40": "slurm-openapi-v0.0.40.json",
    "v0.0.41": "slurmrestd-24.11.5-generated-v0.0.40-42.json",
    "v0.0.42": "slurm-openapi-v0.0.42.json",
    "v0.0.43": "slurm-openapi-v0.0.43.json",
    "v0.0.44": "slurm-openapi-v0.0.44.json",
}


def openapi_spec(version: str) -> dict[str, Any]:
    """The OpenAPI document that describes ``version``'s answers."""
    require_shared()
    return json.loads((OPENAPI / OPENAPI_FILES[version]).read_text())


def schema_example(version: str, schema: str) -> Any:
    """A typical answer of ``{version}_{schema}`` built from the OpenAPI document: every property present,
    one element per array, the first value of each enum (``job_state: ["PENDING"]``), ``1`` for integers."""
    schemas = openapi_spec(version)["components"]["schemas"]

    def build(node: dict[str, Any], seen: frozenset[str]) -> Any:
        ref = node.get("$ref")
        if ref:
            name = ref.rsplit("/", 1)[-1]
            return None if name in seen or len(seen) > 12 else build(schemas[name], seen | {name})
        for combinator in ("allOf", "oneOf", "anyOf"):
            if node.get(combinator):
                return build(node[combinator][0], seen)
        if node.get("enum"):
            return node["enum"][0]
        kind = node.get("type")
        if kind == "object" or "properties" in node:
            built = {key: build(value, seen) for key, value in (node.get("properties") or {}).items()}
            return {key: value for key, value in built.items() if value is not None}
        if kind == "array":
            item = build(node.get("items") or {}, seen)
            return [] if item is None else [item]
        return {"integer": 1, "number": 1.5, "boolean": True, "string": "x"}.get(str(kind))

    return build(schemas[f"{version}_{schema}"], frozenset())
