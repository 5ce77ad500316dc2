"""What this provider takes from Airflow beyond its stable API: the few names whose home moved
between Airflow 3.x and 2.11, and the internal names of Airflow's it has to match.

Imported straight from ``airflow.sdk`` on Airflow 3 (not through ``common.compat``, whose lazy
table costs DAG parsing a few hundred milliseconds).
"""

from __future__ import annotations

from airflow import __version__ as _AIRFLOW_VERSION
from airflow.exceptions import AirflowException


def _version_tuple(text: str) -> tuple[int, int]:
    parts = [int("".join(ch for ch in part if ch.isdigit()) or 0) for part in text.split(".")[:2]]
    major, minor = [*parts, 0, 0][:2]
    return major, minor


AIRFLOW_V_3_0_PLUS = _version_tuple(_AIRFLOW_VERSION) >= (3, 0)
# From 3.2 the Task SDK holds ``conf`` and the task exceptions (see the Airflow 3.1 block below).
AIRFLOW_V_3_2_PLUS = _version_tuple(_AIRFLOW_VERSION) >= (3, 2)
# From 3.3 the triggerer calls ``trigger.on_kill()`` when a user marks or clears a deferred task.
AIRFLOW_V_3_3_PLUS = _version_tuple(_AIRFLOW_VERSION) >= (3, 3)
# How Airflow resumes a deferred task whose trigger timed out (``execution_timeout`` or a sensor's
# ``timeout``): next_method "__fail__" with this error (2.11's scheduler words it its own way). Both
# are internal names of Airflow's.
TRIGGER_FAIL_METHOD = "__fail__"
TRIGGER_TIMEOUT_ERROR = "Trigger timeout" if AIRFLOW_V_3_0_PLUS else "Trigger/execution timeout"

if AIRFLOW_V_3_0_PLUS:
    from airflow.sdk import BaseOperator, BaseSensorOperator, Context

    # --- Airflow 3.1 (Cloud Composer 3's composer-3-airflow-3.1.8 image) ------------------------------
    # 3.1's airflow.sdk has no ``conf`` and its airflow.sdk.exceptions no AirflowFailException or
    # AirflowTaskTimeout (both came in 3.2): importing them there failed the whole provider. 3.1's task
    # runner raises and catches airflow.exceptions' classes, and its configuration is airflow.configuration's.
    if AIRFLOW_V_3_2_PLUS:
        from airflow.sdk import conf
        from airflow.sdk.exceptions import AirflowFailException, AirflowTaskTimeout
    else:  # pragma: no cover - Airflow 3.0 and 3.1
        from airflow.configuration import conf  # type: ignore[no-redef,attr-defined,assignment]
        from airflow.exceptions import AirflowFailException, AirflowTaskTimeout  # type: ignore[no-redef,attr-defined,assignment]
    # --- end of the Airflow 3.1 block ---------------------------------------------------------------
else:  # pragma: no cover - Airflow 2.11
    from airflow.configuration import conf  # type: ignore[no-redef,attr-defined,assignment]
    from airflow.exceptions import AirflowFailException, AirflowTaskTimeout  # type: ignore[no-redef,attr-defined,assignment]
    from airflow.models import BaseOperator  # type: ignore[no-redef,attr-defined,assignment]
    from airflow.sensors.base import BaseSensorOperator  # type: ignore[no-redef,attr-defined,assignment]
    from airflow.utils.context import Context  # type: ignore[no-redef,attr-defined,assignment]


def redact_text(text: str) -> str:
    """Mask Airflow's registered secrets in text a job wrote (its output, its progress) before it is
    logged or raised: the task's log handlers mask too, but not every path does (``dag.test()``)."""
    try:
        if AIRFLOW_V_3_0_PLUS:
            from airflow.sdk.log import redact
        else:  # pragma: no cover - Airflow 2.11
            from airflow.utils.log.secrets_masker import redact  # type: ignore[no-redef]
    except ImportError:  # pragma: no cover
        return text
    masked = redact(text)
    return masked if isinstance(masked, str) else text


__all__ = [
    "AIRFLOW_V_3_0_PLUS",
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "TRIGGER_FAIL_METHOD",
    "TRIGGER_TIMEOUT_ERROR",
    "AirflowException",
    "AirflowFailException",
    "AirflowTaskTimeout",
    "BaseOperator",
    "BaseSensorOperator",
    "Context",
    "conf",
    "redact_text",
]
