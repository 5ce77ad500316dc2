"""A secrets backend for the tag-key DAG runs: it holds the key and fails the first reads it is asked.

Configured through Airflow's own ``[secrets] backend`` (and ``[workers] secrets_backend`` on 3.x), so
the task reads it the way a deployment's Vault or Secret Manager is read; what it answers is set on
the class by the test.
"""

from __future__ import annotations

from typing import Any, ClassVar

try:
    from airflow.sdk.bases.secrets_backend import BaseSecretsBackend
except ImportError:  # Airflow 2.x, and 3.1 before the Task SDK had its own
    from airflow.secrets import BaseSecretsBackend  # type: ignore[no-redef,attr-defined]


class FlakyBackend(BaseSecretsBackend):  # type: ignore[misc]
    key: ClassVar[str] = ""
    value: ClassVar[str | None] = None
    failures_left: ClassVar[int] = 0
    reads: ClassVar[int] = 0

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()

    def get_conn_value(self, conn_id: str) -> str | None:
        return None

    def get_variable(self, key: str, team_name: str | None = None) -> str | None:
        if key != type(self).key:
            return None
        FlakyBackend.reads += 1
        if FlakyBackend.failures_left > 0:
            FlakyBackend.failures_left -= 1
            raise ConnectionError("the secrets store did not answer (a test's transient fault)")
        return FlakyBackend.value
