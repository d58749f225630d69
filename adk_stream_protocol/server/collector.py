"""CPython's cyclic garbage collector, set for a server that allocates per partial.

Every ADK event, pydantic model and chunk of an answer is allocated and freed within
milliseconds. The collector runs its youngest generation every 700 net allocations by default
(several times per answer), and each full collection walks every object the process holds:
after start-up about 160,000 of ADK's, google-genai's and pydantic's that live as long as the
process. Under benchmark 3's load, setting the collector as below cut the server's CPU per
answer by about a fifth (docs/adr/0051). Two process settings, Python's public ``gc`` API:

- ``gc.freeze()`` once start-up is done: what exists then moves to a permanent generation
  that collections no longer walk (the objects stay alive as they would have);
- a larger threshold for the youngest generation: fewer, larger young collections. Answers'
  objects are mostly freed by reference counting before a collection would see them.

Both are undone when the app shuts down, so an app run inside a test process or another
program leaves the collector as it found it.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger(__name__)


@contextmanager
def tuned_collector(*, freeze: bool, young_threshold: int) -> Iterator[None]:
    """While the app runs: start-up's objects frozen (``freeze``) and the youngest
    generation collected every ``young_threshold`` net allocations (0 keeps Python's)."""
    before = gc.get_threshold()
    if young_threshold > 0:
        gc.set_threshold(young_threshold, *before[1:])
    if freeze:
        gc.collect()  # start-up's garbage is not kept for good
        gc.freeze()
    logger.debug("collector: frozen=%d thresholds=%s", gc.get_freeze_count(), gc.get_threshold())
    try:
        yield
    finally:
        if freeze:
            gc.unfreeze()
        if young_threshold > 0:
            gc.set_threshold(*before)
