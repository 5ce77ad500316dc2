"""What each Slurm REST API version looks like on the wire: one row of traits per version.

The emulator is its own distribution and does not import the provider, so it keeps this table of
its own; the provider's is ``airflow_provider_slurmapi/slurm/api/api_versions.py``. The traits both
tables hold (releases, expanded output paths, cancel and submit answer shapes, the history time
filter, EXPEDITING) must agree: ``tests/emulator/test_versions_agree.py`` checks it. The rest are
shapes only the emulator renders, read off Slurm's OpenAPI documents (tests/fixtures/slurm-openapi).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WireVersion:
    """How one API version's answers are shaped."""

    name: str
    slurm_releases: tuple[str, ...]
    """The Slurm feature releases that serve it."""
    deprecated_in: str | None
    has_expanded_output: bool
    """Live ``standard_output`` is the pattern; ``stdout_expanded`` etc. hold the paths."""
    cancel_answers_status: bool
    """A cancel answers ``status[]`` (``openapi_kill_job_resp``), not only warnings (``openapi_resp``)."""
    submit_answers_result: bool
    history_time_filter: str
    """``relative``: /slurmdb jobs filters take ``now-N`` only; ``unix``: Unix times too."""
    has_expediting: bool
    ping_has_responding: bool
    """Ping entries carry ``responding`` and ``primary``."""
    ping_has_pinged: bool
    """Ping entries carry ``pinged`` and ``mode`` (v0.0.45 drops them for ``status``)."""
    live_has_step_id: bool
    """Live records carry ``step_id`` and ``submit_line``."""
    has_segment_size: bool
    """History records carry ``segment_size``."""
    history_has_sluid: bool
    """History records carry ``sluid`` / ``original_sluid`` (and ``exclusive``, ``oversubscribe``)."""
    live_has_power: bool
    """Live records carry ``power`` (v0.0.45 drops it, adds ``container_type`` and memory update fields,
    and spells ``job_resources.select_type`` as slurm.conf does: ``CR_CORE``)."""
    old_live_shape: bool
    """The v0.0.40/41 live record (``exclusive``, ``oversubscribe``, no ``priority_by_partition``)."""
    flat_job_resources: bool
    """v0.0.40's flat ``job_resources`` (``{}`` for a job that never ran)."""
    history_has_restart_cnt: bool
    """History records carry ``restart_cnt`` and ``qosreq``."""
    history_has_output_paths: bool
    """History records carry ``stdout``/``stderr``/``stdin`` (and their ``_expanded`` forms)."""


VERSIONS: tuple[WireVersion, ...] = (
    WireVersion(
        name="v0.0.40",
        slurm_releases=("23.11", "24.05", "24.11", "25.05"),
        deprecated_in="25.05",
        has_expanded_output=False,
        cancel_answers_status=False,
        submit_answers_result=True,
        history_time_filter="relative",
        has_expediting=False,
        ping_has_responding=False,
        ping_has_pinged=True,
        live_has_step_id=False,
        has_segment_size=False,
        history_has_sluid=False,
        live_has_power=True,
        old_live_shape=True,
        flat_job_resources=True,
        history_has_restart_cnt=False,
        history_has_output_paths=False,
    ),
    WireVersion(
        name="v0.0.41",
        slurm_releases=("24.05", "24.11", "25.05", "25.11"),
        deprecated_in="25.11",
        has_expanded_output=False,
        cancel_answers_status=False,
        submit_answers_result=True,
        history_time_filter="relative",
        has_expediting=False,
        ping_has_responding=False,
        ping_has_pinged=True,
        live_has_step_id=False,
        has_segment_size=False,
        history_has_sluid=False,
        live_has_power=True,
        old_live_shape=True,
        flat_job_resources=False,
        history_has_restart_cnt=False,
        history_has_output_paths=True,
    ),
    WireVersion(
        name="v0.0.42",
        slurm_releases=("24.11", "25.05", "25.11", "26.05"),
        deprecated_in="26.05",
        has_expanded_output=False,
        cancel_answers_status=True,
        submit_answers_result=False,
        history_time_filter="unix",
        has_expediting=False,
        ping_has_responding=True,
        ping_has_pinged=True,
        live_has_step_id=False,
        has_segment_size=False,
        history_has_sluid=False,
        live_has_power=True,
        old_live_shape=False,
        flat_job_resources=False,
        history_has_restart_cnt=True,
        history_has_output_paths=True,
    ),
    WireVersion(
        name="v0.0.43",
        slurm_releases=("25.05", "25.11", "26.05"),
        deprecated_in=None,
        has_expanded_output=True,
        cancel_answers_status=True,
        submit_answers_result=False,
        history_time_filter="unix",
        has_expediting=False,
        ping_has_responding=True,
        ping_has_pinged=True,
        live_has_step_id=False,
        has_segment_size=True,
        history_has_sluid=False,
        live_has_power=True,
        old_live_shape=False,
        flat_job_resources=False,
        history_has_restart_cnt=True,
        history_has_output_paths=True,
    ),
    WireVersion(
        name="v0.0.44",
        slurm_releases=("25.11", "26.05"),
        deprecated_in=None,
        has_expanded_output=True,
        cancel_answers_status=True,
        submit_answers_result=False,
        history_time_filter="unix",
        has_expediting=True,
        ping_has_responding=True,
        ping_has_pinged=True,
        live_has_step_id=True,
        has_segment_size=True,
        history_has_sluid=False,
        live_has_power=True,
        old_live_shape=False,
        flat_job_resources=False,
        history_has_restart_cnt=True,
        history_has_output_paths=True,
    ),
    WireVersion(
        name="v0.0.45",
        slurm_releases=("26.05",),
        deprecated_in=None,
        has_expanded_output=True,
        cancel_answers_status=True,
        submit_answers_result=False,
        history_time_filter="unix",
        has_expediting=True,
        ping_has_responding=True,
        ping_has_pinged=False,
        live_has_step_id=True,
        has_segment_size=True,
        history_has_sluid=True,
        live_has_power=False,
        old_live_shape=False,
        flat_job_resources=False,
        history_has_restart_cnt=True,
        history_has_output_paths=True,
    ),
)

BY_NAME = {row.name: row for row in VERSIONS}
SUPPORTED_VERSIONS: tuple[str, ...] = tuple(row.name for row in VERSIONS)
# The Slurm release the emulator acts as by default (its answers were copied from a real 24.11.5).
DEFAULT_SLURM_RELEASE = "24.11"
# The patch level reported in meta.slurm for each release it can act as.
RELEASE_PATCH = {"24.11": "24.11.5", "26.05": "26.05.5"}
DEFAULT_RELEASE = RELEASE_PATCH[DEFAULT_SLURM_RELEASE]


def known_releases() -> list[str]:
    """The Slurm feature releases the table of versions names."""
    return sorted({r for row in VERSIONS for r in row.slurm_releases})


def versions_of(release: str) -> tuple[str, ...]:
    """The versions a Slurm feature release serves, oldest first (ValueError for a release it does not know)."""
    served = tuple(row.name for row in VERSIONS if release in row.slurm_releases)
    if not served:
        raise ValueError(f"slurm_release={release!r}: the emulator knows {', '.join(known_releases())}")
    return served


def pick_versions(names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Versions chosen by name (``["all"]``: every one), in the table's order; ValueError naming an unknown one."""
    wanted = {name.strip() for name in names if name.strip()}
    if wanted == {"all"}:
        return SUPPORTED_VERSIONS
    unknown = sorted(wanted - set(SUPPORTED_VERSIONS))
    if unknown or not wanted:
        raise ValueError(
            f"api_versions={sorted(wanted)!r}: give some of {', '.join(SUPPORTED_VERSIONS)} (or 'all')"
            + (f"; unknown: {', '.join(unknown)}" if unknown else "")
        )
    return tuple(name for name in SUPPORTED_VERSIONS if name in wanted)


def release_name(release: str) -> str:
    """What meta.slurm.release says for a feature release: its patch level (``26.05`` -> ``26.05.5``)."""
    return RELEASE_PATCH.get(release, f"{release}.0")


def wire(version: str) -> WireVersion:
    return BY_NAME[version]
