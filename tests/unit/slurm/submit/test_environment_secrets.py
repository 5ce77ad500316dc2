"""A bad ``environment`` entry is named by its key or position, never by its value (values are secrets)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError
from airflow_provider_slurmapi.slurm.submit.spec import prepare_submission

SCRIPT = "#!/bin/bash\ntrue\n"
SECRET = "hunter2-secret-value"


def refused(environment: Any) -> str:
    with pytest.raises(ConfigurationError, match=r"^job\.environment") as info:
        prepare_submission({"environment": environment}, SCRIPT)
    message = str(info.value)
    assert SECRET not in message, message
    return message


def test_bad_environment_error_names_keys_never_values() -> None:
    message = refused(["PATH=/usr/bin", f"API_TOKEN={SECRET}", f"{SECRET}", 5, f"={SECRET}"])
    assert "#2" in message and "#3" in message and "#4" in message
    assert "#0" not in message and "#1" not in message and "API_TOKEN" not in message


def test_bad_dict_environment_names_only_the_bad_keys() -> None:
    message = refused({"PATH": "/usr/bin", "API_TOKEN": SECRET, "EMPTY": None, f"K={SECRET}": "x", 3: SECRET})
    assert "'EMPTY'" in message and "'K' (with '=' and more)" in message and "<a key of type int>" in message
    assert "API_TOKEN" not in message


@pytest.mark.parametrize("environment", [f"API_TOKEN={SECRET}", {SECRET}, 42.0])
def test_environment_of_the_wrong_type_shows_no_content(environment: Any) -> None:
    assert "not a dict or a list" in refused(environment)


def test_good_environments_in_both_forms() -> None:
    as_dict = prepare_submission({"environment": {"PATH": "/bin", "N": 3, "DEBUG": True}}, SCRIPT)
    assert as_dict.job["environment"] == ["PATH=/bin", "N=3", "DEBUG=True"]
    as_list = prepare_submission({"environment": ["PATH=/bin", "EMPTY="]}, SCRIPT)
    assert as_list.job["environment"] == ["PATH=/bin", "EMPTY="]
