"""Audio, images and spoken words in a response: inline data as chunks, and the transcripts of
a live run.

Inline data becomes a ``file`` part with a ``data:`` URL, except raw PCM audio, which is not a
playable file and goes out as a transient ``data-pcm`` part the page plays. On ``/live`` the
user's words (input transcription) become a ``data-transcript`` part, and the words of a spoken
answer (output transcription) are the assistant's text.
"""

from __future__ import annotations

import base64

from google.genai import types

from adk_stream_protocol.protocol.blocks import ResponseBlocks
from adk_stream_protocol.protocol.chunks import BaseChunk, DataChunk, FileChunk
from adk_stream_protocol.protocol.event_values import pcm_rate


def inline_data_chunk(blob: types.Blob) -> BaseChunk:
    mime = blob.mime_type or "application/octet-stream"
    encoded = base64.b64encode(blob.data or b"").decode("ascii")
    if mime.startswith("audio/pcm"):
        # Raw PCM is not a playable file: the client consumes it as transient data.
        return DataChunk(
            type="data-pcm",
            data={"data": encoded, "mediaType": mime, "sampleRate": pcm_rate(mime)},
            transient=True,
        )
    return FileChunk(url=f"data:{mime};base64,{encoded}", media_type=mime)


class LiveTranscripts:
    """The transcriptions of one response on a live run."""

    def __init__(self, blocks: ResponseBlocks) -> None:
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
                self._blocks.ensure_step(out)
                self._blocks.text_delta(text, out)
                self._answer_streamed = True
            return
        if text and not self._answer_streamed:
            self._blocks.ensure_step(out)
            self._blocks.text_delta(text, out)
        self._answer_streamed = False
        out.extend(self._blocks.close())
