"""ADK's remote-agent module, absent without the `a2a` extra, is not loaded again on every run
(server/adk_imports.py, docs/adr/0049)."""

from __future__ import annotations

import builtins
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from adk_stream_protocol.server.adk_imports import A2A_PACKAGE, REMOTE_AGENT_MODULE
from tests.support.rig import chat_body, in_process_app, post_stream, user_message


def test_without_a2a_a_run_no_longer_loads_adks_remote_agent_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    assert importlib.util.find_spec(A2A_PACKAGE) is None, "this test needs a2a absent"
    attempts: Counter[str] = Counter()
    real_import = builtins.__import__

    def counting_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if A2A_PACKAGE in name:
            attempts[name] += 1
        return real_import(name, *args, **kwargs)

    with in_process_app(tmp_path) as app:
        assert sys.modules[REMOTE_AGENT_MODULE] is None
        monkeypatch.setattr(builtins, "__import__", counting_import)
        for turn in range(3):
            result = post_stream(app, chat_body(f"a2a-{turn}", user_message("Hello", "u1")))
            assert 'You said: "Hello"' in result.text()
        monkeypatch.undo()
    # ADK still asks for the module on each run (so the mark still matters), and gets the
    # answer "absent" at once: never the a2a package itself, which the module's load needed.
    assert attempts, "ADK no longer imports its remote agent per run: drop server/adk_imports.py"
    assert not [name for name in attempts if name.startswith(A2A_PACKAGE)], attempts
