"""The old import path of ``cluster``, kept for the DAGs and docs that name it.

The module is now :mod:`airflow_provider_slurmapi.slurm.api.cluster` (``slurm/`` was split into sub-packages).
"""

# split.py: generated (re-export of a moved module)
from airflow_provider_slurmapi.slurm.api.cluster import *  # noqa: F403
