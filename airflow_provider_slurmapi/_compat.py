"""What this provider takes from Airflow beyond its stable API: the few names whose home moved
between Airflow 3.x and 2.11, and the internal names of Airflow's it has to match.

Imported straight from ``airflow.sdk`` on Airflow 3 (not through ``common.compat``, whose lazy
table costs DAG parsing a few hundred milliseconds).
"""

from __future__ import annotations

from typing import Any

from airflow import __version__ as _AIRFLOW_VERSION
from airflow.exceptions import AirflowException


def _version_tuple(text: str) -> tuple[int, int]:
    parts = [int("".join(ch for ch in part if ch.isdigit()) or 0) for part in text.split(".")[:2]]
    major, minor = [*parts, 0, 0][:2]
    return major, minor


AIRFLOW_V_3_0_PLUS = _version_tuple(_AIRFLOW_VERSION) >= (3, 0)
# From 3.3 the triggerer calls ``trigger.on_kill()`` when a user marks or clears a deferred task.
AIRFLOW_V_3_3_PLUS = _version_tuple(_AIRFLOW_VERSION) >= (3, 3)
# How Airflow resumes a deferred task whose trigger timed out (``execution_timeout`` or a sensor's
# ``timeout``): next_method "__fail__" with this error (2.11's scheduler words it its own way). Both
# are internal names of Airflow's.
TRIGGER_FAIL_METHOD = "__fail__"
TRIGGER_TIMEOUT_ERROR = "Trigger timeout" if AIRFLOW_V_3_0_PLUS else "Trigger/execution timeout"

if AIRFLOW_V_3_0_PLUS:
    from airflow.sdk import BaseOperator, BaseSensorOperator, Context, conf
    from airflow.sdk.exceptions import AirflowFailException, AirflowTaskTimeout
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


def secrets_masker() -> Any:
    """Airflow's secrets masker (its configured sensitive name parts, its minimum length); ``None`` if none."""
    candidates = (
        ("airflow.sdk._shared.secrets_masker", "_secrets_masker"),  # Airflow 3.1+
        ("airflow.sdk.execution_time.secrets_masker", "_secrets_masker"),  # Airflow 3.0
        ("airflow.utils.log.secrets_masker", "_secrets_masker"),  # Airflow 2.x
    )
    for module_name, function in candidates:
        try:
            module = __import__(module_name, fromlist=[function])
            return getattr(module, function)()
        except (ImportError, AttributeError, RuntimeError):
            continue
    return None  # pragma: no cover


def sensitive_name_parts() -> tuple[tuple[str, ...], int]:
    """The name parts that make a variable sensitive to Airflow's masker, and the shortest value it masks.

    Read from Airflow (its defaults plus ``[core] sensitive_var_conn_names``), never copied here.
    """
    masker = secrets_masker()
    parts = getattr(masker, "sensitive_variables_fields", None) if masker is not None else None
    if not parts:
        try:
            from airflow.sdk._shared.secrets_masker import DEFAULT_SENSITIVE_FIELDS
        except ImportError:  # pragma: no cover - Airflow 2.x, 3.0
            try:
                from airflow.utils.log.secrets_masker import DEFAULT_SENSITIVE_FIELDS  # type: ignore[no-redef]
            except ImportError:
                DEFAULT_SENSITIVE_FIELDS = frozenset()  # type: ignore[assignment]
        parts = DEFAULT_SENSITIVE_FIELDS
        extra = conf.get("core", "sensitive_var_conn_names", fallback="") or ""
        parts = set(parts) | {part.strip() for part in extra.split(",") if part.strip()}
    min_length = getattr(masker, "min_length_to_mask", None)
    if not isinstance(min_length, int):
        min_length = conf.getint("logging", "min_length_masked_secret", fallback=1)
    return tuple(sorted({str(part).strip().lower() for part in parts if str(part).strip()})), max(1, int(min_length))


def is_masked(value: str) -> bool:
    """Whether Airflow's masker would hide ``value`` (a secret it was told of, e.g. a masked field's value)."""
    return bool(value) and redact_text(value) != value


__all__ = [
    "AIRFLOW_V_3_0_PLUS",
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
    "is_masked",
    "redact_text",
    "secrets_masker",
    "sensitive_name_parts",
]
