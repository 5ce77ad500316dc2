"""Plans and their two drivers: the one place where a flow of several Slurm calls meets I/O and time.

A *plan* is a generator that yields what it needs next: a :class:`SlurmRequest` (sent the request's
result, or thrown the :class:`SlurmApiError` it ended in), a :class:`Sleep`, :data:`NOW` (sent the
clock's monotonic reading) or :data:`WALL` (its wall-clock time: the core reads time only so).
The client core expands each request into *effects* (send one envelope, refresh the
token, sleep, read the clock: see ``SlurmClient._exchange``), and a driver carries the effects out:
:func:`run_plan` with a blocking transport and clock (the sync hook), :func:`arun_plan` with awaitable
ones (the async hook). A hook only brings a transport and a clock; every decision lives in the core, and a
test drives any flow with a fake clock instead of real time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from airflow_provider_slurmapi.slurm.api.envelope import HttpMethod, SlurmResponse
from airflow_provider_slurmapi.slurm.api.errors import SlurmApiError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SlurmRequest(Generic[T]):
    """One Slurm call and how to read its answer.

    ``retry``: ``None`` retries GET and DELETE on transient failures, never a POST. ``reread``: ask
    again when Slurm garbled the record asked for (:class:`MalformedRecordError`), within the same budget.
    """

    method: HttpMethod
    path: str
    read: Callable[[SlurmResponse], T]
    body: Mapping[str, Any] | None = None
    retry: bool | None = None
    reread: bool = False


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait ``seconds`` on the driver's clock (real time for a hook, none at all for a test's fake clock)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Now:
    """Ask the driver's clock for its monotonic reading (sent back as a float)."""


NOW = Now()


@dataclass(frozen=True, slots=True)
class Wall:
    """Ask the driver's clock for the wall-clock time (epoch seconds: Slurm's times), sent back as a float."""


WALL = Wall()


@dataclass(frozen=True, slots=True)
class Send:
    """One envelope to post; the transport answers ``(HTTP status, body bytes)`` or raises a SlurmApiError."""

    method: HttpMethod
    path: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Refresh:
    """Get a fresh token before the next send (the one 401 rule decides when: ``SlurmClient._exchange``)."""


REFRESH = Refresh()

Plan = Generator["SlurmRequest[Any] | Sleep | Now | Wall", Any, T]
"""A flow of one or more calls: yields requests, sleeps and clock readings; is sent their results."""

Effect = Send | Refresh | Sleep | Now | Wall
Effects = Generator[Effect, Any, T]
Expand = Callable[[SlurmRequest[Any]], Effects[Any]]


def one_call(request: SlurmRequest[T]) -> Plan[T]:
    """The plan of a single call."""
    result: T = yield request
    return result


def primed(plan: Plan[T]) -> Plan[T]:
    """The plan with its first step taken now, so that its arguments are checked before any call (e.g.
    before the async hook negotiates the API version); the returned plan goes on from there."""
    try:
        first = next(plan)
    except StopIteration as stop:
        return _finished(stop.value)
    return _going_on(first, plan)


def _finished(value: T) -> Plan[T]:
    return value
    yield  # a generator that yields nothing


def _going_on(first: SlurmRequest[Any] | Sleep | Now | Wall, plan: Plan[T]) -> Plan[T]:
    step = first
    while True:
        try:
            try:
                reply = yield step
            except SlurmApiError as exc:
                step = plan.throw(exc)
            else:
                step = plan.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


def effects_of(plan: Plan[T], expand: Expand) -> Effects[T]:
    """The plan with each request replaced by its effects; a request's error is thrown into the plan."""
    reply: Any = None
    error: SlurmApiError | None = None
    while True:
        try:
            step = plan.throw(error) if error is not None else plan.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        reply, error = None, None
        if isinstance(step, SlurmRequest):
            try:
                reply = yield from expand(step)
            except SlurmApiError as exc:
                error = exc
        else:
            reply = yield step


class Clock(Protocol):
    """What the sync driver waits with: ``time.monotonic``/``time.sleep``, or a test's fake clock.

    ``wall`` is its reading in seconds since the epoch: what crosses processes (a watch saved between
    a sensor's pokes, a trigger's deadline), so a fake clock moves it too.
    """

    def now(self) -> float: ...

    def wall(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class AsyncClock(Protocol):
    """What the async driver waits with: the event loop's time and ``asyncio.sleep``, or a fake clock."""

    def now(self) -> float: ...

    def wall(self) -> float: ...

    def sleep(self, seconds: float) -> Awaitable[None]: ...


class SystemClock:
    """Real time, blocking."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class LoopClock:
    """Real time on the running event loop."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def wall(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class Transport(Protocol):
    """A sync hook's part: post one envelope, refresh the token."""

    def send(self, envelope: Send) -> tuple[int, bytes]: ...

    def refresh(self) -> None: ...


class AsyncTransport(Protocol):
    """An async hook's part: post one envelope, refresh the token."""

    async def send(self, envelope: Send) -> tuple[int, bytes]: ...

    async def refresh(self) -> None: ...


class _Run(Generic[T]):
    """The stepping both drivers share: the next effect, fed its reply or the error it ended in."""

    def __init__(self, plan: Plan[T], expand: Expand) -> None:
        self._effects = effects_of(plan, expand)
        self.effect: Effect | None = None
        self.result: T | None = None
        self.feed(None)

    def feed(self, reply: Any) -> None:
        """The reply to :attr:`effect` (a :class:`SlurmApiError`: thrown in); :attr:`effect` ``None``: done."""
        try:
            if isinstance(reply, SlurmApiError):
                self.effect = self._effects.throw(reply)
            else:
                self.effect = self._effects.send(reply)
        except StopIteration as stop:
            self.effect, self.result = None, stop.value


def run_plan(plan: Plan[T], *, expand: Expand, transport: Transport, clock: Clock) -> T:
    """Carry out a plan with a blocking transport and clock; its result, or the error it did not catch."""
    run = _Run(plan, expand)
    while (effect := run.effect) is not None:
        reply: Any = None
        try:
            if isinstance(effect, Send):
                reply = transport.send(effect)
            elif isinstance(effect, Refresh):
                transport.refresh()
            elif isinstance(effect, Sleep):
                clock.sleep(effect.seconds)
            elif isinstance(effect, Wall):
                reply = clock.wall()
            else:
                reply = clock.now()
        except SlurmApiError as exc:
            reply = exc
        run.feed(reply)
    return run.result  # type: ignore[return-value]


async def arun_plan(plan: Plan[T], *, expand: Expand, transport: AsyncTransport, clock: AsyncClock) -> T:
    """:func:`run_plan` with an awaitable transport and clock."""
    run = _Run(plan, expand)
    while (effect := run.effect) is not None:
        reply: Any = None
        try:
            if isinstance(effect, Send):
                reply = await transport.send(effect)
            elif isinstance(effect, Refresh):
                await transport.refresh()
            elif isinstance(effect, Sleep):
                await clock.sleep(effect.seconds)
            elif isinstance(effect, Wall):
                reply = clock.wall()
            else:
                reply = clock.now()
        except SlurmApiError as exc:
            reply = exc
        run.feed(reply)
    return run.result  # type: ignore[return-value]


__all__ = [
    "NOW",
    "REFRESH",
    "WALL",
    "AsyncClock",
    "AsyncTransport",
    "Clock",
    "Effects",
    "LoopClock",
    "Now",
    "Plan",
    "Refresh",
    "Send",
    "Sleep",
    "SlurmRequest",
    "SystemClock",
    "Transport",
    "Wall",
    "arun_plan",
    "effects_of",
    "one_call",
    "primed",
    "run_plan",
]
