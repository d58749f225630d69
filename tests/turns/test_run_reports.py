"""``RunReports``: how a ``/live`` run reports to whoever drives its socket (docs/adr/0058).
Pure asyncio: a reporter and a driver, nothing else."""

from __future__ import annotations

import asyncio

import pytest
from google.adk.events import Event

from adk_stream_protocol.protocol.chunks import DataChunk
from adk_stream_protocol.turns.live_runs import RunFailed, RunReports, ToolData


def event(text: str) -> Event:
    return Event(author="model", invocation_id=text)


@pytest.mark.asyncio
async def test_a_reporter_goes_on_once_its_report_was_handled() -> None:
    reports = RunReports()
    first = asyncio.create_task(reports.put(event("e1")))
    await asyncio.sleep(0)
    taken = await reports.next()
    assert isinstance(taken, Event) and taken.invocation_id == "e1"
    await asyncio.sleep(0)
    assert not first.done(), "the driver is still handling it"
    second = asyncio.create_task(reports.put(ToolData(DataChunk(type="data-x", data=1), "c1")))
    assert isinstance(await reports.next(), ToolData)  # asking for the next: the first is done
    await first
    assert not second.done()
    reports.close()
    await second
    assert await reports.next() is None


@pytest.mark.asyncio
async def test_reports_keep_their_order_across_reporters() -> None:
    reports = RunReports()
    puts = [asyncio.create_task(reports.put(event(f"e{n}"))) for n in range(3)]
    failed = asyncio.create_task(reports.put(RunFailed(RuntimeError("gone"))))
    await asyncio.sleep(0)
    seen: list[str | None] = []
    while len(seen) < 4:
        report = await reports.next()
        seen.append(report.invocation_id if isinstance(report, Event) else "failed")
    assert seen == ["e0", "e1", "e2", "failed"]
    reports.close()
    await asyncio.gather(*puts, failed)


@pytest.mark.asyncio
async def test_after_the_close_nobody_waits() -> None:
    reports = RunReports()
    waiting = asyncio.create_task(reports.put(event("e1")))
    driver = asyncio.create_task(reports.next())
    await asyncio.sleep(0)
    reports.close()
    await waiting  # let go, handled or not
    await asyncio.wait_for(reports.put(event("late")), 1)  # nobody drives: at once
    assert isinstance(await driver, Event)
    assert await reports.next() is None


@pytest.mark.asyncio
async def test_a_cancelled_reporter_takes_back_what_was_not_handed_over() -> None:
    reports = RunReports()
    cancelled = asyncio.create_task(reports.put(event("cut")))
    kept = asyncio.create_task(reports.put(event("kept")))
    await asyncio.sleep(0)
    cancelled.cancel()
    await asyncio.gather(cancelled, return_exceptions=True)
    report = await reports.next()
    assert isinstance(report, Event) and report.invocation_id == "kept"
    reports.close()
    await kept
