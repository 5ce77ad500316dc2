"""The documentation site (docs/): it builds with every Sphinx warning an error, takes in every page of
docs/ by itself, shows the provider's configuration options as the provider info declares them, and
includes only example DAGs that the suite runs."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.dag_runs.test_example_dags import EXAMPLES

DOCS = REPO / "docs"
sys.path.insert(0, str(DOCS / "_ext"))
from provider_config import NO_OPTIONS, config_reference_markdown  # noqa: E402

# What a new option of another change looks like (Airflow's provider.yaml format).
NEW_OPTION = {
    "description": "A made-up option: appears in the reference with no edit of the docs.",
    "version_added": "0.2.0",
    "type": "string",
    "example": "some-value",
    "default": None,
    "sensitive": True,
}

PATCH_PROVIDER_INFO = f"""


def get_provider_info():
    # what the provider declares, and the docs test's option
    info = _declared_provider_info()
    section = info.setdefault("config", {{}}).setdefault("slurmapi_docs_test", {{"description": "A made-up section.", "options": {{}}}})
    section["options"]["docs_test_option"] = {NEW_OPTION!r}
    return info
"""


def _text(html_file: Path) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html_file.read_text()))


def test_docs_build_with_warnings_as_errors_take_in_a_new_page_and_a_new_config_option(tmp_path: Path) -> None:
    """The site as committed, plus one page and one config option of a later change, builds with
    ``-W --keep-going -n``: the page lands in the index's toctree by itself, the option in the
    configuration reference, beside every option the provider declares."""
    from airflow_provider_slurmapi.get_provider_info import get_provider_info

    repo = tmp_path / "repo"
    shutil.copytree(DOCS, repo / "docs", ignore=shutil.ignore_patterns("_build", "api"))
    shutil.copytree(
        REPO / "airflow_provider_slurmapi",
        repo / "airflow_provider_slurmapi",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for name in ("example_dags", "CHANGELOG.md"):
        (repo / name).symlink_to(REPO / name)
    info = repo / "airflow_provider_slurmapi" / "get_provider_info.py"
    declared = info.read_text().replace("def get_provider_info(", "def _declared_provider_info(")
    info.write_text(declared + PATCH_PROVIDER_INFO)
    (repo / "docs" / "zz-a-later-topic.md").write_text("# A later topic\n\nWritten by another change.\n")

    out = tmp_path / "html"
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html", str(repo / "docs"), str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert build.returncode == 0, build.stdout[-5000:] + build.stderr[-5000:]
    assert "WARNING" not in build.stderr, build.stderr

    assert 'href="zz-a-later-topic.html"' in (out / "index.html").read_text(), "a new docs/*.md page is in the toctree"
    config_page = _text(out / "reference" / "configuration.html")
    assert "docs_test_option" in config_page and "AIRFLOW__SLURMAPI_DOCS_TEST__DOCS_TEST_OPTION" in config_page
    assert NEW_OPTION["description"] in config_page
    for section, spec in (get_provider_info().get("config") or {}).items():
        for option in spec.get("options") or {}:
            assert f"AIRFLOW__{section.upper()}__{option.upper()}" in config_page, (section, option)
    # Every how-to page shows its example DAG's code.
    for page in (out / "howto").glob("*.html"):
        assert "highlight-python" in page.read_text(), f"{page.name} includes no example DAG"


def test_config_reference_says_none_yet_when_the_provider_declares_no_option() -> None:
    assert config_reference_markdown(None) == NO_OPTIONS + "\n"
    assert config_reference_markdown({}) == NO_OPTIONS + "\n"
    assert config_reference_markdown({"slurmapi": {"description": "x", "options": {}}}) == NO_OPTIONS + "\n"


def test_config_reference_shows_every_field_of_an_option() -> None:
    markdown = config_reference_markdown(
        {"slurmapi": {"description": "The provider's options.", "options": {"tag_secret": NEW_OPTION, "b": {}}}}
    )
    assert markdown.index("### `b`") < markdown.index("### `tag_secret`")
    assert "## `[slurmapi]`" in markdown and "The provider's options." in markdown
    for shown in ("`string`", "`some-value`", "`AIRFLOW__SLURMAPI__TAG_SECRET`", "yes: never shown", "`0.2.0`"):
        assert shown in markdown, shown
    assert "| Default | none |" in markdown


def _literalincludes() -> list[tuple[Path, Path]]:
    found = []
    for page in DOCS.rglob("*.md"):
        for target in re.findall(r"^```\{literalinclude\}\s+(\S+)", page.read_text(), flags=re.M):
            found.append((page, (page.parent / target).resolve()))
    return found


def test_every_example_dag_the_docs_include_runs_in_the_suite() -> None:
    includes = _literalincludes()
    assert includes
    for page, target in includes:
        assert target.parent == (REPO / "example_dags").resolve(), f"{page}: {target} is not an example DAG"
        assert target.name in EXAMPLES, f"{page}: {target.name} is not run by tests/dag_runs/test_example_dags.py"


def _public_classes(module: Path, suffix: str) -> list[str]:
    tree = ast.parse(module.read_text())
    return [
        n.name
        for n in tree.body
        if isinstance(n, ast.ClassDef) and n.name.endswith(suffix) and not n.name.startswith("_")
    ]


@pytest.mark.parametrize(
    ("module", "suffix"),
    [("operators/slurm.py", "Operator"), ("sensors/slurm.py", "Sensor"), ("triggers/slurm.py", "Trigger")],
)
def test_every_operator_sensor_and_trigger_has_a_how_to_page_with_an_example(module: str, suffix: str) -> None:
    classes = _public_classes(REPO / "airflow_provider_slurmapi" / module, suffix)
    assert classes
    titles = {page.read_text().splitlines()[0]: page for page in (DOCS / "howto").glob("*.md")}
    for name in classes:
        pages = [page for title, page in titles.items() if f"`{name}`" in title]
        assert pages, f"no how-to page titled with {name}"
        assert "{literalinclude} ../../example_dags/" in pages[0].read_text(), f"{pages[0]} has no example DAG"
    assert any("`@task.slurm`" in title for title in titles), "no how-to page for the decorator"
