"""ai 7's ``custom`` parts: provider-specific content (``kind`` is ``{provider}.{type}``).

Nothing of ADK's becomes one, and no chunk of ours makes one (so a message's is not rebuilt);
ai 7's fold adds the part as the chunk came; a client sends it back, and it is shown only.
"""

from __future__ import annotations

from typing import Literal

from adk_stream_protocol.protocol.parts.base import (
    Chunk,
    Fold,
    FoldTarget,
    PartKind,
    UIPart,
    pushed,
)


class CustomUIPart(UIPart):
    """ai 7: provider-specific content (``kind`` is ``{provider}.{type}``)."""

    type: Literal["custom"]
    kind: str


class Custom(PartKind):
    """``custom`` parts (ai 7)."""

    part_types = ("custom",)
    request_parts = (("custom", CustomUIPart),)

    def folds(self) -> dict[str, Fold]:
        return {"custom": self._custom}

    def _custom(self, target: FoldTarget, chunk: Chunk) -> None:
        target.message["parts"].append(pushed(chunk, ("kind", "providerMetadata")))
        target.write()
