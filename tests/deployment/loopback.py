"""``[core] hostname_callable`` of the test deployment: log fetching stays on loopback.

Each process may get an address of its own in 127.0.0.0/8 (all of it is loopback on Linux) through
``SLURMAPI_DEPLOYMENT_HOSTNAME``, so the triggerer or worker that holds a task shows in the task
instance's and the triggerer job's ``hostname``.
"""

import os


def hostname() -> str:
    return os.environ.get("SLURMAPI_DEPLOYMENT_HOSTNAME", "127.0.0.1")
