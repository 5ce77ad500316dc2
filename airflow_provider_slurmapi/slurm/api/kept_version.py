"""The value a deployment keeps for a cluster's negotiated API version: the version, when it was last
checked, and the Slurm release the cluster reported then.

A kept version is spoken without asking the cluster, so it would be spoken forever (until the cluster
stopped serving it) although the cluster may since serve a newer one the provider knows. Keeping when
it was checked lets a task negotiate again once :data:`RECHECK_SECONDS` have passed (on the client's
clock), and keeping the release lets an answer from another release say that the cluster changed.

The value is JSON (``{"version": "v0.0.42", "checked": 1765100000, "release": "24.11.5"}``). A value
kept before it carried its time is the version alone (``v0.0.40``): still spoken, and checked at once.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from airflow_provider_slurmapi.slurm.api.api_versions import SUPPORTED_API_VERSIONS

RECHECK_SECONDS = 24 * 3600.0
"""How long a kept version is spoken before the cluster is asked again whether it serves a newer one:
a negotiation (one or two pings) once a day per deployment and cluster, not once per task."""


@dataclass(frozen=True, slots=True)
class KeptVersion:
    """A negotiated version as kept: ``checked`` is the wall-clock time of its negotiation (``None``: kept
    before values carried it); ``release`` the cluster's Slurm release then (``""``: not known)."""

    version: str
    checked: float | None = None
    release: str = ""

    def due(self, wall: float) -> bool:
        """Whether it is time to ask the cluster again. A time more than a day ahead of this clock (a writer
        whose clock runs fast, or a garbled value) is due too: no stamp keeps a version forever."""
        return self.checked is None or abs(wall - self.checked) >= RECHECK_SECONDS

    def text(self) -> str:
        """The value to keep (see :func:`read_kept`)."""
        stamp = None if self.checked is None else math.floor(self.checked)
        return json.dumps({"version": self.version, "checked": stamp, "release": self.release}, sort_keys=True)


def read_kept(value: str | None) -> KeptVersion | None:
    """The kept version in ``value``; ``None`` when nothing usable is kept (absent, garbled, or a version
    this provider does not speak: negotiated afresh then)."""
    text = (value or "").strip()
    if not text.startswith("{"):
        return KeptVersion(text) if text in SUPPORTED_API_VERSIONS else None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    version, checked, release = data.get("version"), data.get("checked"), data.get("release")
    if version not in SUPPORTED_API_VERSIONS:
        return None
    if isinstance(checked, bool) or not isinstance(checked, int | float) or not math.isfinite(checked):
        checked = None
    return KeptVersion(str(version), None if checked is None else float(checked), str(release or ""))


__all__ = ["RECHECK_SECONDS", "KeptVersion", "read_kept"]
