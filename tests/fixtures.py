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
