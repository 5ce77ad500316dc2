"""The emulator's tables of job fields agree with the provider's: what it reads and what it sends.

The emulator is its own distribution and must not import the provider, so it keeps its own tables:
``slurmapi_emulator/job_fields.py`` (what each field of a job is in the live and the history record)
and ``JOB_DESC_FIELDS`` in ``slurm_json.py`` (the fields ``job/submit`` takes, per API version). The
provider's are the field rows of ``SlurmJob`` (``slurm/jobs/job.py``) and what ``spec.py`` and ``sbatch.py``
put into a submitted job. These tests keep them one table in substance, as
``test_versions_agree.py`` does for the tables of API versions:

- every place of a record that ``SlurmJob``'s readers look at is filled by a row of ``job_fields.py``
  (or is one of the few places the emulator holds constant, each named below with its reason), read
  by recording what the readers ask of the emulator's own records;
- ``JOB_DESC_FIELDS`` is, version by version, the ``job_desc_msg`` of Slurm's OpenAPI documents, and
  holds every field the provider sends: those it fills itself and those of every ``#SBATCH`` option.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from slurmapi_emulator.job_fields import HISTORY_FIELDS, LIVE_FIELDS
from slurmapi_emulator.slurm_json import JOB_DESC_FIELDS
from slurmapi_emulator.versions import SUPPORTED_VERSIONS

from airflow_provider_slurmapi.slurm.api.api_versions import SUPPORTED_API_VERSIONS
from airflow_provider_slurmapi.slurm.jobs.job import JobSource, SlurmJob
from airflow_provider_slurmapi.slurm.submit import sbatch
from airflow_provider_slurmapi.slurm.submit.spec import prepare_submission
from tests.fixtures import OPENAPI_FILES, openapi_spec

from .conftest import Client, wait_until

ROOT = Path(__file__).resolve().parents[2]

# Places SlurmJob reads that job_fields.py has no row for, and why the emulator may hold them so.
NOT_IN_THE_TABLE: dict[JobSource, dict[str, str]] = {
    "live": {
        "account": "every job runs under the default account: a constant of render.py's template",
        "restart_cnt": "the emulator never requeues a job: 0 in render.py's template",
        "stdout_expanded": "render.py writes the job's path there for the versions that have it (has_expanded_output)",
        "stderr_expanded": "render.py writes the job's path there for the versions that have it (has_expanded_output)",
    },
    "history": {
        "account": "every job runs under the default account: a constant of render.py's template",
        "restart_cnt": "the emulator never requeues a job: 0 in render.py's template",
    },
}
TABLE_PATHS: dict[JobSource, frozenset[str]] = {
    "live": frozenset(key for key, _ in LIVE_FIELDS),
    "history": frozenset(path for path, _ in HISTORY_FIELDS),
}


class _Recording(Mapping[str, Any]):
    """A record that notes the dotted path of every key asked of it (nested objects included)."""

    def __init__(self, data: Mapping[str, Any], asked: set[str], path: str = "") -> None:
        self._data = data
        self._asked = asked
        self._path = path

    def _child(self, key: str, value: Any) -> Any:
        path = f"{self._path}.{key}" if self._path else key
        self._asked.add(path)
        return _Recording(value, self._asked, path) if isinstance(value, Mapping) else value

    def __getitem__(self, key: str) -> Any:
        return self._child(key, self._data[key])

    def get(self, key: str, default: Any = None) -> Any:
        return self._child(key, self._data.get(key, default))

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def _filled_by_the_table(path: str, table: frozenset[str]) -> bool:
    """A row's place, a place inside a row's value, or an object that holds rows (``time``, ``array``)."""
    return any(path == row or path.startswith(f"{row}.") or row.startswith(f"{path}.") for row in table)


def _asked_of_every_record(client: Client) -> dict[JobSource, set[str]]:
    """What SlurmJob's readers ask of the emulator's live and history records, in every version, for a
    job in every phase (held, an array, running, finished); the readings equal those of the plain record."""
    held = client.submit_id(hold=True)
    array = client.submit_id(array="0-3%1")
    running = client.submit_id(script="#!/bin/bash\nsleep 30\n")
    done = client.submit_id(standard_error="err-%j.txt")
    wait_until(lambda: client.state(done) == ["COMPLETED"] and client.state(running) == ["RUNNING"])
    asked: dict[JobSource, set[str]] = {"live": set(), "history": set()}
    readers: dict[JobSource, Callable[[Any], SlurmJob]] = {"live": SlurmJob.from_live, "history": SlurmJob.from_history}
    for version in SUPPORTED_VERSIONS:
        for job_id in (held, array, running, done):
            places: tuple[tuple[JobSource, str], ...] = (
                ("live", f"/slurm/{version}/job/{job_id}"),
                ("history", f"/slurmdb/{version}/job/{job_id}"),
            )
            for source, path in places:
                answer = client.call("GET", path)
                assert answer.slurm_status == 200 and answer.jobs, (path, answer.raw_text[:300])
                for record in answer.jobs:
                    read = readers[source]
                    assert read(_Recording(record, asked[source])) == read(record), path
    client.cancel(running)
    return asked


def test_every_place_the_provider_reads_is_a_row_of_the_emulator_table(every_version_client: Client) -> None:
    asked = _asked_of_every_record(every_version_client)
    for source in ("live", "history"):
        assert {"job_id", "partition"} <= asked[source], "the recording saw the readers ask"
        outside = {path for path in asked[source] if not _filled_by_the_table(path, TABLE_PATHS[source])}
        outside_rows = {path for path in outside if not any(path.startswith(f"{key}.") for key in outside)}
        assert outside_rows == set(NOT_IN_THE_TABLE[source]), (
            f"SlurmJob reads these places of the {source} record that job_fields.py has no row for: "
            f"{sorted(outside_rows - set(NOT_IN_THE_TABLE[source]))}; add a row (or say in NOT_IN_THE_TABLE why "
            f"the emulator holds it constant). Stale exceptions: {sorted(set(NOT_IN_THE_TABLE[source]) - outside_rows)}"
        )


def test_the_submit_fields_are_those_of_slurms_openapi_documents() -> None:
    assert set(JOB_DESC_FIELDS) == set(SUPPORTED_VERSIONS) == set(OPENAPI_FILES)
    for version in SUPPORTED_VERSIONS:
        schema = openapi_spec(version)["components"]["schemas"][f"{version}_job_desc_msg"]
        assert JOB_DESC_FIELDS[version] == set(schema["properties"]), version


# One line of each #SBATCH option the provider turns into job fields, with a value it takes.
DIRECTIVE_LINES = {
    "job-name": "--job-name=train",
    "partition": "--partition=debug",
    "time": "--time=10",
    "time-min": "--time-min=5",
    "nodes": "--nodes=2-4",
    "ntasks": "--ntasks=2",
    "ntasks-per-node": "--ntasks-per-node=2",
    "cpus-per-task": "--cpus-per-task=2",
    "mincpus": "--mincpus=2",
    "mem": "--mem=1G",
    "mem-per-cpu": "--mem-per-cpu=1G",
    "mem-per-gpu": "--mem-per-gpu=1G",
    "gres": "--gres=gpu:1",
    "gpus": "--gpus=1",
    "gpus-per-node": "--gpus-per-node=1",
    "gpus-per-task": "--gpus-per-task=1",
    "cpus-per-gpu": "--cpus-per-gpu=2",
    "output": "--output=out-%j.txt",
    "error": "--error=err-%j.txt",
    "input": "--input=/dev/null",
    "chdir": "--chdir=/tmp",
    "account": "--account=research",
    "qos": "--qos=normal",
    "constraint": "--constraint=a100",
    "prefer": "--prefer=a100",
    "exclusive": "--exclusive",
    "oversubscribe": "--oversubscribe",
    "array": "--array=0-3%2",
    "dependency": "--dependency=afterok:1",
    "requeue": "--requeue",
    "no-requeue": "--no-requeue",
    "signal": "--signal=B:USR1@60",
    "export": "--export=ALL,A=1",
    "mail-type": "--mail-type=END",
    "mail-user": "--mail-user=someone",
    "comment": "--comment=hello",
    "reservation": "--reservation=maint",
    "begin": "--begin=now+1hour",
    "hold": "--hold",
    "nice": "--nice=10",
    "exclude": "--exclude=node1",
    "nodelist": "--nodelist=node1",
    "tmp": "--tmp=1G",
    "open-mode": "--open-mode=append",
    "licenses": "--licenses=matlab",
    "wckey": "--wckey=w",
    "contiguous": "--contiguous",
    "overcommit": "--overcommit",
    "no-kill": "--no-kill",
    "kill-on-invalid-dep": "--kill-on-invalid-dep=yes",
    "distribution": "--distribution=block",
    "threads-per-core": "--threads-per-core=1",
    "deadline": "--deadline=now+2hours",
    "spread-job": "--spread-job",
}


@pytest.mark.parametrize("version", SUPPORTED_API_VERSIONS)
def test_every_field_the_provider_sends_is_one_the_version_takes(version: str) -> None:
    assert set(DIRECTIVE_LINES) == set(sbatch._SUPPORTED), "a line for each #SBATCH option the provider reads"
    sent: dict[str, str] = {}
    for option, line in DIRECTIVE_LINES.items():
        found = sbatch.directive_fields(f"#!/bin/bash\n#SBATCH {line}\ntrue\n", api_version=version)
        assert found.fields, option
        sent.update(dict.fromkeys(found.fields, f"#SBATCH {line}"))
    filled = prepare_submission({"time_limit": "1:00:00"}, "#!/bin/bash\ntrue\n", tag="t-1").job
    sent.update(dict.fromkeys(filled, "filled in by spec.prepare_submission"))
    unknown = {name: why for name, why in sent.items() if name not in JOB_DESC_FIELDS[version]}
    assert not unknown, f"{version} ignores these fields (slurmrestd only warns): {unknown}"


def test_the_fields_the_sbatch_refusals_name_exist() -> None:
    """A refused option that says "set job['X']" names a field the newest version takes."""
    named = {name for _, reason in sbatch._REFUSED.values() for name in re.findall(r"job\['(\w+)'\]", reason)}
    assert named, "the refusals name fields"
    assert named <= JOB_DESC_FIELDS[SUPPORTED_API_VERSIONS[-1]], named - JOB_DESC_FIELDS[SUPPORTED_API_VERSIONS[-1]]


def test_the_pages_name_the_supported_range_of_the_table() -> None:
    """The range is written once, in the tables; a page that names it must name the same one."""
    first, last = SUPPORTED_API_VERSIONS[0], SUPPORTED_API_VERSIONS[-1]
    for page in ("docs/versions.md", "docs/connection.md"):
        text = " ".join((ROOT / page).read_text().split())
        assert f"speaks Slurm's REST API versions {first} to {last}" in text or f"speaks {first} to {last}" in text, (
            page
        )
