"""scripts/bootstrap_uv.py: uv from the package index with the standard library alone, checked against
its pinned sha256 (a bare Debian 12 has no pip and no venv module: `make test-bare-debian` runs it there
against the real index). Here a real HTTP index on 127.0.0.1 serves the PEP 691 page and the wheel."""

from __future__ import annotations

import hashlib
import http.server
import importlib.util
import io
import json
import os
import subprocess
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("bootstrap_uv", REPO / "scripts" / "bootstrap_uv.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bootstrap_uv = _script()
FILENAME, PINNED_SHA256 = bootstrap_uv.WHEELS["x86_64"]


def _wheel(binary: bytes) -> bytes:
    """A wheel laid out as uv's is: the binary under uv-VERSION.data/scripts/."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(f"uv-{bootstrap_uv.VERSION}.data/scripts/uv", binary)
        archive.writestr(f"uv-{bootstrap_uv.VERSION}.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    return out.getvalue()


@pytest.fixture
def index() -> Iterator[dict[str, Any]]:
    """A simple index: /simple/uv/ answers PEP 691 JSON listing FILENAME; /files/FILENAME is served[wheel]."""
    served: dict[str, Any] = {"wheel": b"", "accepts": []}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/simple/uv/":
                served["accepts"].append(self.headers.get("Accept"))
                body = json.dumps({"files": [{"filename": FILENAME, "url": f"../../files/{FILENAME}"}]}).encode()
            elif self.path == f"/files/{FILENAME}":
                body = served["wheel"]
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    served["url"] = f"http://127.0.0.1:{server.server_address[1]}/simple/"
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


def test_a_wheel_of_another_hash_is_refused_and_nothing_is_written(index: dict[str, Any], tmp_path: Path) -> None:
    index["wheel"] = _wheel(b"#!/bin/sh\necho not uv\n")
    with pytest.raises(bootstrap_uv.BootstrapError) as raised:
        bootstrap_uv.bootstrap(tools=tmp_path, machine="x86_64", index=index["url"])
    message = str(raised.value)
    assert FILENAME in message and PINNED_SHA256 in message and hashlib.sha256(index["wheel"]).hexdigest() in message
    assert "refused" in message
    assert not list(tmp_path.rglob("*")), "no uv, not even a partial one, is left behind"


def test_the_pinned_wheel_is_found_on_the_index_and_its_uv_unpacked(
    index: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same path with the pin moved to the served wheel's hash: the page is asked for in JSON, the
    binary lands executable at .tools/uv-VERSION/uv, and a second run finds it without the index."""
    binary = b"#!/bin/sh\necho uv-from-the-index\n"
    index["wheel"] = _wheel(binary)
    monkeypatch.setitem(bootstrap_uv.WHEELS, "x86_64", (FILENAME, hashlib.sha256(index["wheel"]).hexdigest()))
    uv = bootstrap_uv.bootstrap(tools=tmp_path, machine="x86_64", index=index["url"])
    assert uv == tmp_path / f"uv-{bootstrap_uv.VERSION}" / "uv"
    assert uv.read_bytes() == binary and os.access(uv, os.X_OK)
    assert subprocess.run([str(uv)], capture_output=True, text=True, check=True).stdout == "uv-from-the-index\n"
    assert index["accepts"] == ["application/vnd.pypi.simple.v1+json"]
    assert bootstrap_uv.bootstrap(tools=tmp_path, machine="x86_64", index="http://127.0.0.1:9/nothing/") == uv


def test_a_machine_without_a_pinned_wheel_is_told_to_install_uv_itself() -> None:
    with pytest.raises(bootstrap_uv.BootstrapError, match=r"no pinned uv wheel for linux riscv64.*the uv on PATH"):
        bootstrap_uv.wheel_for("riscv64")


def test_the_makefile_falls_back_to_the_pinned_uv_when_none_is_on_path() -> None:
    """`make` with no uv on PATH (UV_ON_PATH empty) bootstraps the pinned one and builds every venv with it."""
    pinned = f"{REPO}/.tools/uv-{bootstrap_uv.VERSION}/uv"
    dry = subprocess.run(
        ["make", "-n", "-B", "-C", str(REPO), "--no-print-directory", "UV_ON_PATH=", "demo", "install"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "scripts/bootstrap_uv.py" in dry
    assert f"{pinned} venv --quiet --python 3.11 .venv-demo" in dry
    assert (
        f"{pinned} pip install --quiet -p .venv-demo/bin/python -c requirements/test-lock.txt -e . -e ./emulator" in dry
    )
    assert f"{pinned} pip install --quiet -p .venv/bin/python" in dry
    assert "pip install --quiet uv" not in dry, "no step needs pip"
