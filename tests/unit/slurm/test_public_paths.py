"""The old flat import paths of ``slurm/`` are gone (the package was never released with them), and
each name they held lives in exactly one module, the one the CHANGELOG names."""

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
def test_an_old_flat_path_is_gone_and_its_names_live_under_the_sub_package(old: str, new: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    assert importlib.import_module(new).__name__ == new
