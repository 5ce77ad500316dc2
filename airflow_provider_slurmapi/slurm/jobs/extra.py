"""What a job's ``extra`` says: the output report the wrapper wrote at its end, or a progress message.

The job side of :mod:`~airflow_provider_slurmapi.slurm.submit.job_output`: reading a record's ``extra`` needs
only the marker, never the wrapping (the submit side). Control sequences are stripped as the node's
supervisor strips them (:mod:`~airflow_provider_slurmapi.slurm.jobs.controls`): anyone may have set it.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_slurmapi.slurm.api.values import clean_text
from airflow_provider_slurmapi.slurm.jobs.controls import strip_controls

OUTPUT_MARKER = "airflow-output:"


@dataclass(frozen=True, slots=True)
class ExtraReport:
    """What a job's ``extra`` says: its last output (at the end) or its latest progress message."""

    output: str | None = None
    progress: str | None = None


def read_extra(extra: str | None) -> ExtraReport:
    """Split ``extra`` into the wrapper's output report or a progress message (anything else set there)."""
    if not isinstance(extra, str) or not extra.strip():
        return ExtraReport()
    extra = strip_controls(clean_text(extra))  # no lone surrogates, no terminal control sequences
    if extra.startswith(OUTPUT_MARKER):
        return ExtraReport(output=extra[len(OUTPUT_MARKER) :].strip("\n"))
    return ExtraReport(progress=extra.strip())
