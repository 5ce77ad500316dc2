"""What this provider takes from Airflow: the few names whose home moved between Airflow 3.x and 2.x
(2.10.5, 2.11), and the one internal name of Airflow's it still has to match (on 2.x only, see
:func:`is_deferral_timeout`).

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
# From 3.2 the Task SDK holds ``conf`` and the task exceptions (see the Airflow 3.1 block below).
AIRFLOW_V_3_2_PLUS = _version_tuple(_AIRFLOW_VERSION) >= (3, 2)
# From 3.3 the triggerer calls ``trigger.on_kill()`` when a user marks or clears a deferred task.
AIRFLOW_V_3_3_PLUS = _version_tuple(_AIRFLOW_VERSION) >= (3, 3)
# Airflow 2.x words the failure of a deferred task whose trigger timed out with this message: an
# internal string of its scheduler (``check_trigger_timeouts``), which it
# raises as the public ``TaskDeferralError`` it raises for every other trigger failure too. It stays
# because Airflow 2 has no public way to tell a timeout apart; Airflow 3 raises ``TaskDeferralTimeout``.
# tests/unit/test_airflow_surface.py checks it against the scheduler's source on each 2.x version.
AIRFLOW_2_TRIGGER_TIMEOUT_ERROR = "Trigger/execution timeout"

if AIRFLOW_V_3_0_PLUS:
    from airflow.sdk import BaseOperator, BaseSensorOperator, Context

    # --- Airflow 3.1 (Cloud Composer 3's composer-3-airflow-3.1.8 image) ------------------------------
    # 3.1's airflow.sdk has no ``conf`` and its airflow.sdk.exceptions no AirflowFailException,
    # AirflowTaskTimeout or TaskDeferralTimeout (all came in 3.2): importing them there failed the whole
    # provider. 3.1's task runner raises and catches airflow.exceptions' classes, and its configuration
    # is airflow.configuration's.
    if AIRFLOW_V_3_2_PLUS:
        from airflow.sdk import conf
        from airflow.sdk.exceptions import AirflowFailException, AirflowTaskTimeout, TaskDeferralTimeout
    else:  # pragma: no cover - Airflow 3.0 and 3.1
        from airflow.configuration import conf  # type: ignore[no-redef,attr-defined,assignment]
        from airflow.exceptions import (  # type: ignore[no-redef,attr-defined,assignment]
            AirflowFailException,
            AirflowTaskTimeout,
            TaskDeferralTimeout,
        )
    # --- end of the Airflow 3.1 block ---------------------------------------------------------------
else:  # pragma: no cover - Airflow 2.x
    from airflow.configuration import conf  # type: ignore[no-redef,attr-defined,assignment]
    from airflow.exceptions import AirflowFailException, AirflowTaskTimeout, TaskDeferralError  # type: ignore[no-redef,attr-defined,assignment]
    from airflow.models import BaseOperator  # type: ignore[no-redef,attr-defined,assignment]
    from airflow.sensors.base import BaseSensorOperator  # type: ignore[no-redef,attr-defined,assignment]
    from airflow.utils.context import Context  # type: ignore[no-redef,attr-defined,assignment]


if AIRFLOW_V_3_3_PLUS:
    from airflow.sdk import ResumableJobMixin
else:  # pragma: no cover - before Airflow 3.3

    class ResumableJobMixin:  # type: ignore[no-redef]
        """Before Airflow 3.3 there is no task state store to resume from: the operator's own lookup
        (its job's tag) is all a retry has. The same calls as Airflow's mixin, in the same order."""

        external_id_key: str = "remote_job_id"
        durable: bool = False

        def execute_resumable(self, context: Any) -> Any:
            external_id = self.submit_job(context)  # type: ignore[attr-defined]
            self.poll_until_complete(external_id, context)  # type: ignore[attr-defined]
            return self.get_job_result(external_id, context)  # type: ignore[attr-defined]


def is_deferral_timeout(exc: BaseException) -> bool:
    """Whether ``exc``, raised by Airflow's ``resume_execution``, fails the task because its deferral
    timed out (``execution_timeout``, a sensor's ``timeout``): the triggerer calls no ``on_kill`` then.

    Follows the causes: a sensor raises ``AirflowSensorTimeout`` (or, with ``soft_fail``, a skip) from it.
    """
    seen: BaseException | None = exc
    while seen is not None:
        if AIRFLOW_V_3_0_PLUS and isinstance(seen, TaskDeferralTimeout):
            return True
        if (
            not AIRFLOW_V_3_0_PLUS
            and isinstance(seen, TaskDeferralError)
            and str(seen) == AIRFLOW_2_TRIGGER_TIMEOUT_ERROR
        ):
            return True  # pragma: no cover - Airflow 2.x
        seen = seen.__cause__
    return False


def redact_text(text: str) -> str:
    """Mask Airflow's registered secrets in text a job wrote (its output, its progress) before it is
    logged or raised: the task's log handlers mask too, but not every path does (``dag.test()``)."""
    try:
        if AIRFLOW_V_3_0_PLUS:
            from airflow.sdk.log import redact
        else:  # pragma: no cover - Airflow 2.x
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
    "AIRFLOW_2_TRIGGER_TIMEOUT_ERROR",
    "AIRFLOW_V_3_0_PLUS",
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "AirflowException",
    "AirflowFailException",
    "AirflowTaskTimeout",
    "BaseOperator",
    "BaseSensorOperator",
    "Context",
    "ResumableJobMixin",
    "conf",
    "is_deferral_timeout",
    "is_masked",
    "redact_text",
    "secrets_masker",
    "sensitive_name_parts",
]
