"""The part of Airflow's running task instance that the operator and the sensor use, for tests that
call ``execute``, ``poke`` or ``execute_complete`` directly, as Airflow's task runner does."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


class StateStore:
    """Airflow 3.3's task state store: the two methods called."""

    def __init__(self, **values: Any) -> None:
        self.values = dict(values)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


@dataclass
class TaskInstance:
    """Names, try number and XCom of one task instance."""

    dag_id: str = "train_dag"
    task_id: str = "train"
    run_id: str = "manual__2026-12-01T00:00:00+00:00"
    map_index: int = -1
    try_number: int = 1
    xcom: dict[str, Any] = field(default_factory=dict)
    stats_tags: dict[str, str] = field(default_factory=dict)  # read by Airflow 3.3's ResumableJobMixin

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value

    def xcom_pull(self, task_ids: Any = None, key: str = "return_value", map_indexes: Any = None) -> Any:
        return self.xcom.get(key)


@dataclass
class DagRun:
    start_date: datetime = field(default_factory=lambda: datetime.now(UTC))


def task_context(ti: TaskInstance, store: StateStore | None = None, **more: Any) -> Any:
    """The context Airflow passes to ``execute``; ``store`` only on Airflow 3.3+."""
    context: dict[str, Any] = {"ti": ti, "dag_run": DagRun(), **more}
    if store is not None:
        context["task_state_store"] = store
    return context


def deferral_timeout() -> tuple[str, dict[str, Any]]:
    """``next_method`` and ``next_kwargs`` as Airflow's scheduler writes them for a deferred task whose
    trigger timed out (``tests/unit/test_airflow_surface.py`` checks them against Airflow's code)."""
    from airflow_provider_slurmapi._compat import AIRFLOW_2_TRIGGER_TIMEOUT_ERROR, AIRFLOW_V_3_0_PLUS

    if AIRFLOW_V_3_0_PLUS:
        from airflow.models.trigger import TRIGGER_FAIL_REPR, TriggerFailureReason

        return TRIGGER_FAIL_REPR, {"error": TriggerFailureReason.TRIGGER_TIMEOUT.value}
    return "__fail__", {"error": AIRFLOW_2_TRIGGER_TIMEOUT_ERROR}
