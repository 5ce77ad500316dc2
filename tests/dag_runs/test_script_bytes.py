"""The script reaches Slurm byte for byte, final newline included (issue 34): a literal one, a
templated one, one ending with a blank line, a file of the DAG folder, a mapped task's, and what a
``@task.slurm`` function returns (its text, or a file). Each job writes the SHA-256 of the script
its node runs; the emulator's copy of the script is compared too, for a readable difference.

DOS line breaks (``\\r\\n``), which ``sbatch`` refuses, fail before any call, naming the field, the
line and the fix; the DAG's other tasks keep Airflow's own rendering.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator
from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError
from tests.conftest import DAGS_FOLDER, load_dag
from tests.dag_runs.dag_files.slurm_script_bytes import CRLF_FILE, FILE, SUBMITTED, SUCCEEDS
from tests.dag_runs.test_watchers import xcom

CRLF_SCRIPT = b"#!/bin/bash\r\necho saved on Windows\r\n"


def expected(task_id: str) -> bytes:
    """The bytes the job of ``task_id`` must run: the script as written, its templates rendered."""
    if task_id in SUBMITTED:
        return SUBMITTED[task_id].encode()
    return (DAGS_FOLDER / FILE).read_text().replace("{{ task.task_id }}", task_id).encode()


@pytest.fixture
def crlf_file() -> Iterator[Path]:
    """A script file saved with DOS line breaks, beside the DAG (git would not keep one as it is)."""
    path = DAGS_FOLDER / CRLF_FILE
    path.write_bytes(CRLF_SCRIPT)
    yield path
    path.unlink()


def run(dag: Any) -> tuple[Any, dict[str, str]]:
    from airflow.utils.session import create_session

    dag_run = dag.test()
    with create_session() as session:
        states = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances(session=session)}
    return dag_run, states


def test_each_form_of_the_script_reaches_slurm_byte_for_byte(
    airflow_db: Any, gcp_connection: Any, crlf_file: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    _, states = run(load_dag("slurm_script_bytes.py", "script_bytes"))
    out = "".join(capfd.readouterr())
    assert {task: states[task] for task in SUCCEEDS} == dict.fromkeys(SUCCEEDS, "success"), out[-3000:]
    assert xcom("slurm_script_bytes", "other_operator") == "epochs=3"  # the DAG's Jinja environment is not changed
    workdir = Path(gcp_connection.config.workdir)
    jobs = {job["comment"].split(" task=")[1].split()[0]: job["job_id"] for job in gcp_connection.jobs()}
    assert sorted(jobs) == sorted(SUCCEEDS)  # the two scripts with DOS line breaks: no job
    want = {task_id: expected(task_id) for task_id in jobs}
    assert all(script.endswith(b"\n") for script in want.values()) and want["blank_line"].endswith(b"\n\n")
    assert {
        task_id: (workdir / ".emulator" / f"job{job_id}.sh").read_bytes() for task_id, job_id in jobs.items()
    } == want
    digests = {task_id: (workdir / f"bytes-{job_id}.txt").read_text().split()[0] for task_id, job_id in jobs.items()}
    assert digests == {task_id: hashlib.sha256(script).hexdigest() for task_id, script in want.items()}

    # Refused before any call, each naming where the line break is and how to fix it.
    assert states["crlf_file"] == states["crlf_param"] == "failed"
    assert (
        f"script='{CRLF_FILE}' (the file {crlf_file}) has DOS line breaks (\\r\\n), the first at the end of line 1"
        in out
    )
    assert f"dos2unix {crlf_file}" in out
    assert "script (as rendered) has DOS line breaks (\\r\\n), the first at the end of line 2" in out
    assert "sbatch refuses such a script" in out


def test_a_literal_script_with_dos_line_breaks_fails_the_dag_parse() -> None:
    cluster = {"region": "us-central1", "cluster_id": "c"}
    with pytest.raises(
        ConfigurationError, match=r"^script has DOS line breaks \(\\r\\n\), the first at the end of line 1"
    ):
        SlurmSubmitJobOperator(task_id="t", script="#!/bin/bash\r\nsrun train.py\r\n", **cluster)
    # Jinja would turn a lone carriage return of the template into a line break: not as written.
    with pytest.raises(ConfigurationError, match=r"^script has a carriage return \(\\r\) on line 2 that ends no line"):
        SlurmSubmitJobOperator(task_id="t", script="#!/bin/bash\nprintf 'a\rb'\n", **cluster)
