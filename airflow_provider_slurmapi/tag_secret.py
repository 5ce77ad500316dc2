"""The secret that keys the task tags: one every component of the Airflow deployment shares.

Why ``[api] secret_key`` (``[webserver] secret_key`` on Airflow 2.11): it is the one secret that
every component holding task code must share already (workers sign and check log-serving requests
with it), on every Airflow version we support. ``[core] fernet_key`` is empty by default on 3.x and
not needed by 3.x workers; ``[api_auth] jwt_secret`` does not exist on 2.11 and workers need not
have it. ``[slurmapi] tag_secret`` overrides both, for deployments that rotate ``secret_key``.

When none is configured, Airflow makes up a random ``secret_key`` in each process. That key is used
(with a warning): tags still guard against other users and a lost submit answer is still resolved
within the process, but a retry in another process cannot recognise its earlier job by the tag (it
still can by the job id stored in the task state store, on Airflow 3.3+).
"""

from __future__ import annotations

import functools
import logging

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS, conf
from airflow_provider_slurmapi.slurm.errors import ConfigurationError

log = logging.getLogger(__name__)

_SECTION, _OPTION = ("api", "secret_key") if AIRFLOW_V_3_0_PLUS else ("webserver", "secret_key")


@functools.cache
def tag_key() -> bytes:
    """The key of :func:`~airflow_provider_slurmapi.slurm.spec.task_tag` in this deployment."""
    own = conf.get("slurmapi", "tag_secret", fallback="") or ""
    if own.strip():
        return own.strip().encode()
    value = conf.get(_SECTION, _OPTION, fallback="") or ""
    try:
        made_up = value == conf.get_default_value(_SECTION, _OPTION)
    except Exception:  # pragma: no cover - an Airflow without get_default_value
        made_up = False
    if not value.strip() or made_up:
        log.warning(
            "[%s] %s is not configured, so Airflow made up a random one for this process: a retry in another "
            "process will not recognise its earlier Slurm job by its tag. Set AIRFLOW__%s__%s (or "
            "AIRFLOW__SLURMAPI__TAG_SECRET) to the same secret on every Airflow component.",
            _SECTION,
            _OPTION,
            _SECTION.upper(),
            _OPTION.upper(),
        )
    if not value.strip():
        raise ConfigurationError(
            f"[{_SECTION}] {_OPTION} is empty: the Slurm task tags need a secret. Set AIRFLOW__{_SECTION.upper()}__"
            f"{_OPTION.upper()} (or AIRFLOW__SLURMAPI__TAG_SECRET) to the same secret on every Airflow component."
        )
    return value.strip().encode()


__all__ = ["tag_key"]
