"""Triggers of the triggerer benchmark only (never in the package).

- :class:`LagProbeTrigger`: sleeps 100 ms in a loop and appends how late each wake-up was to a file
  (Airflow's triggerer has no event-loop lag metric; ``triggers.blocked_main_thread`` only counts stalls).
- :class:`IdleTrigger`: waits and does nothing: the same N rows held by Airflow's runner with no
  provider code, so the triggerer's own CPU and memory are measured apart from the provider's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

PROBE_PERIOD = 0.1


class LagProbeTrigger(BaseTrigger):
    """Records the event loop's lag: each wake-up's delay past its 100 ms sleep, in ms, a line per second."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}", {"path": self.path})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        batch: list[str] = []
        flushed = time.monotonic()
        while True:
            before = time.monotonic()
            await asyncio.sleep(PROBE_PERIOD)
            now = time.monotonic()
            batch.append(f"{time.time():.3f} {(now - before - PROBE_PERIOD) * 1000:.3f}")
            if now - flushed >= 1.0:
                with open(self.path, "a") as out:
                    out.write("\n".join(batch) + "\n")
                batch, flushed = [], now
        yield TriggerEvent({})  # pragma: no cover - never reached


class IdleTrigger(BaseTrigger):
    """Holds a trigger slot and does nothing (Airflow's own cost of a waiting trigger)."""

    def __init__(self, job_id: int, poll_interval: float = 30.0) -> None:
        super().__init__()
        self.job_id = int(job_id)
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"job_id": self.job_id, "poll_interval": self.poll_interval},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            await asyncio.sleep(self.poll_interval)
        yield TriggerEvent({})  # pragma: no cover - never reached
