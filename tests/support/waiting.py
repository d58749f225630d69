"""Waiting on a condition, with a deadline, where nothing can be awaited instead: another
process's file, log or port, a database's view of its own locks, a server that comes back, the
inner state of the app that has no event. Where there is an event, a test waits on it.

A condition returns a value: a falsy one means "not yet", a truthy one is returned. It may
raise, to end the wait at once (a process that died). ``what`` says what was awaited, for the
failure (a callable is called then, for what it shows, such as a log's tail)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

# Seconds between two looks: short, next to what the tests wait for (tens of milliseconds).
EVERY = 0.02


def wait_until(
    condition: Callable[[], T | None],
    what: str | Callable[[], str],
    *,
    within: float = 10.0,
    every: float = EVERY,
) -> T:
    """``condition()``'s first truthy value; an AssertionError after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not (value := condition()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {within} s: {_said(what)}")
        time.sleep(every)
    return value


async def until(
    condition: Callable[[], T | None],
    what: str | Callable[[], str],
    *,
    within: float = 10.0,
    every: float = EVERY,
) -> T:
    """``wait_until`` on an event loop."""

    async def looked() -> T | None:
        return condition()

    return await until_awaited(looked, what, within=within, every=every)


async def until_awaited(
    condition: Callable[[], Awaitable[T | None]],
    what: str | Callable[[], str],
    *,
    within: float = 10.0,
    every: float = EVERY,
) -> T:
    """``until`` for a condition that awaits (a query, say)."""
    deadline = time.monotonic() + within
    while not (value := await condition()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {within} s: {_said(what)}")
        await asyncio.sleep(every)
    return value


def _said(what: str | Callable[[], str]) -> str:
    return what if isinstance(what, str) else what()
