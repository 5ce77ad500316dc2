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
    }
