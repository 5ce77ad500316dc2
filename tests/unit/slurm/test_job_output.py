"""The script wrapper and the reading of ``extra``, without a cluster (running jobs is judged elsewhere)."""

from __future__ import annotations

import pytest

from airflow_provider_slurmapi.slurm.job import SlurmJob
from airflow_provider_slurmapi.slurm.job_output import (
    EXTRA_LIMIT_BYTES,
    interpreter_of,
    mentions_progress,
    read_extra,
    wrap_script,
)
from airflow_provider_slurmapi.slurm.states import JobState, JobStateInfo


def test_sbatch_lines_stay_at_the_top_right_after_the_interpreter_line() -> None:
    script = "#!/usr/bin/env python3\n# a comment\n#SBATCH --time=5\n\n#SBATCH --mem=1G\nimport os\n#SBATCH --late=1\n"
    wrapped = wrap_script(script).split("\n")
    assert wrapped[:3] == ["#!/bin/sh", "#SBATCH --time=5", "#SBATCH --mem=1G"]
    assert "#SBATCH --late=1" not in wrapped[:10], "Slurm stops reading #SBATCH at the first command"


def test_the_script_is_embedded_unchanged_and_run_with_its_own_interpreter() -> None:
    script = "#!/usr/bin/env python3\nprint('$HOME `x` \\\\ @@SCRIPT@@')\n"
    wrapped = wrap_script(script)
    assert "\n" + script in wrapped
    assert '/usr/bin/env python3 "$_sa_dir/slurm_script"' in wrapped


@pytest.mark.parametrize(
    ("line", "argv"),
    [
        ("#!/bin/bash", ["/bin/bash"]),
        ("#! /bin/bash -l", ["/bin/bash", "-l"]),
        ("#!/usr/bin/env python3", ["/usr/bin/env", "python3"]),
        ("#!/usr/bin/env -S python3 -u", ["/usr/bin/env", "-S python3 -u"]),
    ],
)
def test_interpreter_line_is_read_as_the_kernel_reads_it(line: str, argv: list[str]) -> None:
    assert interpreter_of(line + "\necho\n") == argv


def test_read_extra_tells_output_from_progress() -> None:
    assert read_extra("airflow-output:\nline 1\nline 2").output == "line 1\nline 2"
    assert read_extra("airflow-output:").output == ""
    assert read_extra("epoch 3/10 loss=0.12").progress == "epoch 3/10 loss=0.12"
    assert read_extra("") == read_extra(None) == read_extra("  ")


def test_failure_message_ends_with_the_last_output_or_says_none_was_reported() -> None:
    failed = SlurmJob(job_id=4242, state_info=JobStateInfo(JobState.FAILED), source="live")
    with_output = SlurmJob.from_dict({**failed.to_dict(), "extra": "airflow-output:\nTraceback\nValueError: x"})
    assert with_output.failure_message().endswith("\nLast output of job 4242:\nTraceback\nValueError: x")
    assert "No output was reported by job 4242" in failed.failure_message(output_expected=True)
    assert "output" not in failed.failure_message().lower()


def test_progress_is_detected_in_scripts() -> None:
    assert mentions_progress("#!/bin/bash\nslurm_progress 'x'\n")
    assert mentions_progress("#!/usr/bin/env python3\nrun(['scontrol', 'update', 'extra=x'])\n")
    assert not mentions_progress("#!/bin/bash\necho hi\n")
    assert EXTRA_LIMIT_BYTES == 1024
