"""``#SBATCH --export`` values never reach an error or a note, whatever the spelling (issue 16, point 12).

Environments hold secrets (database passwords, tokens), and errors and notes go to the task log.
Every piece of the generated secret starts with ``qz``, which no message of ours contains, so a
leak of any piece of it, however the line was cut, is seen. (A value whose comma is followed by
``NAME=`` is two variables to Slurm, and the second one's name is shown: such values are not generated.)
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError
from airflow_provider_slurmapi.slurm.submit.sbatch import apply_directives, directive_fields
from airflow_provider_slurmapi.slurm.submit.spec import DEFAULT_ENVIRONMENT

MARK = "qz"
SPELLINGS = ["--e", "--ex", "--exp", "--expo", "--expor", "--export"]


def _messages(script: str) -> str:
    """Everything the provider could log about the script: its error, or its notes."""
    try:
        applied = apply_directives({"environment": {"PATH": "/bin"}}, script, default_environment=DEFAULT_ENVIRONMENT)
    except ConfigurationError as exc:
        return str(exc)
    return "\n".join(applied.notes)


# The two examples of the issue.
@pytest.mark.parametrize(
    "line",
    [
        "#SBATCH --export='DB_PASS=qzs3cr3t qztail-part' --nice=bad",
        "#SBATCH --ex=DB_PASS=qzs3cr3t",
        "#SBATCH --export=DB_PASS=qzs3cr3t qztail-part",
        "#SBATCH --export=ALL,DB_PASS=qzab,qzcd --nice=bad",
        "#SBATCH --export=\"DB_PASS='qzab,qzcd'\" --nice=bad",
        "#SBATCH --export=DB_PASS='qzunbalanced",
        "#SBATCH --export DB_PASS=qzs3cr3t --bogus",
        "#SBATCH -J x --exp=DB_PASS=qzs3cr3t,TOKEN=qzt0k3n",
    ],
)
def test_known_leaks_show_the_names_and_never_the_values(line: str) -> None:
    message = _messages(f"#!/bin/bash\n{line}\ntrue\n")
    assert message, "the line must give an error or a note"
    assert MARK not in message, message
    if "unbalanced" not in line:
        assert "DB_PASS" in message, message


_piece = st.builds(lambda tail: MARK + tail, st.text(alphabet="abcXYZ0189_./@%+-", min_size=1, max_size=8))
_value = st.lists(_piece, min_size=1, max_size=4).flatmap(
    lambda pieces: st.builds(
        lambda seps: pieces[0] + "".join(sep + piece for sep, piece in zip(seps, pieces[1:], strict=False)),
        st.lists(st.sampled_from([",", " ", ":", "  "]), min_size=len(pieces) - 1, max_size=len(pieces) - 1),
    )
)
_name = st.sampled_from(["DB_PASS", "API_TOKEN", "HF_TOKEN", "X"])
_others = st.sampled_from(["", "-J job", "--nice=bad", "--bogus", "-t 5", "--time=nonsense", "'", "more words"])


@settings(max_examples=400, deadline=None)
@given(
    spelling=st.sampled_from(SPELLINGS),
    joiner=st.sampled_from(["=", " "]),
    quote=st.sampled_from(["", "'", '"']),
    items=st.lists(st.tuples(_name, _value), min_size=1, max_size=3),
    lead=st.sampled_from(["", "ALL,", "NONE,", "HOME,"]),
    before=_others,
    after=_others,
)
def test_no_spelling_shows_a_value(
    spelling: str,
    joiner: str,
    quote: str,
    items: list[tuple[str, str]],
    lead: str,
    before: str,
    after: str,
) -> None:
    value = lead + ",".join(f"{name}={secret}" for name, secret in items)
    line = f"#SBATCH {before} {spelling}{joiner}{quote}{value}{quote} {after}"
    message = _messages(f"#!/bin/bash\n{line}\ntrue\n")
    assert MARK not in message, f"{line!r} -> {message}"


@settings(max_examples=200, deadline=None)
@given(items=st.lists(st.tuples(_name, _piece), min_size=1, max_size=3), spelling=st.sampled_from(SPELLINGS[:-1]))
def test_an_error_about_an_export_names_its_variables(items: list[tuple[str, str]], spelling: str) -> None:
    """An abbreviation is refused (getopt finds it ambiguous with --export-file): the error names each variable."""
    line = f"#SBATCH {spelling}=" + ",".join(f"{name}={secret}" for name, secret in items)
    with pytest.raises(ConfigurationError) as raised:
        directive_fields(f"#!/bin/bash\n{line}\ntrue\n")
    message = str(raised.value)
    assert MARK not in message
    for name, _ in items:
        assert f"{name}=***" in message
