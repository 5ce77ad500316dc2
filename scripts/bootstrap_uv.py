"""Put a pinned uv into ``.tools/`` with the Python standard library alone, and print its path.

The Makefile builds every venv with uv. Debian's ``python3`` has neither pip (python3-pip) nor a
working venv module (python3-venv: ``ensurepip`` is left out), so uv cannot be installed with
``python3 -m pip``, and no venv can be made to put pip in. uv needs neither: it makes venvs and installs
packages itself. So this script downloads uv's wheel of :data:`VERSION` from the package index (its
simple API, PEP 691 JSON) with ``urllib``, refuses it unless its sha256 is the one pinned here, and
unpacks the one ``uv`` binary into ``.tools/uv-VERSION/`` (git-ignored). A second run finds it there
and downloads nothing.

    python3 scripts/bootstrap_uv.py     # prints .../.tools/uv-0.13.10/uv

``UV_INDEX_URL`` (or ``PIP_INDEX_URL``) names another simple index, a private mirror for instance.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import stat
import sys
import tempfile
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

VERSION = "0.13.10"
# The wheel of each machine uv publishes one for (Linux), and its sha256 as the index gave it when
# VERSION was pinned. Moving VERSION means taking the new hashes from the index's page of uv.
WHEELS = {
    "x86_64": (
        f"uv-{VERSION}-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "7cc9c41b43d583e34c781fd3446405b06e9c5fa2db468ce2a534d353db6429e5",
    ),
    "aarch64": (
        f"uv-{VERSION}-py3-none-manylinux_2_28_aarch64.whl",
        "ee3bca6523ed93c3ae0d1a90c2733be307f5f7cc5287c746214e93a3bae0da13",
    ),
}
INDEX = "https://pypi.org/simple/"
TOOLS = Path(__file__).resolve().parents[1] / ".tools"


class BootstrapError(Exception):
    """Why uv could not be put in place, and what to do instead."""


def uv_path(tools: Path = TOOLS) -> Path:
    return tools / f"uv-{VERSION}" / "uv"


def wheel_for(machine: str) -> tuple[str, str]:
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine.lower())
    if sys.platform != "linux" or machine not in WHEELS:
        raise BootstrapError(
            f"no pinned uv wheel for {sys.platform} {machine} (pinned: Linux {', '.join(WHEELS)}); "
            "install uv yourself (https://docs.astral.sh/uv/) and run make again: the Makefile uses the uv on PATH"
        )
    return WHEELS[machine]


def wheel_url(filename: str, index: str = INDEX) -> str:
    """The download address of ``filename``, read from the index's JSON page of uv (PEP 691)."""
    page = urllib.parse.urljoin(index.rstrip("/") + "/", "uv/")
    request = urllib.request.Request(page, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        files = json.load(answer)["files"]
    for entry in files:
        if entry["filename"] == filename:
            return urllib.parse.urljoin(page, entry["url"])
    raise BootstrapError(f"{page} lists no {filename}: is uv {VERSION} on that index?")


def verified(data: bytes, filename: str, sha256: str) -> bytes:
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise BootstrapError(
            f"{filename} has sha256 {digest}, not the pinned {sha256}: refused (a changed or corrupted download)"
        )
    return data


def unpack_uv(wheel: bytes, target: Path) -> Path:
    """Write the wheel's ``uv`` binary to ``target`` (atomically: a half-written uv is never run)."""
    member = f"uv-{VERSION}.data/scripts/uv"
    with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
        binary = archive.read(member)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=target.parent, prefix=".uv-")
    with os.fdopen(fd, "wb") as out:
        out.write(binary)
    os.chmod(partial, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    os.replace(partial, target)
    return target


def bootstrap(tools: Path = TOOLS, machine: str | None = None, index: str | None = None) -> Path:
    target = uv_path(tools)
    if target.is_file() and os.access(target, os.X_OK):
        return target
    filename, sha256 = wheel_for(machine or platform.machine())
    index = index or os.environ.get("UV_INDEX_URL") or os.environ.get("PIP_INDEX_URL") or INDEX
    url = wheel_url(filename, index)
    print(f"bootstrap_uv: downloading {filename} ...", file=sys.stderr)
    with urllib.request.urlopen(url, timeout=300) as answer:
        data = answer.read()
    return unpack_uv(verified(data, filename, sha256), target)


def main() -> int:
    try:
        print(bootstrap())
    except (BootstrapError, OSError) as error:
        print(f"bootstrap_uv: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
