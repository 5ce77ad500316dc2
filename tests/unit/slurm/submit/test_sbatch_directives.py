"""Reading ``#SBATCH`` lines into job fields, without a cluster (real sbatch judges it in tests/live_slurm)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError
from airflow_provider_slurmapi.slurm.submit.job_output import wrap_script
from airflow_provider_slurmapi.slurm.submit.sbatch import (
    apply_directives,
    directive_fields,
    directive_lines,
    megabytes,
    read_directives,
)
from airflow_provider_slurmapi.slurm.submit.slurm_time import slurm_minutes
from airflow_provider_slurmapi.slurm.submit.spec import DEFAULT_ENVIRONMENT, prepare_submission


def fields(*lines: str, api_version: str | None = None) -> dict[str, Any]:
    script = "#!/bin/bash\n" + "".join(f"#SBATCH {line}\n" for line in lines) + "srun true\n"
    return directive_fields(script, api_version=api_version, default_environment=DEFAULT_ENVIRONMENT).fields


def num(n: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": n}


INFINITE = {"set": True, "infinite": True, "number": 0}


# -- which lines are read ---------------------------------------------------------------------------------
def test_only_the_comment_block_after_the_interpreter_line_is_read() -> None:
    script = (
        "#!/bin/bash\n"
        "# a comment\n"
        "\n"
        "#SBATCH --partition=a3\n"
        "   # an indented comment\n"
        " #SBATCH --qos=ignored-indented\n"
        "#SBATCH -t 10\n"
        "srun python train.py\n"
        "#SBATCH --account=after-the-first-command\n"
    )
    assert [n for n, _ in directive_lines(script)] == [4, 7]
    assert directive_fields(script).fields == {"partition": "a3", "time_limit": num(10)}


def test_a_script_without_directives_gives_no_fields() -> None:
    assert directive_fields("#!/bin/bash\nsrun true\n").fields == {}


def test_quotes_trailing_comments_and_several_options_a_line() -> None:
    got = fields('--comment="nightly run" -J train # ten minutes', "--mail-user 'a b@example.com'")
    assert got == {"comment": "nightly run", "name": "train", "mail_user": "a b@example.com"}


def test_short_forms_glued_and_separate_and_long_forms_with_equals_or_space() -> None:
    assert fields("-pdebug") == fields("-p debug") == fields("--partition=debug") == fields("--partition debug")
    assert fields("-c4") == {"cpus_per_task": 4, "tres_per_task": "cpu=4"}
    assert fields("-Hs") == {"hold": True, "shared": ["oversubscribe"]}


def test_long_options_may_be_abbreviated_to_a_unique_prefix_as_with_getopt() -> None:
    assert fields("--part=a3") == {"partition": "a3"}
    with pytest.raises(ConfigurationError, match=r"--mem is ambiguous|--me is ambiguous"):
        fields("--me=1G")


def test_a_later_option_wins_as_with_sbatch() -> None:
    assert fields("--time=10", "-t 20", "--requeue", "--no-requeue") == {"time_limit": num(20), "requeue": False}


# -- every option -----------------------------------------------------------------------------------------
OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("--job-name=train", {"name": "train"}),
    ("-J train", {"name": "train"}),
    ("--partition=a3", {"partition": "a3"}),
    ("--time=90", {"time_limit": num(90)}),
    ("--nodes=4", {"minimum_nodes": 4, "maximum_nodes": 4}),
    ("-N 2-8", {"minimum_nodes": 2, "maximum_nodes": 8}),
    ("--nodes=1-15:4", {"nodes": "1-15:4"}),
    ("--nodes=2,4,8", {"nodes": "2,4,8"}),
    ("--ntasks=16", {"tasks": 16}),
    ("-n 16", {"tasks": 16}),
    ("--ntasks-per-node=8", {"tasks_per_node": 8}),
    ("--cpus-per-task=12", {"cpus_per_task": 12, "tres_per_task": "cpu=12"}),
    ("--mincpus=4", {"minimum_cpus_per_node": 4}),
    ("--mem=16G", {"memory_per_node": num(16384)}),
    ("--mem=500", {"memory_per_node": num(500)}),
    ("--mem=2T", {"memory_per_node": num(2 * 1024 * 1024)}),
    ("--mem=1025K", {"memory_per_node": num(2)}),
    ("--mem-per-cpu=4g", {"memory_per_cpu": num(4096)}),
    ("--mem-per-gpu=80G", {"memory_per_tres": "gres/gpu:81920"}),
    ("--gres=gpu:8", {"tres_per_node": "gres/gpu:8"}),
    ("--gres=gpu:h100:8,nvme:1", {"tres_per_node": "gres/gpu:h100:8,gres/nvme:1"}),
    ("--gpus=16", {"tres_per_job": "gres/gpu:16"}),
    ("-G a100:2", {"tres_per_job": "gres/gpu:a100:2"}),
    ("--gpus-per-node=8", {"tres_per_node": "gres/gpu:8"}),
    ("--gpus-per-task=1", {"tres_per_task": "gres/gpu:1"}),
    ("--cpus-per-gpu=12", {"cpus_per_tres": "gres/gpu:12"}),
    ("--output=/home/me/%x-%j.out", {"standard_output": "/home/me/%x-%j.out"}),
    ("-o logs/%A_%a.out", {"standard_output": "logs/%A_%a.out"}),
    ("--error=/tmp/%u-%j.err", {"standard_error": "/tmp/%u-%j.err"}),
    ("-i /dev/null", {"standard_input": "/dev/null"}),
    ("--chdir=/home/me/run", {"current_working_directory": "/home/me/run"}),
    ("-D /scratch", {"current_working_directory": "/scratch"}),
    ("--account=ml", {"account": "ml"}),
    ("-A ml", {"account": "ml"}),
    ("--qos=high", {"qos": "high"}),
    ("-q high", {"qos": "high"}),
    ("--constraint=h100&ib", {"constraints": "h100&ib"}),
    ("-C h100", {"constraints": "h100"}),
    ("--prefer=fast", {"prefer": "fast"}),
    ("--exclusive", {"shared": ["none"]}),
    ("--exclusive=user", {"shared": ["user"]}),
    ("--exclusive=mcs", {"shared": ["mcs"]}),
    ("--exclusive=topo", {"shared": ["topo"]}),
    ("--oversubscribe", {"shared": ["oversubscribe"]}),
    ("--array=0-9%2", {"array": "0-9%2"}),
    ("-a 1,3,5", {"array": "1,3,5"}),
    ("--array=0-15:4", {"array": "0-15:4"}),
    ("--dependency=afterok:123:456,singleton", {"dependency": "afterok:123:456,singleton"}),
    ("-d afterany:7", {"dependency": "afterany:7"}),
    ("--requeue", {"requeue": True}),
    ("--no-requeue", {"requeue": False}),
    (
        "--signal=B:USR1@90",
        {"kill_warning_signal": "USR1", "kill_warning_delay": num(90), "kill_warning_flags": ["BATCH_JOB"]},
    ),
    ("--signal=SIGTERM", {"kill_warning_signal": "TERM", "kill_warning_delay": num(60)}),
    (
        "--signal=R:10@30",
        {"kill_warning_signal": "10", "kill_warning_delay": num(30), "kill_warning_flags": ["RESERVATION_JOB"]},
    ),
    ("--export=ALL,FOO=bar", {"environment": [*DEFAULT_ENVIRONMENT, "FOO=bar"]}),
    ("--export=NONE,FOO=bar", {"environment": ["FOO=bar"]}),
    ("--export=NONE", {"environment": list(DEFAULT_ENVIRONMENT)}),
    ("--export=ALL,PATH=/opt/bin", {"environment": ["PATH=/opt/bin"]}),
    ("--mail-type=END,FAIL", {"mail_type": ["END", "FAIL"]}),
    ("--mail-type=ALL", {"mail_type": ["BEGIN", "END", "FAIL", "REQUEUE", "STAGE_OUT", "INVALID_DEPENDENCY"]}),
    ("--mail-type=TIME_LIMIT_90,ARRAY_TASKS", {"mail_type": ["TIME=90%", "ARRAY_TASKS"]}),
    ("--mail-type=NONE", {"mail_type": []}),
    ("--mail-user=me@example.com", {"mail_user": "me@example.com"}),
    ("--comment=nightly", {"comment": "nightly"}),
    ("--reservation=maint", {"reservation": "maint"}),
    ("--begin=now+1hour", {"begin_time": "now+1hour"}),
    ("-b 2027-01-31T16:00:00", {"begin_time": "2027-01-31T16:00:00"}),
    ("--begin=16:00", {"begin_time": "16:00"}),
    ("--begin=tomorrow", {"begin_time": "tomorrow"}),
    ("--hold", {"hold": True}),
    ("-H", {"hold": True}),
    ("--nice", {"nice": 100}),
    ("--nice=10", {"nice": 10}),
    ("--nice=-5", {"nice": -5}),
    ("--exclude=node[1-3]", {"excluded_nodes": "node[1-3]"}),
    ("-x node7", {"excluded_nodes": "node7"}),
    ("--nodelist=a3-[0-3]", {"required_nodes": "a3-[0-3]"}),
    ("-w a3-0", {"required_nodes": "a3-0"}),
    ("--tmp=100G", {"temporary_disk_per_node": 102400}),
    ("--time-min=30", {"time_minimum": num(30)}),
    ("--open-mode=append", {"open_mode": ["APPEND"]}),
    ("--open-mode=truncate", {"open_mode": ["TRUNCATE"]}),
    ("--licenses=matlab:2", {"licenses": "matlab:2"}),
    ("-L fluent", {"licenses": "fluent"}),
    ("--wckey=exp1", {"wckey": "exp1"}),
    ("--contiguous", {"contiguous": True}),
    ("-O", {"overcommit": True}),
    ("--no-kill", {"kill_on_node_fail": False}),
    ("--kill-on-invalid-dep=yes", {"flags": ["KILL_INVALID_DEPENDENCY"]}),
    ("--kill-on-invalid-dep=no", {"flags": ["NO_KILL_INVALID_DEPENDENCY"]}),
]


@pytest.mark.parametrize(("line", "expected"), OPTIONS, ids=[line for line, _ in OPTIONS])
def test_every_option_gives_the_fields_sbatch_sends(line: str, expected: dict[str, Any]) -> None:
    assert fields(line) == expected


def test_gres_and_gpus_per_node_share_tres_per_node_and_gpus_per_task_joins_the_cpus() -> None:
    got = fields("--gpus-per-node=8", "--gres=nvme:1", "-c 12", "--gpus-per-task=1")
    assert got["tres_per_node"] == "gres/nvme:1,gres/gpu:8"
    assert got["tres_per_task"] == "cpu=12,gres/gpu:1"


# -- every time format ------------------------------------------------------------------------------------
TIMES = [
    ("90", 90),
    ("0:30", 1),  # MM:SS: seconds round up to a minute, as in Slurm
    ("5:00", 5),
    ("1:30:00", 90),
    ("1:30:01", 91),
    ("2-12", 3600),
    ("1-00:30", 1470),
    ("1-00:00:01", 1441),
    ("0-00:00:30", 1),
]


@pytest.mark.parametrize(("text", "minutes"), TIMES)
def test_every_sbatch_time_format(text: str, minutes: int) -> None:
    assert slurm_minutes(text) == minutes
    assert fields(f"--time={text}") == {"time_limit": num(minutes)}
    assert fields(f"--time-min={text}") == {"time_minimum": num(minutes)}


@pytest.mark.parametrize("text", ["UNLIMITED", "infinite", "-1", "0"])
def test_unlimited_time_and_zero_mean_no_limit(text: str) -> None:
    assert fields(f"--time={text}") == {"time_limit": INFINITE}


@settings(max_examples=60)
@given(days=st.integers(0, 30), hours=st.integers(0, 23), minutes=st.integers(0, 59), seconds=st.integers(0, 59))
def test_every_time_format_counts_like_slurm(days: int, hours: int, minutes: int, seconds: int) -> None:
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    assert slurm_minutes(f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}") == -(-total // 60)
    assert slurm_minutes(f"{days}-{hours}:{minutes}") == (days * 24 + hours) * 60 + minutes
    assert slurm_minutes(f"{days}-{hours}") == (days * 24 + hours) * 60
    assert slurm_minutes(f"{days * 24 + hours}:{minutes:02d}:{seconds:02d}") == -(-total // 60)
    assert slurm_minutes(f"{minutes}:{seconds}") == minutes + (1 if seconds else 0)


@pytest.mark.parametrize(("text", "mb"), [("1", 1), ("1K", 1), ("2048k", 2), ("3M", 3), ("2G", 2048), ("1t", 1048576)])
def test_sizes_in_megabytes(text: str, mb: int) -> None:
    assert megabytes(text) == mb


# -- what is refused, before anything is sent --------------------------------------------------------------
REFUSED = [
    ("--foo=1", r"#SBATCH --foo=1 \(script line 2\): unknown option --foo"),
    ("-Z", r"unknown option -Z"),
    ("--time=abc", r"'abc' is not a Slurm time"),
    ("--time=1:2:3:4", r"not a Slurm time"),
    ("--mem=16GB", r"'16GB' is not a size"),
    ("--nodes=4-2", r"min <= max"),
    ("--nodes=zero", r"not a node count"),
    ("--ntasks=0", r"at least 1"),
    ("--cpus-per-task=two", r"not a whole number"),
    ("--chdir=relative/dir", r"relative.*absolute path"),
    ("--export=HOME", r"'HOME' would copy a variable of the submitting shell"),
    ("--export=ALL,1X=2", r"not a variable name"),
    ("--mail-type=SOMETIMES", r"not a mail type"),
    ("--signal=B:NOPE", r"not a signal name"),
    ("--signal=USR1@70000", r"at most 65535"),
    ("--open-mode=sometimes", r"not an open mode"),
    ("--exclusive=always", r"exclusive takes no value, or user, mcs or topo"),
    ("--array=0-9%", r"not an array specification"),
    ("--begin='next tuesday'", r"not a time sbatch reads"),
    ("--gpus=many", r"not a GPU request"),
    ("--nodelist=/etc/hosts", r"looks like a file"),
    ("--hold=yes", r"--hold takes no value"),
    ("--partition", r"--partition needs a value"),
    ("-p", r"-p needs a value"),
    ("--wait", r"--wait cannot be sent through the Slurm REST API: .*wait_for_completion"),
    ("-W", r"--wait cannot be sent"),
    ("--wrap='srun x'", r"--wrap cannot be sent"),
    ("--get-user-env", r"--get-user-env cannot be sent"),
    ("--uid=0", r"--uid cannot be sent"),
    ("--clusters=other", r"--clusters cannot be sent.*cluster_id"),
    ("--export-file=/tmp/env", r"--export-file cannot be sent"),
    ("--nodefile=nodes.txt", r"--nodefile cannot be sent"),
    ("--comment='unbalanced", r"unbalanced ' quote"),
    ("partition=a3", r"'partition=a3' is not an option"),
    ("hetjob", r"heterogeneous jobs are not supported"),
]


@pytest.mark.parametrize(("line", "message"), REFUSED, ids=[line for line, _ in REFUSED])
def test_a_bad_or_inexpressible_line_is_refused_naming_the_line_and_the_fix(line: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as raised:
        fields(line)
    assert "(script line 2)" in str(raised.value)
    assert "sbatch_directives=False" in str(raised.value) or "hetjob" in line


def test_an_option_glued_to_sbatch_or_after_a_tab_is_read_as_sbatch_reads_it() -> None:
    assert directive_fields("#!/bin/bash\n#SBATCH--time=5\n#SBATCH\t-J tabbed\n").fields == {
        "time_limit": num(5),
        "name": "tabbed",
    }
    with pytest.raises(ConfigurationError, match=r"'foo' is not an option"):
        read_directives("#!/bin/bash\n#SBATCHfoo\n")


def test_exclusive_topo_needs_v0_0_41_or_later() -> None:
    with pytest.raises(ConfigurationError, match=r"topo needs api_version v0.0.41"):
        fields("--exclusive=topo", api_version="v0.0.40")
    assert fields("--exclusive", api_version="v0.0.40") == {"shared": ["none"]}


def test_options_that_only_change_what_sbatch_prints_are_noted_not_refused() -> None:
    script = "#!/bin/bash\n#SBATCH --parsable -Q\n#SBATCH -p a3\n"
    found = directive_fields(script)
    assert found.fields == {"partition": "a3"}
    assert len(found.notes) == 2 and "ignored" in found.notes[0]


# -- precedence of job, and the way on into the submit body -------------------------------------------------
SCRIPT = (
    "#!/bin/bash\n"
    "#SBATCH --partition=debug --time=10 -N 2\n"
    "#SBATCH --comment=from-script\n"
    "#SBATCH --export=ALL,SECRET_TOKEN=hunter2\n"
    "srun true\n"
)


def test_a_field_set_in_job_keeps_the_job_value_and_the_note_names_the_directive() -> None:
    applied = apply_directives(
        {"partition": "a3", "maximum_nodes": 4, "environment": {"SECRET_TOKEN": "s3cr3t"}, "account": None},
        SCRIPT,
    )
    assert applied.job["partition"] == "a3"
    assert applied.job["maximum_nodes"] == 4 and "minimum_nodes" not in applied.job  # the group goes with it
    assert applied.job["time_limit"] == num(10)
    assert applied.job["environment"] == {"SECRET_TOKEN": "s3cr3t"}
    notes = "\n".join(applied.notes)
    assert "job['partition']='a3' kept over #SBATCH --partition=debug (script line 2)" in notes
    assert "job['maximum_nodes']=4 kept over #SBATCH --nodes=2 (script line 2)" in notes
    assert "job['environment'] kept over" in notes
    assert "s3cr3t" not in notes
    assert sorted(applied.applied) == ["comment", "time_limit"]


def test_the_comment_of_a_directive_keeps_the_task_tag() -> None:
    applied = apply_directives({}, SCRIPT, default_environment=DEFAULT_ENVIRONMENT)
    prepared = prepare_submission(applied.job, SCRIPT, tag="airflow-ti=abc", comment="airflow dag=d airflow-ti=abc")
    assert prepared.job["comment"] == "from-script | airflow dag=d airflow-ti=abc"
    assert prepared.job["environment"] == [*DEFAULT_ENVIRONMENT, "SECRET_TOKEN=hunter2"]


def test_job_cpus_per_task_also_overrides_the_cpu_count_sbatch_puts_in_tres_per_task() -> None:
    script = "#!/bin/bash\n#SBATCH -c 8 --gpus-per-task=1\n"
    assert apply_directives({"cpus_per_task": 2}, script).job == {"cpus_per_task": 2, "tres_per_task": "gres/gpu:1"}
    assert apply_directives({"cpus_per_task": 2}, "#!/bin/bash\n#SBATCH -c 8\n").job == {"cpus_per_task": 2}


def test_the_wrapper_keeps_the_directives_that_are_read_from_the_users_script() -> None:
    script = "#!/usr/bin/env python3\n#SBATCH -p a3 --time=5\nprint('hi')\n"
    assert (
        directive_fields(wrap_script(script)).fields
        == directive_fields(script).fields
        == {
            "partition": "a3",
            "time_limit": num(5),
        }
    )


def test_a_non_string_script_is_left_to_prepare_submission() -> None:
    assert apply_directives({"name": "x"}, None).job == {"name": "x"}  # type: ignore[arg-type]


def test_export_values_never_reach_an_error_or_a_note() -> None:
    with pytest.raises(ConfigurationError) as raised:
        fields("--export=ALL,API_KEY=hunter2 --bogus")
    assert "hunter2" not in str(raised.value) and "API_KEY=***" in str(raised.value)
    with pytest.raises(ConfigurationError) as raised:
        fields("--export=ALL,API_KEY=hunter2,HOME")
    assert "hunter2" not in str(raised.value)
    applied = apply_directives({"environment": ["A=1"]}, "#!/bin/bash\n#SBATCH --export=API_KEY=hunter2\n")
    assert "hunter2" not in "".join(applied.notes) and "--export=API_KEY=***" in "".join(applied.notes)


# -- the four options sbatch accepts that the provider used to refuse (issue 17) ---------------------------
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("--distribution=cyclic:block", {"distribution": "cyclic:block"}),
        ("-m block", {"distribution": "block"}),
        ("--distribution=block:*:fcyclic,pack", {"distribution": "block:*:fcyclic,pack"}),
        ("--distribution=plane=4", {"distribution": "plane=4"}),
        ("--distribution=nopack", {"distribution": "nopack"}),
        ("--threads-per-core=1", {"threads_per_core": 1}),
        ("--deadline=now+1day", {"deadline": "now+1day"}),
        ("--deadline=2031-01-02T03:04:05", {"deadline": "2031-01-02T03:04:05"}),
        ("--spread-job", {"flags": ["SPREAD_JOB"]}),
    ],
)
def test_distribution_threads_deadline_and_spread_job_are_translated(line: str, expected: dict[str, Any]) -> None:
    assert fields(line) == expected


def test_spread_job_and_kill_on_invalid_dep_share_the_flags() -> None:
    assert fields("--spread-job", "--kill-on-invalid-dep=yes")["flags"] == ["SPREAD_JOB", "KILL_INVALID_DEPENDENCY"]


def test_threads_per_core_asks_for_nodes_times_threads_tasks_as_sbatch_does() -> None:
    assert fields("-N 2", "--threads-per-core=2")["tasks"] == 4
    assert "tasks" not in fields("-N 1-2", "--threads-per-core=2")  # a node range: sbatch leaves the tasks unset
    assert fields("-N 2", "-n 3", "--threads-per-core=2")["tasks"] == 3


def test_threads_per_core_puts_slurm_threads_per_core_in_the_environment() -> None:
    script = "#!/bin/bash\n#SBATCH --threads-per-core=1\ntrue\n"
    applied = apply_directives({"environment": {"HOME": "/home/me"}}, script)
    assert applied.job["environment"] == ["HOME=/home/me", "SLURM_THREADS_PER_CORE=1"]
    applied = apply_directives({"threads_per_core": 2}, script)  # job wins, and sbatch's variable with it
    assert "environment" not in applied.job


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--distribution=round", r"not a distribution sbatch reads"),
        ("--distribution=plane=0", r"plane size must be at least 1"),
        ("--distribution=arbitrary", r"--nodelist and --ntasks"),
        ("--threads-per-core=0", r"at least 1"),
        ("--deadline=someday", r"not a time sbatch reads"),
        ("--spread-job=yes", r"--spread-job takes no value"),
    ],
)
def test_bad_values_of_the_four_options_are_refused(line: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        fields(line)


def test_an_option_the_api_cannot_express_is_never_told_to_go_into_a_job_field() -> None:
    with pytest.raises(ConfigurationError) as raised:
        fields("--wait")
    assert "cannot be sent through the Slurm REST API" in str(raised.value)
    assert "job[" not in str(raised.value) and "job={" not in str(raised.value)


def test_an_option_the_api_can_express_but_the_provider_does_not_read_names_the_field() -> None:
    with pytest.raises(ConfigurationError) as raised:
        fields("--acctg-freq=10")
    message = str(raised.value)
    assert "cannot be sent" not in message
    assert "is not read from #SBATCH lines by this provider" in message
    assert "set job['account_gather_frequency'] instead" in message
