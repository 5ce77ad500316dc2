"""Unit tests run operators outside an Airflow task, where no Variable store answers: they get a configured tag key."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def configured_tag_secret(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AIRFLOW__SLURMAPI__TAG_SECRET", "slurmapi-unit-tests-tag-key-of-at-least-32-chars")
    yield
