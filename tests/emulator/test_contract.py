"""Contract: the emulator's answers against the answers of a real Slurm 24.11.5 cluster.

For each captured answer in tests/fixtures/slurm-24.11/, the emulator is brought into the same
situation and asked the same request; its answer must have the same HTTP status, the same keys
(recursively) and the same JSON types, and the same values where they carry meaning (states,
reasons, error numbers). Runs offline: the fixtures are files.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from slurmapi_emulator import EmulatorConfig, EmulatorHandle, run_emulator
from slurmapi_emulator.versions import SUPPORTED_VERSIONS, wire

from tests.fixtures import OPENAPI, OPENAPI_FILES, RESPONSES, type_name

from .conftest import TOKEN, Answer, Client, V, job_desc, release_serving, wait_until

FIXTURES = RESPONSES


@pytest.fixture(autouse=True)
def _fixtures_present() -> None:
    """The contract is checked against the real answers: without them, fail (never skip) and say where."""
    if not FIXTURES.is_dir():
        pytest.fail(f"no Slurm fixtures at {FIXTURES}: record them with 'scripts/slurm-lab record'")


def fixture(name: str) -> tuple[int, Any, dict[str, Any]]:
    """(HTTP status, body as JSON or text, meta) of a captured real answer, by its number prefix."""
    [meta_path] = FIXTURES.glob(f"{name}_*.meta")
    meta_text = meta_path.read_text()
    meta: dict[str, Any] = {}
    head, _, request = meta_text.partition("request_body:")
    for line in head.splitlines():
        key, _, value = line.partition(":")
        meta[key.strip()] = value.strip()
    meta["request_body"] = request.strip()
    json_path = meta_path.with_suffix(".json")
    body: Any = (
        json.loads(json_path.read_text()) if json_path.exists() else (meta_path.with_suffix(".body.txt").read_text())
    )
    return int(meta["http_status"]), body, meta


NULLABLE = ("job_resources",)  # null for a job that never ran, an object otherwise (both seen on 24.11)


def shape_diff(expected: Any, actual: Any, path: str = "$") -> list[str]:
    """Differences of keys and JSON types (values are not compared)."""
    if path.endswith(NULLABLE) and None in (expected, actual):
        return []
    if type_name(expected) != type_name(actual):
        return [f"{path}: {type_name(actual)} instead of {type_name(expected)}"]
    diffs: list[str] = []
    if isinstance(expected, dict):
        for key in expected.keys() - actual.keys():
            diffs.append(f"{path}.{key}: missing")
        for key in actual.keys() - expected.keys():
            diffs.append(f"{path}.{key}: not in the real answer")
        for key in expected.keys() & actual.keys():
            diffs += shape_diff(expected[key], actual[key], f"{path}.{key}")
    elif isinstance(expected, list) and expected and actual:
        for i, item in enumerate(actual):
            diffs += shape_diff(expected[min(i, len(expected) - 1)], item, f"{path}[{i}]")
    return diffs


def assert_matches(name: str, answer: Answer, *, same: tuple[str, ...] = ()) -> None:
    """Same status and shape as fixture `name`; `same` lists dotted paths whose values must be equal."""
    status, expected, _ = fixture(name)
    assert answer.slurm_status == status, f"{name}: status {answer.slurm_status} != {status}"
    if isinstance(expected, str):
        assert answer.body == expected, name
        return
    diffs = shape_diff(expected, answer.body)
    assert not diffs, f"{name}: " + "; ".join(sorted(diffs)[:20])
    for dotted in same:
        assert _get(answer.body, dotted) == _get(expected, dotted), f"{name}: {dotted}"


def _get(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


def replay_body(name: str, cwd: str) -> Any:
    """The request body a fixture was captured with, its working directory moved to `cwd`."""
    body = json.loads(fixture(name)[2]["request_body"])
    if "current_working_directory" in body.get("job", {}):
        body["job"]["current_working_directory"] = cwd
    return body


# ------------------------------------------------------------------------------------------ a world
class World:
    """One emulator brought through the same story as the real capture (jobs A, B, F, H, ...)."""

    def __init__(self, emu: EmulatorHandle, client: Client) -> None:
        self.emu = emu
        self.client = client
        self.ids: dict[str, int] = {}
        self.answers: dict[str, Answer] = {}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    workdir = tmp_path_factory.mktemp("contract")
    config = EmulatorConfig(
        tokens=[TOKEN], cpus=2, minute_seconds=1, min_job_age=3600, workdir=str(workdir), kill_wait=0.5
    )
    with run_emulator(config) as emu:
        client = Client(emu)
        w = World(emu, client)
        cwd = client.cwd

        def submit(label: str, script: str, **fields: Any) -> None:
            fields.setdefault("time_limit", {"set": True, "number": 2})
            answer = client.call(
                "POST", f"/slurm/{V}/job/submit", {"job": job_desc(cwd, name=f"t_{label}", **fields), "script": script}
            )
            w.ids[label] = answer.body["job_id"]

        real_sizes = {"minimum_nodes": 1, "tasks_per_node": 1}  # as jobs A and B were submitted
        submit("A", "#!/bin/bash\necho hello\nsleep 0.2\necho done\n", **real_sizes)
        submit("F", "#!/bin/bash\necho failing >&2\nexit 3\n")
        submit("K", "#!/bin/bash\nkill -9 $$\n")
        submit(
            "P",
            "#!/bin/bash\necho out\necho err >&2\n",
            standard_output=f"{cwd}/paths-%j.out",
            standard_error=f"{cwd}/paths-%j.err",
        )
        for label, state in (("A", "COMPLETED"), ("F", "FAILED"), ("K", "FAILED"), ("P", "COMPLETED")):
            emu.wait_for_state(w.ids[label], state)
        submit("T", "#!/bin/bash\nsleep 30\n", time_limit={"set": True, "number": 1})
        emu.wait_for_state(w.ids["T"], "RUNNING")
        w.answers["T_running"] = client.job(w.ids["T"])
        emu.wait_for_state(w.ids["T"], "TIMEOUT", timeout=10)
        wait_until(lambda: client.state(w.ids["T"]) == ["TIMEOUT"])
        submit("B", "#!/bin/bash\necho long\nsleep 120\n", **real_sizes)
        submit("R", "#!/bin/bash\nsleep 120\n", **real_sizes)
        emu.wait_for_state(w.ids["B"], "RUNNING")
        emu.wait_for_state(w.ids["R"], "RUNNING")
        # R's time limit is two emulated minutes (2 s here), as the real jobs had: read it while it runs.
        w.answers["R_running"] = client.job(w.ids["R"])
        w.answers["R_running_db"] = client.history(w.ids["R"])
        submit("Q", "#!/bin/bash\ntrue\n")
        w.answers["Q_now"] = client.job(w.ids["Q"])  # immediately after submit
        wait_until(lambda: client.job(w.ids["Q"]).jobs[0]["state_reason"] == "Resources")
        w.answers["Q_pending"] = client.job(w.ids["Q"])
        answer = client.call(
            "POST",
            f"/slurm/{V}/job/submit",
            {"job": job_desc(cwd, name="t_held", hold=True, script="#!/bin/bash\nsleep 1\n")},
        )
        w.ids["H"] = answer.body["job_id"]
        wait_until(lambda: client.job(w.ids["H"]).jobs[0]["state_reason"] == "JobHeldUser")
        w.answers["H_pending"] = client.job(w.ids["H"])
        w.answers["jobs_all"] = client.call("GET", f"/slurm/{V}/jobs/")
        w.answers["cancel_B"] = client.cancel(w.ids["B"])
        w.answers["B_after_cancel"] = client.job(w.ids["B"])
        w.answers["cancel_H"] = client.cancel(w.ids["H"])
        yield w


# ------------------------------------------------------------------------------------------ live jobs
LIVE_SAME = (
    "jobs.0.job_state",
    "jobs.0.state_reason",
    "jobs.0.exit_code.status",
    "jobs.0.exit_code.signal.name",
    "jobs.0.exit_code.return_code.set",
)


def test_job_pending_right_after_submit(world: World) -> None:
    answer = world.answers["Q_now"]
    assert_matches("08", answer, same=("jobs.0.job_state",))
    assert answer.jobs[0]["state_reason"] in ("None", "Resources")  # None unless the scheduler already ran


def test_job_pending_behind_others(world: World) -> None:
    assert_matches("17", world.answers["Q_pending"], same=LIVE_SAME)


@pytest.mark.parametrize("name", ["09", "18", "69"])
def test_job_running(world: World, name: str) -> None:
    assert_matches(name, world.answers["R_running"], same=LIVE_SAME)


@pytest.mark.parametrize("name", ["16", "70"])
def test_job_completed(world: World, name: str) -> None:
    label = "A" if name == "16" else "P"
    assert_matches(name, world.client.job(world.ids[label]), same=LIVE_SAME)


def test_job_paths_expanded(world: World) -> None:
    job = world.client.job(world.ids["P"]).jobs[0]
    assert job["standard_output"].endswith(f"/paths-{world.ids['P']}.out")
    assert job["standard_error"].endswith(f"/paths-{world.ids['P']}.err")


@pytest.mark.parametrize("name", ["20", "21"])
def test_job_cancelled_while_running(world: World, name: str) -> None:
    answer = world.answers["B_after_cancel"] if name == "20" else world.client.job(world.ids["B"])
    assert_matches(
        name, answer, same=("jobs.0.state_reason", "jobs.0.exit_code.status", "jobs.0.exit_code.signal.name")
    )
    assert answer.jobs[0]["job_state"][0] == "CANCELLED"


def test_job_held(world: World) -> None:
    assert_matches("28", world.answers["H_pending"], same=(*LIVE_SAME, "jobs.0.hold", "jobs.0.priority"))


def test_job_failed_exit_3(world: World) -> None:
    assert_matches("66", world.client.job(world.ids["F"]), same=(*LIVE_SAME, "jobs.0.exit_code.return_code"))


def test_job_killed_by_sigkill(world: World) -> None:
    assert_matches("67", world.client.job(world.ids["K"]), same=(*LIVE_SAME, "jobs.0.state_description"))


def test_job_timeout(world: World) -> None:
    assert_matches("69", world.answers["T_running"], same=LIVE_SAME)
    assert_matches("71", world.client.job(world.ids["T"]), same=LIVE_SAME)


def test_job_unknown_and_non_numeric(world: World) -> None:
    assert_matches(
        "25", world.client.job(999999), same=("errors.0.error_number", "errors.0.description", "errors.0.source")
    )
    assert_matches("26", world.client.call("GET", f"/slurm/{V}/job/abc"), same=("errors.0.error_number",))


def test_jobs_lists(world: World) -> None:
    for name in ("10", "11", "13"):
        assert_matches(name, world.answers["jobs_all"])
    path = f"/slurm/{V}/jobs/"
    assert_matches("11", world.client.call("GET", f"{path}?update_time=1"))
    assert_matches("13", world.client.call("GET", f"{path}?flags=DETAIL"))
    last = world.client.call("GET", path).body["last_update"]["number"]
    answer = world.client.call("GET", f"{path}?update_time={last}")
    assert_matches("12", answer)
    assert re.fullmatch(
        r"No job changes since update_time\[\d+\]=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d",
        answer.body["warnings"][0]["description"],
    )
    assert_matches("88", world.client.call("GET", f"{path}?flags=DETAIL,ALL"))


# ------------------------------------------------------------------------------------------ cancel
def test_cancel_answers(world: World) -> None:
    client, ids = world.client, world.ids
    assert_matches("19", world.answers["cancel_B"], same=("status",))
    assert_matches("29", world.answers["cancel_H"], same=("status",))
    same = ("status.0.error", "status.0.job_id", "status.0.federation")
    assert_matches("22", client.cancel(ids["A"]), same=("status.0.error", "status.0.job_id.set"))
    assert_matches("23", client.cancel(ids["B"]), same=("status.0.error",))
    assert_matches("24", client.cancel(999999), same=(*same, "status.0.step_id"))
    assert_matches("30", client.cancel(ids["H"], "?signal=SIGKILL"), same=("status.0.error",))


# ------------------------------------------------------------------------------------------ submit
@pytest.mark.parametrize("name", ["07", "14", "15", "27", "31", "32", "33", "34", "35", "37", "38", "39", "42"])
def test_submit_replays(name: str, make_emulator: Callable[..., EmulatorHandle]) -> None:
    client = Client(make_emulator(min_job_age=60))
    answer = client.call("POST", f"/slurm/{V}/job/submit", replay_body(name, client.cwd))
    status, _expected, _ = fixture(name)
    same: tuple[str, ...] = (
        ("step_id", "job_submit_user_msg", "warnings")
        if status == 200
        else ("errors.0.error_number", "errors.0.error", "errors.0.description", "errors.0.source")
    )
    assert_matches(name, answer, same=same)


# ------------------------------------------------------------------------------------------ misc
def test_ping_and_versions(world: World) -> None:
    client = world.client
    assert_matches("01", client.call("GET", f"/slurm/{V}/ping"), same=("pings.0.pinged", "pings.0.mode"))
    assert_matches("43", client.call("GET", "/slurm/v0.0.41/ping"), same=("meta.plugin.data_parser",))
    assert_matches("44", client.call("GET", "/slurm/v0.0.40/ping"), same=("meta.plugin.data_parser",))
    assert_matches("45", client.call("GET", "/slurm/v0.0.39/ping"))


def test_purged_job_and_jobs_after_purge(make_emulator: Callable[..., EmulatorHandle]) -> None:
    emu = make_emulator(min_job_age=0.3)
    client = Client(emu)
    gone = client.submit_id()
    emu.wait_for_state(gone, "COMPLETED")
    wait_until(lambda: client.job(gone).slurm_status == 404, timeout=5)
    assert_matches("46", client.job(gone), same=("errors.0.error_number", "errors.0.source"))
    held = client.submit_id(hold=True)
    client.cancel(held)
    answer = client.call("GET", f"/slurm/{V}/jobs/")
    assert [j["job_id"] for j in answer.jobs] == [held]
    assert_matches("47", answer)
    assert answer.jobs[0]["state_reason"] == "JobHeldUser"


# ------------------------------------------------------------------------------------------ slurmdb
DB_SAME = (
    "jobs.0.state",
    "jobs.0.exit_code.status",
    "jobs.0.exit_code.signal.name",
    "jobs.0.flags",
    "jobs.0.steps.0.state",
    "jobs.0.steps.0.exit_code.status",
    "jobs.0.steps.0.exit_code.signal.name",
)


@pytest.mark.parametrize(
    ("name", "label"), [("48", "A"), ("49", "B"), ("50", "F"), ("72", "F"), ("73", "K"), ("74", "T"), ("75", "P")]
)
def test_slurmdb_finished_jobs(world: World, name: str, label: str) -> None:
    job_id = world.ids[label]
    if label == "B":
        world.emu.wait_for_state(job_id, "CANCELLED")
        wait_until(lambda: world.client.state(job_id) == ["CANCELLED"])
    answer = world.client.history(job_id)
    assert_matches(name, answer, same=DB_SAME)


def test_slurmdb_cancelled_pending_and_running(world: World) -> None:
    answer = world.client.history(world.ids["H"])
    assert_matches(
        "51",
        answer,
        same=(
            "jobs.0.state",
            "jobs.0.exit_code",
            "jobs.0.flags",
            "jobs.0.nodes",
            "jobs.0.steps",
            "jobs.0.time.start",
            "jobs.0.allocation_nodes",
        ),
    )
    assert_matches("68", world.answers["R_running_db"], same=(*DB_SAME, "jobs.0.time.end"))


def test_slurmdb_unknown_and_lists(world: World) -> None:
    client = world.client
    answer = client.history(999999)
    assert_matches("52", answer, same=("jobs", "warnings.0.source"))
    assert answer.body["warnings"][0]["description"].endswith(") found nothing")
    path = f"/slurmdb/{V}/jobs/"
    user = client.history(world.ids["A"]).jobs[0]["user"]
    assert_matches("53", client.call("GET", f"{path}?users={user}"))
    assert_matches("54", client.call("GET", path))
    assert_matches("85", client.call("GET", f"{path}?users={user}&users=root"))
    assert_matches("87", client.call("GET", f"{path}?job_name=t_F"))
    assert_matches("82", client.call("GET", f"{path}?state=TIMEOUT"), same=("jobs",))
    now = int(time.time())
    window = f"&start_time={now - 3600}&end_time={now + 60}"
    answer = client.call("GET", f"{path}?state=TIMEOUT{window}")
    assert_matches("83", answer)
    # T timed out; R (a 2 s limit) times out too once this test starts more than 2 s after it did.
    assert world.ids["T"] in [j["job_id"] for j in answer.jobs], answer.jobs
    assert all(j["state"]["current"] == ["TIMEOUT"] for j in answer.jobs), answer.jobs
    answer = client.call("GET", f"{path}?state=TIMEOUT&state=FAILED{window}")
    assert_matches("84", answer)
    assert {j["state"]["current"][0] for j in answer.jobs} == {"TIMEOUT", "FAILED"}
    assert_matches(
        "81",
        client.call("GET", f"{path}?state=TIMEOUT%2CFAILED{window}"),
        same=("errors.0.error_number", "errors.0.error", "errors.0.description"),
    )
    assert_matches(
        "86",
        client.call("GET", f"{path}?users={user}%2Croot"),
        same=("errors.0.error_number", "errors.1.error_number", "errors.1.description"),
    )
    for name in ("76", "80"):
        assert_matches(name, client.call("GET", f"{path}?state=TIMEOUT,FAILED"))


# ------------------------------------------------------------------------------------------ OpenAPI


def _schema_registry(version: str = V) -> Any:
    """A version's spec as a JSON-schema registry, with two known spec bugs neutralised.

    Slurm's generated spec (1) lists nested required properties as "a/b" names that never occur,
    and (2) types `job_resources` as an object although slurmctld sends null for jobs that never
    ran. The real fixtures validate only with both fixes; nothing else is relaxed.
    """
    import referencing
    from referencing.jsonschema import DRAFT4

    spec = json.loads((OPENAPI / OPENAPI_FILES[version]).read_text())

    def fix(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("required"), list):
                node["required"] = [r for r in node["required"] if "/" not in r]
            props = node.get("properties")
            if isinstance(props, dict) and "job_resources" in props and "job_state" in props:
                props["job_resources"] = {"oneOf": [{"type": "null"}, props["job_resources"]]}
            for value in node.values():
                fix(value)
        elif isinstance(node, list):
            for value in node:
                fix(value)

    fix(spec)
    resource = referencing.Resource(contents=spec, specification=DRAFT4)
    return referencing.Registry().with_resource("spec", resource)


JOB_STATE_RESP = {  # /jobs/state/ answers this (Slurm's openapi_job_state_resp); the spec file mislabels it
    "type": "object",
    "required": ["jobs"],
    "properties": {
        "jobs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["job_id", "state"],
                "additionalProperties": False,
                "properties": {
                    "job_id": {"type": "string"},
                    "state": {"$ref": "spec#/components/schemas/v0.0.42_job_info/properties/job_state"},
                },
            },
        },
        "meta": {"$ref": "spec#/components/schemas/v0.0.42_openapi_meta"},
        "errors": {"$ref": "spec#/components/schemas/v0.0.42_openapi_errors"},
        "warnings": {"$ref": "spec#/components/schemas/v0.0.42_openapi_warnings"},
    },
}


@pytest.fixture(scope="module")
def validate() -> Callable[[str | dict[str, Any], Any], None]:
    import jsonschema

    registry = _schema_registry()

    def check(schema: str | dict[str, Any], instance: Any) -> None:
        root = schema if isinstance(schema, dict) else {"$ref": f"spec#/components/schemas/v0.0.42_{schema}"}
        errors = list(jsonschema.Draft4Validator(root, registry=registry).iter_errors(instance))
        assert not errors, "; ".join(f"{list(e.absolute_path)}: {e.message[:120]}" for e in errors[:5])

    return check


def test_the_real_answers_validate_against_the_fixed_spec(validate: Callable[..., None]) -> None:
    for name, schema in (
        ("16", "openapi_job_info_resp"),
        ("17", "openapi_job_info_resp"),
        ("47", "openapi_job_info_resp"),
        ("07", "openapi_job_submit_response"),
        ("22", "openapi_kill_job_resp"),
        ("54", "openapi_slurmdbd_jobs_resp"),
        ("51", "openapi_slurmdbd_jobs_resp"),
        ("01", "openapi_ping_array_resp"),
        ("33", "openapi_resp"),
    ):
        validate(schema, fixture(name)[1])


def test_emulator_answers_validate_against_the_spec(world: World, validate: Callable[..., None]) -> None:
    client, ids = world.client, world.ids
    validate("openapi_job_info_resp", client.call("GET", f"/slurm/{V}/jobs/").body)
    for label in ids:
        validate("openapi_job_info_resp", client.job(ids[label]).body)
        validate("openapi_slurmdbd_jobs_resp", client.history(ids[label]).body)
    validate("openapi_job_info_resp", client.job(999999).body)
    validate("openapi_slurmdbd_jobs_resp", client.call("GET", f"/slurmdb/{V}/jobs/").body)
    validate("openapi_slurmdbd_jobs_resp", client.history(999999).body)
    validate("openapi_kill_job_resp", client.cancel(ids["A"]).body)
    validate("openapi_kill_job_resp", client.cancel(999999).body)
    validate("openapi_ping_array_resp", client.call("GET", f"/slurm/{V}/ping").body)
    validate("openapi_job_submit_response", client.submit(hold=True).body)
    validate("openapi_resp", client.submit(partition="nope").body)
    validate("openapi_resp", client.call("GET", f"/slurm/{V}/job/abc").body)
    validate(JOB_STATE_RESP, client.call("GET", f"/slurm/{V}/jobs/state/").body)
    gpu = client.submit_id(tres_per_node="gres/gpu:2", script="#!/bin/bash\ntrue\n")
    world.emu.wait_for_state(gpu, "COMPLETED", timeout=60)
    validate("openapi_job_info_resp", client.job(gpu).body)
    validate("openapi_slurmdbd_jobs_resp", client.history(gpu).body)


# ------------------------------------------------------------------------------------------ values
LIVE_FIXTURES = ("08", "09", "16", "17", "18", "20", "21", "28", "66", "67", "69", "70", "71")
DB_FIXTURES = ("48", "49", "50", "51", "68", "72", "73", "74", "75")
SITE_SPECIFIC = re.compile(
    r"^/(account|cluster|group_id|group_name|user_id|user_name|mail_user|association_id|association/.*|"
    r"current_working_directory|standard_(output|error)|working_directory|user|group|stdout.*|stderr.*|"
    r"kill_request_user)$"
)


def _leaves(obj: Any, path: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(obj, dict):
        for key, value in obj.items():
            out.update(_leaves(value, f"{path}/{key}"))
    elif isinstance(obj, list) and obj:
        for i, value in enumerate(obj):
            out.update(_leaves(value, f"{path}[{i}]"))
    else:
        out[path] = json.dumps(obj)
    return out


def _invariants(names: tuple[str, ...]) -> dict[str, str]:
    """Leaf values that are identical in every real record (minus site-specific ones)."""
    leaves = [_leaves(fixture(n)[1]["jobs"][0]) for n in names]
    common = set.intersection(*(set(x) for x in leaves))
    return {k: leaves[0][k] for k in common if all(x[k] == leaves[0][k] for x in leaves) and not SITE_SPECIFIC.match(k)}


def test_values_constant_in_every_real_record_are_the_same(world: World) -> None:
    live, db = _invariants(LIVE_FIXTURES), _invariants(DB_FIXTURES)
    assert len(live) > 150 and len(db) > 60
    diffs = []
    for label, job_id in world.ids.items():
        if label in ("H", "Q"):  # H is compared with fixture 47 below; Q has no finished real counterpart
            continue
        got = _leaves(world.client.job(job_id).jobs[0])
        diffs += [f"live {label}{k}: {got.get(k)} != {v}" for k, v in live.items() if got.get(k) != v]
        got = _leaves(world.client.history(job_id).jobs[0])
        diffs += [f"db {label}{k}: {got.get(k)} != {v}" for k, v in db.items() if got.get(k) != v]
    assert not diffs, "\n".join(diffs[:30])


def test_shape_diff_catches_differences() -> None:
    real = fixture("16")[1]
    changed = json.loads(json.dumps(real))
    del changed["jobs"][0]["comment"]
    changed["jobs"][0]["exit_code"]["return_code"]["number"] = "0"
    changed["jobs"][0]["extra_key"] = 1
    diffs = shape_diff(real, changed)
    assert len(diffs) == 3
    assert shape_diff(real, real) == []


def _record_diffs(real_job: dict[str, Any], got_job: dict[str, Any]) -> list[str]:
    real, got = _leaves(real_job), _leaves(got_job)
    varying = re.compile(
        r"(_time|_evaluation)/number$|^/job_id$|^/name$|^/standard_input$|"
        r"^/time/(eligible|end|submission)$"
    )
    return [
        f"{k}: {got.get(k)} != {v}"
        for k, v in real.items()
        if not SITE_SPECIFIC.match(k) and not varying.search(k) and got.get(k) != v
    ]


def test_special_records_match_the_real_ones_value_by_value(
    world: World, make_emulator: Callable[..., EmulatorHandle]
) -> None:
    """All values (but times, ids and site values) of held, held-then-cancelled and BadConstraints jobs."""
    jobs_47 = {j["name"]: j for j in fixture("47")[1]["jobs"]}  # by name: ids change with each recording
    diffs = _record_diffs(fixture("28")[1]["jobs"][0], world.answers["H_pending"].jobs[0])
    diffs += _record_diffs(jobs_47["t_held"], world.client.job(world.ids["H"]).jobs[0])
    client = Client(make_emulator(min_job_age=60))
    assert client.call("POST", f"/slurm/{V}/job/submit", replay_body("38", client.cwd)).slurm_status == 500
    diffs += _record_diffs(jobs_47["big"], client.job(1).jobs[0])
    db_85 = {j["name"]: j for j in fixture("85")[1]["jobs"]}
    diffs += [f"db 8 {d}" for d in _record_diffs(db_85["big"], client.history(1).jobs[0])]
    diffs += [
        f"db 4 {d}" for d in _record_diffs(fixture("51")[1]["jobs"][0], world.client.history(world.ids["H"]).jobs[0])
    ]
    assert not diffs, "\n".join(diffs)


STEP_ACCOUNTING = re.compile(
    r"^/steps\[0\]/(statistics/|tres/(requested|consumed)/|step/id$|time/)|^/time/"
    r"(elapsed|start|planned/number)$"
)


@pytest.mark.parametrize(
    ("name", "label", "where"),
    [
        ("16", "A", "live"),
        ("09", "R_running", "answer"),
        ("18", "R_running", "answer"),
        ("21", "B", "live"),
        ("66", "F", "live"),
        ("67", "K", "live"),
        ("70", "P", "live"),
        ("71", "T", "live"),
        ("69", "T_running", "answer"),
        ("48", "A", "db"),
        ("49", "B", "db"),
        ("50", "F", "db"),
        ("72", "F", "db"),
        ("73", "K", "db"),
        ("74", "T", "db"),
        ("75", "P", "db"),
    ],
)
def test_records_match_the_real_ones_value_by_value(world: World, name: str, label: str, where: str) -> None:
    """Each job record equals its real counterpart in every value but times, ids, site values and the
    accounting statistics slurmdbd gathers (CPU time, memory, disk)."""
    if label == "B":
        wait_until(lambda: world.client.state(world.ids["B"]) == ["CANCELLED"])
    if where == "answer":
        got = world.answers[label].jobs[0]
    elif where == "live":
        got = world.client.job(world.ids[label]).jobs[0]
    else:
        got = world.client.history(world.ids[label]).jobs[0]
    diffs = [
        d
        for d in _record_diffs(fixture(name)[1]["jobs"][0], got)
        if not STEP_ACCOUNTING.search(d.split(":")[0]) and "/sockets[" not in d
    ]
    assert not diffs, "\n".join(diffs)


@pytest.mark.parametrize("version", [version for version in SUPPORTED_VERSIONS if version != V])
def test_other_versions_validate_against_their_specs(
    version: str, make_emulator: Callable[..., EmulatorHandle]
) -> None:
    import jsonschema

    registry = _schema_registry(version)
    emu = make_emulator(min_job_age=60, slurm_release=release_serving(version))
    client = Client(emu)

    def check(schema: str, instance: Any) -> None:
        ref = {"$ref": f"spec#/components/schemas/{version}_{schema}"}
        errors = list(jsonschema.Draft4Validator(ref, registry=registry).iter_errors(instance))
        assert not errors, "; ".join(f"{list(e.absolute_path)}: {e.message[:120]}" for e in errors[:5])

    answer = client.call(
        "POST",
        f"/slurm/{version}/job/submit",
        {"job": job_desc(client.cwd, tres_per_node="gres/gpu:1"), "script": "#!/bin/bash\nsleep 0.3\n"},
    )
    check("openapi_job_submit_response", answer.body)
    job_id = answer.body["job_id"]
    check("openapi_job_info_resp", client.call("GET", f"/slurm/{version}/job/{job_id}").body)
    emu.wait_for_state(job_id, "RUNNING")
    check("openapi_job_info_resp", client.call("GET", f"/slurm/{version}/jobs/").body)
    check("openapi_slurmdbd_jobs_resp", client.call("GET", f"/slurmdb/{version}/job/{job_id}").body)
    emu.wait_for_state(job_id, "COMPLETED")
    check("openapi_job_info_resp", client.call("GET", f"/slurm/{version}/job/{job_id}").body)
    check("openapi_slurmdbd_jobs_resp", client.call("GET", f"/slurmdb/{version}/jobs/").body)
    check("openapi_ping_array_resp", client.call("GET", f"/slurm/{version}/ping").body)
    kill_schema = "openapi_kill_job_resp" if wire(version).cancel_answers_status else "openapi_resp"
    check(kill_schema, client.call("DELETE", f"/slurm/{version}/job/{job_id}").body)
    check(kill_schema, client.call("DELETE", f"/slurm/{version}/job/999").body)
