"""A connection without a key: these tests never fetch a token (the recorded answers need none)."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(autouse=True)
def _keyless_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", json.dumps({"conn_type": "google_cloud_platform"}))
