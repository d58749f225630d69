"""The recordings a replay serves: read once from a directory, the rule that picks one for a
request, and its chunks as they are sent again.

Which recording answers a request:

- **A new message** (the last message is the user's: a send, an edit, a regenerate): a
  recording of a new message whose last user message has exactly the same text; if none,
  the same text once case, spacing and trailing punctuation are set aside.
- **A continuation** (the last message is the assistant's: approvals, tool outputs): a
  recording that continued the same recorded assistant message with the same answers (each
  tool part's call id, state and decision).
- Among several that fit, those made for the same AI SDK version come first, then the one
  served least often, then the oldest: the same question asked again walks through its
  recordings in order and starts over. Anything else is refused (404) with a list of what
  the directory holds.

Ids: a response keeps its recorded ids, so the client's continuation names the recorded
message and calls and finds its recording. When the client already holds the recorded
message (the same recording replayed again in one chat), the response's message, tool call
and approval ids get a copy suffix (``-r2``, ``-r3``…), which a continuation of that copy
carries and the match sets aside.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.protocol.chunks import AiSdkVersion
from adk_stream_protocol.protocol.clients import client_for, downgraded
from adk_stream_protocol.protocol.parts.text import TextUIPart
from adk_stream_protocol.protocol.ui_messages import ChatRequest, UIMessage

logger = logging.getLogger(__name__)

# The keys holding ids that a copy of a response renames.
_ID_KEYS = ("messageId", "toolCallId", "approvalId")
_COPY = re.compile(r"^(?P<base>.+)-r(?P<copy>[0-9]+)$")
_ANSWERED = frozenset({"approval-responded", "output-available", "output-error", "output-denied"})
# How many recorded messages a refusal lists.
_LISTED = 12

Answers = tuple[tuple[str, str, bool | None], ...]


@dataclass(frozen=True)
class Recording:
    """One recorded response: what it answered, and its chunks with their times (ms)."""

    name: str
    ai_sdk: int
    continues: str | None  # the assistant message id a continuation continued
    prompt: str  # a new message's text
    answers: Answers  # a continuation's answers
    chunks: tuple[tuple[int, dict[str, Any]], ...]


@dataclass(frozen=True)
class Replay:
    """A recording picked for a request, with its chunks as they go to this client."""

    name: str
    chunks: list[tuple[int, dict[str, Any]]]


def load_recordings(directory: Path) -> list[Recording]:
    """Every readable recording in ``directory``, oldest first (the names sort by time). A
    file that is not a recording is skipped with a warning."""
    if not directory.is_dir():
        raise NotADirectoryError(f"no directory of recordings at {directory}")
    recordings = []
    for path in sorted(directory.glob("*.jsonl")):
        try:
            recordings.append(_read(path))
        except (OSError, ValueError, KeyError, TypeError, RequestError) as exc:
            reason = exc.message if isinstance(exc, RequestError) else type(exc).__name__
            logger.warning("replay: skipped %s (not a recording: %s)", path.name, reason)
    logger.info("replay: %d recordings in %s", len(recordings), directory)
    return recordings


def _read(path: Path) -> Recording:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    header = lines[0]
    if header.get("kind") != "request":
        raise ValueError("the first line is not a request")
    try:
        request = ChatRequest.model_validate(header["request"])
    except ValueError:
        raise RequestError(422, "its request is not a chat request") from None
    chunks = tuple(
        (int(line["t"]), dict(line["chunk"])) for line in lines if line["kind"] == "chunk"
    )
    last = request.last_message
    continuation = last.role == "assistant"
    return Recording(
        name=path.name,
        ai_sdk=int(header.get("aiSdk", 6)),
        continues=(request.message_id or last.id) if continuation else None,
        prompt="" if continuation else _text(last),
        answers=_answers(last) if continuation else (),
        chunks=chunks,
    )


class ReplayStore:
    """The recordings of one replay application, and how often each was served."""

    def __init__(self, recordings: list[Recording]) -> None:
        self.recordings = recordings
        self._served: Counter[str] = Counter()

    def pick(self, request: ChatRequest, ai_sdk: AiSdkVersion) -> Replay:
        """The recording that answers ``request``; ``RequestError`` 404 if none does."""
        last = request.last_message
        if last.role == "assistant":
            base, copy = _split_copy(request.message_id or last.id)
            fits = [
                r
                for r in self.recordings
                if r.continues == base and r.answers == _answers(last, strip=True)
            ]
            if not fits:
                raise RequestError(404, self._no_continuation(base))
        else:
            text = _text(last)
            new = [r for r in self.recordings if r.continues is None]
            fits = [r for r in new if r.prompt == text] or [
                r for r in new if _normalised(r.prompt) == _normalised(text)
            ]
            if not fits:
                raise RequestError(404, self._no_message(text))
            copy = 1
        order = {r.name: i for i, r in enumerate(self.recordings)}
        chosen = min(fits, key=lambda r: (r.ai_sdk != ai_sdk, self._served[r.name], order[r.name]))
        self._served[chosen.name] += 1
        if last.role != "assistant":
            held = {m.id for m in request.messages}
            copy = _free_copy(_message_id(chosen), held)
        chunks = [(t, _as_copy(chunk, copy)) for t, chunk in chosen.chunks]
        client = client_for(ai_sdk)  # a recording made for ai 7, sent as this client reads it
        chunks = [(t, c) for t, chunk in chunks if (c := downgraded(chunk, client)) is not None]
        return Replay(chosen.name, chunks)

    def _no_message(self, text: str) -> str:
        prompts = list(dict.fromkeys(r.prompt for r in self.recordings if r.continues is None))
        listed = ", ".join(json.dumps(p, ensure_ascii=False) for p in prompts[:_LISTED])
        more = f" and {len(prompts) - _LISTED} more" if len(prompts) > _LISTED else ""
        return (
            f"no recording answers the message {json.dumps(text, ensure_ascii=False)}; "
            f"the recorded messages are: {listed or 'none'}{more}"
        )

    def _no_continuation(self, message_id: str) -> str:
        recorded = [r.answers for r in self.recordings if r.continues == message_id]
        if not recorded:
            return f"no recording continues the assistant message {message_id!r}"
        shown = "; ".join(_shown_answers(a) for a in recorded[:_LISTED])
        return (
            f"no recording continues the assistant message {message_id!r} with these "
            f"answers; the recorded continuations answer: {shown}"
        )


async def paced(
    chunks: list[tuple[int, dict[str, Any]]], speed: float
) -> AsyncIterator[dict[str, Any]]:
    """The chunks at their recorded times divided by ``speed``; all at once for speed 0."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    for t, chunk in chunks:
        if speed > 0:
            delay = started + t / 1000 / speed - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
        yield chunk


def sse_event(chunk: dict[str, Any]) -> bytes:
    """A chunk as one SSE event, compact as the server's own."""
    return (
        b"data: " + json.dumps(chunk, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"
    )


# -- the rule's pieces ------------------------------------------------------------------------


def _text(message: UIMessage) -> str:
    return "".join(p.text for p in message.parts if isinstance(p, TextUIPart))


def _normalised(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".!?。？！ ")


def _answers(message: UIMessage, *, strip: bool = False) -> Answers:
    return tuple(
        sorted(
            (
                _split_copy(p.tool_call_id)[0] if strip else p.tool_call_id,
                p.state,
                p.approval.approved if p.approval is not None else None,
            )
            for p in message.tool_parts()
            if p.state in _ANSWERED
        )
    )


def _shown_answers(answers: Answers) -> str:
    return ", ".join(
        f"{call} {state}" + ("" if approved is None else f" approved={approved}")
        for call, state, approved in answers
    )


def _split_copy(value: str) -> tuple[str, int]:
    match = _COPY.match(value)
    return (match["base"], int(match["copy"])) if match else (value, 1)


def _message_id(recording: Recording) -> str | None:
    return next((c.get("messageId") for _, c in recording.chunks if c.get("type") == "start"), None)


def _free_copy(message_id: str | None, held: set[str]) -> int:
    """The first copy number whose message id the client does not hold yet."""
    if message_id is None:
        return 1
    return next(k for k in itertools.count(1) if _copied(message_id, k) not in held)


def _copied(value: str, copy: int) -> str:
    return value if copy == 1 else f"{value}-r{copy}"


def _as_copy(chunk: dict[str, Any], copy: int) -> dict[str, Any]:
    if copy == 1:
        return chunk
    return {
        k: _copied(v, copy) if k in _ID_KEYS and isinstance(v, str) else v for k, v in chunk.items()
    }
