"""The one way the tests wait: poll a condition until it holds, or fail saying what never happened.

A test waits for an event it can see (a state, a call counted, a line written), never for a fixed
time: a fixed sleep is either too short on a loaded machine or wasted on a fast one, and a sleep that
stands for "nothing happened" proves nothing. To show that something did *not* happen, wait for a
later event that shows it would have happened by then, then assert it did not.

``wait_until`` returns the condition's first truthy value; the async form awaits the same from a
coroutine (its condition may be a plain function or a coroutine function). ``give_up=True`` returns
the last value at the deadline instead of failing, for a race whose either outcome is valid.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def _failure(what: str, timeout: float, last: Any) -> AssertionError:
    return AssertionError(f"{what}: not reached within {timeout:g}s (last: {last!r:.300})")


def wait_until(
    condition: Callable[[], T],
    what: str = "the condition",
    *,
    timeout: float = 30.0,
    every: float = 0.05,
    give_up: bool = False,
) -> T:
    """Call ``condition`` every ``every`` seconds until it returns a truthy value, and return that value.

    After ``timeout`` seconds: raise an ``AssertionError`` naming ``what`` and the last value (or, with
    ``give_up=True``, return the last value). An assertion inside ``condition`` fails at once (e.g. a
    process that died while it was awaited).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            if give_up:
                return value
            raise _failure(what, timeout, value)
        time.sleep(every)


async def wait_until_async(
    condition: Callable[[], T] | Callable[[], Awaitable[T]],
    what: str = "the condition",
    *,
    timeout: float = 30.0,
    every: float = 0.05,
    give_up: bool = False,
) -> T:
    """:func:`wait_until` for a coroutine: the event loop runs on between the calls."""
    deadline = time.monotonic() + timeout
    while True:
        value: Any = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            if give_up:
                return value  # type: ignore[no-any-return]
            raise _failure(what, timeout, value)
        await asyncio.sleep(every)
