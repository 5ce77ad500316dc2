"""The provider uses Airflow's public surface only, and the one internal name it still matches is
checked here on every Airflow it supports (Cloud Composer upgrades Airflow under its users).

Run on each supported version: the main venv (3.3), ``.venv-airflow3x`` (3.2, before its deployment
scenarios), ``.venv-airflow31`` (3.1), ``.venv-airflow2`` (2.11) and ``.venv-airflow2105`` (2.10.5).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import airflow_provider_slurmapi
from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
from tests.unit.task_instance import deferral_timeout

PACKAGE = Path(airflow_provider_slurmapi.__file__).parent


def _modules() -> list[tuple[str, ast.Module]]:
    return [(str(path.relative_to(PACKAGE)), ast.parse(path.read_text())) for path in sorted(PACKAGE.rglob("*.py"))]


# The private modules still imported, each with why it stays; a test below checks each on every
# supported Airflow (make test runs this file on every version's venv).
KNOWN_PRIVATE_IMPORTS = {
    # Airflow 3.1+ keeps the secrets masker's sensitive name parts (DEFAULT_SENSITIVE_FIELDS) there and
    # has no public reader of them; the job-output wrapper redacts by the same names on the node.
    "_compat.py: airflow.sdk._shared.secrets_masker",
}


def test_no_module_imports_a_private_module_of_airflow() -> None:
    """``airflow.sdk.definitions._internal`` and its kind move between releases without notice; the
    few that stay are named in KNOWN_PRIVATE_IMPORTS, with why."""
    private = []
    for name, tree in _modules():
        for node in ast.walk(tree):
            modules = []
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            private += [
                f"{name}: {module}"
                for module in modules
                if module.startswith("airflow.") and any(part.startswith("_") for part in module.split("."))
            ]
    assert [use for use in private if use not in KNOWN_PRIVATE_IMPORTS] == []


def test_the_sensitive_name_parts_are_read_from_this_airflow() -> None:
    """The one private import that stays (KNOWN_PRIVATE_IMPORTS) still finds Airflow's masker and its
    sensitive name parts on this version: the wrapper redacts nothing if it does not."""
    from airflow_provider_slurmapi._compat import secrets_masker, sensitive_name_parts

    assert secrets_masker() is not None
    parts, min_length = sensitive_name_parts()
    assert {"password", "secret", "token", "api_key"} <= set(parts)
    assert min_length >= 1


def test_no_class_overrides_a_private_method_of_airflows_base_classes() -> None:
    """Overriding ``_do_render_template_fields`` and its kind ties the provider to Airflow's internals."""
    from airflow_provider_slurmapi._compat import BaseOperator, BaseSensorOperator

    airflow_private = {
        name
        for base in (BaseOperator, BaseSensorOperator)
        for klass in base.__mro__
        for name in vars(klass)
        if name.startswith("_") and not name.startswith("__")
    }
    overrides = [
        f"{name}: {node.name}.{item.name}"
        for name, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, ast.FunctionDef) and item.name in airflow_private
    ]
    assert overrides == []


def test_no_module_matches_airflows_internal_next_method() -> None:
    """A timed-out deferral is told by the exception Airflow raises, not by its ``"__fail__"`` marker."""
    literals = [
        f"{name}: {node.value!r}"
        for name, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in ("__fail__", "Trigger timeout")
    ]
    assert literals == []


def test_a_deferral_timeout_is_told_apart_from_any_other_trigger_failure() -> None:
    """What Airflow's own ``resume_execution`` raises for a trigger timeout, and for anything else."""
    from airflow_provider_slurmapi._compat import BaseOperator, is_deferral_timeout

    task = BaseOperator(task_id="t")
    next_method, next_kwargs = deferral_timeout()
    with pytest.raises(Exception) as timed_out:
        task.resume_execution(next_method, next_kwargs, {})  # type: ignore[arg-type]
    assert is_deferral_timeout(timed_out.value)
    with pytest.raises(Exception) as failed:
        task.resume_execution(next_method, {"error": "Trigger failure"}, {})  # type: ignore[arg-type]
    assert not is_deferral_timeout(failed.value)


def test_airflow_writes_the_timeout_this_provider_matches() -> None:
    """The scheduler's own words for a timed-out deferral: on Airflow 2 an internal string (no public
    name exists), on Airflow 3 the enum behind the public ``TaskDeferralTimeout``."""
    if AIRFLOW_V_3_0_PLUS:
        from airflow.models.trigger import TriggerFailureReason

        assert deferral_timeout()[1] == {"error": TriggerFailureReason.TRIGGER_TIMEOUT.value}
    else:  # Airflow 2.10.5, 2.11: literals in the scheduler's timeout of deferred tasks
        from airflow.jobs.scheduler_job_runner import SchedulerJobRunner

        from airflow_provider_slurmapi._compat import AIRFLOW_2_TRIGGER_TIMEOUT_ERROR

        source = inspect.getsource(SchedulerJobRunner.check_trigger_timeouts)
        assert 'next_method="__fail__"' in source
        assert f'next_kwargs={{"error": "{AIRFLOW_2_TRIGGER_TIMEOUT_ERROR}"}}' in source


def test_the_submit_operator_resumes_through_airflows_resumable_job_mixin_from_3_3() -> None:
    """On Airflow 3.3+ the job id goes through Airflow's own ResumableJobMixin (its key, its
    ``durable``); before, the operator's tag lookup stands in with the same calls."""
    from airflow_provider_slurmapi._compat import AIRFLOW_V_3_3_PLUS
    from airflow_provider_slurmapi.operators.slurm import JOB_ID_STATE_KEY, SlurmSubmitJobOperator

    def submit(**kwargs: object) -> SlurmSubmitJobOperator:
        return SlurmSubmitJobOperator(
            task_id="t", script="#!/bin/bash\n", region="us-central1", cluster_id="c", **kwargs
        )

    if AIRFLOW_V_3_3_PLUS:
        from airflow.sdk import ResumableJobMixin

        assert isinstance(submit(), ResumableJobMixin)
    assert submit().external_id_key == JOB_ID_STATE_KEY
    assert submit().durable is True and submit(reattach_on_restart=False).durable is False
