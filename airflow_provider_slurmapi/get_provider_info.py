"""What ``airflow providers list`` shows; the ``apache_airflow_provider`` entry point calls this."""

from __future__ import annotations

from typing import Any

from airflow_provider_slurmapi import __version__


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-provider-slurmapi",
        "name": "Slurm Job API (Google Cloud training clusters)",
        "description": "Submit, watch, cancel and list Slurm jobs on Google Cloud training clusters "
        "through the Slurm Job API (callSlurmRestApi), with no SSH.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Slurm Job API",
                "external-doc-url": "https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/training-clusters/manage-clusters-slurm",
                "tags": ["gcp"],
            }
        ],
        "operators": [
            {"integration-name": "Slurm Job API", "python-modules": ["airflow_provider_slurmapi.operators.slurm"]}
        ],
        "sensors": [
            {"integration-name": "Slurm Job API", "python-modules": ["airflow_provider_slurmapi.sensors.slurm"]}
        ],
        "hooks": [{"integration-name": "Slurm Job API", "python-modules": ["airflow_provider_slurmapi.hooks.slurm"]}],
        "triggers": [
            {"integration-name": "Slurm Job API", "python-modules": ["airflow_provider_slurmapi.triggers.slurm"]}
        ],
        "task-decorators": [{"class-name": "airflow_provider_slurmapi.decorators.slurm.slurm_task", "name": "slurm"}],
        "connection-types": [],
        "extra-links": [],
        "config": {
            "slurmapi": {
                "description": "The Slurm Job API provider.",
                "options": {
                    "report_output": {
                        "description": "Off unless set: True wraps each job's script so that its last lines of "
                        "output (values of sensitive environment variables redacted) reach the task log through "
                        "the job's Extra field, which every user of the cluster can read unless Slurm's "
                        "PrivateData hides jobs, and needs python3 on every node. False (the default) submits "
                        "each script byte for byte. A task's report_output argument still wins for that task.",
                        "version_added": "0.1.0",
                        "type": "boolean",
                        "example": "True",
                        "default": "False",
                        "sensitive": False,
                    },
                    "tag_secret": {
                        "description": "The key of the tags that name each task instance's Slurm jobs (in the "
                        "job's comment). Unset, a random key is created once and kept in the Airflow Variable "
                        "slurmapi_tag_secret. Set it to the same random secret of at least 32 characters on every "
                        "component; never reuse another secret of the deployment.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": None,
                        "default": None,
                        "sensitive": True,
                    },
                },
            },
        },
    }
