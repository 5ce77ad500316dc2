"""One reader of text (issue 19): the job record, the accounting reader and #SBATCH values read text alike."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError
from airflow_provider_slurmapi.slurm.api.values import NotText, read_text
from airflow_provider_slurmapi.slurm.jobs.accounting import read_accounting
from airflow_provider_slurmapi.slurm.jobs.job import SlurmJob
from airflow_provider_slurmapi.slurm.submit.sbatch import directive_fields
from tests.fixtures import fixture_body


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("  train  ", "train"),
        ("", None),
        ("   ", None),
        (None, None),
        ("(null)", None),
        ("None assigned", None),
        ("x\ud800y", "x?y"),  # a lone surrogate, replaced so a log can write it
        (7, None),
        (True, None),
        (["a"], None),
    ],
)
def test_read_text(value: Any, text: str | None) -> None:
    assert read_text(value) == text


def test_strict_reads_numbers_slurm_printed_as_text_and_refuses_other_shapes() -> None:
    assert read_text(42, strict=True) == "42"
    assert read_text(None, strict=True) is None
    for odd in (True, ["a"], {"a": 1}):
        with pytest.raises(NotText):
            read_text(odd, strict=True)


def test_limit_and_placeholders() -> None:
    assert read_text("x" * 300, limit=200) == "x" * 197 + "..."
    assert read_text("(null)", placeholders=False) == "(null)"


def _live_record() -> dict[str, Any]:
    record = fixture_body("16_job_A_completed")["jobs"][0]
    return copy.deepcopy(record)


@given(st.sampled_from(["(null)", "None assigned", "  ", "", "a3-node[1-4]", " n1 ", "x\udfffy"]))
def test_the_job_record_and_the_accounting_reader_read_nodes_alike(nodes: str) -> None:
    """Before: the accounting reader dropped Slurm's placeholders and the job reader's name/comment kept them."""
    record = _live_record()
    record["nodes"] = nodes
    job = SlurmJob.from_live(record)
    accounting = read_accounting(record, int(record["job_id"]))
    assert job.nodes == read_text(nodes)
    if accounting is not None:
        assert accounting.node_list == read_text(nodes)


def test_a_placeholder_is_no_comment_in_the_job_record() -> None:
    record = _live_record()
    record["comment"] = "(null)"
    assert SlurmJob.from_live(record).comment is None


def test_an_sbatch_value_with_a_nul_says_so() -> None:
    with pytest.raises(ConfigurationError, match="holds a NUL character"):
        directive_fields("#!/bin/bash\n#SBATCH --job-name='a\x00b'\ntrue\n")
