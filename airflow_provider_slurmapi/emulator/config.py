"""Settings of one emulator instance.

One dataclass serves both the CLI (one field per flag) and the Python API used by tests,
so that a test can state exactly the cluster it needs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

EnvelopeMode = Literal["body", "structured"]
PathLike = str | os.PathLike[str]


@dataclass
class EmulatorConfig:
    """Everything that shapes the emulator's behaviour; field names follow the CLI flags."""

    host: str = "127.0.0.1"
    port: int = 0
    envelope: EnvelopeMode = "body"
    tokens: list[str] = field(default_factory=list)
    token_file: PathLike | None = None
    token_lifetime: int = 3600
    credentials_file: PathLike | None = None
    project: str = "demo-project"
    clusters: list[str] = field(default_factory=list)
    partitions: list[str] = field(default_factory=lambda: ["debug", "a3"])
    cpus: int = 2
    gpus: int = 8
    min_job_age: float = 300.0
    history_delay: float = 0.0
    minute_seconds: float = 60.0
    workdir: PathLike | None = None
    faults: list[str] = field(default_factory=list)
    reject_query_strings: bool = False
    deny_permission: bool = False
    slurmrestd: str | None = None
    slurm_token_file: PathLike | None = None
    slurm_user: str | None = None
    kill_wait: float = 2.0
    # Seconds added to every answer, token endpoint included: a stand-in for Google's real latency.
    latency: float = 0.0

    def validate(self) -> None:
        """Refuse settings that cannot work, before anything is started."""
        if self.envelope not in ("body", "structured"):
            raise ValueError(f"envelope must be 'body' or 'structured', not {self.envelope!r}")
        if not self.partitions:
            raise ValueError("at least one partition is needed")
        if self.cpus < 1 or self.gpus < 0:
            raise ValueError("cpus must be >= 1 and gpus >= 0")
        if self.minute_seconds <= 0 or self.min_job_age < 0 or self.history_delay < 0:
            raise ValueError("minute_seconds must be > 0; min_job_age and history_delay >= 0")
        if self.token_lifetime < 1:
            raise ValueError("token_lifetime must be >= 1 second")
        if self.latency < 0:
            raise ValueError(f"latency must be >= 0 seconds, not {self.latency!r}")
        if self.slurmrestd and not self.slurm_token_file:
            raise ValueError("gateway mode (slurmrestd) needs slurm_token_file")

    @property
    def gateway(self) -> bool:
        """True when Slurm calls are forwarded to a real slurmrestd instead of the local model."""
        return bool(self.slurmrestd)
