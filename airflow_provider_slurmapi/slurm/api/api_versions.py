"""What each Slurm REST API version does: one frozen row of traits per version, and nothing else.

Every difference between versions that the provider acts on is a field here, so code asks
``traits(version).has_expanded_output`` instead of comparing version strings. The emulator (its own
distribution, which must not import the provider) keeps its own copy in
``emulator/.../versions.py``; ``tests/emulator/test_versions_agree.py`` checks that they agree.

Sources: Slurm's OpenAPI documents (``tests/fixtures/slurm-openapi``), SchedMD's ``rest_clients``
lifecycle page and 26.05's RELEASE_NOTES, and real Slurm 24.11.5 and 26.05.5 (``scripts/slurm-lab``).
A version is served by four feature releases: deprecated in the last, removed in the next.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from airflow_provider_slurmapi.slurm.api.errors import UnsupportedApiVersionError

NEGOTIATE = "auto"
"""``api_version="auto"`` (the default): the newest version both the provider and the cluster speak."""


@dataclass(frozen=True, slots=True)
class ApiVersionTraits:
    """One Slurm REST API version: which releases serve it and how its answers differ."""

    name: str
    """``v0.0.NN``, as in the path."""
    slurm_releases: tuple[str, ...]
    """The released Slurm feature releases known to serve it (later ones are not listed until out)."""
    deprecated_in: str | None
    """The release whose answers warn that it is deprecated (``None``: not announced yet)."""
    removed_in: str
    """The first release that no longer serves it (404)."""
    job_state_is_list: bool
    """``job_state`` is a list of base state and flags (a string before v0.0.40)."""
    has_expanded_output: bool
    """``standard_output`` is the raw pattern (``%x-%j.out``); ``stdout_expanded`` holds the path."""
    environment_required: bool
    """The submit schema itself requires ``job.environment`` (slurmctld always needed one)."""
    has_jobs_state: bool
    """``GET /slurm/{v}/jobs/state/`` exists (on Slurm 23.11.7 and later)."""
    history_time_filter: Literal["relative", "unix"]
    """``/slurmdb/{v}/jobs/`` ``start_time``/``end_time``: ``now-Nseconds`` only, or Unix times too."""
    cancel_answers_status: bool
    """``DELETE /slurm/{v}/job/{id}`` answers a ``status[]`` list (else only warnings)."""
    submit_answers_result: bool
    """The submit answer repeats the job id in a ``result`` object."""
    has_expediting: bool
    """State EXPEDITING and flag EXPEDITED_REQUEUE (Slurm 25.11 and later) can appear."""
    has_requeue_endpoint: bool
    """``POST /slurm/{v}/job/{id}/requeue`` and ``/jobs/requeue`` exist."""
    has_exclusive_topo: bool
    """``shared: ["topo"]`` (``sbatch --exclusive=topo``) is known."""

    @property
    def number(self) -> int:
        """The NN of ``v0.0.NN``: for ordering only, never for deciding what a version does."""
        return int(self.name.rsplit(".", 1)[1])


API_VERSIONS: tuple[ApiVersionTraits, ...] = (
    ApiVersionTraits(
        name="v0.0.40",
        slurm_releases=("23.11", "24.05", "24.11", "25.05"),
        deprecated_in="25.05",
        removed_in="25.11",
        job_state_is_list=True,
        has_expanded_output=False,
        environment_required=False,
        has_jobs_state=True,
        history_time_filter="relative",
        cancel_answers_status=False,
        submit_answers_result=True,
        has_expediting=False,
        has_exclusive_topo=False,
        has_requeue_endpoint=False,
    ),
    ApiVersionTraits(
        name="v0.0.41",
        slurm_releases=("24.05", "24.11", "25.05", "25.11"),
        deprecated_in="25.11",
        removed_in="26.05",
        job_state_is_list=True,
        has_expanded_output=False,
        environment_required=False,
        has_jobs_state=True,
        history_time_filter="relative",
        cancel_answers_status=False,
        submit_answers_result=True,
        has_expediting=False,
        has_exclusive_topo=True,
        has_requeue_endpoint=False,
    ),
    ApiVersionTraits(
        name="v0.0.42",
        slurm_releases=("24.11", "25.05", "25.11", "26.05"),
        deprecated_in="26.05",
        removed_in="26.11",
        job_state_is_list=True,
        has_expanded_output=False,
        environment_required=False,
        has_jobs_state=True,
        history_time_filter="unix",
        cancel_answers_status=True,
        submit_answers_result=False,
        has_expediting=False,
        has_exclusive_topo=True,
        has_requeue_endpoint=False,
    ),
    ApiVersionTraits(
        name="v0.0.43",
        slurm_releases=("25.05", "25.11", "26.05"),
        deprecated_in=None,
        removed_in="27.05",
        job_state_is_list=True,
        has_expanded_output=True,
        environment_required=False,
        has_jobs_state=True,
        history_time_filter="unix",
        cancel_answers_status=True,
        submit_answers_result=False,
        has_expediting=False,
        has_exclusive_topo=True,
        has_requeue_endpoint=False,
    ),
    ApiVersionTraits(
        name="v0.0.44",
        slurm_releases=("25.11", "26.05"),
        deprecated_in=None,
        removed_in="27.11",
        job_state_is_list=True,
        has_expanded_output=True,
        environment_required=False,
        has_jobs_state=True,
        history_time_filter="unix",
        cancel_answers_status=True,
        submit_answers_result=False,
        has_expediting=True,
        has_exclusive_topo=True,
        has_requeue_endpoint=False,
    ),
    ApiVersionTraits(
        name="v0.0.45",
        slurm_releases=("26.05",),
        deprecated_in=None,
        removed_in="28.05",
        job_state_is_list=True,
        has_expanded_output=True,
        environment_required=True,
        has_jobs_state=True,
        history_time_filter="unix",
        cancel_answers_status=True,
        submit_answers_result=False,
        has_expediting=True,
        has_exclusive_topo=True,
        has_requeue_endpoint=True,
    ),
)

_BY_NAME = {row.name: row for row in API_VERSIONS}
SUPPORTED_API_VERSIONS: tuple[str, ...] = tuple(row.name for row in API_VERSIONS)
NEWEST_FIRST: tuple[ApiVersionTraits, ...] = tuple(sorted(API_VERSIONS, key=lambda row: row.number, reverse=True))
_VERSION_RE = re.compile(r"^v0\.0\.(\d+)$")


def _supported_text() -> str:
    return f"{SUPPORTED_API_VERSIONS[0]}-{SUPPORTED_API_VERSIONS[-1]}"


def traits(version: str) -> ApiVersionTraits:
    """The row of ``version``; an unsupported one gets an error that says what is supported."""
    row = _BY_NAME.get(version) if isinstance(version, str) else None
    if row is not None:
        return row
    hint = ""
    match = _VERSION_RE.match(version) if isinstance(version, str) else None
    if match and int(match.group(1)) < NEWEST_FIRST[-1].number:
        hint = " Slurm 23.11 and later serve v0.0.40 or newer; upgrade the cluster or pick a newer version."
    elif match:
        hint = f" This provider knows versions up to {NEWEST_FIRST[0].name}; upgrade it to speak newer ones."
    raise UnsupportedApiVersionError(
        f"api_version={version!r} is not supported. Leave it unset ({NEGOTIATE!r}: the newest version both "
        f"this provider and the cluster speak) or use one of {', '.join(SUPPORTED_API_VERSIONS)} "
        f"({served_by_text()}).{hint}"
    )


def served_by(release: str) -> tuple[ApiVersionTraits, ...]:
    """The versions a Slurm feature release (``"26.05"``) serves that this provider speaks, newest first."""
    return tuple(row for row in NEWEST_FIRST if release in row.slurm_releases)


def served_by_text() -> str:
    """``"24.11 serves v0.0.40-v0.0.42, ..."`` for error messages, from the table."""
    releases = sorted({r for row in API_VERSIONS for r in row.slurm_releases})
    parts = []
    for release in releases:
        names = [row.name for row in reversed(served_by(release))]
        # Releases older than 24.11 are out of support at SchedMD; not worth a user's reading.
        if release >= "24.11":
            parts.append(f"{release} serves {names[0]}-{names[-1]}")
    return ", ".join(parts)


def probe_order() -> tuple[ApiVersionTraits, ...]:
    """The versions to ping when negotiating, until one answers.

    The newest first: on a cluster that serves it, one call. Then the version served by the most
    releases of the table (v0.0.42 today): its answer names the cluster's Slurm release
    (``meta.slurm.release``), from which the table gives the newest common version without pinging
    each older one. Then the rest, newest first, for a release the table does not know.
    """
    newest = NEWEST_FIRST[0]
    widest = max(NEWEST_FIRST[1:], key=lambda row: len(row.slurm_releases))
    rest = tuple(row for row in NEWEST_FIRST if row not in (newest, widest))
    return (newest, widest, *rest)


def check_api_version(version: str) -> str:
    """``version`` if it is supported or :data:`NEGOTIATE`, else an error that lists what is."""
    if version == NEGOTIATE:
        return version
    return traits(version).name


__all__ = [
    "API_VERSIONS",
    "NEGOTIATE",
    "NEWEST_FIRST",
    "SUPPORTED_API_VERSIONS",
    "ApiVersionTraits",
    "check_api_version",
    "probe_order",
    "served_by",
    "served_by_text",
    "traits",
]
