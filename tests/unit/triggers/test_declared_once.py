"""The watch settings and the cluster arguments are declared once, and reach every holder from there.

A field added to ``WatchSettings`` reaches the trigger's serialization, and back, with no other edit:
these tests iterate the dataclass's fields instead of naming them. A trigger serialized by the release
before ``WatchSettings`` was carried whole (its settings flat among its kwargs) still resumes into the
same settings.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import fields, replace
from typing import Any

import pytest

from airflow_provider_slurmapi.operators.base import SlurmBaseOperator
from airflow_provider_slurmapi.operators.slurm import (
    SlurmCancelJobOperator,
    SlurmGetJobOperator,
    SlurmListJobsOperator,
    SlurmSubmitJobOperator,
)
from airflow_provider_slurmapi.sensors.slurm import SlurmJobSensor
from airflow_provider_slurmapi.slurm.api.cluster import CLUSTER_ARG_NAMES, CLUSTER_TEMPLATE_FIELDS
from airflow_provider_slurmapi.slurm.jobs.watch import WatchSettings
from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger
from tests.unit.triggers.rebuild import import_string
from tests.unit.triggers.test_trigger_upgrade import PAYLOAD

CLUSTER = {"project_id": "demo-project", "region": "us-central1", "cluster_id": "demo-cluster"}
OPERATORS = [SlurmSubmitJobOperator, SlurmCancelJobOperator, SlurmGetJobOperator, SlurmListJobsOperator, SlurmJobSensor]


def rebuild(classpath: str, kwargs: dict[str, Any]) -> Any:
    """As the triggerer does: the stored JSON, read back, handed to the class found by its path."""
    return import_string(classpath)(**json.loads(json.dumps(kwargs)))


def other_value(default: object) -> object:
    """A value unlike a field's default, of the field's kind (what JSON keeps)."""
    if isinstance(default, bool):
        return not default
    if isinstance(default, int | float):
        return float(default) + 17.5
    return 123.0  # an unset limit (None): a number of seconds


@pytest.mark.parametrize("name", WatchSettings.names())
def test_each_watch_setting_reaches_the_triggers_serialization_and_back(name: str) -> None:
    default = next(f.default for f in fields(WatchSettings) if f.name == name)
    settings = replace(WatchSettings(), **{name: other_value(default)})
    trigger = SlurmJobTrigger(job_id=42, watch=settings, **CLUSTER)
    classpath, kwargs = trigger.serialize()
    assert kwargs[name] == getattr(settings, name)
    assert rebuild(classpath, kwargs).watch_settings == settings


def test_a_trigger_stored_with_its_settings_flat_resumes_into_the_same_settings() -> None:
    classpath, stored = PAYLOAD
    old = {**stored, "pending_timeout": 600.0, "pending_since": 1_700_000_000.0, "cancel_copies_of": "send-1"}
    trigger = rebuild(classpath, old)
    assert trigger.watch_settings == WatchSettings(
        missing_grace_seconds=42.0, outage_tolerance_seconds=3600.0, log_progress=True, pending_timeout=600.0
    )
    assert trigger.serialize() == (classpath, old)


def test_an_unknown_stored_argument_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="unexpected arguments: bogus"):
        SlurmJobTrigger(job_id=42, bogus=1, **CLUSTER)


def test_every_cluster_argument_is_taken_by_every_operator_and_carried_by_the_trigger() -> None:
    # Airflow's default_args and partial() read the parameters of __init__: the base operator declares them all.
    params = inspect.signature(SlurmBaseOperator.__init__).parameters
    assert set(CLUSTER_ARG_NAMES) <= {name for name, p in params.items() if p.kind is p.KEYWORD_ONLY}
    for operator in OPERATORS:
        assert issubclass(operator, SlurmBaseOperator)
        assert set(CLUSTER_TEMPLATE_FIELDS) <= set(operator.template_fields), operator
    trigger = SlurmJobTrigger(job_id=42, **CLUSTER)
    assert set(CLUSTER_ARG_NAMES) <= set(trigger.serialize()[1])


def test_an_operator_keeps_each_cluster_argument_as_given_under_its_declared_name() -> None:
    given = {**CLUSTER, "gcp_conn_id": "conn", "api_version": "v0.0.42",
             "impersonation_chain": "sa@demo-project.iam.gserviceaccount.com", "api_endpoint": "https://x.example.com"}  # fmt: skip
    assert set(given) == set(CLUSTER_ARG_NAMES)
    operator = SlurmGetJobOperator(task_id="get", job_id=1, **given)
    assert {name: getattr(operator, name) for name in CLUSTER_ARG_NAMES} == given
    assert operator.cluster.as_kwargs() == given
