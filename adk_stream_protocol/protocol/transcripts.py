"""Spoken words in a response on a live run: the user's words (input transcription) become a
``data-transcript`` part, and the words of a spoken answer (output transcription) are the
assistant's text, streamed as text blocks (``parts/text.py``).
"""

from __future__ import annotations

from google.genai import types

from adk_stream_protocol.protocol.chunks import BaseChunk, DataChunk
from adk_stream_protocol.protocol.parts.steps import ResponseSteps
from adk_stream_protocol.protocol.parts.text import ResponseBlocks


class LiveTranscripts:
    """The transcriptions of one response on a live run."""

    def __init__(self, steps: ResponseSteps, blocks: ResponseBlocks) -> None:
        self._steps = steps
        self._blocks = blocks
        self._heard = ""  # the user's words in this response
        self._answer_streamed = False

    def user(self, transcription: types.Transcription, partial: bool | None) -> list[BaseChunk]:
        """What the user said (live audio in): not assistant text, but a data part the UI can
        show. Deltas accumulate; one part id per response, so the client updates it in place."""
        text = transcription.text or ""
        if partial:
            self._heard += text
        elif text:
            self._heard = text  # the final transcription carries the full text
        final = bool(transcription.finished) or not partial
        if not self._heard:
            return []
        return [
            DataChunk(
                type="data-transcript",
                id=f"heard_{self._blocks.id_prefix}",
                data={"role": "user", "text": self._heard, "final": final},
            )
        ]

    def answer(
        self, transcription: types.Transcription, partial: bool | None, out: list[BaseChunk]
    ) -> None:
        """The words of a spoken answer are the assistant's text: streamed from the partial
        deltas; the final transcription repeats them and only closes the block."""
        text = transcription.text or ""
        if partial:
            if text:
                self._steps.ensure(out)
                self._blocks.text_delta(text, out)
                self._answer_streamed = True
            return
        if text and not self._answer_streamed:
            self._steps.ensure(out)
            self._blocks.text_delta(text, out)
        self._answer_streamed = False
        out.extend(self._blocks.close())
