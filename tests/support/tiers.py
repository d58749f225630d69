"""The test tiers: which tests need another process, and the guard that keeps the others honest.

A test is ``out_of_process`` when it needs a process besides the test's own: a subprocess it
starts (uvicorn, Node, Chromium, a package build, a private PostgreSQL or Redis) or a service
already running (PostgreSQL, Redis); or what Node builds, which a fresh machine has only after
the full set-up. Every other test is ``fast``: the app in this process (Starlette's TestClient,
or uvicorn in a thread), the real ADK Runner, the offline model, SQLite. ``scripts/test
--fast`` runs the ``fast`` ones only.

Nobody marks a test ``fast``: ``TierPlugin`` (registered by tests/conftest.py) marks each test
at collection. A test is ``out_of_process`` by
- a fixture it uses, directly or through other fixtures, that is declared so where it is
  defined (``@out_of_process_fixture`` under ``@pytest.fixture``: uvicorn in a subprocess, the
  PostgreSQL and Redis fixtures, the fault tests' private stores, the browser); a module's own
  fixture of the same name (an in-process ``server``) is what counts for its tests; or a
  parameter that names one (``target`` is ``app`` or ``server``);
- the ``browser`` marker;
- ``pytest.mark.out_of_process`` on the test, its module (``pytestmark``) or a parameter,
  where the test starts the process itself, or needs what Node builds (the playground's page).

While a ``fast`` test runs (its set-up, call and teardown, in every run, so that CI catches a
test in the wrong tier), ``ProcessGuard`` refuses to start a process, and an out-of-process
fixture asked for at run time (``request.getfixturevalue``) fails the test.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

FAST = "fast"
OUT_OF_PROCESS = "out_of_process"

# Set on the function of a fixture that starts a process or reaches a service.
_MARK = "_starts_or_reaches_a_process"
# What a dispatching fixture's parameter may name (tests/conftest.py's ``target``: ``app`` or
# ``server``): the run-wide ``server``, uvicorn in a subprocess.
DISPATCHING_FIXTURES = frozenset({"target"})
DISPATCHED_OUT_OF_PROCESS = frozenset({"server"})

F = TypeVar("F", bound=Callable[..., Any])


def out_of_process_fixture(function: F) -> F:
    """Declares a fixture out of process (under ``@pytest.fixture``): the tests that use it,
    directly or through other fixtures, are ``out_of_process``."""
    setattr(function, _MARK, True)
    return function


def is_out_of_process(fixturedef: pytest.FixtureDef[Any]) -> bool:
    return bool(getattr(fixturedef.func, _MARK, False))


def process_fixtures(item: pytest.Item) -> list[str]:
    """The fixtures of the item's closure that are out of process, as the item resolves them
    (a module's own ``server`` in place of the run's)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    found = []
    for name in getattr(item, "fixturenames", ()):
        defs = list(info.name2fixturedefs.get(name, ()))
        # The last definition is the one in effect; one that asks for its own name uses the
        # one before it too.
        while defs:
            fixturedef = defs.pop()
            if is_out_of_process(fixturedef):
                found.append(name)
                break
            if name not in fixturedef.argnames:
                break
    return found


# Audit events (sys.audit) of a process being started: subprocess and asyncio's subprocesses
# both go through ``subprocess.Popen``; the rest is what os and pty offer besides.
PROCESS_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.posix_spawn",
        "os.fork",
        "os.forkpty",
        "os.exec",
        "os.spawn",
        "pty.spawn",
    }
)


def out_of_process_reason(
    out_of_process: Iterable[str], markers: Iterable[str], params: Mapping[str, object]
) -> str | None:
    """Why a test whose out-of-process fixtures are these (``process_fixtures``), with these
    marker names and parameters, is ``out_of_process``, or None for a ``fast`` one."""
    names = set(markers)
    if OUT_OF_PROCESS in names:
        return "marked out_of_process"
    if "browser" in names:
        return "marked browser"
    used = sorted(out_of_process)
    if used:
        return f"uses the fixture {used[0]}"
    for name in DISPATCHING_FIXTURES:
        chosen = params.get(name)
        if isinstance(chosen, str) and chosen in DISPATCHED_OUT_OF_PROCESS:
            return f"runs on the fixture {chosen} ({name})"
    return None


def classify(items: Iterable[pytest.Item]) -> None:
    """Mark each item ``fast`` or ``out_of_process``."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        reason = out_of_process_reason(
            process_fixtures(item), (m.name for m in item.iter_markers()), params
        )
        if reason is None:
            item.add_marker(FAST)
        elif not item.get_closest_marker(OUT_OF_PROCESS):
            item.add_marker(OUT_OF_PROCESS)


class ProcessInFastTier(RuntimeError):
    """A ``fast`` test started a process."""


@dataclass
class ProcessGuard:
    """Refuses to start a process while a ``fast`` test runs (``test``, its node id), through
    an audit hook (``sys.addaudithook``: it cannot be removed, so it is added once and does
    nothing between tests). Whatever was refused is kept in ``attempts`` until ``check``
    (the test's teardown) fails the test with it, should the test have swallowed the error."""

    test: str | None = None
    attempts: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    installed: bool = False

    def install(self) -> None:
        if not self.installed:
            sys.addaudithook(self._audit)
            self.installed = True

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        test = self.test
        if test is None or event not in PROCESS_EVENTS:
            return
        what = f"{event} {_command(event, args)}"
        with self.lock:
            self.attempts.append(what)
        raise ProcessInFastTier(refusal(test, what))

    def check(self, test: str | None) -> None:
        """Fail (``pytest.fail``) with what was refused since the last check, and forget it."""
        with self.lock:
            attempts, self.attempts = self.attempts, []
        if attempts:
            pytest.fail(refusal(test or "a fast test", "; ".join(attempts)), pytrace=False)


def _reported_once() -> Iterator[None]:
    """A phase's wrapper: a test that failed with the refusal itself is not failed again for
    it at its teardown."""
    try:
        return (yield)
    except BaseException as error:
        cause: BaseException | None = error
        while cause is not None and not isinstance(cause, ProcessInFastTier):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            with GUARD.lock:
                GUARD.attempts.clear()
        raise


def refusal(test: str, what: str) -> str:
    return (
        f"{test} is in the fast tier, which starts no process, and it started one ({what}). "
        f"Mark it out_of_process (pytestmark = pytest.mark.{OUT_OF_PROCESS}) or use the app in "
        "this process (tests/support/tiers.py)."
    )


def _command(event: str, args: tuple[Any, ...]) -> str:
    """The program an audit event starts, as far as its arguments say."""
    if event == "subprocess.Popen" and len(args) >= 2:
        program = args[1] if args[1] is not None else args[0]
        return repr(program)[:200]
    return repr(args[:2])[:200]


GUARD = ProcessGuard()


class TierPlugin:
    """The hooks (tests/conftest.py registers it): marks at collection, the guard while a fast
    test runs."""

    def __init__(self) -> None:
        GUARD.install()

    # Before pytest's own, which deselects by the marks (``-m fast``).
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        classify(items)

    # From a fast test's set-up to the end of its teardown: fixtures of a wider scope are made
    # in the set-up of the first test that needs them.
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        GUARD.test = item.nodeid if item.get_closest_marker(FAST) else None
        return (yield from _reported_once())

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        return (yield from _reported_once())

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        test = GUARD.test
        try:
            result = yield
        finally:
            GUARD.test = None
        GUARD.check(test)
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any]) -> None:
        """A fast test that asks for a server or a service at run time fails, saying so."""
        test = GUARD.test
        if test is not None and is_out_of_process(fixturedef):
            pytest.fail(refusal(test, f"the fixture {fixturedef.argname}"), pytrace=False)
