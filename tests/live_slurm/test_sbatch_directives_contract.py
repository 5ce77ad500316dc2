"""Contract: a script's ``#SBATCH`` lines give the same job through our REST path as through real ``sbatch``.

For each case, one script is submitted twice to the lab: by ``sbatch`` itself (in the lab, as its job
user, from /tmp), and by the provider's path (:func:`apply_directives` -> the hook's ``submit_job``
-> the gateway -> slurmrestd). Both jobs are held (or begin in years), so nothing runs; they are
cancelled afterwards. The records ``GET job/{id}`` returns are compared on the fields the case's
options set, after normalising what must differ (the job id inside ``%j`` paths, times relative to
each job's own submit time, the task tag our path appends to the comment).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_slurmapi.slurm.submit.sbatch import apply_directives, read_directives
from airflow_provider_slurmapi.slurm.submit.spec import DEFAULT_ENVIRONMENT, parse_time_limit
from tests.live_slurm.conftest import make_hook
from tests.live_slurm.lab import Lab, in_lab

pytestmark = pytest.mark.slurm

LAB_DIR = Path(os.environ.get("SLURM_LAB_DIR", "/var/tmp/slurmapi-lab"))
NAME = "sbatch-contract"
HOLD = "--hold"
FAR_BEGIN = "--begin=now+3650days"

# (case id, #SBATCH lines, record fields compared). Every job also gets --job-name (unless the case
# sets one: %x must expand alike) and --hold (unless the case holds with a far --begin instead).
CASES: list[tuple[str, list[str], list[str]]] = [
    ("job-name", ["--job-name=contract-long"], ["name"]),
    ("job-name-short", ["-J contract-short"], ["name"]),
    ("partition", ["--partition=debug"], ["partition"]),
    ("partition-short-glued", ["-pdebug"], ["partition"]),
    ("time-minutes", ["--time=90"], ["time_limit"]),
    ("time-mm-ss", ["-t 5:30"], ["time_limit"]),
    ("time-hh-mm-ss", ["--time=2:00:01"], ["time_limit"]),
    ("time-d-hh", ["--time=1-12"], ["time_limit"]),
    ("time-d-hh-mm", ["--time 2-03:04"], ["time_limit"]),
    ("time-d-hh-mm-ss", ["--time=0-00:00:30"], ["time_limit"]),
    ("time-unlimited", ["--time=UNLIMITED"], ["time_limit"]),
    ("time-infinite", ["--time=infinite"], ["time_limit"]),
    ("time-zero", ["--time=0"], ["time_limit"]),
    ("time-min", ["--time=60", "--time-min=30"], ["time_minimum", "time_limit"]),
    ("nodes", ["-N 1"], ["node_count", "max_nodes"]),
    ("nodes-range", ["--nodes=1-2"], ["node_count", "max_nodes"]),
    ("nodes-list", ["--nodes=1,2"], ["node_count", "max_nodes", "job_size_str"]),
    ("ntasks", ["-n 2"], ["tasks", "cpus"]),
    ("ntasks-per-node", ["--ntasks-per-node=2"], ["tasks_per_node", "tasks", "cpus"]),
    ("cpus-per-task", ["-c 2"], ["cpus_per_task", "cpus", "tres_per_task"]),
    ("mincpus", ["--mincpus=2"], ["minimum_cpus_per_node"]),
    ("mem", ["--mem=500"], ["memory_per_node", "memory_per_cpu", "tres_req_str"]),
    ("mem-units", ["--mem=512000K"], ["memory_per_node", "tres_req_str"]),
    ("mem-per-cpu", ["--mem-per-cpu=300M"], ["memory_per_cpu", "memory_per_node", "tres_req_str"]),
    ("output-patterns", ["-o /tmp/contract-%j-%x-%u.out"], ["standard_output", "standard_error"]),
    ("output-relative", ["--output=contract-%j.txt"], ["standard_output"]),
    ("error", ["-e /tmp/contract-%x-%j.err"], ["standard_error", "standard_output"]),
    ("input", ["--input=/dev/null"], ["standard_input"]),
    (
        "array-patterns",
        ["--array=0-3%2", "-o /tmp/contract-%A_%a.out"],
        ["array_task_string", "array_max_tasks", "standard_output"],
    ),
    ("chdir", ["-D /var/tmp"], ["current_working_directory", "standard_output"]),
    ("account", ["-A test"], ["account"]),
    ("qos", ["--qos=normal"], ["qos"]),
    ("exclusive", ["--exclusive"], ["shared"]),
    ("exclusive-user", ["--exclusive=user"], ["shared"]),
    ("oversubscribe", ["-s"], ["shared"]),
    ("dependency", ["--dependency=afterok:{target}"], ["dependency"]),
    ("requeue", ["--requeue"], ["requeue"]),
    ("no-requeue", ["--no-requeue"], ["requeue"]),
    ("mail-type", ["--mail-type=END,FAIL,TIME_LIMIT_80"], ["mail_type"]),
    ("mail-type-all", ["--mail-type=ALL"], ["mail_type"]),
    ("mail-user", ["--mail-user=ml-team@example.com"], ["mail_user"]),
    ("comment", ['--comment="nightly run" # a trailing comment'], ["comment"]),
    ("begin-relative", ["--begin=now+7days"], ["eligible_time"]),
    ("begin-absolute", ["--begin=2031-01-02T03:04:05"], ["eligible_time"]),
    ("hold", [HOLD, FAR_BEGIN], ["hold", "priority", "state_reason"]),
    ("nice", ["--nice=50"], ["nice"]),
    ("nice-default", ["--nice"], ["nice"]),
    ("exclude", ["--exclude=localhost"], ["excluded_nodes"]),
    ("nodelist", ["-w localhost"], ["required_nodes"]),
    ("tmp", ["--tmp=1"], ["minimum_tmp_disk_per_node"]),
    ("contiguous", ["--contiguous"], ["contiguous"]),
    ("constraint", ["--constraint=sbatchcontract"], ["features"]),
    ("constraint-short", ["-C sbatchcontract"], ["features"]),
    ("prefer", ["--prefer=sbatchcontract"], ["prefer"]),
    ("licenses", ["--licenses=sbatchcontract@lab:2"], ["licenses", "tres_req_str"]),
    ("licenses-short", ["-L sbatchcontract@lab"], ["licenses"]),
    ("wckey", ["--wckey=contract"], ["wckey"]),
    ("kill-on-invalid-dep", ["--kill-on-invalid-dep=yes"], ["flags"]),
    ("several-on-one-line", ["-J one-line -p debug -t 1:00:00 -n 1 -c 1 --nice=7"], ["name", "time_limit", "nice"]),
    ("abbreviated", ["--part=debug --mail-u=abbrev@example.com"], ["partition", "mail_user"]),
    ("later-wins", ["--time=10", "--time=20", "--requeue", "--no-requeue"], ["time_limit", "requeue"]),
    # The four options the provider used to refuse (issue 17); --distribution is not in the record, so it
    # is judged by the job's environment in test_distribution_and_threads_give_the_job_what_sbatch_gives_it.
    ("threads-per-core", ["--threads-per-core=1"], ["threads_per_core", "tasks"]),
    ("threads-per-core-nodes", ["-N 1", "--threads-per-core=1"], ["threads_per_core", "tasks", "flags"]),
    ("deadline-relative", ["--deadline=now+7days"], ["deadline"]),
    ("deadline-absolute", ["--deadline=2031-01-02T03:04:05"], ["deadline"]),
    ("spread-job", ["--spread-job"], ["flags"]),
    ("spread-job-and-kill", ["--spread-job", "--kill-on-invalid-dep=yes"], ["flags"]),
    # Slurm's time forms: a sample of what slurm_time reads, both through #SBATCH and job['time_limit'].
    ("time-d-hh-mm-short", ["--time=0-5:30"], ["time_limit"]),
    ("time-d-hh-zero-days", ["--time=0-2"], ["time_limit"]),
    ("time-days-dash", ["--time=2-"], ["time_limit"]),
    ("time-minus-zero", ["--time=-0"], ["time_limit"]),
    ("time-minus-one", ["--time=-1"], ["time_limit"]),
    ("time-leading-zeros", ["--time=0090"], ["time_limit"]),
    ("time-mm-ss-carry", ["--time=59:01"], ["time_limit"]),
]


def _options(lines: list[str]) -> set[str]:
    script = "#!/bin/bash\n" + "".join(f"#SBATCH {line}\n" for line in lines)
    return {d.option for d in read_directives(script.replace("{target}", "1"))}


CHECKED_OPTIONS = sorted(set().union(*(_options(lines) for _, lines, _ in CASES)))


def test_at_least_25_sbatch_options_are_checked_against_real_sbatch() -> None:
    assert len(CHECKED_OPTIONS) >= 25, CHECKED_OPTIONS


def _script(lines: list[str], target: int) -> str:
    sets_name = any(line.startswith(("-J", "--job-name")) or " -J " in line for line in lines)
    base = [] if sets_name else [f"--job-name={NAME}"]
    holds = any(line.startswith("--begin") or line == HOLD for line in lines)
    base += [] if holds else [HOLD]
    body = "".join(f"#SBATCH {line.replace('{target}', str(target))}\n" for line in base + lines)
    return f"#!/bin/bash\n# a contract job of the provider's tests: never released\n\n{body}echo never runs\n"


def _sbatch(script: str) -> int:
    """Submit ``script`` with the real sbatch, in the lab, as its job user, from /tmp."""
    chroot = LAB_DIR / "chroot"
    name = f"sbatch-contract-{uuid.uuid4().hex[:8]}.sh"
    inside = f"/tmp/{name}"
    host = (chroot / "tmp" / name) if chroot.is_dir() else Path(inside)
    host.write_text(script)
    host.chmod(0o644)
    prefix = ["chroot", str(chroot)] if chroot.is_dir() else []
    command = [
        *prefix,
        "/usr/bin/env",
        "-i",
        "PATH=/usr/local/bin:/usr/bin:/bin",
        "SLURM_CONF=/etc/slurm/slurm.conf",
        "setpriv",
        "--reuid=tester",
        "--regid=tester",
        "--init-groups",
        "sh",
        "-c",
        f"cd /tmp && sbatch --parsable {inside}",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    finally:
        host.unlink(missing_ok=True)
    assert done.returncode == 0, f"sbatch refused the script:\n{script}\n{done.stderr}"
    return int(done.stdout.strip().split(";")[0])


def _normalise(record: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    job_id = str(record["job_id"])
    submit = record["submit_time"]["number"]
    out: dict[str, Any] = {}
    for name in fields:
        value = record.get(name)
        if isinstance(value, str):
            value = value.replace(job_id, "<id>")
        if name == "comment" and isinstance(value, str):
            value = value.split(" | airflow")[0].split(" | ")[0]  # our path appends the task tag
        if name == "deadline" and isinstance(value, dict):
            value = value["number"] - submit  # now+7days counts from each job's own submit time
        if name == "eligible_time" and isinstance(value, dict):
            value = value["number"] - submit  # now+7days counts from each job's own submit time
        if name == "flags" and isinstance(value, list):
            value = sorted(
                flag for flag in value if "INVALID_DEPENDENCY" in flag or "EXACT" in flag or "SPREAD" in flag
            )
        out[name] = value
    return out


def _unix(local: str) -> int:
    """A local time of the lab (this machine's time zone) as a Unix time."""
    import datetime

    return int(datetime.datetime.fromisoformat(local).timestamp())


@pytest.fixture(scope="module")
def submitted(lab: Lab) -> Iterator[list[int]]:
    ids: list[int] = []
    yield ids
    for job_id in ids:
        lab.cancel(job_id)


# Cases that need the node feature and the license below.
NEEDS_RESOURCES = {"constraint", "constraint-short", "prefer", "licenses", "licenses-short"}
FEATURE = "sbatchcontract"


@pytest.fixture(scope="module")
def lab_resources(lab: Lab, submitted: list[int]) -> Iterator[None]:
    """A node feature and a license for --constraint, --prefer and --licenses; removed afterwards.

    Neither changes how other jobs of the shared lab run: a feature no other job asks for, a license
    no other job uses.
    """
    if os.geteuid() != 0:
        pytest.fail("node features and licenses are set with scontrol/sacctmgr as root: run as root (CI does)")
    node = f"AvailableFeatures={FEATURE}", f"ActiveFeatures={FEATURE}"
    in_lab("scontrol", "update", "NodeName=localhost", *node, timeout=60)
    in_lab(
        "sacctmgr", "-i", "add", "resource", f"name={FEATURE}", "server=lab", "servertype=test", "type=license",
        "count=4", "cluster=lab", "allowed=100", timeout=60,
    )  # fmt: skip
    try:
        yield
    finally:
        for job_id in submitted:  # jobs that ask for them go first
            lab.cancel(job_id)
        in_lab("sacctmgr", "-i", "delete", "resource", f"name={FEATURE}", "server=lab", timeout=60)
        in_lab("scontrol", "update", "NodeName=localhost", "AvailableFeatures=", "ActiveFeatures=", timeout=60)


@pytest.fixture(scope="module")
def target(lab: Lab, submitted: list[int]) -> int:
    """A held job for --dependency to name."""
    job_id = lab.submit("#!/bin/bash\ntrue\n", name="sbatch-contract-target", hold=True)
    submitted.append(job_id)
    return job_id


@pytest.mark.parametrize(("case", "lines", "fields"), CASES, ids=[case for case, _, _ in CASES])
def test_sbatch_and_our_rest_path_give_the_same_job(
    case: str,
    lines: list[str],
    fields: list[str],
    lab: Lab,
    gateway: Any,
    submitted: list[int],
    target: int,
    request: pytest.FixtureRequest,
) -> None:
    if case in NEEDS_RESOURCES:
        request.getfixturevalue("lab_resources")
    script = _script(lines, target)
    by_sbatch = _sbatch(script)
    submitted.append(by_sbatch)

    applied = apply_directives({}, script, api_version="v0.0.42", default_environment=DEFAULT_ENVIRONMENT)
    ours = make_hook(gateway).submit_job(applied.job, script).job_id
    submitted.append(ours)

    real = lab.live(by_sbatch)
    mine = lab.live(ours)
    assert real is not None and mine is not None
    expected = _normalise(real.raw, fields)
    got = _normalise(mine.raw, fields)
    if case == "begin-relative":  # slurmrestd and sbatch may read "now" in different seconds
        assert abs(got.pop("eligible_time") - expected.pop("eligible_time")) <= 2, (real.raw, mine.raw)
    if case == "deadline-relative":
        assert abs(got.pop("deadline") - expected.pop("deadline")) <= 2, (real.raw, mine.raw)
    if case == "deadline-absolute":
        assert got.pop("deadline") + mine.raw["submit_time"]["number"] == _unix("2031-01-02T03:04:05")
        assert expected.pop("deadline") + real.raw["submit_time"]["number"] == _unix("2031-01-02T03:04:05")
    if case == "begin-absolute":  # relative to each job's submit time, which may fall in different seconds
        assert got.pop("eligible_time") + mine.raw["submit_time"]["number"] == _unix("2031-01-02T03:04:05")
        assert expected.pop("eligible_time") + real.raw["submit_time"]["number"] == _unix("2031-01-02T03:04:05")
    assert got == expected, f"{case}: sbatch gave {expected}, our path gave {got}\n{script}"
    times = [d.value for d in read_directives(script) if d.option == "time"]
    if times and times[-1] is not None:  # job['time_limit'] sends what #SBATCH --time sent: what sbatch sent
        assert parse_time_limit(times[-1]) == applied.job["time_limit"], (case, times[-1])
    # The case's own lines were read into job fields (not two defaults compared).
    own = "#!/bin/bash\n" + "".join(f"#SBATCH {line.replace('{target}', str(target))}\n" for line in lines)
    assert apply_directives({}, own).applied, f"{case}: no job field read from {lines}"


def test_export_and_open_mode_give_the_job_what_sbatch_gives_it(lab: Lab, gateway: Any, submitted: list[int]) -> None:
    """Not in the job record, so judged by what the job does: its environment and its appended output.

    Our path submits the script wrapped (``report_output=True``), so this
    also shows the wrapper keeps both working.
    """
    from airflow_provider_slurmapi.slurm.submit.job_output import wrap_script

    chroot = LAB_DIR / "chroot"
    outputs = {}
    for way in ("sbatch", "ours"):
        name = f"sbatch-contract-append-{way}-{uuid.uuid4().hex[:8]}.out"
        host = (chroot / "tmp" / name) if chroot.is_dir() else Path("/tmp") / name
        host.write_text("written before the job\n")
        host.chmod(0o666)
        script = (
            "#!/bin/bash\n"
            f"#SBATCH --job-name={NAME}-run --time=2 --output=/tmp/{name} --open-mode=append\n"
            "#SBATCH --export=ALL,TRAIN_EPOCHS=3,EMPTY=\n"
            'echo "epochs=$TRAIN_EPOCHS empty=[$EMPTY] path=${PATH:+set}"\n'
        )
        if way == "sbatch":
            job_id = _sbatch(script)
        else:
            applied = apply_directives({}, script, api_version="v0.0.42", default_environment=DEFAULT_ENVIRONMENT)
            job_id = make_hook(gateway).submit_job(applied.job, wrap_script(script)).job_id
        submitted.append(job_id)
        assert lab.final(job_id, timeout=120).return_code == 0
        outputs[way] = host.read_text()
        host.unlink()
    assert outputs["ours"] == outputs["sbatch"] == "written before the job\nepochs=3 empty=[] path=set\n"


def test_signal_reaches_the_script_as_with_sbatch(lab: Lab, gateway: Any, submitted: list[int]) -> None:
    """``--signal=B:USR1@50`` with a 1-minute limit: the batch script gets USR1 before its end, both ways.

    Not in the job record, so judged by what the job does. Our path submits the script wrapped (the
    operator's default): the wrapper, which is the batch shell, passes the signal on to the script.
    Slurm sends warning signals from a periodic check, so this takes up to about 40 s.
    """
    from airflow_provider_slurmapi.slurm.submit.job_output import wrap_script

    chroot = LAB_DIR / "chroot"
    started = {}
    for way in ("sbatch", "ours"):
        name = f"sbatch-contract-signal-{way}-{uuid.uuid4().hex[:8]}.out"
        script = (
            "#!/bin/bash\n"
            f"#SBATCH --job-name={NAME}-signal --time=1 --signal=B:USR1@50 --output=/tmp/{name}\n"
            "trap 'echo got USR1; exit 0' USR1\n"
            "for i in $(seq 1 100); do sleep 1; done\n"
            "echo no signal\n"
        )
        if way == "sbatch":
            job_id = _sbatch(script)
        else:
            applied = apply_directives({}, script, api_version="v0.0.42", default_environment=DEFAULT_ENVIRONMENT)
            job_id = make_hook(gateway).submit_job(applied.job, wrap_script(script)).job_id
        submitted.append(job_id)
        started[way] = (job_id, (chroot / "tmp" / name) if chroot.is_dir() else Path("/tmp") / name)
    outputs = {}
    for way, (job_id, path) in started.items():
        record = lab.final(job_id, timeout=180)
        outputs[way] = (record.state, path.read_text() if path.exists() else "")
        path.unlink(missing_ok=True)
    assert outputs["ours"] == outputs["sbatch"] == ("COMPLETED", "got USR1\n"), outputs


def test_distribution_and_threads_give_the_job_what_sbatch_gives_it(
    lab: Lab, gateway: Any, submitted: list[int]
) -> None:
    """``--distribution`` is not in the job record, and ``--threads-per-core`` also sets a variable:
    judged by the job's own environment, which srun in the job reads."""
    chroot = LAB_DIR / "chroot"
    outputs = {}
    for way in ("sbatch", "ours"):
        name = f"sbatch-contract-layout-{way}-{uuid.uuid4().hex[:8]}.out"
        host = (chroot / "tmp" / name) if chroot.is_dir() else Path("/tmp") / name
        script = (
            "#!/bin/bash\n"
            f"#SBATCH --job-name={NAME}-layout --time=2 --output=/tmp/{name}\n"
            "#SBATCH -N 1 --distribution=cyclic:block --threads-per-core=1 --spread-job\n"
            "env | grep -E '^SLURM_(DISTRIBUTION|THREADS_PER_CORE|NTASKS|NPROCS|DIST_PLANESIZE)=' | sort\n"
        )
        if way == "sbatch":
            job_id = _sbatch(script)
        else:
            applied = apply_directives({}, script, api_version="v0.0.42", default_environment=DEFAULT_ENVIRONMENT)
            job_id = make_hook(gateway).submit_job(applied.job, script).job_id
        submitted.append(job_id)
        assert lab.final(job_id, timeout=120).return_code == 0
        outputs[way] = host.read_text()
        host.unlink()
    assert outputs["ours"] == outputs["sbatch"], outputs
    assert "SLURM_DISTRIBUTION=cyclic:block" in outputs["sbatch"] and "SLURM_THREADS_PER_CORE=1" in outputs["sbatch"]
