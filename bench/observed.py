"""Benchmark 9: what watching a response costs. The same server twice: once as deployed by
default, once with traces (an OpenTelemetry SDK, spans batched and dropped), Prometheus
metrics and recording of every response to JSONL all on (bench/observed_app.py).

The model streams benchmark 2's long answer with no pause, so the hooks' share is as large as
it gets: every chunk passes the span's and the recording's observers.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.approvals import UNPACED
from bench.core import Figure, Size
from bench.endtoend import compare
from bench.servers import Server, serve

BENCHMARK = "9 traces, metrics, recording"
COMPARISON = "same server, all off"
# Its goals are benchmark 2's (bench/endtoend.py): at most 10% slower with everything on.
OBSERVED_APP = "bench.observed_app:app"


@contextmanager
def servers() -> Iterator[tuple[Server, Server, Path]]:
    """The observed server, the plain one, and the folder the observed one records into."""
    with tempfile.TemporaryDirectory(prefix="bench-recordings-") as recordings:
        observed = {**UNPACED, "ADK_STREAM_METRICS": "true", "ADK_STREAM_RECORD_DIR": recordings}
        with serve("ours", observed, app=OBSERVED_APP) as on, serve("ours", UNPACED) as off:
            yield on, off, Path(recordings)


def run(size: Size) -> list[Figure]:
    with servers() as (on, off, recordings):
        figures = asyncio.run(compare(size, on, off, benchmark=BENCHMARK, comparison=COMPARISON))
        recorded = len(list(recordings.glob("*.jsonl")))
        metrics = on.metrics_text()
    # The hooks ran: each response was recorded and counted (warm-up included).
    if recorded == 0 or "adk_stream_responses_total" not in metrics:
        raise RuntimeError(
            f"the observed server recorded {recorded} responses; metrics: {metrics[:200]}"
        )
    print(f"  {recorded} responses recorded")
    return figures
