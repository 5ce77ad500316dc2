"""The emulator's table of API versions agrees with the provider's on every trait both hold.

The emulator is its own distribution and must not import the provider, so each keeps a table
(``slurmapi_emulator/versions.py``, ``airflow_provider_slurmapi/slurm/api/api_versions.py``); this test is
what keeps them one table in substance.
"""

from __future__ import annotations

from slurmapi_emulator.versions import VERSIONS as WIRE_VERSIONS

from airflow_provider_slurmapi.slurm.api.api_versions import API_VERSIONS

SHARED = (
    "name",
    "slurm_releases",
    "deprecated_in",
    "has_expanded_output",
    "cancel_answers_status",
    "submit_answers_result",
    "history_time_filter",
    "has_expediting",
)


def test_both_tables_list_the_same_versions_with_the_same_traits() -> None:
    provider = [tuple(getattr(row, name) for name in SHARED) for row in API_VERSIONS]
    emulator = [tuple(getattr(row, name) for name in SHARED) for row in WIRE_VERSIONS]
    assert provider == emulator
