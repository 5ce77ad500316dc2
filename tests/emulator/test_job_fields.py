"""The job records are laid out from the emulator's table of job fields (``job_fields.py``).

``render.py`` writes each record as a template in Slurm's key order with a marker where a field of
the job goes; every marker must be filled by a row of the table, in every API version, for a job in
every phase (pending array task, running, finished) and in both records.
"""

from __future__ import annotations

from slurmapi_emulator.render import FILL
from slurmapi_emulator.versions import VERSIONS

from .conftest import Client, wait_until


def test_every_place_of_both_records_is_filled_in_every_version(every_version_client: Client) -> None:
    client = every_version_client
    held = client.submit_id(hold=True)
    array = client.submit_id(array="0-3%1")
    running = client.submit_id(script="#!/bin/bash\nsleep 30\n")
    done = client.submit_id()
    wait_until(lambda: client.state(done) == ["COMPLETED"] and client.state(running) == ["RUNNING"])
    seen = 0
    for version in (v.name for v in VERSIONS):
        for job_id in (held, array, running, done):
            for path in (f"/slurm/{version}/job/{job_id}", f"/slurmdb/{version}/job/{job_id}"):
                answer = client.call("GET", path)
                assert answer.slurm_status == 200 and answer.jobs, (path, answer.raw_text[:300])
                assert FILL not in answer.raw_text, path
                seen += len(answer.jobs)
    assert seen >= 2 * len(VERSIONS) * 4
    client.cancel(running)
