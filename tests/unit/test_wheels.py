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
import subprocess
import sys
import tarfile
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
