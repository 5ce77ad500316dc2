"""The import paths that users and the docs name keep working after the split of ``slurm/``."""

# split.py: generated
from __future__ import annotations

import importlib

import pytest

MOVED = [
    ("airflow_provider_slurmapi.slurm.cluster", "airflow_provider_slurmapi.slurm.api.cluster"),
    ("airflow_provider_slurmapi.slurm.errors", "airflow_provider_slurmapi.slurm.api.errors"),
    ("airflow_provider_slurmapi.slurm.slurm_time", "airflow_provider_slurmapi.slurm.submit.slurm_time"),
    ("airflow_provider_slurmapi.slurm.watch", "airflow_provider_slurmapi.slurm.jobs.watch"),
]


@pytest.mark.parametrize(("old", "new"), MOVED)
def test_an_old_import_path_gives_the_same_objects(old: str, new: str) -> None:
    before, after = importlib.import_module(old), importlib.import_module(new)
    defined = set(getattr(after, "__all__", ())) or {
        name
        for name, value in vars(after).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == new
    }
    assert defined
    missing = sorted(name for name in defined if not hasattr(before, name))
    assert missing == [], f"{old} lacks {missing}: run split.py again"
    assert all(getattr(before, name) is getattr(after, name) for name in defined)
