"""The old import path of ``slurm_time``, kept for the DAGs and docs that name it.

The module is now :mod:`airflow_provider_slurmapi.slurm.submit.slurm_time` (``slurm/`` was split into sub-packages).
"""

# split.py: generated (re-export of a moved module)
from airflow_provider_slurmapi.slurm.submit.slurm_time import (
    FORMS,
    SlurmTimeError,
    slurm_minutes,
    time_limit_field,
)

__all__ = [
    "FORMS",
    "SlurmTimeError",
    "slurm_minutes",
    "time_limit_field",
]
