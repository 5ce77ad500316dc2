"""Who is calling: the Slurm user the Slurm Job API runs this provider's calls as.

Every answer of slurmrestd names its caller in ``meta.client.user`` (the Job API runs each call as
the caller's own Linux account); slurmdbd's answers (``/slurmdb/``) leave it empty. Knowing it, a
listing shows the caller's own jobs, not the whole queue of a shared cluster.
"""

from __future__ import annotations

from airflow_provider_slurmapi.slurm.envelope import SlurmResponse
from airflow_provider_slurmapi.slurm.errors import SlurmApiError


def caller_user(response: SlurmResponse) -> str | None:
    """The caller's user name in ``meta.client.user`` of an answer; ``None`` when it names none."""
    meta = response.body.get("meta") if isinstance(response.body, dict) else None
    client = meta.get("client") if isinstance(meta, dict) else None
    user = client.get("user") if isinstance(client, dict) else None
    return user.strip() if isinstance(user, str) and user.strip() else None


def require_caller_user(response: SlurmResponse) -> str:
    """:func:`caller_user`, or an error saying the answer does not tell whose jobs are the caller's."""
    user = caller_user(response)
    if user is None:
        raise SlurmApiError(
            f"The answer to {response.method} {response.path} does not name the calling user (meta.client.user), "
            "so the caller's own jobs cannot be told apart from other users'. List every user's jobs "
            "explicitly (all_users=True), or name the users (history filters users=[...])."
        )
    return user
