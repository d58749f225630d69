"""Streamed text: a reply cut into the small pieces both models stream."""

from __future__ import annotations

import itertools
import re

from .bounds import MAX_STREAM_PIECES

_RE_WORD = re.compile(r"\S+")


def chunk_text(text: str) -> list[str]:
    """Splits text into small chunks of a few words: at least three, at most MAX_STREAM_PIECES.

    A chunk is whole words with the spaces after them (the first one also takes the
    leading spaces), so the chunks add up to the text.
    """
    starts = [m.start() for m in _RE_WORD.finditer(text)]
    if len(starts) >= 3:
        # Up to 4 words a chunk, more when that would make too many chunks.
        size = max(1, min(4, len(starts) // 3), -(-len(starts) // MAX_STREAM_PIECES))
        bounds = [0, *starts[size::size], len(text)]
        return [text[a:b] for a, b in itertools.pairwise(bounds)]
    if len(text) >= 3:  # Too few words (e.g. Japanese): split by characters.
        step = -(-len(text) // 3)
        return [text[i : i + step] for i in range(0, len(text), step)]
    return [text] if text else []
