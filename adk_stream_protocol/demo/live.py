"""A live (bidirectional) connection for the offline demo model.

`OfflineLiveConnection` stands in for a Gemini Live session without a network.
It answers with the same reply logic as `OfflineDemoLlm.generate_content_async`
(`decide_reply` of replies.py over the conversation it has seen), so a chat behaves the same
over `run_async` and `run_live`. The output follows what ADK's
`GeminiLlmConnection` yields for Gemini Live:

* text: `partial=True` chunks, then one `partial=False` response with the full text;
* tool calls: one `Content(role="model", parts=[function_call, ...])`, after
  which the turn waits until every call has a function response (ADK sends the
  results of its own tools; a browser tool's result comes from the client) and
  then continues with the answer. As with Gemini 3.x Live there is no
  `turn_complete` between a call and its answer, so a turn waiting for a
  browser tool stays open until the result or new user input arrives;
* then a usage-only response and `LlmResponse(turn_complete=True)`.

History sent at connect time (`send_history`) that ends on the user's side is
answered at once, as Gemini does; otherwise the model waits for input.

Output modality comes from `llm_request.live_connect_config.response_modalities`
(`run_live` fills it from `RunConfig`, defaulting to AUDIO): with TEXT the
answer is text as above; with AUDIO it is spoken like a native-audio model,
i.e. `output_transcription` deltas (`partial=True`) interleaved with
`audio/pcm;rate=24000` chunks (a sine tone, 0.1 s per delta), then a final
transcription with the full text (`finished=True`, `partial=False`).
Transcriptions are only produced when `input_audio_transcription` /
`output_audio_transcription` are set (RunConfig turns both on by default).
Thoughts are streamed as `thought=True` text in both modalities.

Audio input is not recognised: the model "hears" a fixed phrase chosen by the length of the
utterance (see listening.py for the phrases and where an utterance ends).

New user input while a turn is still being produced (text, `ActivityStart`, or
speech detected automatically) interrupts it, as Gemini does: the text streamed
so far is closed (in TEXT mode a full-text response carrying `interrupted=True`;
in AUDIO mode a final output transcription followed by a bare
`LlmResponse(interrupted=True)`), then `turn_complete`, then the new input is
answered. The model keeps what it said so far in its history.

Function calls carry ids of the model's own, like Gemini Live
(`function-call-<digits>`, random), so a function response is matched to its call exactly
and a late response for an interrupted turn is recognised and dropped. They are unique in
the chat: after `transfer_to_agent` the next agent's connection sees the calls before it
only as ADK's relayed text, so a count of the calls in its history would start again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, Collection, Sequence
from typing import Any

from google.adk.models.base_llm_connection import BaseLlmConnection
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from typing_extensions import override

from adk_stream_protocol.foundation.model_names import OFFLINE_MODEL_NAME

from .audio import OUTPUT_AUDIO_MIME_TYPE, sample_rate, voice_chunk
from .chunks import chunk_text
from .listening import (
    IDLE_END_OF_SPEECH_SECONDS,
    LONG_UTTERANCE_PHRASE,
    SHORT_UTTERANCE_PHRASE,
    Listener,
    phrase_for_utterance,
)
from .live_options import LiveOptions
from .offline_turn import Turn
from .replies import Decide, decide_reply_off_loop, within_tools
from .usage import token_usage

# The names this module has always offered (they now live in the modules they come from).
__all__ = [
    "LONG_UTTERANCE_PHRASE",
    "OUTPUT_AUDIO_MIME_TYPE",
    "SHORT_UTTERANCE_PHRASE",
    "LiveOptions",
    "OfflineLiveConnection",
    "phrase_for_utterance",
]

logger = logging.getLogger(__name__)
# ADK's inputs to send_realtime: 2.12's base_llm_connection.RealtimeInput (2.11 has no name).
RealtimeInput = types.Blob | types.ActivityStart | types.ActivityEnd | types.LiveClientRealtimeInput

# A realistic but fast pause between streamed pieces (it also lets input arrive mid-turn).
DEFAULT_PACE_SECONDS = 0.005


class _Closed:
    """Outbox marker: the connection is closed."""


_CLOSED = _Closed()
_OutboxItem = LlmResponse | BaseException | _Closed


class OfflineLiveConnection(BaseLlmConnection):
    """A scripted Gemini Live session; see the module docstring."""

    def __init__(
        self,
        options: LiveOptions | None = None,
        *,
        model_version: str = OFFLINE_MODEL_NAME,
        pace_seconds: float = DEFAULT_PACE_SECONDS,
        tools: Collection[str] | None = None,
        decide: Decide = decide_reply_off_loop,  # another script's (testing.ScriptedLlm)
    ) -> None:
        self._options, self._decide = options or LiveOptions(), decide
        self._tools = tools  # the agent's tool names (None: any the demo calls)
        self._model_version = model_version
        self._pace = pace_seconds
        self._history: list[types.Content] = []
        self._draft: list[types.Part] = []  # Partial user content awaiting its completion.
        self._outbox: asyncio.Queue[_OutboxItem] = asyncio.Queue()
        self._turn: Turn | None = None
        self._listener = Listener(self._options.automatic_activity_detection)
        self._idle_timer: asyncio.TimerHandle | None = None
        self._closed = False

    @classmethod
    def for_request(
        cls, llm_request: LlmRequest, *, model_version: str = OFFLINE_MODEL_NAME
    ) -> OfflineLiveConnection:
        options = LiveOptions.from_config(llm_request.live_connect_config)
        logger.debug("offline live connection: %s", options)
        return cls(options, model_version=model_version, tools=set(llm_request.tools_dict))

    @property
    def options(self) -> LiveOptions:
        return self._options

    @property
    def history(self) -> list[types.Content]:
        """The conversation as the model sees it (a copy)."""
        return list(self._history)

    # --- BaseLlmConnection -------------------------------------------------------

    @override
    async def send_history(self, history: list[types.Content]) -> None:
        self._history = list(history)
        # Like Gemini: history ending with the user's turn is answered right away.
        if history and history[-1].role == "user":
            self._start_turn(spoken=None)

    @override
    async def send_content(self, content: types.Content) -> None:
        await self._send_content(content)

    @override
    async def _send_content(self, content: types.Content, *, partial: bool = False) -> None:
        if self._closed:
            logger.debug("offline live connection closed; content ignored")
            return
        parts = list(content.parts or [])
        if parts and all(p.function_response for p in parts):
            self._take_results(parts)
            return
        if partial:  # Not a turn yet: kept until the content that completes it.
            self._draft.extend(parts)
            return
        message = types.Content(role="user", parts=[*self._draft, *parts])
        self._draft = []
        self._interrupt()
        self._history.append(message)
        self._start_turn(spoken=None)

    @override
    async def send_realtime(self, blob: RealtimeInput) -> None:
        if self._closed:
            return
        if isinstance(blob, types.ActivityStart):
            self._listener.activity_start()
            self._interrupt()
        elif isinstance(blob, types.ActivityEnd):
            self._hear(self._listener.activity_end())
        elif isinstance(blob, types.LiveClientRealtimeInput):
            if blob.audio_stream_end:
                self._cancel_idle_timer()
                self._hear(self._listener.stream_end())
            else:
                logger.debug("offline live model ignores realtime input %s", blob)
        elif (blob.mime_type or "").startswith("audio/"):
            self._take_audio(blob)
        else:
            # Video frames and other media: the offline model is blind.
            logger.debug("offline live model ignores a %s blob", blob.mime_type)

    @override
    async def receive(self) -> AsyncGenerator[LlmResponse, None]:
        # The flow calls receive() in a loop: one call per turn; a call that
        # yields nothing ends the session.
        while True:
            item = await self._outbox.get()
            if isinstance(item, _Closed):
                self._outbox.put_nowait(item)  # Later calls must end at once too.
                return
            if isinstance(item, BaseException):
                raise item
            yield item
            if item.turn_complete:
                return

    @override
    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._cancel_idle_timer()
        turn, self._turn = self._turn, None
        self._outbox.put_nowait(_CLOSED)
        if turn is not None and turn.task is not None and not turn.task.done():
            turn.task.cancel()
            await asyncio.wait([turn.task])  # Let it unwind; its cancellation is expected.

    # --- Input -------------------------------------------------------------------

    def _take_results(self, parts: Sequence[types.Part]) -> None:
        turn = self._turn
        for part in parts:
            response = part.function_response
            assert response is not None
            if turn is None or not turn.accept(response):
                # E.g. the result of a call whose turn was interrupted: the
                # model has moved on, and a stray result would confuse it.
                logger.info("offline live model drops an unexpected %s result", response.name)

    def _take_audio(self, blob: types.Blob) -> None:
        started, ended = self._listener.audio(blob.data or b"", sample_rate(blob.mime_type))
        if started:
            self._interrupt()  # Barge-in: the user talks over the model.
        self._cancel_idle_timer()
        if ended is not None:
            self._hear(ended)
        elif self._listener.hearing:
            loop = asyncio.get_running_loop()
            self._idle_timer = loop.call_later(IDLE_END_OF_SPEECH_SECONDS, self._on_idle)

    def _on_idle(self) -> None:
        self._idle_timer = None
        if not self._closed:
            self._hear(self._listener.stream_end())

    def _cancel_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _hear(self, seconds: float | None) -> None:
        if seconds is None:
            return
        phrase = phrase_for_utterance(seconds)
        logger.debug("offline live model heard %.2f s of speech: %r", seconds, phrase)
        self._interrupt()
        self._history.append(types.Content(role="user", parts=[types.Part(text=phrase)]))
        self._start_turn(spoken=phrase)

    # --- Output ------------------------------------------------------------------

    def _put(self, **fields: Any) -> None:
        self._outbox.put_nowait(LlmResponse(model_version=self._model_version, **fields))

    def _start_turn(self, spoken: str | None) -> None:
        turn = Turn()
        turn.task = asyncio.create_task(self._play_turn(turn, spoken))
        self._turn = turn

    def _interrupt(self) -> None:
        """Stops the turn in progress and closes what it had started, like Gemini."""
        turn, self._turn = self._turn, None
        if turn is None or turn.task is None or turn.task.done():
            return
        turn.task.cancel()  # Its output so far is already in the outbox.
        logger.debug("offline live model interrupted")
        if turn.heard:
            transcription = types.Transcription(text="".join(turn.heard), finished=True)
            self._put(input_transcription=transcription, partial=False)
        said = ""
        if turn.streamed:
            # Gemini closes streamed text with a full-text response flagged interrupted.
            streamed = "".join(turn.streamed)
            part = types.Part(text=streamed, thought=turn.streamed_thought or None)
            content = types.Content(role="model", parts=[part])
            self._put(content=content, partial=False, interrupted=True)
            said = "" if turn.streamed_thought else streamed
        else:
            said = "".join(turn.spoken)
            if said and self._options.output_transcription:
                transcription = types.Transcription(text=said, finished=True)
                self._put(output_transcription=transcription, partial=False)
            self._put(interrupted=True)
        self._put(turn_complete=True)
        if said:
            self._history.append(types.Content(role="model", parts=[types.Part(text=said)]))

    async def _play_turn(self, turn: Turn, spoken: str | None) -> None:
        try:
            await self._produce(turn, spoken)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            # Surfaced through receive(), so the flow fails instead of hanging.
            logger.exception("offline live model failed")
            self._outbox.put_nowait(error)

    async def _produce(self, turn: Turn, spoken: str | None) -> None:
        prompt = list(self._history)
        generated: list[types.Part] = []
        if spoken is not None and self._options.input_transcription:
            await self._transcribe_input(turn, spoken)
        while True:
            reply = await self._decide(self._history)
            if self._tools is not None:
                reply = within_tools(reply, self._tools)
            if reply.error:
                self._put(error_code=reply.error_code, error_message=reply.error_message)
                break
            said: list[types.Part] = []
            if reply.thought:
                await self._stream_text(turn, reply.thought, thought=True)
                generated.append(types.Part(text=reply.thought, thought=True))
            if reply.text:
                if self._options.audio_output:
                    await self._speak(turn, reply.text)
                else:
                    await self._stream_text(turn, reply.text, thought=False)
                said.append(types.Part(text=reply.text))
            if reply.grounding is not None:  # Gemini Live sends it after the text
                self._put(grounding_metadata=reply.grounding)
            calls = [self._new_call(c.name, c.args) for c in reply.calls]
            call_parts = [types.Part(function_call=c) for c in calls]
            generated.extend([*said, *call_parts])
            if said or call_parts:
                self._history.append(types.Content(role="model", parts=[*said, *call_parts]))
            if not calls:
                break
            turn.expect(calls)
            await self._pause()
            self._put(content=types.Content(role="model", parts=call_parts))
            await turn.answered.wait()
            self._history.append(types.Content(role="user", parts=list(turn.results)))
        await self._pause()
        self._put(usage_metadata=token_usage(prompt, generated))
        self._put(turn_complete=True)

    def _new_call(self, name: str, args: dict[str, Any]) -> types.FunctionCall:
        # 63 random bits: Gemini Live's ids are digits of that size.
        call_id = f"function-call-{uuid.uuid4().int >> 65}"
        return types.FunctionCall(id=call_id, name=name, args=args)

    async def _pause(self) -> None:
        await asyncio.sleep(self._pace)

    async def _transcribe_input(self, turn: Turn, phrase: str) -> None:
        for piece in chunk_text(phrase):
            await self._pause()
            turn.heard.append(piece)
            transcription = types.Transcription(text=piece, finished=False)
            self._put(input_transcription=transcription, partial=True)
        await self._pause()
        turn.heard = []
        self._put(
            input_transcription=types.Transcription(text=phrase, finished=True), partial=False
        )

    async def _stream_text(self, turn: Turn, text: str, *, thought: bool) -> None:
        turn.streamed_thought = thought
        for piece in chunk_text(text):
            await self._pause()
            turn.streamed.append(piece)
            part = types.Part(text=piece, thought=thought or None)
            self._put(content=types.Content(role="model", parts=[part]), partial=True)
        await self._pause()
        turn.streamed = []
        part = types.Part(text=text, thought=thought or None)
        self._put(content=types.Content(role="model", parts=[part]), partial=False)

    async def _speak(self, turn: Turn, text: str) -> None:
        for index, piece in enumerate(chunk_text(text)):
            await self._pause()
            turn.spoken.append(piece)
            audio = types.Blob(mime_type=OUTPUT_AUDIO_MIME_TYPE, data=voice_chunk(index))
            # Audio events carry no partial flag, as with Gemini.
            self._put(content=types.Content(role="model", parts=[types.Part(inline_data=audio)]))
            if self._options.output_transcription:
                transcription = types.Transcription(text=piece, finished=False)
                self._put(output_transcription=transcription, partial=True)
        await self._pause()
        turn.spoken = []
        if self._options.output_transcription:
            transcription = types.Transcription(text=text, finished=True)
            self._put(output_transcription=transcription, partial=False)
