"""Real Slurm 24.11's refusals are classified as permanent: the task fails at its first try.

What the lab answers (measured): an unknown partition 500 with 2000 "Invalid partition name
specified"; ``gres/gpu:1`` on its GPU-less node 2072 "Invalid generic resource (gres)
specification"; a malformed TRES 2115 "Invalid Trackable RESource (TRES) specification". The lab
does not enforce associations (no ``AccountingStorageEnforce``), so it accepts any account or QoS:
those refusals (2045, 2066) are classified from Slurm's error numbers in the unit tests.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_slurmapi.slurm.api.errors import SubmitRejectedError, is_permanent
from tests.conftest import load_dag
from tests.dag_runs.test_fail_fast import run_with_retries
from tests.live_slurm.conftest import make_hook

pytestmark = pytest.mark.slurm

JOB = {"name": "slurm-live-refused", "current_working_directory": "/tmp", "environment": ["PATH=/usr/bin:/bin"]}


@pytest.mark.parametrize(
    ("job", "number", "kind"),
    [
        ({"partition": "no-such-partition"}, 2000, "partition"),
        ({"tres_per_node": "gres/gpu:1"}, 2072, "tres"),
        ({"tres_per_node": "gpu=abc"}, 2115, "tres"),
    ],
)
def test_the_labs_refusals_are_permanent(job: dict[str, Any], number: int, kind: str, gateway: Any) -> None:
    hook = make_hook(gateway)
    with pytest.raises(SubmitRejectedError) as info:
        hook.submit_job({**JOB, **job}, "#!/bin/bash\ntrue\n")
    assert number in info.value.error_numbers
    assert (info.value.kind, is_permanent(info.value)) == (kind, True)
    if kind == "partition":  # the lab's partitions, read from its partitions/ endpoint
        # the fix first, with scripts/slurm-lab's three partitions, then what Slurm answered
        assert str(info.value).startswith("Set job['partition'] to one of the cluster's partitions")
        assert (
            "this cluster. The cluster's partitions: debug, high, low. Slurm refused the job (Slurm answered HTTP 500"
            in str(info.value)
        )


def test_a_bad_partition_on_real_slurm_gives_exactly_one_try(
    mode: bool, gateway: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    gateway.reset_calls()
    state, tries = run_with_retries(load_dag("slurm_scenarios.py", "bad_partition"), retries=2)
    out = "".join(capfd.readouterr())
    assert (state, tries) == ("failed", 1)
    assert gateway.calls()["by_kind"].get("submit") == 1
    assert "2000 Invalid partition name specified" in out and "The cluster's partitions: debug, high, low." in out
