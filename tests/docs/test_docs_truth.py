"""The docs held true by the code: every argument of every public operator, sensor, trigger and task
decorator is a row of its how-to page's argument table with its real default, every row names a real
argument; the same for every connection extra the hooks read (``docs/connection.md``) and every
``[slurmapi]`` option the code reads (``docs/reference/configuration.md``).

The truth is read from the code, never from a list kept here: the public classes from the provider
info's modules, their arguments from ``inspect.signature`` of each ``__init__`` of this package's
classes in their MRO (the cluster arguments of ``ClusterArgs``, the watch settings of ``WatchSettings``
included), the extras from where the hooks read them (``_get_field("...")``) and their defaults from a
real hook built with and without each, the options from the ``conf.get*("slurmapi", ...)`` calls.

Out of scope, by rule: the arguments of Airflow's own classes in the MRO (``BaseOperator``,
``BaseSensorOperator``, ``DecoratedOperator``, ``ResumableJobMixin``: ``task_id``, ``retries``,
``poke_interval``...) and Google's own connection extras (``key_path``, ``scope``...): each page says so.

A Default cell starts with the default as Python writes it, in backticks (```None```, ```30```,
```"auto"```), or ``required``; for an extra, with the value the hook uses when it is unset (``none``
where that is nothing); any words after it are free.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

DOCS = REPO / "docs"
PACKAGE = REPO / "airflow_provider_slurmapi"
PACKAGE_NAME = "airflow_provider_slurmapi"
REQUIRED = inspect.Parameter.empty

# Values a class is built with, to read what it does with an argument left out (the cluster arguments'
# defaults, whether it takes a watch setting): only what the classes cannot be built without.
SAMPLES: dict[str, Any] = {
    "region": "us-central1",
    "cluster_id": "docs-cluster",
    "job_id": 4242,
    "python_callable": lambda: "#!/bin/bash\ntrue\n",
    # The submit operator needs exactly one of script and script_path, both optional in its signature.
    "script": "#!/bin/bash\ntrue\n",
}
# What @task.slurm refuses of the submit operator's arguments, and why (each refusal is checked below).
DECORATOR_REFUSES = {
    "script": "the decorated function returns the script",
    "script_path": "the decorated function returns the script (or a .sh path of the DAG folder)",
}


# -- what the code says --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Argument:
    name: str
    default: Any  # REQUIRED when there is none
    declared_in: str


def _ours(klass: type) -> bool:
    return klass.__module__.startswith(PACKAGE_NAME)


def declared_arguments(cls: type) -> dict[str, Argument]:
    """Every named argument of ``cls``'s ``__init__`` and of this package's bases in its MRO, with the
    default of the first class that declares it (the one a caller meets). Airflow's classes are skipped."""
    found: dict[str, Argument] = {}
    for klass in cls.__mro__:
        if not _ours(klass) or "__init__" not in vars(klass):
            continue
        for param in inspect.signature(vars(klass)["__init__"]).parameters.values():
            if param.name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            found.setdefault(param.name, Argument(param.name, param.default, klass.__qualname__))
    return found


def public_classes() -> list[type]:
    """The operators, sensors and triggers of the provider info's modules: defined there, not private."""
    from airflow.triggers.base import BaseTrigger

    from airflow_provider_slurmapi._compat import BaseOperator
    from airflow_provider_slurmapi.get_provider_info import get_provider_info

    info = get_provider_info()
    classes = []
    for kind in ("operators", "sensors", "triggers"):
        for entry in info[kind]:
            for module_name in entry["python-modules"]:
                for name, obj in vars(importlib.import_module(module_name)).items():
                    if (
                        inspect.isclass(obj)
                        and obj.__module__ == module_name
                        and not name.startswith("_")
                        and issubclass(obj, BaseOperator | BaseTrigger)
                    ):
                        classes.append(obj)
    return classes


@dataclass(frozen=True)
class Decorator:
    name: str  # "slurm": @task.slurm
    factory: Callable[..., Any]
    operator: type  # the operator class the decorator builds


def decorators() -> list[Decorator]:
    from airflow_provider_slurmapi.get_provider_info import get_provider_info

    found = []
    for entry in get_provider_info()["task-decorators"]:
        module_name, _, attr = entry["class-name"].rpartition(".")
        factory = getattr(importlib.import_module(module_name), attr)
        found.append(Decorator(entry["name"], factory, factory(SAMPLES["python_callable"]).operator_class))
    return found


def _build(cls: type, *, leave_out: str | None = None, refused: tuple[str, ...] = (), **given: Any) -> Any:
    """An instance of ``cls`` from :data:`SAMPLES` (what it takes of them), ``given`` on top."""
    from airflow_provider_slurmapi._compat import BaseOperator

    takes = declared_arguments(cls)
    kwargs = {name: value for name, value in SAMPLES.items() if name in takes and name not in refused}
    kwargs.pop(leave_out or "", None)
    if issubclass(cls, BaseOperator):
        kwargs["task_id"] = f"docs_truth_{cls.__name__.lower()}"
    missing = [a.name for a in takes.values() if a.default is REQUIRED and a.name not in kwargs and a.name != leave_out]
    assert not missing, f"tests/docs/test_docs_truth.py: add a sample value of {missing} of {cls.__name__} to SAMPLES"
    return cls(**{**kwargs, **given})


def watch_settings_taken_by_keyword(cls: type, refused: tuple[str, ...] = ()) -> dict[str, Argument]:
    """The ``WatchSettings`` fields ``cls`` takes through ``**kwargs`` (the trigger takes them so): a field
    is taken when ``cls`` can be built with it. Airflow's ``BaseOperator`` refuses a field it does not know."""
    from airflow_provider_slurmapi.slurm.jobs.watch import WatchSettings

    explicit = declared_arguments(cls)
    taken = {}
    for field in dataclasses.fields(WatchSettings):
        if field.name in explicit:
            continue
        try:
            given: dict[str, Any] = {field.name: field.default}
            _build(cls, refused=refused, **given)
        except Exception:
            continue
        taken[field.name] = Argument(field.name, field.default, "WatchSettings")
    return taken


def cluster_defaults(cls: type, refused: tuple[str, ...] = ()) -> dict[str, Any]:
    """Each cluster argument's default as ``cls`` applies it: ``REQUIRED`` if ``cls`` cannot be built
    without it, else the value its ``ClusterRef`` gets (the operators' signature default; the trigger's
    ``None`` is "not given", filled by ``ClusterRef``)."""
    from airflow_provider_slurmapi.slurm.api.cluster import CLUSTER_ARG_NAMES

    defaults = {}
    for name in CLUSTER_ARG_NAMES:
        try:
            instance = _build(cls, leave_out=name, refused=refused)
        except Exception:
            defaults[name] = REQUIRED
            continue
        defaults[name] = instance.cluster.as_kwargs()[name]
    return defaults


# -- what the pages say --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    name: str | None  # None: the first cell is not one `name`
    default: str
    line: int
    first_cell: str


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def table_rows(page: Path, first_header: str) -> list[Row]:
    """The rows of every table of ``page`` whose header reads ``| <first_header> | Default | ...``."""
    rows: list[Row] = []
    lines = page.read_text().splitlines()
    for index, line in enumerate(lines):
        if not line.startswith("|") or _cells(line)[:2] != [first_header, "Default"]:
            continue
        for number, row in enumerate(lines[index + 2 :], start=index + 3):
            if not row.startswith("|"):
                break
            cells = _cells(row)
            named = re.fullmatch(r"`([A-Za-z_][A-Za-z0-9_]*)`", cells[0])
            rows.append(Row(named[1] if named else None, cells[1] if len(cells) > 1 else "", number, cells[0]))
    return rows


def default_forms(value: Any, *, unset: str = "`None`") -> tuple[str, ...]:
    """How a Default cell may begin for ``value`` (``unset``: how ``None`` reads)."""
    if value is REQUIRED:
        return ("required",)
    if value is None:
        return (unset,)
    if isinstance(value, bool):
        return (f"`{value}`",)
    if isinstance(value, int | float):
        return (f"`{int(value)}`", f"`{value!r}`") if float(value).is_integer() else (f"`{value!r}`",)
    if isinstance(value, str):
        return (f'`"{value}"`', f"`'{value}'`")
    return (f"`{value!r}`",)


def shows(cell: str, value: Any, *, unset: str = "`None`") -> bool:
    return any(re.match(re.escape(form) + r"(?![\w.])", cell) for form in default_forms(value, unset=unset))


def _rel(page: Path) -> str:
    return str(page.relative_to(REPO))


def _how_to_page(title_mark: str) -> Path:
    pages = [page for page in sorted((DOCS / "howto").glob("*.md")) if title_mark in page.read_text().splitlines()[0]]
    assert pages, f"no page of docs/howto/ has {title_mark} in its title: add one (docs/howto/<name>.md)"
    return pages[0]


def _row_to_add(name: str, default: Any, *, unset: str = "`None`") -> str:
    return f"| `{name}` | {default_forms(default, unset=unset)[0]} | what it does |"


def _a(kind: str) -> str:
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def check_table(
    page: Path, rows: list[Row], truth: dict[str, Any], whose: str, *, unset: str = "`None`", kind: str = "argument"
) -> Iterator[str]:
    """Problems of ``rows`` against ``truth`` (name -> default), each naming the page, the name and the fix."""
    seen: dict[str, Row] = {}
    for row in rows:
        if row.name is None:
            yield f"{_rel(page)}:{row.line}: the first cell {row.first_cell!r} is not one {kind} as `name`"
            continue
        if row.name in seen:
            yield f"{_rel(page)}:{row.line}: `{row.name}` has two rows (also line {seen[row.name].line}): keep one"
        seen[row.name] = row
        if row.name not in truth:
            yield (
                f"{_rel(page)}:{row.line}: `{row.name}` is not {_a(kind)} of {whose} (they are: "
                f"{', '.join(sorted(truth))}): remove the row, or fix its name"
            )
        elif not shows(row.default, truth[row.name], unset=unset):
            yield (
                f"{_rel(page)}:{row.line}: `{row.name}` of {whose} defaults to "
                f"{default_forms(truth[row.name], unset=unset)[0]}, the page says {row.default!r}: start its Default "
                f"cell with {default_forms(truth[row.name], unset=unset)[0]}"
            )
    for name, default in truth.items():
        if name not in seen:
            yield (
                f"{_rel(page)}: {kind} `{name}` of {whose} has no row in its table: add "
                f"{_row_to_add(name, default, unset=unset)}"
            )


# -- the tests -----------------------------------------------------------------------------------------


def _classes() -> list[type]:
    return public_classes()


@pytest.mark.parametrize("cls", _classes(), ids=lambda cls: cls.__name__)
def test_every_argument_of_each_operator_sensor_and_trigger_is_a_row_of_its_how_to_page(cls: type) -> None:
    """Every argument ``cls`` (and this package's bases) declares, and every watch setting it takes by
    keyword, is a row of the ``| Argument | Default |`` table of the how-to page titled with its name, with
    its default; every row there names one of them. The cluster arguments are the connection page's."""
    from airflow_provider_slurmapi.slurm.api.cluster import CLUSTER_ARG_NAMES

    page = _how_to_page(f"`{cls.__name__}`")
    arguments = {**declared_arguments(cls), **watch_settings_taken_by_keyword(cls)}
    truth = {name: arg.default for name, arg in arguments.items() if name not in CLUSTER_ARG_NAMES}
    problems = list(check_table(page, table_rows(page, "Argument"), truth, cls.__name__))
    text = page.read_text()
    if "../connection.md" not in text:
        problems.append(
            f"{_rel(page)}: link the cluster arguments: 'and the cluster arguments of [Connection ...](../connection.md)'"
        )
    if "Airflow's own arguments" not in text:
        problems.append(
            f"{_rel(page)}: say that Airflow's own arguments (task_id, retries...) are not in the table: "
            'a sentence with "Airflow\'s own arguments"'
        )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("decorator", decorators(), ids=lambda d: f"task.{d.name}")
def test_every_argument_of_the_task_decorator_is_a_row_of_its_how_to_page(decorator: Decorator) -> None:
    """The decorator's own arguments (its operator's, beyond the public operator it extends, and the
    factory's) are rows of its page; the page links the extended operator's page for the rest and names
    what the decorator refuses of them, and each refusal is real."""
    operator = decorator.operator
    extended = [klass for klass in operator.__mro__[1:] if klass in _classes()]
    assert extended, f"@task.{decorator.name}'s operator {operator.__name__} extends no public operator"
    base = extended[0]
    inherited = declared_arguments(base)
    own = {name: arg for name, arg in declared_arguments(operator).items() if name not in inherited}
    for name, param in inspect.signature(decorator.factory).parameters.items():
        if param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            own.setdefault(name, Argument(name, param.default, decorator.factory.__qualname__))
    page = _how_to_page(f"`@task.{decorator.name}`")
    text = page.read_text()
    problems = list(
        check_table(
            page, table_rows(page, "Argument"), {n: a.default for n, a in own.items()}, f"@task.{decorator.name}"
        )
    )
    base_page = _how_to_page(f"`{base.__name__}`")
    if f"({base_page.name}" not in text:
        problems.append(
            f"{_rel(page)}: link {base.__name__}'s arguments: [{base.__name__}]({base_page.name}#arguments)"
        )
    _build(operator, refused=tuple(DECORATOR_REFUSES))  # it builds without them...
    for name, why in DECORATOR_REFUSES.items():
        assert name in inherited, f"DECORATOR_REFUSES: {name} is no longer an argument of {base.__name__}: drop it"
        with pytest.raises(Exception):  # noqa: B017 - ...and refuses each, whatever the error's type
            _build(operator, refused=tuple(DECORATOR_REFUSES), **{name: SAMPLES.get(name, "train.sh")})
        if f"`{name}`" not in text:
            problems.append(f"{_rel(page)}: say that @task.{decorator.name} takes no `{name}` ({why})")
    assert not problems, "\n".join(problems)


def _all_takers() -> list[tuple[str, type, tuple[str, ...]]]:
    takers: list[tuple[str, type, tuple[str, ...]]] = [(cls.__name__, cls, ()) for cls in _classes()]
    takers += [(f"@task.{d.name}", d.operator, tuple(DECORATOR_REFUSES)) for d in decorators()]
    return takers


def test_every_cluster_argument_is_a_row_of_the_connection_page_with_the_default_each_class_applies() -> None:
    """The cluster arguments (``ClusterArgs``) are rows of the connection page's ``| Argument | Default |``
    table, with the default that every operator, the sensor, the trigger and the decorator apply."""
    from airflow_provider_slurmapi.slurm.api.cluster import CLUSTER_ARG_NAMES

    page = DOCS / "connection.md"
    rows = table_rows(page, "Argument")
    problems: list[str] = []
    reference = None
    for whose, cls, refused in _all_takers():
        missing = [name for name in CLUSTER_ARG_NAMES if name not in declared_arguments(cls)]
        assert not missing, f"{whose} does not take the cluster arguments {missing}"
        defaults = cluster_defaults(cls, refused)
        if reference is None:
            reference = defaults
            problems += check_table(page, rows, defaults, f"the cluster arguments ({whose})")
        else:
            problems += [
                f"{whose}'s cluster argument `{name}` defaults to {default_forms(value)[0]}, the others' to "
                f"{default_forms(reference[name])[0]}: {_rel(page)} documents one default for all"
                for name, value in defaults.items()
                if value != reference[name]
            ]
    assert not problems, "\n".join(problems)


# -- connection extras ---------------------------------------------------------------------------------


def _read_names(tree: ast.AST, is_reader: Callable[[ast.Call], bool], position: int) -> Iterator[tuple[str, int]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and is_reader(node) and len(node.args) > position:
            arg = node.args[position]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                yield arg.value, node.lineno


def connection_extras() -> dict[str, str]:
    """Every extra the package reads from a connection, with where: ``<hook>._get_field("name")``,
    ``get_field(extras, "name")``, ``<conn>.extra_dejson.get("name")``."""

    def reads_extra(call: ast.Call) -> bool:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "_get_field":
            return True
        return isinstance(func, ast.Attribute) and func.attr == "get" and "extra" in ast.unparse(func.value)

    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for name, line in _read_names(tree, reads_extra, 0):
            found.setdefault(name, f"{path.relative_to(REPO)}:{line}")
        get_field = lambda call: isinstance(call.func, ast.Name) and call.func.id == "get_field"  # noqa: E731
        for name, line in _read_names(tree, get_field, 1):
            found.setdefault(name, f"{path.relative_to(REPO)}:{line}")
    return found


# Values an extra is set to, to see where the hook keeps it (a number first, then an endpoint).
_SENTINELS = ("17.25", "https://docs-probe.example.com")
_PROBE_CONN = "slurmapi_docs_probe"


def _hook_state(monkeypatch: pytest.MonkeyPatch, extra: dict[str, str]) -> dict[str, Any]:
    """What a real ``SlurmApiHook`` on a connection with ``extra`` holds: its client's settings and its cluster."""
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
    from airflow_provider_slurmapi.slurm.api.cluster import ClusterRef

    monkeypatch.setenv(
        f"AIRFLOW_CONN_{_PROBE_CONN.upper()}", json.dumps({"conn_type": "google_cloud_platform", "extra": extra})
    )
    hook = SlurmApiHook(
        region="us-central1", cluster_id="docs-cluster", project_id="docs-project", gcp_conn_id=_PROBE_CONN
    )
    state = {
        f"{prefix}.{key}": value
        for holder, prefix in ((hook.client, "client"), (hook.client.transport, "transport"))
        for key, value in vars(holder).items()
        if isinstance(value, str | int | float | type(None))
    }
    state.update(
        {f"cluster.{field.name}": getattr(hook.cluster, field.name) for field in dataclasses.fields(ClusterRef)}
    )
    return state


def _is(value: Any, sentinel: str) -> bool:
    return value == sentinel or (
        isinstance(value, float) and not sentinel.startswith("http") and value == float(sentinel)
    )


def extra_defaults(monkeypatch: pytest.MonkeyPatch, names: list[str]) -> dict[str, Any]:
    """Each extra's default: what a real hook holds without it where, with it, it holds the extra's value."""
    unset = _hook_state(monkeypatch, {})
    defaults: dict[str, Any] = {}
    for name in names:
        for sentinel in _SENTINELS:
            try:
                state = _hook_state(monkeypatch, {name: sentinel})
            except Exception:
                continue  # not a value of this extra's kind
            kept = [key for key, value in state.items() if _is(value, sentinel) and not _is(unset[key], sentinel)]
            if kept:
                defaults[name] = unset[kept[0]]
                break
    return defaults


def test_every_connection_extra_the_hooks_read_is_a_row_of_the_connection_page_with_its_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each extra the package reads is a row of the connection page's ``| Extra | Default |`` table with the
    value a real hook uses without it; every row is an extra the package reads. Google's own extras
    (``key_path``, ``scope``...) are the Google provider's, read by ``GoogleBaseHook``: not rows here."""
    extras = connection_extras()
    assert {"api_endpoint", "slurm_user"} <= set(extras), extras  # the scan still finds the hooks' reads
    defaults = extra_defaults(monkeypatch, sorted(extras))
    unknown = sorted(set(extras) - set(defaults))
    assert not unknown, (
        f"a real SlurmApiHook keeps the connection extras {unknown} ({', '.join(extras[n] for n in unknown)}) in no "
        "setting of its client, transport or cluster that the test sees: teach tests/docs/test_docs_truth.py extra_defaults "
        "where (or keep it there)"
    )
    page = DOCS / "connection.md"
    problems = list(
        check_table(page, table_rows(page, "Extra"), defaults, "the hooks", unset="none", kind="connection extra")
    )
    assert not problems, "\n".join(problems)


def test_the_connection_page_names_the_scope_the_hook_asks_for_and_what_impersonation_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The OAuth scopes a real hook asks Google for (the Google provider's default, the connection's
    ``scope`` extra unset), and, since the cluster arguments take ``impersonation_chain``, the IAM role the
    connection's principal needs on the service account it impersonates."""
    from airflow_provider_slurmapi.hooks.slurm import SlurmApiHook
    from airflow_provider_slurmapi.slurm.api.cluster import CLUSTER_ARG_NAMES

    monkeypatch.setenv(
        f"AIRFLOW_CONN_{_PROBE_CONN.upper()}", json.dumps({"conn_type": "google_cloud_platform", "extra": {}})
    )
    hook = SlurmApiHook(
        region="us-central1", cluster_id="docs-cluster", project_id="docs-project", gcp_conn_id=_PROBE_CONN
    )
    page = (DOCS / "connection.md").read_text()
    scopes = list(hook.scopes)
    assert scopes
    for scope in scopes:
        assert f"`{scope}`" in page, f"docs/connection.md: name the OAuth scope the hook asks for: `{scope}`"
    assert "`scope`" in page, "docs/connection.md: say that the connection's `scope` extra replaces the scope"
    if "impersonation_chain" in CLUSTER_ARG_NAMES:
        assert "`roles/iam.serviceAccountTokenCreator`" in page, (
            "docs/connection.md: say that impersonation_chain needs the Service Account Token Creator role "
            "(`roles/iam.serviceAccountTokenCreator`) on the impersonated service account"
        )


# -- [slurmapi] options ----------------------------------------------------------------------------------


def options_read() -> dict[str, tuple[Any, str]]:
    """Every ``[slurmapi]`` option the package reads (``conf.get*("slurmapi", "name", fallback=...)``),
    with its fallback and where."""
    found: dict[str, tuple[Any, str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr.startswith("get")
                and ast.unparse(node.func.value).endswith("conf")
                and len(node.args) >= 2
                and all(isinstance(arg, ast.Constant) for arg in node.args[:2])
                and node.args[0].value == "slurmapi"  # type: ignore[attr-defined]
            ):
                continue
            fallback = next((ast.literal_eval(k.value) for k in node.keywords if k.arg == "fallback"), None)
            found.setdefault(node.args[1].value, (fallback, f"{path.relative_to(REPO)}:{node.lineno}"))  # type: ignore[attr-defined]
    return found


def test_every_slurmapi_option_the_code_reads_is_declared_with_its_default_and_on_the_reference_page() -> None:
    """Each option read is declared in the provider info (from which docs/reference/configuration.md is
    generated at each build) with the code's fallback as its default; each declared option is read."""
    import sys

    from airflow_provider_slurmapi.get_provider_info import get_provider_info

    sys.path.insert(0, str(DOCS / "_ext"))
    from provider_config import MARKER, config_reference_markdown

    config = get_provider_info().get("config") or {}
    declared = (config.get("slurmapi") or {}).get("options") or {}
    read = options_read()
    assert read, "the scan finds no conf.get('slurmapi', ...) call: fix options_read()"
    problems = []
    for name, (fallback, where) in read.items():
        if name not in declared:
            problems.append(
                f"[slurmapi] {name} is read at {where} but not declared: add it to get_provider_info.py's "
                "config section (docs/reference/configuration.md is generated from it)"
            )
            continue
        default = declared[name].get("default")
        code = None if fallback in (None, "") else str(fallback)
        if code != default:
            problems.append(
                f"[slurmapi] {name}: the code's fallback at {where} is {fallback!r}, get_provider_info.py declares "
                f"default {default!r}: declare {code!r}"
            )
    problems += [
        f"[slurmapi] {name} is declared in get_provider_info.py but the code never reads it: remove it"
        for name in declared
        if name not in read
    ]
    page = (DOCS / "reference" / "configuration.md").read_text()
    if MARKER not in page:
        problems.append(f"docs/reference/configuration.md: keep the line {MARKER}: the options are generated there")
    markdown = config_reference_markdown(config)
    for name, spec in declared.items():
        shown = "none" if spec.get("default") is None else f"`{spec['default']}`"
        section = markdown.split(f"### `{name}`", 1)[-1].split("### ", 1)[0]
        if f"| Default | {shown} |" not in section:
            problems.append(f"docs/_ext/provider_config.py: the reference shows no '| Default | {shown} |' for {name}")
    assert not problems, "\n".join(problems)
