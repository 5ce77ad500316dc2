"""The kept API version's value: read back as written, and read from what earlier releases kept."""

from __future__ import annotations

import pytest

from airflow_provider_slurmapi.slurm.api.kept_version import RECHECK_SECONDS, KeptVersion, read_kept


def test_a_kept_value_reads_back_as_written() -> None:
    kept = KeptVersion("v0.0.42", 1765100000.0, "24.11.5")
    assert read_kept(kept.text()) == kept
    assert not kept.due(1765100000.0 + RECHECK_SECONDS - 1)
    assert kept.due(1765100000.0 + RECHECK_SECONDS)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("v0.0.40", KeptVersion("v0.0.40")),  # kept before values carried their time: due at once
        (" v0.0.41\n", KeptVersion("v0.0.41")),
        ('{"version": "v0.0.43", "checked": "yesterday", "release": null}', KeptVersion("v0.0.43")),
        ('{"version": "v0.0.43", "checked": true}', KeptVersion("v0.0.43")),
        ('{"version": "v9.9.9", "checked": 1765100000}', None),  # not a version this provider speaks
        ('{"version": "v0.0.42"', None),  # garbled: negotiated afresh
        ("[]", None),
        ("", None),
        (None, None),
    ],
)
def test_what_an_earlier_release_or_a_garbled_store_holds(value: str | None, expected: KeptVersion | None) -> None:
    assert read_kept(value) == expected
    if expected is not None:
        assert expected.due(1765100000.0)


def test_a_stamp_more_than_a_day_ahead_of_this_clock_is_due_not_kept_forever() -> None:
    assert KeptVersion("v0.0.42", 4102444800.0).due(1765100000.0)  # year 2100
