"""The old import path of ``watch``, kept for the DAGs and docs that name it.

The module is now :mod:`airflow_provider_slurmapi.slurm.jobs.watch` (``slurm/`` was split into sub-packages).
"""

# split.py: generated (re-export of a moved module)
from airflow_provider_slurmapi.slurm.jobs.watch import *  # noqa: F403
