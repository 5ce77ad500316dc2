"""The two wheels this repository builds: the provider's carries no emulator, the emulator's stands alone.

The emulator runs any script it is sent; the provider's wheel goes into every Airflow (Composer)
image, so it must not bring the emulator along. Both wheels are built with hatchling's PEP 517 hook,
the backend pip and uv call, in a fresh interpreter (about a second each).
"""

from __future__ import annotations

import configparser
import subprocess
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_BUILD = "import sys; from hatchling.build import build_wheel; print(build_wheel(sys.argv[1]))"


def build_wheel(project: Path, out: Path) -> zipfile.ZipFile:
    """The wheel of the project in ``project``, built into ``out``."""
    done = subprocess.run(
        [sys.executable, "-c", _BUILD, str(out)], cwd=project, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"building the wheel of {project} failed:\n{done.stderr}"
    return zipfile.ZipFile(out / done.stdout.strip().splitlines()[-1])


def dist_info(wheel: zipfile.ZipFile, name: str) -> str:
    (path,) = [n for n in wheel.namelist() if n.split("/")[0].endswith(".dist-info") and n.endswith(f"/{name}")]
    return wheel.read(path).decode()


def entry_points(wheel: zipfile.ZipFile) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(dist_info(wheel, "entry_points.txt"))
    return parser


def requirements(wheel: zipfile.ZipFile) -> list[str]:
    return HeaderParser().parsestr(dist_info(wheel, "METADATA")).get_all("Requires-Dist") or []


@pytest.fixture(scope="module")
def provider_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    return build_wheel(REPO, tmp_path_factory.mktemp("provider-wheel"))


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
    # the emulator comes only with the test extra
    emulator_requirements = [r for r in requirements(provider_wheel) if r.startswith("slurmapi-emulator")]
    assert emulator_requirements == ["slurmapi-emulator; extra == 'test'"]


def test_emulator_wheel_builds_on_its_own(emulator_wheel: zipfile.ZipFile) -> None:
    names = emulator_wheel.namelist()
    assert {"slurmapi_emulator/__init__.py", "slurmapi_emulator/__main__.py", "slurmapi_emulator/py.typed"} <= set(
        names
    )
    assert "slurmapi_emulator/server.py" in names and "slurmapi_emulator/gateway.py" in names
    assert [n for n in names if n.split("/")[0] != "slurmapi_emulator" and ".dist-info/" not in n] == []
    assert dict(entry_points(emulator_wheel)["console_scripts"]) == {"slurmapi-emulator": "slurmapi_emulator.cli:main"}
    assert [r for r in requirements(emulator_wheel) if "airflow" in r] == []
