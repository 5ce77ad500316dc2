"""A CPU quota and a memory limit for a process and its children, through the machine's cgroups.

cgroup v2 (``cpu.max``, ``memory.max``, ``memory.peak``) where the unified hierarchy has those controllers,
else cgroup v1 (``cpu.cfs_quota_us``, ``memory.limit_in_bytes``, ``cpuacct.usage``). Needs root.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000


def _v2_ready() -> bool:
    controllers = ROOT / "cgroup.controllers"
    return controllers.exists() and {"cpu", "memory"} <= set(controllers.read_text().split())


@dataclass
class Confinement:
    """One fresh cgroup (per controller in v1) named ``name``: ``vcpu`` CPUs of quota, ``memory`` bytes."""

    name: str
    vcpu: float
    memory: int

    def __post_init__(self) -> None:
        self.v2 = _v2_ready()
        if self.v2:
            self.dirs = {"all": ROOT / self.name}
        else:
            self.dirs = {c: ROOT / c / self.name for c in ("cpu", "cpuacct", "memory")}
        for path in self.dirs.values():
            if path.exists():
                path.rmdir()
            path.mkdir()
        quota = int(self.vcpu * PERIOD_US)
        if self.v2:
            (self.dirs["all"] / "cpu.max").write_text(f"{quota} {PERIOD_US}")
            (self.dirs["all"] / "memory.max").write_text(str(self.memory))
        else:
            (self.dirs["cpu"] / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.dirs["cpu"] / "cpu.cfs_quota_us").write_text(str(quota))
            (self.dirs["memory"] / "memory.limit_in_bytes").write_text(str(self.memory))

    @property
    def kind(self) -> str:
        return "cgroup v2" if self.v2 else "cgroup v1"

    def enter(self) -> None:
        """Move the calling process into the group (a ``preexec_fn``: its children follow)."""
        for path in self.dirs.values():
            (path / "cgroup.procs").write_text(str(os.getpid()))

    def pids(self) -> list[int]:
        path = self.dirs["all" if self.v2 else "memory"] / "cgroup.procs"
        return [int(p) for p in path.read_text().split()]

    def cpu_seconds(self) -> float:
        if self.v2:
            for line in (self.dirs["all"] / "cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6
            return float("nan")
        return int((self.dirs["cpuacct"] / "cpuacct.usage").read_text()) / 1e9

    def throttled(self) -> int:
        path = self.dirs["all" if self.v2 else "cpu"] / "cpu.stat"
        for line in path.read_text().splitlines():
            if line.startswith("nr_throttled "):
                return int(line.split()[1])
        return 0

    def memory_stat(self, key: str) -> int:
        path = self.dirs["all" if self.v2 else "memory"] / "memory.stat"
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
        return 0

    def memory_rss(self) -> int:
        """Anonymous memory of the group (RSS without page cache)."""
        return self.memory_stat("anon" if self.v2 else "rss")

    def memory_peak(self) -> int:
        """The group's peak usage (page cache included), the figure its limit is judged by."""
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        path = self.dirs["all" if self.v2 else "memory"] / name
        return int(path.read_text()) if path.exists() else 0

    def oom_kills(self) -> int:
        if self.v2:
            events = (self.dirs["all"] / "memory.events").read_text().split()
            return int(dict(zip(events[::2], events[1::2], strict=False)).get("oom_kill", 0))
        return int((self.dirs["memory"] / "memory.failcnt").read_text())

    def peak_rss_of_processes(self) -> int:
        """Sum of the group's processes' own peak RSS (VmHWM)."""
        total = 0
        for pid in self.pids():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1]) * 1024
            except OSError:
                continue
        return total

    def remove(self) -> None:
        for path in self.dirs.values():
            deadline = time.monotonic() + 10
            while path.exists():
                try:
                    path.rmdir()
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
