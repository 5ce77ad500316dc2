"""Settings of one emulator instance.

One dataclass serves both the CLI (one field per flag) and the Python API used by tests,
so that a test can state exactly the cluster it needs.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from typing import Literal

from .locations import DEFAULT_REGIONS, check_region_name
from .versions import DEFAULT_SLURM_RELEASE, pick_versions, versions_of

EnvelopeMode = Literal["body", "structured"]
PathLike = str | os.PathLike[str]
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback IP literals (127.0.0.0/8, ::1); a name is never resolved."""
    name = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


ROOT_STAND_IN = "slurmapi"


@dataclass
class EmulatorConfig:
    """Everything that shapes the emulator's behaviour; field names follow the CLI flags."""

    host: str = "127.0.0.1"
    port: int = 0
    envelope: EnvelopeMode = "body"
    tokens: list[str] = field(default_factory=list, repr=False)
    token_file: PathLike | None = None
    token_lifetime: int = 3600
    credentials_file: PathLike | None = None
    project: str = "demo-project"
    clusters: list[str] = field(default_factory=list)  # the cluster ids served; empty: any well-formed id
    # The locations served (others: 404 NOT_FOUND, as the real API answers a wrong region).
    regions: list[str] = field(default_factory=lambda: list(DEFAULT_REGIONS))
    partitions: list[str] = field(default_factory=lambda: ["debug", "a3"])
    cpus: int = 2
    gpus: int = 8
    min_job_age: float = 300.0
    history_delay: float = 0.0
    # slurmdbd stores job comments only with AccountingStoreFlags=job_comment (not Slurm's default).
    history_comments: bool = True
    minute_seconds: float = 60.0
    workdir: PathLike | None = None
    faults: list[str] = field(default_factory=list)
    reject_query_strings: bool = False
    deny_permission: bool = False
    slurmrestd: str | None = None
    # The Slurm feature release the model acts as ("24.11", "26.05"): meta.slurm.release, and the API
    # versions it serves (24.11: v0.0.40-42; 26.05: v0.0.42-45), as a real slurmrestd of that release.
    slurm_release: str = DEFAULT_SLURM_RELEASE
    # The API versions served instead of the release's (names from versions.py, or ["all"]); None: the release's.
    api_versions: list[str] | None = None
    slurm_token_file: PathLike | None = None
    slurm_user: str | None = None
    # What meta.client.user says in each slurmctld answer, while jobs stay owned by the token's user:
    # "token" (the token's user, as the Job API is described), "slurmrestd" (what slurmrestd itself says:
    # "root" for rest_auth/jwt over TCP; the model says "root" too), "empty", or "user:NAME" (a fixed account).
    meta_client_user: str = "token"
    # The account the model's jobs are owned by in answers. None: the OS user running the emulator, except
    # root, which is named ROOT_STAND_IN: the Job API never runs a caller's jobs as root, and a client rightly
    # takes no job of root's for its own.
    job_user: str | None = None
    kill_wait: float = 2.0
    # Seconds added to every answer, token endpoint included: a stand-in for Google's real latency.
    latency: float = 0.0
    allow_remote: bool = False  # bind a non-loopback address (anyone who reaches it can run scripts)
    allowed_hosts: list[str] = field(default_factory=list)  # extra Host header names accepted
    control_token: str | None = field(default=None, repr=False)  # for /_emulator/*; None: random per start
    control_token_file: PathLike | None = None  # where the control token is written (mode 0600)
    header_timeout: float = 30.0  # a connection's first request head must be in within this
    idle_timeout: float = 75.0  # then each next head (longer than the usual 30/60 s poll intervals)
    body_timeout: float = 60.0  # a request body must arrive within this once the head is in

    def validate(self) -> None:
        """Refuse settings that cannot work, before anything is started."""
        if self.envelope not in ("body", "structured"):
            raise ValueError(f"envelope must be 'body' or 'structured', not {self.envelope!r}")
        if not self.regions:
            raise ValueError("at least one region is needed (the default is Google Cloud's regions)")
        for region in self.regions:
            check_region_name(region)  # raises ValueError naming the rule
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
        if not self.allow_remote and not is_loopback(self.host):
            raise ValueError(
                f"host {self.host!r} is not a loopback address: the emulator runs every script it is sent "
                "as your user, so anyone who can reach it could run commands on this machine. Bind "
                "127.0.0.1 (the default) or ::1, or add --allow-remote (allow_remote=True) if you mean it"
            )
        if min(self.header_timeout, self.idle_timeout, self.body_timeout) <= 0:
            raise ValueError("header_timeout, idle_timeout and body_timeout must be > 0 seconds")
        if self.control_token is not None and len(self.control_token) < 16:
            raise ValueError("control_token must be at least 16 characters (leave it unset for a random one)")
        versions_of(self.slurm_release)  # raises ValueError naming the releases it knows
        if self.api_versions is not None:
            pick_versions(self.api_versions)  # raises ValueError naming the versions it knows
        if self.meta_client_user not in ("token", "slurmrestd", "empty") and not (
            self.meta_client_user.startswith("user:") and self.meta_client_user[5:].strip()
        ):
            raise ValueError(
                f"meta_client_user must be 'token', 'slurmrestd', 'empty' or 'user:NAME', not {self.meta_client_user!r}"
            )
        if self.slurmrestd and not self.slurm_token_file:
            raise ValueError("gateway mode (slurmrestd) needs slurm_token_file")

    def owner_name(self, os_user: str) -> str:
        """The account the model's jobs are owned by (see ``job_user``)."""
        if self.job_user:
            return self.job_user
        return ROOT_STAND_IN if os_user == "root" else os_user

    def meta_user(self, token_user: str | None, slurmrestd_user: str | None) -> str | None:
        """The ``meta.client.user`` to answer with (``None``: leave the answer's as it is)."""
        if self.meta_client_user == "token":
            return token_user
        if self.meta_client_user == "slurmrestd":
            return slurmrestd_user
        if self.meta_client_user == "empty":
            return ""
        return self.meta_client_user[5:].strip()

    @property
    def served_versions(self) -> tuple[str, ...]:
        """The API versions the model answers (others get slurmrestd's plain-text 404)."""
        if self.api_versions is not None:
            return pick_versions(self.api_versions)
        return versions_of(self.slurm_release)

    @property
    def gateway(self) -> bool:
        """True when Slurm calls are forwarded to a real slurmrestd instead of the local model."""
        return bool(self.slurmrestd)
