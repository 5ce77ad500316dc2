"""Apache Airflow provider for Slurm jobs on Google Cloud training clusters, through the Slurm Job API.

Kept import-light on purpose: DAG files import the operators at parse time, and nothing heavy
(Google libraries, aiohttp, the hooks) loads before a task runs.
"""

__version__ = "0.1.0"
