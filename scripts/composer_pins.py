"""Resolve the provider's wheel on top of each Cloud Composer pin set and fail if a pin would move.

Composer installs a user's packages on top of an image whose packages are pinned, and refuses (or
breaks on) a package that needs one of them moved. This resolves the built wheel with every pin of a
set as a constraint (uv's resolver, Python 3.11 on Linux x86_64, as the images run), then compares the
resolution with the pins: a pinned package at another version fails the check; what the resolver
added beside the provider is printed, one line per set, for the release notes.

    python scripts/composer_pins.py dist/airflow_provider_slurmapi-*.whl requirements/composer/*.txt
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

PROVIDER = "airflow-provider-slurmapi"
# A pin set that holds only the image's key pins says so with this line: what the resolver adds to it is
# the image's own packages as much as the provider's, so it is counted, not listed.
KEY_PINS_ONLY = "# slurmapi: key pins only"
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)")


def normalize(name: str) -> str:
    """PEP 503's form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(text: str) -> dict[str, str]:
    """``name==version`` lines (comments and blank lines skipped), by normalized name."""
    pins = {}
    for line in text.splitlines():
        found = _PIN.match(line)
        if found:
            pins[normalize(found[1])] = found[2]
    return pins


def resolve(wheel: Path, pin_file: Path) -> dict[str, str]:
    """What uv resolves the wheel to with every pin of ``pin_file`` as a constraint."""
    uv = shutil.which("uv")
    if uv is None:
        raise SystemExit("uv is not on PATH: `make install` installs it")
    done = subprocess.run(
        [
            uv, "pip", "compile", "--quiet", "--no-header", "--no-annotate",
            "--python-version", "3.11", "--python-platform", "x86_64-unknown-linux-gnu",
            "--constraint", str(pin_file), "-",
        ],
        input=f"{PROVIDER} @ {wheel.resolve().as_uri()}\n",
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{pin_file.name}: the wheel does not resolve under these pins:\n{done.stderr.strip()}")
    return read_pins(done.stdout)


def check(wheel: Path, pin_file: Path) -> list[str]:
    """The problems of one pin set (empty when no pin moves); prints what was added."""
    pins = read_pins(pin_file.read_text())
    resolved = resolve(wheel, pin_file)
    moved = [
        f"{name} {pins[name]} -> {version}"
        for name, version in resolved.items()
        if name in pins and pins[name] != version
    ]
    added = sorted(f"{name}=={version}" for name, version in resolved.items() if name not in pins and name != PROVIDER)
    kept = sum(1 for name in resolved if name in pins)
    print(
        f"{pin_file.name}: {len(pins)} pins, {kept} of them in the provider's closure, none moved"
        if not moved
        else f"{pin_file.name}: {len(moved)} pin(s) moved: {', '.join(moved)}"
    )
    if KEY_PINS_ONLY in pin_file.read_text():
        picked = ", ".join(f"{n}=={resolved[n]}" for n in ("apache-airflow-providers-google",) if n in resolved)
        print(f"  key pins only (the image's full list was not at hand): {len(added)} more packages resolved; {picked}")
    else:
        print(f"  added beside the provider ({len(added)}): {', '.join(added) or 'nothing'}")
    return [f"{pin_file.name}: {m}" for m in moved]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("pin_files", type=Path, nargs="+")
    args = parser.parse_args(argv)
    problems = [problem for pin_file in args.pin_files for problem in check(args.wheel, pin_file)]
    for problem in problems:
        print(f"MOVED {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
