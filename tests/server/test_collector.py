"""CPython's collector while the app runs (server/collector.py, docs/adr/0051): start-up's
objects frozen, a larger young threshold, both undone at shutdown."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.rig import chat_body, in_process_app, post_stream, user_message


@pytest.fixture(autouse=True)
def collector_as_python_leaves_it() -> Iterator[None]:
    """Without the test process's own freeze (tests/conftest.py), which is back afterwards."""
    gc.unfreeze()
    yield
    gc.collect()
    gc.freeze()


def test_a_running_app_freezes_start_up_and_collects_the_young_less_often(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The default settings, as deployed: not those tests/conftest.py gives the test apps.
    monkeypatch.delenv("ADK_STREAM_GC_FREEZE", raising=False)
    before = gc.get_threshold()
    with in_process_app(tmp_path) as app:
        assert gc.get_freeze_count() > 50_000, "ADK, genai and pydantic: frozen"
        assert gc.get_threshold() == (10_000, *before[1:])
        answer = post_stream(app, chat_body("gc-1", user_message("Hello there", "u1")))
        assert answer.status == 200
        assert 'You said: "Hello there"' in answer.text()
    assert gc.get_freeze_count() == 0, "unfrozen at shutdown"
    assert gc.get_threshold() == before


def test_both_can_be_turned_off(tmp_path: Path) -> None:
    before = gc.get_threshold()
    with in_process_app(tmp_path, gc_freeze=False, gc_young_threshold=0):
        assert gc.get_freeze_count() == 0
        assert gc.get_threshold() == before
    assert gc.get_threshold() == before
