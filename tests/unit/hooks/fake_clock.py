"""A clock for the hooks' waits that takes no real time: its ``sleep`` advances its ``now``.

What must happen during a wait (the emulator carrying out a late submit, say) is waited for as an event
(``before_sleep``), never as a fixed real sleep.
"""

from __future__ import annotations

from collections.abc import Callable


class FakeClock:
    """``now`` starts at 0 and moves only when a plan sleeps; ``sleeps`` records each wait asked for."""

    # Where the wall clock starts: a plausible epoch time, so deadlines computed from it look real.
    WALL_START = 1_700_000_000.0

    def __init__(self, before_sleep: Callable[[], None] | None = None) -> None:
        self.current = 0.0
        self.sleeps: list[float] = []
        self.before_sleep = before_sleep

    def now(self) -> float:
        return self.current

    def wall(self) -> float:
        """Seconds since the epoch, moving with ``now``."""
        return self.WALL_START + self.current

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.before_sleep is not None:
            self.before_sleep()
        self.current += seconds


class AsyncFakeClock(FakeClock):
    """The same, for the async hook."""

    async def sleep(self, seconds: float) -> None:  # type: ignore[override]
        FakeClock.sleep(self, seconds)
