"""The layers of the core, read from the source (ast): what may import what under ``slurm/``.

- ``api``: the transport's side (envelope, paths, versions, retry, errors, plans, plain values);
- ``jobs``: the job model and everything that reads jobs (readers, states, arrays, accounting, watch,
  a record's ``Extra``): it may read ``api``, never the submit side;
- ``submit``: what a submit sends (spec, sbatch, time forms, tag, the wrapped script): it may read
  ``api`` and ``jobs``;
- ``node``: the supervisor that runs on the cluster's node, which the provider never imports;
- the client facade (and the reaper over it) on top, free to read all three.

A module sits where its sub-package says; in the flat layout (before the split) :data:`FLAT_SIDES`
says it. No runtime import circle among the core's modules, no circle among its sub-packages, no
Airflow import in the core, and nothing of the provider outside the core imported by it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import airflow_provider_slurmapi
from airflow_provider_slurmapi.slurm.submit.job_output import SUPERVISOR_SOURCE

PACKAGE = Path(airflow_provider_slurmapi.__file__).parent
CORE = PACKAGE / "slurm"
PREFIX = "airflow_provider_slurmapi.slurm"
RANK = {"api": 0, "jobs": 1, "submit": 2, "top": 3}
NODE = "node"
FLAT_SIDES = {
    "api": {"errors", "api_versions", "validation", "cluster", "paths", "envelope", "retry", "plans", "values"},
    "jobs": {"controls", "extra", "states", "array", "job", "readers", "accounting", "watch"},
    "submit": {"slurm_time", "tag", "spec", "sbatch", "job_output"},
    NODE: {"job_supervisor"},
    "top": {"client", "reaper"},
}


@dataclass(frozen=True)
class Edge:
    """One import in a core module: ``target`` is a dotted module name, ``typing_only`` under TYPE_CHECKING."""

    source: str
    target: str
    typing_only: bool
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _core_modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(CORE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, typing_only: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import under ``tree``, at any depth, and whether it sits under ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, typing_only
        elif isinstance(child, ast.If) and _is_type_checking(child):
            yield from _imports(ast.Module(body=child.body, type_ignores=[]), True)
            yield from _imports(ast.Module(body=child.orelse, type_ignores=[]), typing_only)
        else:
            yield from _imports(child, typing_only)


def _edges(name: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    edges = []
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node, typing_only in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # "from package import module" names a module; "from module import name" names the module
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        edges += [Edge(name, target, typing_only, node.lineno) for target in dict.fromkeys(targets)]
    return edges


def _all_edges() -> list[Edge]:
    modules = _core_modules()
    return [edge for name, path in modules.items() for edge in _edges(name, path, modules)]


def _side(module: str) -> str:
    """The layer of a core module: its sub-package, else (flat layout) its row in FLAT_SIDES."""
    if module == PREFIX:
        return "top"
    rest = module.removeprefix(f"{PREFIX}.").split(".")
    subpackages = {path.parent.name for path in CORE.glob("*/__init__.py")}
    if len(rest) > 1 or rest[0] in subpackages:
        assert rest[0] in RANK or rest[0] == NODE, f"{module}: a sub-package test_layers.py does not rank"
        return rest[0]
    if subpackages:
        return "top"  # the facade and the thin re-exports of old import paths
    sides = [side for side, names in FLAT_SIDES.items() if rest[0] in names]
    assert sides, f"{module} is in no layer: add it to FLAT_SIDES in {__file__} (api, jobs, submit, node or top)"
    return sides[0]


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` (its nodes in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _core_graph(*, with_typing: bool) -> dict[str, set[str]]:
    modules = _core_modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for edge in _all_edges():
        if edge.target in modules and edge.target != edge.source and (with_typing or not edge.typing_only):
            graph[edge.source].add(edge.target)
    return graph


def _within_core(edge: Edge) -> bool:
    return edge.target == PREFIX or edge.target.startswith(f"{PREFIX}.")


def test_the_core_has_no_import_circle_at_run_time() -> None:
    assert _circle(_core_graph(with_typing=False)) is None


def test_the_core_sub_packages_form_no_circle() -> None:
    packages: dict[str, set[str]] = {}
    for source, targets in _core_graph(with_typing=True).items():
        if source == PREFIX:
            continue
        side = _side(source)
        packages.setdefault(side, set()).update(
            _side(target) for target in targets if target != PREFIX and _side(target) != side
        )
    assert _circle(packages) is None


def test_each_layer_imports_only_its_own_and_lower_layers() -> None:
    """Reading a job (``Extra`` too) never pulls in the submit side; the transport reads no job."""
    wrong = []
    for edge in _all_edges():
        if not _within_core(edge) or edge.target == PREFIX or edge.source == PREFIX:
            continue
        source, target = _side(edge.source), _side(edge.target)
        if source == NODE or target == NODE:
            continue  # the supervisor has its own tests below
        if RANK[target] > RANK[source]:
            wrong.append(f"{edge.source}:{edge.line} ({source}) imports {edge.target} ({target})")
    assert wrong == []


def test_the_node_supervisor_is_never_imported_by_the_provider() -> None:
    """The supervisor runs on the node, as one file: the provider reads its text, never imports it."""
    supervisor = [name for name in _core_modules() if _side(name) == NODE and not name.endswith("__init__")]
    assert supervisor
    package_modules = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
    importers = [
        f"{edge.source}:{edge.line}"
        for name, path in package_modules.items()
        for edge in _edges(name, path, package_modules)
        if edge.target in supervisor
    ]
    assert importers == []


def test_the_embedded_supervisor_imports_nothing_of_the_provider() -> None:
    tree = ast.parse(SUPERVISOR_SOURCE)
    modules = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    modules += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    assert [name for name in modules if name and name.startswith("airflow_provider_slurmapi")] == []
    assert "def strip_controls(" in SUPERVISOR_SOURCE  # inlined, not lost


def test_the_core_imports_neither_airflow_nor_the_provider_above_it() -> None:
    wrong = [
        f"{edge.source}:{edge.line} imports {edge.target}"
        for edge in _all_edges()
        if edge.target.split(".")[0] == "airflow"
        or (edge.target.startswith("airflow_provider_slurmapi") and not _within_core(edge))
    ]
    assert wrong == []
