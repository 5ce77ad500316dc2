"""The two wheels this repository builds: the provider's carries no emulator, the emulator's stands alone.

The emulator runs any script it is sent; the provider's wheel goes into every Airflow (Composer)
image, so it must not bring the emulator along. Both wheels (and the provider's sdist) are built with
hatchling's PEP 517 hooks, the backend pip and uv call, in a fresh interpreter (about a second each).
The provider's metadata is what PyPI and Composer read: its floors must fit the oldest Composer image in
support (requirements/composer/); `make pins` resolves the wheel against every pin set with uv.
"""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.parser import HeaderParser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
COMPOSER_2105 = REPO / "requirements" / "composer" / "composer-2.15.3-airflow-2.10.5.txt"
_BUILD = "import sys; from hatchling.build import build_{kind}; print(build_{kind}(sys.argv[1]))"


def _build(project: Path, out: Path, kind: str) -> Path:
    done = subprocess.run(
        [sys.executable, "-c", _BUILD.format(kind=kind), str(out)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"building the {kind} of {project} failed:\n{done.stderr}"
    return out / done.stdout.strip().splitlines()[-1]


def build_wheel(project: Path, out: Path) -> zipfile.ZipFile:
    """The wheel of the project in ``project``, built into ``out``."""
    return zipfile.ZipFile(_build(project, out, "wheel"))


def build_sdist(project: Path, out: Path) -> tarfile.TarFile:
    """The sdist of the project in ``project``, built into ``out``."""
    return tarfile.open(_build(project, out, "sdist"))


def dist_info(wheel: zipfile.ZipFile, name: str) -> str:
    (path,) = [n for n in wheel.namelist() if n.split("/")[0].endswith(".dist-info") and n.endswith(f"/{name}")]
    return wheel.read(path).decode()


def entry_points(wheel: zipfile.ZipFile) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(dist_info(wheel, "entry_points.txt"))
    return parser


def metadata(wheel: zipfile.ZipFile, field: str) -> list[str]:
    return HeaderParser().parsestr(dist_info(wheel, "METADATA")).get_all(field) or []


def requirements(wheel: zipfile.ZipFile) -> list[str]:
    return metadata(wheel, "Requires-Dist")


@pytest.fixture(scope="module")
def provider_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    return build_wheel(REPO, tmp_path_factory.mktemp("provider-wheel"))


@pytest.fixture(scope="module")
def provider_sdist(tmp_path_factory: pytest.TempPathFactory) -> tarfile.TarFile:
    return build_sdist(REPO, tmp_path_factory.mktemp("provider-sdist"))


@pytest.fixture(scope="module")
def emulator_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    return build_wheel(REPO / "emulator", tmp_path_factory.mktemp("emulator-wheel"))


def test_provider_wheel_holds_no_emulator(provider_wheel: zipfile.ZipFile) -> None:
    names = provider_wheel.namelist()
    # the real provider, not an empty or misbuilt wheel
    assert "airflow_provider_slurmapi/hooks/slurm.py" in names
    assert "airflow_provider_slurmapi/py.typed" in names
    assert entry_points(provider_wheel)["apache_airflow_provider"]["provider_info"]
    assert [n for n in names if "emulator" in n.lower()] == []
    assert [n for n in names if n.split("/")[0] != "airflow_provider_slurmapi" and ".dist-info/" not in n] == []
    scripts = entry_points(provider_wheel)
    assert not scripts.has_section("console_scripts"), dict(scripts["console_scripts"])
    # nothing in the provider imports the emulator: Airflow images install the provider without it
    importing = [
        n for n in names if n.endswith(".py") and "slurmapi_emulator" in provider_wheel.read(n).decode("utf-8")
    ]
    assert importing == []
    # the emulator is not on PyPI: no published requirement names it, not even an extra's (the tests take
    # it from the repository through the `test` dependency group)
    assert [r for r in requirements(provider_wheel) if "emulator" in r] == []


def test_emulator_wheel_builds_on_its_own(emulator_wheel: zipfile.ZipFile) -> None:
    names = emulator_wheel.namelist()
    assert {"slurmapi_emulator/__init__.py", "slurmapi_emulator/__main__.py", "slurmapi_emulator/py.typed"} <= set(
        names
    )
    assert "slurmapi_emulator/server.py" in names and "slurmapi_emulator/gateway.py" in names
    assert [n for n in names if n.split("/")[0] != "slurmapi_emulator" and ".dist-info/" not in n] == []
    assert dict(entry_points(emulator_wheel)["console_scripts"]) == {"slurmapi-emulator": "slurmapi_emulator.cli:main"}
    assert [r for r in requirements(emulator_wheel) if "airflow" in r] == []


def test_provider_wheel_and_sdist_carry_the_license_and_the_notice(
    provider_wheel: zipfile.ZipFile, provider_sdist: tarfile.TarFile
) -> None:
    license_text = (REPO / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text  # the whole text, not a pointer to it
    assert dist_info(provider_wheel, "licenses/LICENSE") == license_text
    assert dist_info(provider_wheel, "licenses/NOTICE") == (REPO / "NOTICE").read_text()
    assert metadata(provider_wheel, "License-Expression") == ["Apache-2.0"]
    sdist = {name.split("/", 1)[1] for name in provider_sdist.getnames() if "/" in name}
    assert {"LICENSE", "NOTICE", "pyproject.toml", "README.md", "airflow_provider_slurmapi/__init__.py"} <= sdist
    # the emulator (its own distribution), the tests with their recorded fixtures and the lab scripts
    # need the repository to run: the sdist is the provider and its documentation only
    assert [n for n in sdist if n.split("/")[0] in ("emulator", "tests", "scripts", "bench", "requirements")] == []


def test_provider_metadata_is_what_pypi_and_composer_read(provider_wheel: zipfile.ZipFile) -> None:
    from airflow_provider_slurmapi import __version__

    # one source for the version: the package's __version__, which get_provider_info() reports too
    assert metadata(provider_wheel, "Version") == [__version__]
    classifiers = metadata(provider_wheel, "Classifier")
    assert {
        "Framework :: Apache Airflow",
        "Framework :: Apache Airflow :: Provider",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
    } <= set(classifiers)
    assert metadata(provider_wheel, "Requires-Python") == [">=3.11"]
    urls = dict(url.split(", ", 1) for url in metadata(provider_wheel, "Project-URL"))
    assert urls["Slurm Job API"].startswith("https://docs.cloud.google.com/")
    assert urls["Slurm Job API"].endswith("/manage-clusters-slurm")
    # the provider info (Airflow's providers page) links the same current page of Google's
    from airflow_provider_slurmapi.get_provider_info import get_provider_info

    (integration,) = get_provider_info()["integrations"]
    assert integration["external-doc-url"] == urls["Slurm Job API"]
    # published extras: OpenLineage only; the test and development tools are dependency groups
    assert metadata(provider_wheel, "Provides-Extra") == ["openlineage"]
    by_name = {Requirement(r).name: Requirement(r) for r in requirements(provider_wheel)}
    assert "apache-airflow-providers-common-compat" not in by_name  # nothing imports it
    assert str(by_name["apache-airflow-providers-openlineage"].marker) == 'extra == "openlineage"'
    assert not {"pytest", "ruff", "mypy", "hatchling", "pre-commit"} & set(by_name)


def test_every_floor_admits_the_oldest_composer_image_in_support(provider_wheel: zipfile.ZipFile) -> None:
    """Composer refuses a package that needs one of its image's pins moved: each requirement of the
    wheel (its extras' too) must admit the version composer-2.15.3-airflow-2.10.5 pins."""
    pins = {}
    for line in COMPOSER_2105.read_text().splitlines():
        if found := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$", line.strip()):
            pins[re.sub(r"[-_.]+", "-", found[1]).lower()] = found[2]
    assert pins["apache-airflow"] == "2.10.5" and pins["apache-airflow-providers-google"] == "18.0.0"
    refused = []
    for text in requirements(provider_wheel):
        requirement = Requirement(text)
        pinned = pins.get(re.sub(r"[-_.]+", "-", requirement.name).lower())
        assert pinned is not None, f"{requirement.name} is not in the image: the image would have to add it"
        if not requirement.specifier.contains(pinned, prereleases=True):
            refused.append(f"{text} refuses the image's {requirement.name}=={pinned}")
    assert refused == []


# -- built from a clean tree only -----------------------------------------------------------------------

# What a build, a test run, `make docs` or an editor leaves in a working tree: none of it may be packed.
_JUNK = {
    "docs/_build/doctrees/environment.pickle": b"\x80\x04junk",
    "docs/_build/html/index.html": b"<html></html>",
    "docs/reference/api/airflow_provider_slurmapi/index.rst": b"generated\n",
    "airflow_provider_slurmapi/__pycache__/__init__.cpython-311.pyc": b"\x00",
    "airflow_provider_slurmapi/hooks/__pycache__/slurm.cpython-311.pyc": b"\x00",
    "airflow_provider_slurmapi/slurm/client.py.orig": b"old\n",
    "airflow_provider_slurmapi/.coverage": b"x",
    "example_dags/__pycache__/example_slurm_submit.cpython-311.pyc": b"\x00",
    "docs/.DS_Store": b"\x00",
    "docs/howto/operator-submit.md~": b"backup\n",
    ".venv-airflow34/lib/python3.11/site-packages/junk.py": b"x = 1\n",
    ".coverage": b"x",
    ".coverage.host.1234": b"x",
    ".mypy_cache/3.11/cache.json": b"{}",
    "htmlcov/index.html": b"<html></html>",
    "build/lib/airflow_provider_slurmapi/stale.py": b"x = 1\n",
    "dist/airflow_provider_slurmapi-0.0.1-py3-none-any.whl": b"PK",
    "airflow-home/airflow.db": b"x",
}
# The sdist: the provider, its example DAGs and documentation sources, the metadata's files (hatchling
# always adds the .gitignore it read, so that a rebuild from the sdist ignores the same files).
_SDIST_ROOTS = ("airflow_provider_slurmapi/", "example_dags/", "docs/")
_SDIST_FILES = {"README.md", "CHANGELOG.md", "LICENSE", "NOTICE", "pyproject.toml", ".gitignore"}


def _repository_files() -> list[str]:
    """The files git knows (committed, staged, or new and not ignored): what the packages are made of."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    return sorted(name for name in listed.split("\0") if name and (REPO / name).is_file())


@pytest.fixture(scope="module")
def dirty_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's files copied out (no .git: a tree as a packager unpacks it), then build junk planted."""
    tree = tmp_path_factory.mktemp("dirty") / "airflow-provider-slurmapi"
    for name in _repository_files():
        target = tree / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((REPO / name).read_bytes())
    for name, content in _JUNK.items():
        target = tree / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return tree


def test_packages_built_from_a_tree_full_of_build_junk_hold_only_the_repositorys_files(
    dirty_tree: Path, tmp_path: Path
) -> None:
    known = _repository_files()
    wheel = build_wheel(dirty_tree, tmp_path / "wheel")
    sdist = build_sdist(dirty_tree, tmp_path / "sdist")

    in_wheel = sorted(n for n in wheel.namelist() if ".dist-info/" not in n)
    assert in_wheel == [n for n in known if n.startswith("airflow_provider_slurmapi/")]
    assert {n.rsplit("/", 1)[1] for n in wheel.namelist() if ".dist-info/" in n} == {
        "METADATA",
        "WHEEL",
        "RECORD",
        "entry_points.txt",
        "LICENSE",
        "NOTICE",
    }

    in_sdist = sorted(n.split("/", 1)[1] for n in sdist.getnames() if "/" in n and sdist.getmember(n).isfile())
    intended = [n for n in known if n.startswith(_SDIST_ROOTS) or n in _SDIST_FILES] + ["PKG-INFO"]
    assert in_sdist == sorted(intended)
    # the planted junk, named: none of it in either archive
    assert [n for n in _JUNK if n in in_sdist or n in in_wheel] == []
    assert not [n for n in in_sdist if n.startswith(("docs/_build/", "docs/reference/api/")) or "__pycache__" in n]
    # no tests, emulator servers, lab scripts or benchmarks in the wheel
    assert not [n for n in in_wheel if n.split("/")[1] in ("tests", "emulator") or "server" in n]

    sizes = {path.name: path.stat().st_size for path in (tmp_path / "wheel").iterdir()}
    sizes |= {path.name: path.stat().st_size for path in (tmp_path / "sdist").iterdir()}
    print(f"FIGURE packages: {sizes}, wheel {len(wheel.namelist())} files, sdist {len(sdist.getnames())} entries")


# -- the metadata Composer's packaging reads ------------------------------------------------------------

_VALIDATE = """
import sys, packaging
from packaging.metadata import Metadata
assert packaging.__version__ == "25.0", packaging.__version__
Metadata.from_email(open(sys.argv[1], "rb").read(), validate=True)
print("valid")
"""


def test_the_wheels_metadata_is_valid_for_composers_packaging_25(
    provider_wheel: zipfile.ZipFile, tmp_path: Path
) -> None:
    """Composer 2.15.3 pins packaging 25.0, which refuses Metadata-Version 2.5: its own validator reads the wheel."""
    assert metadata(provider_wheel, "Metadata-Version") == ["2.4"]
    text = tmp_path / "METADATA"
    text.write_text(dist_info(provider_wheel, "METADATA"))
    uv = shutil.which("uv")
    assert uv, "uv is not on PATH: `make install` installs it"
    venv = tmp_path / "packaging-25"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([uv, "pip", "install", "--quiet", "-p", str(python), "packaging==25.0"], check=True, timeout=300)
    done = subprocess.run([str(python), "-c", _VALIDATE, str(text)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "valid", done.stderr
    # the same validator refuses what a newer backend writes: the check can fail
    text.write_text(dist_info(provider_wheel, "METADATA").replace("Metadata-Version: 2.4", "Metadata-Version: 2.5"))
    refused = subprocess.run([str(python), "-c", _VALIDATE, str(text)], capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "'2.5' is not a valid metadata version" in refused.stderr


def test_the_build_backend_is_pinned_to_one_that_writes_metadata_2_4() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["build-system"]["requires"] == ["hatchling==1.27.0"]
    for target in ("wheel", "sdist"):
        assert project["tool"]["hatch"]["build"]["targets"][target]["core-metadata-version"] == "2.4"
    # the tests build with the same backend pip and uv use
    assert "hatchling==1.27.0" in project["dependency-groups"]["test"]


# -- the package page ------------------------------------------------------------------------------------

_LINK = re.compile(r"\]\(([^)\s]+)[^)]*\)|<a\s[^>]*href=[\"']([^\"']+)|^\[[^\]]+\]:\s*(\S+)", re.MULTILINE)


def test_the_package_page_is_written_for_users_with_absolute_links_only(provider_wheel: zipfile.ZipFile) -> None:
    page = HeaderParser().parsestr(dist_info(provider_wheel, "METADATA")).get_payload()
    assert isinstance(page, str)
    assert page.strip() == (REPO / "docs" / "pypi-description.md").read_text().strip()
    assert metadata(provider_wheel, "Description-Content-Type") == ["text/markdown"]
    links = [next(g for g in found if g) for found in _LINK.findall(page)]
    assert len(links) >= 3  # the reader finds links at all
    assert [link for link in links if not link.startswith("https://")] == []
    # users' matters first: what it is and how to install it, before any contributor command
    assert page.index("## Install") < page.index("## A training job")
    assert not re.search(r"\bmake (demo|test|dist|install)\b", page)
    assert "tests/" not in page and "bench/" not in page
