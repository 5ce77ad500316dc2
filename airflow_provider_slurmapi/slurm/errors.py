"""The old import path of ``errors``, kept for the DAGs and docs that name it.

The module is now :mod:`airflow_provider_slurmapi.slurm.api.errors` (``slurm/`` was split into sub-packages).
"""

# split.py: generated (re-export of a moved module)
from airflow_provider_slurmapi.slurm.api.errors import (
    ApiConnectionError,
    ClusterNotFoundError,
    ConfigurationError,
    EnvelopeError,
    InvalidArgumentError,
    JobNotFoundError,
    MalformedRecordError,
    MalformedResponseError,
    PermissionDeniedError,
    RequestNotSentError,
    RequestTooLargeError,
    SignalOutcomeUnknownError,
    SlurmApiError,
    SlurmError,
    SubmitOutcomeUnknownError,
    SubmitRejectedError,
    TransientApiError,
    UnauthenticatedError,
    UnsupportedApiVersionError,
    WrongEndpointError,
    is_permanent,
    refused_submit,
)

__all__ = [
    "ApiConnectionError",
    "ClusterNotFoundError",
    "ConfigurationError",
    "EnvelopeError",
    "InvalidArgumentError",
    "JobNotFoundError",
    "MalformedRecordError",
    "MalformedResponseError",
    "PermissionDeniedError",
    "RequestNotSentError",
    "RequestTooLargeError",
    "SignalOutcomeUnknownError",
    "SlurmApiError",
    "SlurmError",
    "SubmitOutcomeUnknownError",
    "SubmitRejectedError",
    "TransientApiError",
    "UnauthenticatedError",
    "UnsupportedApiVersionError",
    "WrongEndpointError",
    "is_permanent",
    "refused_submit",
]
