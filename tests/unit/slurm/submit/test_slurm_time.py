"""Slurm's time forms: one reader for ``job["time_limit"]`` and ``#SBATCH --time``, as ``time_str2mins`` reads them.

The expected minutes come from Slurm's rules (``src/common/parse_time.c``), counted by hand; a
sample is checked against real ``sbatch`` in ``tests/live_slurm/test_sbatch_directives_contract.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError
from airflow_provider_slurmapi.slurm.submit.sbatch import directive_fields
from airflow_provider_slurmapi.slurm.submit.slurm_time import SlurmTimeError, slurm_minutes
from airflow_provider_slurmapi.slurm.submit.spec import parse_time_limit

INFINITE = {"set": True, "infinite": True, "number": 0}


def num(n: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": n}


# (form, minutes): None is no limit.
FORMS = [
    ("90", 90),
    ("0090", 90),
    ("5:30", 6),  # minutes:seconds; seconds round up
    ("5:00", 5),
    ("0:01", 1),
    ("1:30:00", 90),
    ("1:30:01", 91),
    ("0-5:30", 330),  # days-hours:minutes (issue 17: was sent as 6)
    ("0-2", 120),  # days-hours (issue 17: was sent as 2)
    ("2-12", 3600),
    ("1-00:30", 1470),
    ("1-2:3:4", 1564),
    ("0-00:00:30", 1),
    ("5-", 7200),  # Slurm reads "days-" with the hours left at 0
    ("0", 0),
    ("-0", 0),
    ("-1", None),
    ("UNLIMITED", None),
    ("unlimited", None),
    ("Infinite", None),
    ("35791393", 35791393),  # the last minute count whose seconds fit Slurm's int
]


@pytest.mark.parametrize(("text", "minutes"), FORMS)
def test_every_form_reads_as_time_str2mins_reads_it(text: str, minutes: int | None) -> None:
    assert slurm_minutes(text) == minutes


@pytest.mark.parametrize(("text", "minutes"), FORMS)
def test_job_time_limit_and_sbatch_time_give_the_same_field(text: str, minutes: int | None) -> None:
    expected = INFINITE if minutes in (None, 0) else num(minutes)
    assert parse_time_limit(text) == expected
    assert _directive("time", text) == {"time_limit": expected}
    assert _directive("time-min", text) == {"time_minimum": expected}  # sbatch: 0 is INFINITE here too


REFUSED = [
    "",
    " 5",  # no blanks: sbatch refuses "--time=' 5'"
    "5 ",
    "+5",
    "1.5",
    "5m",
    "1:2-3",  # a '-' after a ':'
    "1-2-3",
    "1:2:3:4",
    "1-:5",
    ":5",
    "5:",
    "1::2",
    "1-2:3:",
    "-",
    "-5",  # sbatch sends an unsigned wrap (squeue shows INVALID)
    "-01",
    "35791394",  # seconds overflow Slurm's int
    "9" * 5000,  # and never Python's limit on long digit strings
]


@pytest.mark.parametrize("text", REFUSED, ids=lambda text: repr(text[:20]))
def test_forms_slurm_refuses_are_refused_on_both_paths_with_the_forms_named(text: str) -> None:
    with pytest.raises(SlurmTimeError):
        slurm_minutes(text)
    with pytest.raises(ConfigurationError, match=r"job\.time_limit=.*is not a Slurm time.*12:00:00"):
        parse_time_limit(text)
    if text.strip() and "'" not in text:
        with pytest.raises(ConfigurationError, match=r"--time=.*is not a Slurm time"):
            _directive("time", text)


def _directive(option: str, text: str) -> dict[str, Any]:
    return directive_fields(f"#!/bin/bash\n#SBATCH --{option}='{text}'\ntrue\n").fields


# Forms built from their parts, and the minutes those parts make (seconds rounded up).
_part = st.integers(0, 99)


@st.composite
def _generated(draw: st.DrawFn) -> tuple[str, int]:
    days, hours, minutes, seconds = draw(_part), draw(_part), draw(st.integers(0, 9999)), draw(_part)
    pad = draw(st.sampled_from(["", "0", "00"]))
    form = draw(st.sampled_from(["m", "m:s", "h:m:s", "d-h", "d-h:m", "d-h:m:s"]))
    text = {
        "m": f"{pad}{minutes}",
        "m:s": f"{minutes}:{pad}{seconds}",
        "h:m:s": f"{hours}:{pad}{minutes}:{seconds}",
        "d-h": f"{days}-{pad}{hours}",
        "d-h:m": f"{days}-{hours}:{pad}{minutes}",
        "d-h:m:s": f"{pad}{days}-{hours}:{minutes}:{seconds}",
    }[form]
    used = {"m": (0, 0, 1, 0), "m:s": (0, 0, 1, 1), "h:m:s": (0, 1, 1, 1), "d-h": (1, 1, 0, 0)}
    used |= {"d-h:m": (1, 1, 1, 0), "d-h:m:s": (1, 1, 1, 1)}
    d, h, m, s = used[form]
    total = d * days * 86400 + h * hours * 3600 + m * minutes * 60 + s * seconds
    return text, -(-total // 60)


@settings(max_examples=300, deadline=None)
@given(_generated())
def test_generated_forms_count_like_slurm_and_both_paths_agree(case: tuple[str, int]) -> None:
    text, minutes = case
    assert slurm_minutes(text) == minutes
    expected = INFINITE if minutes == 0 else num(minutes)
    assert parse_time_limit(text) == _directive("time", text)["time_limit"] == expected


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="0123456789-:+.xIiNnFfTtEeUuLlMmDd", max_size=14))
def test_any_text_is_read_alike_or_refused_alike_by_both_paths(text: str) -> None:
    try:
        by_job: Any = parse_time_limit(text)
    except ConfigurationError:
        by_job = "refused"
    try:
        by_script: Any = _directive("time", text)["time_limit"]
    except ConfigurationError:
        by_script = "refused"
    assert by_job == by_script
