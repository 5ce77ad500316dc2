"""The keys a Slurm job description has, per REST API version, and the check that refuses any other.

Slurm answers a key it does not know (``timelimit`` for ``time_limit``) with only a warning, and runs
the job without it: a GPU job then runs with the partition's default limit and the task succeeds. So
every key of ``job``, at every depth the schema has (``time_limit.number``), is checked before anything
is sent, against Slurm's own job description of the version spoken: ``v0.0.4N_job_desc_msg`` and the
schemas it references, shipped verbatim in ``job_desc_schemas.json`` (made by
``scripts/extract_job_fields.py`` from slurmrestd's OpenAPI documents) and read on first use only, so a
DAG file that imports the operators pays nothing for it.

Only keys are judged here, never values: a value of a form the provider converts (``time_limit="2:00:00"``,
``environment={"A": "1"}``) is not descended into, and a value Slurm cannot read is Slurm's error (9202).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from airflow_provider_slurmapi.slurm.api.api_versions import NEGOTIATE, traits
from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError

SCHEMA_FILE = "job_desc_schemas.json"
_REF_PREFIX = "#/components/schemas/"
# At most this many unknown keys are named in one error (untrusted input may hold thousands).
MAX_NAMED = 10
# A node's fields are listed in the error when it has no more than this many (time_limit's three).
_LISTED_FIELDS = 12
# Keys Slurm once had or users bring from sbatch, with the fix instead of a guess.
_REFERENCE = " (see Slurm's job description: https://slurm.schedmd.com/rest_api.html)"
_MOVED: dict[str, str] = {
    "gres": "Slurm's REST API has no 'gres' field since v0.0.40; use tres_per_node='gres/gpu:8' "
    "(or tres_per_job / tres_per_task)",
    "exclusive": "give shared=['user'] (sbatch --exclusive=user) or shared=['none'] (--exclusive)",
    "oversubscribe": "give shared=['oversubscribe'] (sbatch --oversubscribe)",
}


@dataclass(frozen=True, slots=True)
class FieldNode:
    """One place of a job description: an object's fields, an array's items, or a value with no keys."""

    fields: dict[str, FieldNode] | None = None
    items: FieldNode | None = None

    @property
    def leaf(self) -> bool:
        return self.fields is None and self.items is None


@dataclass(frozen=True, slots=True)
class JobFields:
    """The job description of one API version (or of all, for :data:`NEGOTIATE`): its tree of keys."""

    version: str
    root: FieldNode
    # For each dotted path (``time_limit.number``), the versions that know it: to name them in an error.
    known_in: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __contains__(self, path: str) -> bool:
        node: FieldNode | None = self.root
        for part in path.split("."):
            if node is None or node.fields is None or part not in node.fields:
                return False
            node = node.fields[part]
        return True


@functools.cache
def _document() -> dict[str, Any]:
    text = resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def shipped_versions() -> tuple[str, ...]:
    """The API versions whose job description the package ships."""
    return tuple(_document()["versions"])


def _build(schemas: Mapping[str, Any], schema: Mapping[str, Any], seen: frozenset[str]) -> FieldNode:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
        name = ref[len(_REF_PREFIX) :]
        if name in seen:  # a schema that contains itself: no keys checked below that point
            return FieldNode()
        return _build(schemas, schemas[name], seen | {name})
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        return FieldNode(fields={key: _build(schemas, value, seen) for key, value in properties.items()})
    items = schema.get("items")
    if schema.get("type") == "array" and isinstance(items, Mapping):
        inner = _build(schemas, items, seen)
        return FieldNode() if inner.leaf else FieldNode(items=inner)
    return FieldNode()


def _paths(node: FieldNode, prefix: str = "") -> Iterator[str]:
    for key, child in (node.fields or {}).items():
        path = f"{prefix}{key}"
        yield path
        yield from _paths(child.items or child, f"{path}.")


def _merge(a: FieldNode, b: FieldNode) -> FieldNode:
    """The keys either node knows (for a check that must accept what any version takes)."""
    if a.fields is not None or b.fields is not None:
        fields = dict(a.fields or {})
        for key, child in (b.fields or {}).items():
            fields[key] = _merge(fields[key], child) if key in fields else child
        return FieldNode(fields=fields)
    if a.items is not None and b.items is not None:
        return FieldNode(items=_merge(a.items, b.items))
    return FieldNode(items=a.items or b.items)


@functools.cache
def _roots() -> dict[str, FieldNode]:
    versions: dict[str, Any] = _document()["versions"]
    return {
        version: _build(schemas, schemas[f"{version}_job_desc_msg"], frozenset())
        for version, schemas in versions.items()
    }


@functools.cache
def _known_in() -> dict[str, tuple[str, ...]]:
    known_in: dict[str, list[str]] = {}
    for version, node in _roots().items():
        for path in _paths(node):
            known_in.setdefault(path, []).append(version)
    return {path: tuple(names) for path, names in known_in.items()}


@functools.cache
def job_fields(api_version: str | None) -> JobFields:
    """The job description of ``api_version``; for ``None`` or ``"auto"``, the keys any shipped version knows.

    "auto" is the version not known yet (at parse time, or before the negotiation): a key no version
    knows is refused then, and the version spoken decides the rest once it is known.
    """
    roots = _roots()
    if api_version in (None, NEGOTIATE):
        merged = FieldNode(fields={})
        for node in roots.values():
            merged = _merge(merged, node)
        return JobFields(NEGOTIATE, merged, _known_in())
    name = traits(api_version).name
    if name not in roots:
        raise ConfigurationError(f"No job description of Slurm REST API {name} is shipped (only {', '.join(roots)}).")
    return JobFields(name, roots[name], _known_in())


def check_job_keys(job: Mapping[str, Any], api_version: str | None = None, *, where: str = "job") -> None:
    """Refuse a key of ONE job description that Slurm's job description of ``api_version`` does not have.

    Every depth the schema has is checked (``job.time_limit.numbr``); each unknown key is named with the
    nearest known one. ``where`` names the job in the message (``job``; ``job[1]`` for a component of a
    heterogeneous job). ``None`` or ``"auto"``: the version is not known yet, so only a key that no
    shipped version knows is refused. Raises :class:`ConfigurationError`; values are never shown
    (an ``environment`` under a misspelt key may hold secrets).
    """
    problems = list(_unknown(job, job_fields(api_version), where))
    if not problems:
        return
    shown = problems[:MAX_NAMED]
    more = f" ({len(problems) - MAX_NAMED} more unknown keys not named.)" if len(problems) > MAX_NAMED else ""
    raise ConfigurationError(
        " ".join(shown)
        + more
        + " Slurm ignores a key it does not know (with only a warning) and runs the job without it: "
        "correct the key or remove it."
    )


def _unknown(job: Mapping[str, Any], table: JobFields, where: str) -> Iterator[str]:
    yield from _walk(job, table.root, (), table, where)


def _walk(value: Any, node: FieldNode, path: tuple[str, ...], table: JobFields, where: str) -> Iterator[str]:
    if node.fields is not None and isinstance(value, Mapping):
        for key, child_value in value.items():
            if not isinstance(key, str):
                kind = type(key).__name__
                yield f"{where} key {_shown(key)} of type {kind} is not a Slurm job field: keys are strings."
                continue
            child = node.fields.get(key)
            if child is None:
                yield _unknown_message(key, path, node, table, where)
                continue
            yield from _walk(child_value, child, (*path, key), table, where)
    elif node.items is not None and isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _walk(item, node.items, (*path[:-1], f"{path[-1]}[{index}]") if path else path, table, where)


def _unknown_message(key: str, path: tuple[str, ...], node: FieldNode, table: JobFields, where: str) -> str:
    dotted = ".".join((*path, key))
    known = sorted(node.fields or {})
    said = f"{where} key {_shown(dotted)}" + (f" ({where}.{dotted})" if path else "") + " is not a Slurm job field"
    elsewhere = table.known_in.get(_plain(dotted), ())
    if table.version != NEGOTIATE and elsewhere:
        verb = "has" if len(elsewhere) == 1 else "have"
        said += f" in Slurm REST API {table.version} (only {', '.join(elsewhere)} {verb} it)"
    listed = f" ({where}.{'.'.join(path)} has {', '.join(known)}.)" if path and len(known) <= _LISTED_FIELDS else ""
    moved = _MOVED.get(key) if not path else None
    if moved:
        return f"{said}: {moved}."
    nearest = _nearest(key, known)
    if nearest is not None:
        return f"{said}; did you mean {'.'.join((*path, nearest))!r}?{listed}"
    return f"{said}, and no field is close{listed or _REFERENCE}."


def _plain(dotted: str) -> str:
    """A path without its list indexes (``crontab.line``), as :attr:`JobFields.known_in` keys them."""
    return ".".join(part.split("[", 1)[0] for part in dotted.split("."))


def _nearest(key: str, known: list[str]) -> str | None:
    import difflib  # only when a key is wrong

    lowered = key.lower().replace("-", "_")
    if lowered in known:
        return lowered
    found = difflib.get_close_matches(lowered, known, n=1, cutoff=0.6)
    return found[0] if found else None


def _shown(key: object) -> str:
    """A key as an error names it: quoted, cut short (a key from untrusted input may be huge)."""
    text = repr(key)
    return text if len(text) <= 80 else f"{text[:77]}..."


__all__ = ["MAX_NAMED", "SCHEMA_FILE", "FieldNode", "JobFields", "check_job_keys", "job_fields", "shipped_versions"]
