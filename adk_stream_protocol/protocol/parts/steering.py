"""ai 7's ``steering-message`` parts (experimental): a user message added to a running
generation (docs/adr/0022).

Nothing of ADK's becomes one, and no chunk of ours makes one (so a message's is not rebuilt);
ai 7's fold adds the part as the chunk came. From the client, its text and files are the
user's input to the turn, in order, wherever the part is (``inputs.steering_input``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from google.genai import types
from pydantic import Discriminator, Tag

from adk_stream_protocol.protocol.parts.base import (
    Chunk,
    Fold,
    FoldTarget,
    PartKind,
    UIPart,
    pushed,
)
from adk_stream_protocol.protocol.parts.files import FileUIPart, file_part
from adk_stream_protocol.protocol.parts.text import TextUIPart


def _steering_tag(value: Any) -> str | None:
    part_type = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return part_type if part_type in ("text", "file") else None


SteeringContentPart: TypeAlias = Annotated[
    Annotated[TextUIPart, Tag("text")] | Annotated[FileUIPart, Tag("file")],
    Discriminator(
        _steering_tag,
        custom_error_type="unknown_part_type",
        custom_error_message="a steering message holds only text and file parts",
    ),
]


class SteeringMessageUIPart(UIPart):
    """ai 7 (experimental): a user message added to a running generation."""

    type: Literal["steering-message"]
    id: str
    parts: list[SteeringContentPart]


class Steering(PartKind):
    """``steering-message`` parts (ai 7)."""

    part_types = ("steering-message",)
    request_parts = (("steering-message", SteeringMessageUIPart),)

    def folds(self) -> dict[str, Fold]:
        return {"steering-message": self._steering}

    def _steering(self, target: FoldTarget, chunk: Chunk) -> None:
        target.message["parts"].append(pushed(chunk, ("id", "parts")))
        target.write()

    @classmethod
    def model_input(cls, part: UIPart) -> tuple[list[types.Part], list[str]]:
        """The steering message's text and files, in order."""
        assert isinstance(part, SteeringMessageUIPart)
        given: list[types.Part] = []
        for content in part.parts:
            if isinstance(content, TextUIPart):
                if content.text:
                    given.append(types.Part(text=content.text))
            else:
                given.append(file_part(content))
        return given, []
