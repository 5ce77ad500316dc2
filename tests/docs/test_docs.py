"""The documentation site (docs/): it builds with every Sphinx warning an error, takes in every page of
docs/ by itself, shows the provider's configuration options as the provider info declares them, and
includes only example DAGs that the suite runs."""

from __future__ import annotations

import ast
import json
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


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as committed, plus one page and one config option of a later change, built once for the
    module (the build takes most of a minute) with ``-W --keep-going -n``."""
    tmp_path = tmp_path_factory.mktemp("site")
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
    return out


def test_docs_build_with_warnings_as_errors_take_in_a_new_page_and_a_new_config_option(site: Path) -> None:
    """The site as committed, plus one page and one config option of a later change, builds with
    ``-W --keep-going -n``: the page lands in the index's toctree by itself, the option in the
    configuration reference, beside every option the provider declares."""
    from airflow_provider_slurmapi.get_provider_info import get_provider_info

    out = site
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


# -- as a browser shows it ----------------------------------------------------------------------------

# Run in the page once it is laid out: every table and code block of the article that does not fit its
# box (it would scroll sideways, or cut a column, as the index's How-to column once was), and a page
# wider than the window.
_LAYOUT_CHECK = """
<script>
window.addEventListener("load", () => {
  const width = document.documentElement.clientWidth;
  const cut = [];
  for (const el of document.querySelectorAll("article table, article pre, article .table-wrapper")) {
    const box = el.getBoundingClientRect();
    if (el.scrollWidth > el.clientWidth + 1 || box.right > width + 1) {
      cut.push(el.tagName + " " + el.scrollWidth + ">" + el.clientWidth + ": " + el.textContent.trim().slice(0, 80));
    }
  }
  if (document.documentElement.scrollWidth > width + 1) cut.push("the page is wider than the window");
  const found = document.createElement("div");
  found.id = "layout-check";
  found.textContent = "LAYOUT " + width + " " + JSON.stringify(cut) + " END";
  document.body.appendChild(found);
});
</script>
"""
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Headless, and nothing that reaches the network or a profile of the machine.
_CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,2000",
]


def _chromium(tmp_path: Path, *args: str) -> str:
    assert CHROMIUM is not None
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    done = subprocess.run(
        [CHROMIUM, *_CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium here (CI installs Debian's package: .ci/run)")
@pytest.mark.parametrize("page", ["index.html", "howto/operator-submit.html", "installation.html"])
def test_the_page_reads_whole_at_1280_px_in_a_browser(page: str, site: Path, tmp_path: Path) -> None:
    html = site / page
    checked = html.with_name(f"layout-check-{html.name}")  # beside it: the same CSS and images
    checked.write_text(html.read_text().replace("</body>", _LAYOUT_CHECK + "</body>"))
    dom = _chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", checked.as_uri())
    found = re.search(r"LAYOUT (\d+) (.*?) END", dom, re.DOTALL)
    assert found, "the check did not run in the page: " + dom[-2000:]
    width, cut = int(found[1]), json.loads(found[2].replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    assert 1200 <= width <= 1280  # the window the page was laid out in (less a scroll bar)
    assert cut == [], f"{page} at 1280 px: {cut}"
    # and a picture of it, for a person to look at (the test's tmp folder)
    shot = tmp_path / f"{page.replace('/', '-')}.png"
    _chromium(tmp_path, f"--screenshot={shot}", html.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(shot.read_bytes()[16:20], "big") == 1280


# -- what the pages say, against what is -------------------------------------------------------------


def _make_test_sentence(text: str) -> str:
    (sentence,) = re.findall(r"^`make test` runs the full suite: .*$", text, re.MULTILINE)
    return sentence


def test_the_readme_and_the_docs_index_say_the_same_of_make_test() -> None:
    readme, index = (REPO / "README.md").read_text(), (DOCS / "index.md").read_text()
    assert _make_test_sentence(readme) == _make_test_sentence(index)
    # and what it names is what the Makefile's test target runs
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile.split("\ntest: ", 1)[1].split("\n\n", 1)[0]
    for stage in ("lint", "unit-emulator-dag-runs+slurm+slurm-26.05", "deployment-3.3"):
        assert f"TIMED,{stage}," in recipe
    for target in ("test-fast", "test-slurm", "test-slurm-26", "test-deployment"):
        assert re.search(rf"\b{target}\b", recipe), f"make test no longer runs {target}"
    assert '"docs"' not in recipe  # the docs build runs in the main pytest stage (tests/docs), not apart


def test_the_install_page_leads_with_what_works_before_the_package_index() -> None:
    page = (DOCS / "installation.md").read_text()
    wheel = page.index("pip install dist/airflow_provider_slurmapi-")
    registry = page.index("twine upload --repository-url https://REGION-python.pkg.dev/PROJECT/")
    index = page.index("pip install airflow-provider-slurmapi\n")
    assert wheel < registry < index
    assert "work once the package is published" in page[page.rindex("\n## ", 0, index) : index]
    # Composer 3 is said for what it is
    assert "key pins only" in page and "key pins only" in (DOCS / "versions.md").read_text()


def test_the_provider_name_the_docs_quote_is_the_one_airflow_lists() -> None:
    """`airflow providers list` prints the package name and the provider info's description."""
    from airflow_provider_slurmapi.get_provider_info import get_provider_info

    info = get_provider_info()
    page = re.sub(r"\s+", " ", (DOCS / "installation.md").read_text())
    assert f"`{info['package-name']}`" in page
    assert f'"{info["description"]}"' in page
