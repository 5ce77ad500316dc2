"""Run one DAG of a DAG file with ``dag.test()`` in a fresh process; print its outcome as one JSON line.

The lineage tests need a process of their own: OpenLineage reads its transport once per process,
and ``--without-openlineage`` must hide the provider from the very first import of Airflow:

    python -m tests.dag_runs.lineage_runner DAG_FILE DAG_KEY [--without-openlineage]
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import json
import runpy
import sys
from collections.abc import Iterator
from typing import Any

HIDDEN = ("openlineage", "airflow.providers.openlineage")
HIDDEN_DISTRIBUTIONS = ("apache-airflow-providers-openlineage", "openlineage-")


def _hidden(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in HIDDEN)


class _WithoutOpenLineage(importlib.abc.MetaPathFinder):
    """Python's path finder, minus the OpenLineage packages: their modules are not found and their
    distributions (so their entry points: the provider, its plugin) are not listed, as where they
    are not installed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if _hidden(fullname) or not hasattr(self.inner, "find_spec"):
            return None
        return self.inner.find_spec(fullname, path, target)

    def find_distributions(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        # The importlib_metadata backport removes the stdlib path finder's own find_distributions.
        inner = getattr(self.inner, "find_distributions", None)
        for dist in inner(*args, **kwargs) if inner is not None else ():
            name = str(dist.metadata["Name"] or "").lower().replace("_", "-")
            if not name.startswith(HIDDEN_DISTRIBUTIONS):
                yield dist

    def invalidate_caches(self) -> None:
        if hasattr(self.inner, "invalidate_caches"):
            self.inner.invalidate_caches()


def _hide_openlineage() -> None:
    with contextlib.suppress(ImportError):  # the backport Airflow reads entry points with adds its own finder
        import importlib_metadata  # noqa: F401
    sys.meta_path[:] = [
        _WithoutOpenLineage(finder)
        if finder is importlib.machinery.PathFinder or hasattr(finder, "find_distributions")
        else finder
        for finder in sys.meta_path
    ]


def main(dag_file: str, dag_key: str, without_openlineage: bool) -> int:
    if without_openlineage:
        _hide_openlineage()
    namespace = runpy.run_path(dag_file, run_name="dagfile_lineage")
    dag = namespace["DAGS"][dag_key]
    run = dag.test()
    from airflow.utils.session import create_session

    with create_session() as session:
        tasks = {ti.task_id: str(ti.state) for ti in run.get_task_instances(session=session)}
    loaded = sorted(name for name in sys.modules if _hidden(name))
    sys.stdout.flush()
    print("DAG-RESULT " + json.dumps({"state": str(run.state), "tasks": tasks, "openlineage_modules": loaded}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], "--without-openlineage" in sys.argv[3:]))
