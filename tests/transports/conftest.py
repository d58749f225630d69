"""Fixtures of the transports' tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.agents.leave import LEDGER_ENV


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The file the leave agent's tools write each run to (tests/support/agents/leave.py)."""
    path = str(tmp_path / "ledger")
    monkeypatch.setenv(LEDGER_ENV, path)
    return path
