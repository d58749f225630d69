"""ADK events to AI SDK UI message stream chunks.

A ``StreamProtocolConverter`` covers exactly one response (one request on ``/stream``, one
turn on ``/live``): it owns that response's ids, open blocks and steps (``parts/text.py``,
``parts/steps.py``), usage (``usage.py``) and transcripts (``transcripts.py``), and is thrown
away afterwards, so nothing leaks into the next turn. Both transports feed it ADK events and
serialise the typed chunks it returns.

The partial/aggregate rule (docs/adr/0003-converter.md): text and thoughts
stream from ``partial`` events; the non-partial event that follows repeats that text, so only
its other parts (function calls, files) are used. When nothing was streamed, the non-partial
event's text is emitted whole. This needs no event-id matching, so it also holds in live mode,
where every partial has a fresh id.

The chunks of each part kind are made by that kind's module (``parts/``, docs/adr/0059): the
converter decides, per event, which kinds it holds and in which order. What an event carries
beside its text, calls, results and files (a widget in its actions) reaches the page through
one hook: each ``EventPart`` of ``parts/kinds.py`` reads every final event, and its chunks
follow the event's own, in its step (docs/adr/0062); the converter names none of them.
Gemini's grounding becomes source parts for every client (``parts/sources.py``). What ai 7
adds (citations on ``text-end``, ``tool-approval-response``, the finish reason
``interrupted``) is sent only when the response's client is known to be ai 7 (``ai_sdk=7``;
what each client has is its table in ``clients.py``); otherwise every chunk is one the strict
ai 6.0.25 client accepts.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from typing import Any

from google.adk.events import Event
from google.genai import types

from adk_stream_protocol.foundation.errors import (
    ABORTED_CODE,
    describe_error,
    log_error,
    new_error_reference,
)
from adk_stream_protocol.protocol.chunks import (
    AbortChunk,
    AiSdkVersion,
    BaseChunk,
    ErrorChunk,
    FinishChunk,
    FinishReason,
    StartChunk,
)
from adk_stream_protocol.protocol.clients import client_for
from adk_stream_protocol.protocol.confirmations import approval_request_chunks
from adk_stream_protocol.protocol.credentials import shown_answer
from adk_stream_protocol.protocol.interrupts import CREDENTIAL_TOOL
from adk_stream_protocol.protocol.parts.files import file_data_chunk, inline_data_chunk, is_audio
from adk_stream_protocol.protocol.parts.kinds import EVENT_PARTS
from adk_stream_protocol.protocol.parts.sources import ResponseSources
from adk_stream_protocol.protocol.parts.steps import ResponseSteps
from adk_stream_protocol.protocol.parts.text import ResponseBlocks
from adk_stream_protocol.protocol.parts.tools import (
    approval_response_chunks,
    call_chunks,
    rearmed_call,
    result_chunk,
)
from adk_stream_protocol.protocol.refusals import log_failure
from adk_stream_protocol.protocol.tool_calls import CONFIRMATION_TOOL
from adk_stream_protocol.protocol.transcripts import LiveTranscripts
from adk_stream_protocol.protocol.usage import ResponseUsage

logger = logging.getLogger(__name__)


def speaks_to_user(event: Event, content: types.Content) -> bool:
    """Whether an event's content is the agent's to the user, not results sent to the model:
    the model's, and a workflow node's message, which ADK stores as the user's content under
    the node's (or its workflow's) name."""
    if content.role == "model":
        return True
    parts = content.parts or ()
    return event.author != "user" and not any(p.function_response for p in parts)


class StreamProtocolConverter:
    """Turns the ADK events of one response into UI message stream chunks.

    Call ``start()`` once, ``convert(event)`` for every ADK event, then ``finish()``; call
    ``fail(exc)`` instead of ``finish()`` when the run raised. Each returns the chunks to send.
    """

    def __init__(
        self,
        *,
        message_id: str | None = None,
        error_detail: bool = False,
        denied_tool_call_ids: Collection[str] = (),
        known_tool_call_ids: Collection[str] | None = None,
        id_prefix: str | None = None,
        ai_sdk: AiSdkVersion = 6,
    ) -> None:
        self.message_id = message_id
        # Whether an error event reports a refusal the server made and logged itself (a tool
        # the fence stopped): ADK reports it under a generic code, RuntimeError. The chat's
        # turn sets it; None: every error event is logged as an error.
        self.refused: Callable[[Event], bool] | None = None
        self._client = client_for(ai_sdk)
        # With a live run, a late result of an earlier turn's call can arrive in this response;
        # the client has no part for it and would throw. None: no such restriction.
        self._known_calls = set(known_tool_call_ids) if known_tool_call_ids is not None else None
        self._error_detail = error_detail
        self._denied = frozenset(denied_tool_call_ids)
        self._blocks = ResponseBlocks(
            id_prefix=id_prefix or uuid.uuid4().hex[:8], client=self._client
        )
        self._steps = ResponseSteps(self._blocks)
        self._sources = ResponseSources()
        # The parts made from an event's other content, each read through the hook.
        self._event_parts = tuple(part(self._client) for part in EVENT_PARTS)
        # The voices (ResponseBlocks) that streamed text or thoughts since their last
        # non-partial model event: that event repeats them, so its text parts are skipped.
        self._streamed: set[str | None] = set()

        self._transcripts = LiveTranscripts(self._steps, self._blocks)

        self._awaiting_client: set[str] = set()
        self._usage = ResponseUsage()
        self._errored = False
        self._started = False
        self._finished = False

    # -- public API ---------------------------------------------------------------------

    @property
    def awaiting_client(self) -> bool:
        """True when the response pauses for the client (an approval or a browser tool)."""
        return bool(self._awaiting_client)

    @property
    def errored(self) -> bool:
        return self._errored

    def start(self) -> list[BaseChunk]:
        if self._started:
            return []
        self._started = True
        return [StartChunk(message_id=self.message_id)]

    def convert(self, event: Event) -> list[BaseChunk]:
        if self._finished:
            return []
        out: list[BaseChunk] = []
        partial, grounding = event.partial, event.grounding_metadata  # read once: hot path
        self._blocks.speak_as(event.branch)  # a parallel branch streams in a voice of its own
        self._usage.observe(event)
        if grounding is not None:
            self._blocks.ground(grounding)
        if event.input_transcription is not None:
            out.extend(self._transcripts.user(event.input_transcription, partial))
        if event.output_transcription is not None:
            self._transcripts.answer(event.output_transcription, partial, out)
        content = event.content
        if content is not None and (parts := content.parts):
            if partial:
                self._convert_partial(event.branch, parts, out)
            elif speaks_to_user(event, content):
                self._convert_model_content(event, parts, out)
            else:
                self._convert_tool_results(event, parts, out)
        if grounding is not None and (sources := self._sources.new_in(grounding)):
            self._steps.ensure(out)
            out.extend(sources)  # every client; after the text they ground
        if not partial:
            self._usage.record_final(event)
            self._read_event_parts(event, out)
        if event.error_code:
            code = str(getattr(event.error_code, "name", event.error_code))
            if code == ABORTED_CODE:
                out.extend(self._aborted())
            else:
                refused = self.refused is not None and self.refused(event)
                out.extend(self._error(code, event.error_message, refused=refused))
        return out

    def replay(self, responses: Sequence[Sequence[Event]]) -> list[BaseChunk]:
        """What earlier responses of this turn held back (docs/adr/0010): their text and the
        results of calls they did not introduce themselves. Their own calls and approval
        requests were delivered, so function calls are skipped."""
        out: list[BaseChunk] = []
        for events in responses:
            introduced = {
                call.id for event in events for call in event.get_function_calls() if call.id
            }
            for event in events:
                if event.partial:
                    continue
                self._blocks.speak_as(event.branch)
                content = event.content
                parts = content.parts if content is not None and content.parts else []
                if parts and content is not None and speaks_to_user(event, content):
                    # Only calls: nothing to send (no empty step).
                    if text_only := [p for p in parts if not p.function_call]:
                        self._convert_model_content(event, text_only, out)
                elif parts:
                    self._convert_tool_results(event, parts, out, skip=introduced)
                self._read_event_parts(event, out)  # held back as the event's text was
        return out

    def approval_request(
        self, approval_id: str, call_id: str, hint: str | None = None, payload: Any = None
    ) -> list[BaseChunk]:
        """An approval request, with its hint and payload."""
        out: list[BaseChunk] = []
        if not self._steps.open:
            out.extend(self._steps.new())
        out.extend(approval_request_chunks(approval_id, call_id, hint, payload, self._client))
        self._awaiting_client.add(approval_id)
        return out

    def approval_responses(
        self, decisions: Sequence[tuple[str, bool, str | None]]
    ) -> list[BaseChunk]:
        """The decisions (approval id, approved, reason) a continuation acts on, for an ai 7
        client: a response replayed to another tab shows them too. Nothing for ai 6."""
        return approval_response_chunks(decisions, self._client)

    def rearm(
        self, call_id: str, tool_name: str, args: dict[str, Any], *, announce: bool = True
    ) -> list[BaseChunk]:
        """Hand an approved browser call back to the client to run (docs/adr/0009), in its
        own step, where the stock helpers look; without ``announce`` (``add-output``) only
        pause for it: the page runs it already, and the chunk would reset its output."""
        self._awaiting_client.add(call_id)
        return [rearmed_call(call_id, tool_name, args)] if announce else []

    def finish(self, reason: FinishReason | None = None) -> list[BaseChunk]:
        """Close whatever is open and end the response with ``finish`` (``reason`` overrides
        the derived finish reason, e.g. ``other`` for an interrupted live turn)."""
        if self._finished:
            return []
        out = self._blocks.close_all()
        if self._steps.after_tool_results and not self._errored and not self._awaiting_client:
            # The response ends right after tool results. An empty step after them keeps the
            # stock `lastAssistantMessageIsCompleteWithToolCalls` from resubmitting forever.
            out.extend(self._steps.new())
        out.extend(self._steps.finish())
        out.append(
            FinishChunk(
                finish_reason=reason or self._final_reason(),
                message_metadata=self._usage.metadata(),
            )
        )
        self._finished = True
        return out

    def fail(self, exc: BaseException, *, error_text: str | None = None) -> list[BaseChunk]:
        """End the response after the run raised: one ``error`` chunk (unless the error was
        already reported as an ADK error event), then ``finish``. ``error_text``: a failure
        the caller understood and logged (a store's outage), shown as it is."""
        out: list[BaseChunk] = []
        if not self._errored:
            if error_text is None:
                reference = new_error_reference()
                log_failure(reference, exc)  # a refusal: its WARNING is logged already
                error_text = self._error_text(type(exc).__name__, str(exc), reference)
            out.extend(self._blocks.close_all())
            out.append(ErrorChunk(error_text=error_text))
            self._errored = True
        out.extend(self.finish())
        return out

    # -- partial events: streamed text and thoughts -------------------------------------------

    def _convert_partial(
        self, voice: str | None, parts: list[types.Part], out: list[BaseChunk]
    ) -> None:
        blocks, steps = self._blocks, self._steps
        for part in parts:
            inline = part.inline_data
            if inline is not None and inline.data is not None:
                steps.ensure(out)
                out.append(inline_data_chunk(inline))  # live audio
                continue
            text = part.text
            if not text:
                continue  # function calls are taken only from the final event
            steps.ensure(out)
            if part.thought:
                blocks.reasoning_delta(text, out)
            else:
                blocks.text_delta(text, out)
            self._streamed.add(voice)

    # -- non-partial model events ---------------------------------------------------------------

    def _convert_model_content(
        self, event: Event, parts: list[types.Part], out: list[BaseChunk]
    ) -> None:
        if all(is_audio(p) for p in parts):
            # Live audio arrives as its own events between transcript deltas: it is not the
            # end of the answer's text, so it closes nothing.
            self._steps.ensure(out)
            out.extend(inline_data_chunk(p.inline_data) for p in parts if p.inline_data)
            return
        skip_text = event.branch in self._streamed
        self._streamed.discard(event.branch)
        out.extend(self._blocks.close())
        long_running = set(event.long_running_tool_ids or ())
        for part in parts:
            if part.function_call:
                self._function_call(part.function_call, long_running, out)
            elif part.text and not skip_text:
                self._steps.ensure(out)
                if part.thought:
                    self._blocks.reasoning_delta(part.text, out)
                else:
                    self._blocks.text_delta(part.text, out)
            elif part.inline_data and part.inline_data.data is not None:
                self._steps.ensure(out)
                out.extend(self._blocks.close())
                out.append(inline_data_chunk(part.inline_data))
            elif part.file_data and part.file_data.file_uri:
                self._steps.ensure(out)
                out.extend(self._blocks.close())
                out.append(file_data_chunk(part.file_data))
        out.extend(self._blocks.close())

    def _function_call(
        self, call: types.FunctionCall, long_running: set[str], out: list[BaseChunk]
    ) -> None:
        call_id = call.id or ""
        if call.name == CONFIRMATION_TOOL:
            original = (call.args or {}).get("originalFunctionCall") or {}
            original_id = original.get("id") if isinstance(original, dict) else None
            if not original_id:
                logger.warning("confirmation request %s names no original call", call_id)
                return
            asked = (call.args or {}).get("toolConfirmation")
            hint, payload = (asked.get(k) for k in ("hint", "payload")) if asked else (None, None)
            # Same step as the tool part it gates: a start-step in between would hide the
            # part from the stock approval helper.
            out.extend(self.approval_request(call_id, original_id, hint, payload))
            return
        self._steps.ensure(out)
        if self._known_calls is not None:
            self._known_calls.add(call_id)
        out.extend(call_chunks(call_id, call.name or "unknown", call.args or {}))
        if call_id in long_running:
            self._awaiting_client.add(call_id)

    # -- what else a final event carries: the parts read through the hook ----------------------

    def _read_event_parts(self, event: Event, out: list[BaseChunk]) -> None:
        for part in self._event_parts:
            chunks = part.chunks(event)
            if not chunks:
                continue
            # Where the event's own chunks went (a tool's widget beside its output, in the
            # step of its call or, in a continuation, with no step of its own), after its text.
            out.extend(self._blocks.close())
            out.extend(chunks)

    # -- tool results -----------------------------------------------------------------------------

    def _convert_tool_results(
        self,
        event: Event,
        parts: list[types.Part],
        out: list[BaseChunk],
        skip: Collection[str] = (),
    ) -> None:
        placeholders = (
            set(event.actions.requested_tool_confirmations or ()) if event.actions else set()
        )
        for part in parts:
            response = part.function_response
            if response is None or response.name == CONFIRMATION_TOOL:
                continue
            call_id = response.id or ""
            if call_id in placeholders or call_id in skip:
                continue  # ADK's "needs approval" stand-in, or a result delivered before
            if self._known_calls is not None and call_id not in self._known_calls:
                logger.debug("result for call %s of another message dropped", call_id)
                continue
            self._awaiting_client.discard(call_id)
            out.extend(self._blocks.close())
            result = response.response
            if response.name == CREDENTIAL_TOOL:  # the user's credential: never sent back
                result = shown_answer(result)
            out.append(result_chunk(call_id, result, denied=call_id in self._denied))
            self._steps.after_tool_results = True

    # -- errors and the finish reason -------------------------------------------------------------

    def _aborted(self) -> list[BaseChunk]:
        """The run was stopped (a stop request, or the client left): an ``abort``, not an
        error, so a client still reading (a resumed stream) ends quietly."""
        logger.info("run aborted code=%s", ABORTED_CODE)
        # ai 7 knows a stopped answer, and does not resend it automatically.
        self._usage.finish_reason = self._client.stopped_reason
        out = self._blocks.close_all()
        out.append(AbortChunk())
        return out

    def _error(self, code: str, message: str | None, *, refused: bool = False) -> list[BaseChunk]:
        if self._errored:
            return []
        self._errored = True
        reference = new_error_reference()
        if refused:  # its WARNING is logged where it was made
            logger.debug("refused run ref=%s code=%s", reference, code)
        else:
            log_error(reference, code, message)
        out = self._blocks.close_all()
        out.append(ErrorChunk(error_text=self._error_text(code, message, reference)))
        return out

    def _error_text(self, code: str | None, message: str | None, reference: str) -> str:
        return describe_error(code, message, detail=self._error_detail, reference=reference)

    def _final_reason(self) -> FinishReason:
        if self._errored:
            return "error"
        if self._awaiting_client:
            return "tool-calls"
        return self._usage.finish_reason or "stop"
