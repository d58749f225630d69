"""A payments backend as a production team runs one beside the server: shared by every
instance, deduplicating by idempotency key, fenced by the chat's lease generation
(tests/faults/test_exactly_once.py, issue 39).

The backend is a ledger file under an exclusive lock (``fcntl.flock``): each request reads
it, decides, and writes it back whole before the lock is let go, whichever process asks. A
request carries its idempotency key (the call id), the chat, and a fencing token (the
chat's lease generation when the tool ran):

- a token lower than the highest the backend has seen for the chat is refused, and the
  refusal recorded: the writer has lost the chat to a newer holder;
- the first request with a key makes the effect and gets a new transaction id;
- a request with a key already used gets that key's transaction id and makes no effect.

Every attempt is recorded with its outcome and token, every effect with its transaction:
the ground truth a test compares with the chat's record.
"""

from __future__ import annotations

import fcntl
import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LEDGER = "ledger.json"
LOCK = "ledger.lock"


class StaleToken(Exception):
    """The backend refused a write: a newer holder of the chat has written with a higher
    token."""


@dataclass
class Attempt:
    key: str
    chat: str
    tool: str
    token: int
    pid: int
    outcome: str  # "effect", "repeat" or "refused"
    transaction: str | None


@dataclass
class Effect:
    key: str
    chat: str
    tool: str
    token: int
    transaction: str
    amount: float
    to: str


@dataclass
class Ledger:
    """What the backend has seen: every attempt, every effect, the highest token per chat."""

    attempts: list[Attempt] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)
    highest: dict[str, int] = field(default_factory=dict)

    def effects_of(self, key: str) -> list[Effect]:
        return [e for e in self.effects if e.key == key]

    def attempts_of(self, key: str) -> list[Attempt]:
        return [a for a in self.attempts if a.key == key]

    def to_json(self) -> dict[str, Any]:
        return {
            "attempts": [vars(a) for a in self.attempts],
            "effects": [vars(e) for e in self.effects],
            "highest": self.highest,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Ledger:
        return cls(
            attempts=[Attempt(**a) for a in data["attempts"]],
            effects=[Effect(**e) for e in data["effects"]],
            highest=dict(data["highest"]),
        )


@contextmanager
def _locked(directory: Path) -> Iterator[Ledger]:
    """The ledger, read and written back under the lock every process takes."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        path = directory / LEDGER
        ledger = Ledger.from_json(json.loads(path.read_text())) if path.exists() else Ledger()
        yield ledger
        # Written whole, then renamed: a process killed half-way leaves the previous ledger.
        temporary = directory / f"{LEDGER}.{os.getpid()}"
        temporary.write_text(json.dumps(ledger.to_json()))
        temporary.replace(path)
    finally:
        os.close(fd)  # closing the descriptor lets the lock go


def charge(
    directory: Path, *, key: str, chat: str, tool: str, token: int, amount: float, to: str
) -> str:
    """The transaction id of the effect made for ``key``: made now, or before by a request
    with the same key. ``StaleToken`` when ``token`` is lower than the chat's highest."""
    with _locked(directory) as ledger:
        highest = ledger.highest.get(chat, token)
        if token < highest:
            ledger.attempts.append(Attempt(key, chat, tool, token, os.getpid(), "refused", None))
            refused = True
        else:
            refused = False
            ledger.highest[chat] = max(highest, token)
            done = ledger.effects_of(key)
            if done:
                transaction = done[0].transaction
                outcome = "repeat"
            else:
                transaction = f"tx-{uuid.uuid4().hex[:12]}"
                ledger.effects.append(Effect(key, chat, tool, token, transaction, amount, to))
                outcome = "effect"
            ledger.attempts.append(
                Attempt(key, chat, tool, token, os.getpid(), outcome, transaction)
            )
    if refused:
        raise StaleToken(f"token {token} is below the chat's {highest}")
    return transaction


def read(directory: Path) -> Ledger:
    """The ledger as it stands (taken under the lock, written back unchanged)."""
    with _locked(directory) as ledger:
        return ledger
