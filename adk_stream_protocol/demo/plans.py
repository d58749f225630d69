"""What the offline model means to do: an intent and the calls it plans."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

IntentKind = Literal[
    "fail",
    "payment",
    "payment_help",
    "weather",
    "location",
    "music",
    "recall",
    "chart",
    "sources",
    "chat",
]


@dataclass(frozen=True)
class PlannedCall:
    """A function call the model intends to make."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Intent:
    """What the latest user message asks for, as a plan of call batches.

    Each entry of `steps` is one model response; all calls of a step are
    issued together (parallel calls), later steps wait for earlier results.
    """

    kind: IntentKind
    text: str
    steps: tuple[tuple[PlannedCall, ...], ...] = ()
    think: bool = False
    # Whether more payments were asked for than MAX_PAYMENTS_PER_MESSAGE (left out).
    payments_left_out: bool = False
