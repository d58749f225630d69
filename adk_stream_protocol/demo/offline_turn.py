"""One turn of the offline live model: what it streamed so far (what an interruption has
to close) and the function calls it waits for."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from google.genai import types


@dataclass(eq=False)
class Turn:
    """One model turn being produced, and what an interruption has to close."""

    task: asyncio.Task[None] | None = None
    # Pieces streamed whose final response is not sent yet (lists: joined only if needed).
    heard: list[str] = field(default_factory=list)  # Input transcription.
    streamed: list[str] = field(default_factory=list)  # Text.
    streamed_thought: bool = False
    spoken: list[str] = field(default_factory=list)  # Output transcription.
    awaiting: dict[str, types.FunctionCall] = field(default_factory=dict)
    results: list[types.Part] = field(default_factory=list)
    answered: asyncio.Event = field(default_factory=asyncio.Event)

    def expect(self, calls: Sequence[types.FunctionCall]) -> None:
        """Waits for the results of these calls from now on."""
        self.awaiting = {c.id: c for c in calls if c.id}
        self.results = []
        self.answered.clear()

    def accept(self, response: types.FunctionResponse) -> bool:
        """Takes a function response if it answers a call this turn waits for."""
        call_id = response.id
        if call_id is None:  # A client that dropped the id: pair by name.
            call_id = next((k for k, c in self.awaiting.items() if c.name == response.name), None)
        if call_id is None or call_id not in self.awaiting:
            return False
        del self.awaiting[call_id]
        self.results.append(types.Part(function_response=response))
        if not self.awaiting:
            self.answered.set()
        return True
