"""Fuzzing the request side of both transports (docs/adr/0019): generated input, fixed contracts.

1. hypothesis against the parsers: for any body or frame, ``parse_chat_body``, ``read_frame`` and
   ``parse_frame`` return a checked request or raise ``RequestError`` with a 4xx status, nothing
   else. An accepted request holds exactly the JSON values sent (no ``"yes"`` taken as ``True``),
   within the limits, with no lone surrogate.
2. hypothesis against the app: ``POST /stream`` in-process (ASGI, lifespan entered) never
   answers 5xx, and every 200 is a well-formed stream; ``WS /live`` on real uvicorn (served from
   a thread of this process) answers every frame, is never closed under the client, and leaves
   no response without its ``[DONE]``.
3. schemathesis against the OpenAPI schema the app publishes (in-process): no operation answers
   5xx.

Each test has a fixed example budget so the file stays fast on two cores. Inputs that once
broke something are pinned as explicit examples and run first. No example database is kept:
a failure prints its inputs (``show``) instead.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import logging
import math
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TypeVar, get_args

import httpx
import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, event, example, given, note, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    positive_data_acceptance,
    response_schema_conformance,
)

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.limits import RequestLimits
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.protocol.parts.files import FileUIPart
from adk_stream_protocol.protocol.parts.steering import SteeringMessageUIPart
from adk_stream_protocol.protocol.parts.text import TextUIPart
from adk_stream_protocol.protocol.parts.tools import AnyToolUIPart, ToolState
from adk_stream_protocol.protocol.ui_messages import CHAT_ID_PATTERN, ChatRequest, parse_chat_body
from adk_stream_protocol.server.app import create_app
from adk_stream_protocol.transports.live_frames import parse_frame, read_frame
from tests.support.rig import (
    LiveServer,
    SocketClosed,
    StreamResult,
    app_settings,
    assert_strict_chunk,
    assert_valid_stream,
    assistant_message,
    chat_body,
    serve_in_thread,
    sse_payloads,
    user_message,
)

T = TypeVar("T")
Strategy = st.SearchStrategy

# -- limits ------------------------------------------------------------------------------------

DEFAULT_LIMITS = RequestLimits.from_settings(Settings())
# Small enough that generated requests reach every limit.
SMALL_LIMITS = RequestLimits(
    max_request_bytes=64 * 1024,
    max_message_chars=40,
    max_parts_per_message=4,
    max_added_bytes=64 * 1024,
    max_json_depth=8,
    max_file_bytes=16,
)
# The small limits first: hypothesis draws earlier elements more often, and they reach more.
LIMITS = st.sampled_from([SMALL_LIMITS, DEFAULT_LIMITS])

# -- strategies: JSON and near-JSON --------------------------------------------------------------

# st.text() never draws a lone surrogate (category Cs). A Python str can hold one and a JSON text
# can name one (\ud800), so now and then a string is drawn from characters parsers trip on.
ODD_CHARS = st.sampled_from(
    ["\ud800", "\udbff", "\udc00", "\udfff", *'\x00"\\/\u2028\u2029\ufeff\uffff\U0010ffff']
)


_PLAIN_TEXT = st.text(max_size=24)
_ODD_TEXT = st.lists(st.characters() | ODD_CHARS, max_size=24).map("".join)


@st.composite
def texts(draw: st.DrawFn) -> str:
    return draw(_ODD_TEXT if draw(st.integers(0, 7)) == 7 else _PLAIN_TEXT)


def has_lone_surrogate(text: str) -> bool:
    return any("\ud800" <= char <= "\udfff" for char in text)


TEXT = texts()


def json_values(text: Strategy[str] = TEXT, max_leaves: int = 12) -> Strategy[Any]:
    scalars = st.none() | st.booleans() | st.integers() | st.floats() | text
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
        max_leaves=max_leaves,
    )


JSON_VALUES = json_values()
# For values inside generated requests: smaller, as a request holds many.
_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | TEXT
SMALL_JSON = _SCALARS | st.lists(_SCALARS, max_size=3) | st.dictionaries(TEXT, _SCALARS, max_size=3)

JSON_TOKENS = st.sampled_from(
    [
        *'{}[],:" \n\\',
        *("null", "true", "false", "0", "-0", "01", "1e999", "-1.5e-3", "NaN", "Infinity"),
        *('"type"', '"message"', '"ping"', '"id"', '"messages"', '"parts"', '"text"'),
        *('"approved"', '"approval"', '"role"', '"user"', '"tool-x"', '"state"'),
        *('"\\ud800"', '"\\udc00"', '"\\ud800\\udc00"', '"\\u0000"', '"\\x41"', '"\\u12"'),
        "\ufeff",
    ]
)
TOKEN_SOUP = st.lists(JSON_TOKENS, max_size=40).map("".join)

NESTINGS = [("[", "]", 1), ('{"a":', "}", 1), ('[{"k":', "}]", 2)]


@st.composite
def nested_json(draw: st.DrawFn) -> tuple[str, int]:
    """A value nested some levels deep (around the limits, or thousands of levels), and how
    many levels of arrays and objects it has."""
    opener, closer, levels = draw(st.sampled_from(NESTINGS))
    # At and around both limits on depth (body > messages > message add 3 levels), anywhere
    # below 80 levels, or thousands of levels.
    at_limits = [SMALL_LIMITS.max_json_depth - 3, DEFAULT_LIMITS.max_json_depth - 3]
    count = draw(
        st.sampled_from([n + d for n in at_limits for d in (0, 1)])
        | st.integers(0, 80)
        | st.integers(0, 12_000)
    )
    return opener * count + "0" + closer * count, count * levels


def dumps(value: Any, ascii_only: bool) -> str:
    """JSON text as a client might send it: lone surrogates either as ``\\ud800`` escapes
    (``ascii_only``) or as raw characters, which no UTF-8 encoder can write."""
    return json.dumps(value, ensure_ascii=ascii_only)


@st.composite
def raw_texts(draw: st.DrawFn) -> str:
    """Text that is JSON, almost JSON, or not JSON at all; sometimes cut short."""
    text = draw(
        st.one_of(
            st.builds(dumps, JSON_VALUES, st.booleans()),
            TOKEN_SOUP,
            nested_json().map(lambda nested: nested[0]),
            texts(),
        )
    )
    if draw(st.integers(0, 5)) == 5:
        text = text[: draw(st.integers(0, len(text)))]
    return text


def encoded(text: str, as_bytes: bool) -> bytes | str:
    # surrogatepass: a raw lone surrogate becomes bytes that are not UTF-8 (ED A0 80).
    return text.encode("utf-8", "surrogatepass") if as_bytes else text


# -- strategies: near-valid chat requests and frames ---------------------------------------------

WRONG_KIND = st.sampled_from(
    ["yes", "true", "1", "", 1, 0, -1, 1.0, 2**70, True, False, None, [], {}, ["x"], {"x": 1}]
)
# Decisions as careless clients send them; only True and False are decisions.
APPROVED: Strategy[Any] = st.sampled_from(
    [True, False, None, "yes", "no", "true", "false", "1", "0", 1, 0, 1.0, 0.0, "", [], {}, [True]]
)
NOT_DECISIONS = st.sampled_from(["yes", 1, "true", 0, "false", 1.0, "1", "", [], {}, [True]])
IDS = st.sampled_from(["u-1", "u-2", "a-1", "call-1", "function-call-1", "approval-1"]) | TEXT
CHAT_IDS = st.from_regex(CHAT_ID_PATTERN, fullmatch=True) | st.sampled_from(
    ["", " x", "a/b", "-x", "x" * 129, "chat\n"]
)
INTENTS = st.sampled_from(
    [
        "hello",
        "Send 50 dollars to Hanako",
        "Pay Alice 10 and then Bob 20 euros",
        "What's the weather in Tokyo?",
        "where am I",
        "play music track 2",
        "fail",
        "think step by step",
        "what did I say first",
    ]
)
MESSAGE_TEXTS = INTENTS | TEXT | st.integers(0, 300).map(lambda n: "w" * n)
TOOL_STATES = list(get_args(ToolState))
PART_STATES = st.sampled_from([*TOOL_STATES, "approval_requested", "done", "", "Output-Available"])
TOOL_NAMES = st.sampled_from(
    ["process_payment", "get_weather", "get_location", "change_bgm", "adk_request_confirmation"]
) | st.text(max_size=8)
MEDIA_TYPES = st.sampled_from(
    [
        "image/png",
        "text/plain",
        "application/pdf",
        "audio/wav",
        "application/x-evil",
        "",
        "png",
        "image",  # ai 7: a bare top-level type, narrowed by the data: URL or the bytes
        "image/*",
    ]
)
URLS = st.sampled_from(
    [
        "data:image/png;base64,iVBORw0KGgo=",
        "data:image/png;base64,",
        "data:;base64,QUJD",
        "data:text/plain,hello%20there",
        "data:text/plain;base64,!!!!",
        "data:image/png;base64,QUJD=garbage",
        "data:image/png;base64,Q\u00e9JD",
        "data:,",
        "data:",
        "https://example.com/a.png",
        "javascript:alert(1)",
        "",
    ]
) | st.integers(0, 200).map(lambda n: "data:application/octet-stream;base64," + "QUJD" * n)
UNKNOWN_PART_TYPES = st.sampled_from(["image", "tool", "data", "tool_call", "Text", "", "tool-"])
EXTRA_KEYS = (
    st.sampled_from(["title", "callProviderMetadata", "providerMetadata", "tool_call_id", "x"])
    | TEXT
)


@st.composite
def sometimes_wrong(draw: st.DrawFn, values: Strategy[Any]) -> Any:
    """Mostly a value of the right kind; now and then one of a wrong kind."""
    if draw(st.integers(0, 7)) == 7:
        return draw(WRONG_KIND)
    return draw(values)


@st.composite
def record(
    draw: st.DrawFn,
    required: dict[str, Strategy[Any]],
    optional: dict[str, Strategy[Any]] | None = None,
) -> dict[str, Any]:
    """A JSON object: a required field now and then missing or of a wrong kind, an optional one
    present or not, and sometimes keys the server does not know (newer clients send those)."""
    out: dict[str, Any] = {}
    for key, values in required.items():
        if draw(st.integers(0, 15)) != 15:
            out[key] = draw(sometimes_wrong(values))
    for key, values in (optional or {}).items():
        if draw(st.booleans()):
            out[key] = draw(sometimes_wrong(values))
    if draw(st.integers(0, 3)) == 3:
        for key, value in draw(st.dictionaries(EXTRA_KEYS, SMALL_JSON, max_size=2)).items():
            out.setdefault(key, value)
    return out


APPROVALS = record(
    {"id": IDS},
    {"approved": APPROVED, "reason": TEXT, "requestReason": TEXT, "isAutomatic": st.booleans()},
)
TOOL_FIELDS: dict[str, Strategy[Any]] = {
    "input": SMALL_JSON,
    "output": SMALL_JSON,
    "errorText": TEXT,
    "approval": APPROVALS,
    "providerExecuted": st.booleans(),
    "preliminary": st.booleans(),
}
TEXT_PARTS = record(
    {"type": st.just("text"), "text": MESSAGE_TEXTS},
    {"state": PART_STATES, "citations": st.lists(SMALL_JSON, max_size=2)},
)
FILE_PARTS = record(
    {"type": st.just("file"), "mediaType": MEDIA_TYPES, "url": URLS},
    {"filename": TEXT, "providerReference": st.dictionaries(TEXT, TEXT, max_size=2)},
)
PARTS: Strategy[dict[str, Any]] = st.one_of(
    TEXT_PARTS,
    record({"type": st.just("reasoning"), "text": TEXT}, {"state": PART_STATES}),
    FILE_PARTS,
    # ai 7's parts; a steering message holds text and files only.
    record({"type": st.just("custom"), "kind": TEXT}, {"providerMetadata": SMALL_JSON}),
    record({"type": st.just("reasoning-file"), "mediaType": MEDIA_TYPES, "url": URLS}),
    record(
        {
            "type": st.just("steering-message"),
            "id": IDS,
            "parts": st.lists(
                TEXT_PARTS | FILE_PARTS | record({"type": UNKNOWN_PART_TYPES}), max_size=3
            ),
        }
    ),
    record({"type": st.just("step-start")}),
    record({"type": st.just("source-url"), "sourceId": IDS, "url": URLS}, {"title": TEXT}),
    record(
        {
            "type": st.just("source-document"),
            "sourceId": IDS,
            "mediaType": MEDIA_TYPES,
            "title": TEXT,
        },
        {"filename": TEXT},
    ),
    record(
        {"type": TOOL_NAMES.map("tool-{}".format), "toolCallId": IDS, "state": PART_STATES},
        TOOL_FIELDS,
    ),
    record(
        {
            "type": st.just("dynamic-tool"),
            "toolName": TOOL_NAMES,
            "toolCallId": IDS,
            "state": PART_STATES,
        },
        TOOL_FIELDS,
    ),
    record({"type": st.text(max_size=8).map("data-{}".format)}, {"id": IDS, "data": SMALL_JSON}),
    record({"type": UNKNOWN_PART_TYPES}, {"text": TEXT}),
)
ROLES = st.sampled_from(["user", "user", "user", "assistant", "system", "tool", "User", ""])


@st.composite
def chat_payloads(draw: st.DrawFn, chat_ids: Strategy[Any] = CHAT_IDS) -> dict[str, Any]:
    """A ``DefaultChatTransport`` body, near-valid: the right skeleton, with wrong kinds of value,
    unknown part types, tool parts in any state with any approval, odd data URLs, and now and
    then many messages (no limit counts them: ADR 0069) or more parts than the default
    limits allow."""
    messages = draw(
        st.lists(
            record(
                {"id": IDS, "role": ROLES, "parts": st.lists(PARTS, max_size=5)},
                {"metadata": SMALL_JSON},
            ),
            max_size=4,
        )
    )
    if messages and draw(st.integers(0, 31)) == 31:
        over = draw(st.sampled_from(["messages", "parts"]))
        if over == "messages":
            messages = messages[-1:] * 1_001  # the count the removed limit refused
        elif isinstance(messages[-1].get("parts"), list) and messages[-1]["parts"]:
            parts = messages[-1]["parts"][:1] * (DEFAULT_LIMITS.max_parts_per_message + 1)
            messages[-1] = {**messages[-1], "parts": parts}
    body = draw(
        record(
            {"id": chat_ids, "messages": st.just(messages)},
            {
                "trigger": st.sampled_from(["submit-message", "regenerate-message", "submit"]),
                "messageId": IDS,
            },
        )
    )
    return body


FRESH_IDS = st.uuids().map(lambda u: f"u-{u.hex[:8]}")
PNG_URL = (  # a 1x1 PNG
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
# Parts a user message may hold besides its text: a file, and parts the model never sees.
USER_EXTRA_PARTS = st.sampled_from(
    [
        {"type": "file", "mediaType": "image/png", "url": PNG_URL, "filename": "dot.png"},
        {"type": "file", "mediaType": "text/plain", "url": "data:text/plain,hello%20there"},
        {"type": "step-start"},
        {"type": "data-note", "id": "n-1", "data": {"k": [1, 2]}},
        {"type": "source-url", "sourceId": "s-1", "url": "https://example.com"},
        # ai 7: a file of a bare type, display-only parts, a steering message
        {"type": "file", "mediaType": "image", "url": PNG_URL},
        {"type": "custom", "kind": "openai.thing"},
        {"type": "reasoning-file", "mediaType": "image/png", "url": PNG_URL},
        {"type": "steering-message", "id": "st-1", "parts": [{"type": "text", "text": "and"}]},
    ]
)
_HELLO = [
    {"id": "u-0", "role": "user", "parts": [{"type": "text", "text": "hello"}]},
    {"id": "a-0", "role": "assistant", "parts": [{"type": "text", "text": "Hi."}]},
]
_AGAIN = [
    {"id": "u-00", "role": "user", "parts": [{"type": "text", "text": "hello again"}]},
    {"id": "a-00", "role": "assistant", "parts": [{"type": "text", "text": "Hi again."}]},
]
# What the client sends before the new message: nothing, or earlier turns (four messages go past
# the small limit on messages).
EARLIER_TURNS = st.sampled_from([[], _HELLO[:1], _HELLO, [*_HELLO, *_AGAIN]])


TURN_TEXTS = INTENTS | st.text(min_size=1, max_size=40) | st.integers(1, 300).map(lambda n: "w" * n)
# Valid chat ids (\Z: from_regex lets `$` match before a final newline, which is no valid id).
VALID_CHAT_IDS = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.:-]{0,40}\Z")


@st.composite
def chat_turns(draw: st.DrawFn, chat_ids: Strategy[Any]) -> dict[str, Any]:
    """A body ``DefaultChatTransport`` could send: a new user message (now and then a voice turn,
    which has no text: the words come as audio), an edited one (``messageId``), a regenerate, or
    an answer to an approval request, whose decision is here now and then not a JSON boolean."""
    parts = draw(st.lists(USER_EXTRA_PARTS, max_size=2))
    if draw(st.integers(0, 4)) != 4 or not parts:
        parts.append({"type": "text", "text": draw(TURN_TEXTS)})
    parts = draw(st.permutations(parts))
    # Now and then more parts than a limit allows (step starts, which the model never sees).
    padding = draw(st.sampled_from([0, 0, 0, 0, 4, DEFAULT_LIMITS.max_parts_per_message]))
    parts.extend({"type": "step-start"} for _ in range(padding))
    message_id = draw(FRESH_IDS | st.sampled_from(["u-0", "u-1"]))
    messages = [
        *draw(EARLIER_TURNS),
        {"id": message_id, "role": "user", "parts": parts},
    ]
    body: dict[str, Any] = {"id": draw(chat_ids), "messages": messages, "trigger": "submit-message"}
    mode = draw(st.sampled_from(["new", "answer", "new", "edit", "regenerate"]))
    if mode == "edit":
        body["messageId"] = message_id
    elif mode == "regenerate":
        body["trigger"] = "regenerate-message"
    elif mode == "answer":
        payment = {
            "type": "tool-process_payment",
            "toolCallId": "function-call-1",
            "state": draw(st.sampled_from(["approval-responded", "output-denied"])),
            "input": {"amount": 50, "recipient": "Hanako", "currency": "USD"},
            "approval": {"id": "approval-1", "approved": draw(NOT_DECISIONS | st.booleans())},
        }
        step = {"type": "step-start"}
        messages.append({"id": "a-1", "role": "assistant", "parts": [step, payment]})
        body["messageId"] = "a-1"
    return body


def json_slots(value: Any) -> list[tuple[Any, Any]]:
    """Every place inside a JSON value: (the object or array, its key or index)."""
    slots: list[tuple[Any, Any]] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            items: Any = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            continue
        for key, child in items:
            slots.append((node, key))
            stack.append(child)
    return slots


def retyped(value: Any) -> list[Any]:
    """The same value as other JSON types: what a lax parser would coerce back to it."""
    if isinstance(value, bool):
        return [str(value).lower(), int(value), str(int(value))]
    if isinstance(value, int):
        return [str(value), float(value)]
    if isinstance(value, str):
        return [int(value)] if value.isdecimal() else [[value]]
    return []


@st.composite
def changed_once(draw: st.DrawFn, payloads: Strategy[dict[str, Any]]) -> dict[str, Any]:
    """A valid payload as drawn, or with one change: a value given as another JSON type (``1``
    for ``true``, ``"16000"`` for ``16000``), replaced by a value of a wrong kind, or removed."""
    payload = copy.deepcopy(draw(payloads))
    if not draw(st.booleans()):
        return payload
    # Deepest places first: hypothesis favours the first of a list, and the top-level keys
    # are changed often enough anyway.
    container, key = draw(st.sampled_from(json_slots(payload)[::-1]))
    change = draw(st.sampled_from(["retype", "replace", "remove"]))
    if change == "retype" and retyped(container[key]):
        container[key] = draw(st.sampled_from(retyped(container[key])))
    elif change == "remove" and isinstance(container, dict):
        del container[key]
    else:
        container[key] = draw(WRONG_KIND | TEXT | SMALL_JSON)
    return payload


def chat_requests(
    chat_ids: Strategy[Any], turn_chat_ids: Strategy[str] = VALID_CHAT_IDS
) -> Strategy[dict[str, Any]]:
    """Near-valid bodies of both kinds: valid with at most one change, or built wrong anywhere.
    (hypothesis draws the first of alternatives more often: the ones that get further.)"""
    return changed_once(chat_turns(turn_chat_ids)) | chat_payloads(chat_ids)


AUDIO_CHUNKS = (
    st.binary(max_size=64).map(lambda data: base64.b64encode(data).decode())
    | st.sampled_from(["", "not base64!", "AAA", "AA==", "====", "QUJD\n", "QU JD"])
    | TEXT
)
# Rates a microphone uses, next to the same numbers as strings, floats or booleans.
SAMPLE_RATES = (
    st.sampled_from(
        [16_000, "16000", 8_000, 16_000.0, 48_000, True, 24_000, "8000", 44_100, 7_999, 48_001, 0]
    )
    | st.integers()
)
# Stands for the socket's chat id in generated frames; replaced when sent.
LIVE_CHAT = "fuzz-live-chat"


@st.composite
def message_frames(draw: st.DrawFn, chat_ids: Strategy[Any]) -> dict[str, Any]:
    envelope = draw(record({"type": st.just("message")}, {"version": TEXT, "timestamp": TEXT}))
    return {**draw(chat_requests(chat_ids)), **envelope}


CONTROL_FRAMES: Strategy[dict[str, Any]] = st.one_of(
    record({"type": st.just("audio_chunk"), "chunk": AUDIO_CHUNKS, "sampleRate": SAMPLE_RATES}),
    record({"type": st.just("ping")}, {"timestamp": JSON_VALUES}),
    record({"type": st.just("interrupt")}, {"reason": TEXT}),
    record({"type": st.just("audio_control"), "action": st.sampled_from(["start", "stop", "go"])}),
    record({"type": st.just("tool_result"), "toolCallId": IDS}, {"result": JSON_VALUES}),
    record({"type": st.sampled_from(["Ping", "audio", "pong", "error", "tool-result", ""])}),
)
VALID_CONTROL_FRAMES: Strategy[dict[str, Any]] = st.sampled_from(
    [
        {"type": "audio_chunk", "chunk": "AAAA", "sampleRate": 16_000},
        {"type": "ping", "timestamp": 1},
        {"type": "audio_control", "action": "start"},
        {"type": "tool_result", "toolCallId": "call-1", "result": {"ok": True}},
        {"type": "interrupt", "reason": "user"},
    ]
)
FRAMES = changed_once(VALID_CONTROL_FRAMES) | CONTROL_FRAMES | message_frames(CHAT_IDS)
# For a socket: messages of its own chat, mostly valid, so that turns run.
LIVE_TURNS = changed_once(
    chat_turns(st.just(LIVE_CHAT)).map(lambda body: {"type": "message", "version": "1", **body})
)

# -- oracles -------------------------------------------------------------------------------------


def show(**inputs: Any) -> None:
    """Print a test's inputs if it fails. The schemathesis plugin blanks hypothesis' own listing
    of them: it swaps hypothesis' pretty-printer for one that prints nothing, for speed."""
    for name, value in inputs.items():
        text = repr(value)
        note(f"{name} = {text if len(text) <= 4000 else text[:4000] + ' ...'}")


def outcome(parse: Callable[[], T]) -> T | RequestError:
    """What a parser did: its result, or the ``RequestError`` it raised, which must be a 4xx with
    a message. Any other exception propagates and fails the test."""
    try:
        return parse()
    except RequestError as exc:
        assert 400 <= exc.status < 500, f"status {exc.status}: {exc.message}"
        assert isinstance(exc.message, str) and exc.message
        return exc


def assert_holds_what_was_sent(model: BaseModel, sent: Any, where: str = "body") -> None:
    """Every value the model holds is the JSON value sent, of the same JSON type: nothing was
    coerced (``"yes"`` to ``True``, ``1`` to ``"1"``, ``16000.0`` to ``16000``)."""
    assert isinstance(sent, dict), f"{where}: {sent!r} was taken as {model!r}"
    for name, field in type(model).model_fields.items():
        if name not in model.model_fields_set:
            continue
        key = field.alias if field.alias in sent else name  # pydantic reads the alias first
        assert key in sent, f"{where}.{name} was set without being sent"
        assert_same_json(getattr(model, name), sent[key], f"{where}.{key}")


def assert_same_json(held: Any, sent: Any, where: str) -> None:
    if isinstance(held, BaseModel):
        assert_holds_what_was_sent(held, sent, where)
    elif isinstance(held, list):
        assert isinstance(sent, list) and len(held) == len(sent), f"{where}: {sent!r}"
        for index, (item, sent_item) in enumerate(zip(held, sent, strict=True)):
            assert_same_json(item, sent_item, f"{where}.{index}")
    elif isinstance(held, dict):
        assert isinstance(sent, dict) and held.keys() == sent.keys(), f"{where}: {sent!r}"
        for key, value in held.items():
            assert_same_json(value, sent[key], f"{where}.{key}")
    else:
        assert type(held) is type(sent), f"{where}: {sent!r} was taken as {held!r}"
        if isinstance(sent, str):
            # On the wire a high and a low surrogate escaped in a row (`\ud800\udc00`) are one
            # character (U+10000), as JSON says: that is what a correct parser holds.
            sent = sent.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
        same = held == sent or (isinstance(held, float) and math.isnan(held) and math.isnan(sent))
        assert same, f"{where}: {sent!r} was taken as {held!r}"


def sent_decisions(payload: Any) -> list[Any]:
    """The ``approval.approved`` values of the tool parts in a generated body, where present
    and not null."""
    found: list[Any] = []
    messages = payload.get("messages") if isinstance(payload, dict) else None
    for message in messages if isinstance(messages, list) else []:
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else []:
            kind = part.get("type") if isinstance(part, dict) else None
            approval = part.get("approval") if isinstance(part, dict) else None
            is_tool = isinstance(kind, str) and (kind.startswith("tool-") or kind == "dynamic-tool")
            if is_tool and isinstance(approval, dict) and approval.get("approved") is not None:
                found.append(approval["approved"])
    return found


def file_size(url: str) -> int:
    """The bytes a data: URL carries (0 for base64 that does not decode: refused later)."""
    header, _, data = url.partition(",")
    if not header.endswith(";base64"):
        return len(data)
    try:
        return len(base64.b64decode(data, validate=True))
    except ValueError:  # binascii.Error is one
        return 0


def assert_accepted_request_is_sound(request: ChatRequest, limits: RequestLimits) -> None:
    """Within every limit, every decision a JSON boolean, and no lone surrogate inside."""
    for message in request.messages:
        # A steering message's parts count as the message's own: they are the user's input.
        steered = [
            q for p in message.parts if isinstance(p, SteeringMessageUIPart) for q in p.parts
        ]
        assert len(message.parts) + len(steered) <= limits.max_parts_per_message
        typed = [*(message.parts if message.role == "user" else []), *steered]
        chars = sum(len(p.text) for p in typed if isinstance(p, TextUIPart))
        assert chars <= limits.max_message_chars
        for part in [*message.parts, *steered]:
            if isinstance(part, FileUIPart):
                assert file_size(part.url) <= limits.max_file_bytes
        tool_parts: list[AnyToolUIPart] = message.tool_parts()
        for tool_part in tool_parts:
            if tool_part.approval is not None:
                assert type(tool_part.approval.approved) in (bool, type(None))
    # Everything the request holds can be written as UTF-8 (a lone surrogate cannot).
    json.dumps(request.model_dump(), ensure_ascii=False, default=repr).encode("utf-8")


# -- 1. the parsers --------------------------------------------------------------------------------

# Pure parsing is cheap: many examples. The near-valid ones cost more to generate: fewer.
PURE = settings(max_examples=200, deadline=None, database=None)
PURE_STRUCTURED = settings(PURE, max_examples=100)


@PURE
@given(text=raw_texts(), as_bytes=st.booleans(), limits=LIMITS)
# Pinned inputs: 10,000 levels gave HTTP 500 while bodies were read with json.loads; a lone
# surrogate escaped, and as a raw character of a str (pydantic-core's from_json raises TypeError
# for such a str, found by this fuzz).
@example(text="[" * 10_000 + "]" * 10_000, as_bytes=True, limits=DEFAULT_LIMITS)
@example(text='"\\ud800"', as_bytes=True, limits=DEFAULT_LIMITS)
@example(text='"\ud800"', as_bytes=False, limits=DEFAULT_LIMITS)
def test_any_body_is_read_or_refused_with_a_4xx(
    text: str, as_bytes: bool, limits: RequestLimits
) -> None:
    show(text=text, as_bytes=as_bytes, limits=limits)
    result = outcome(lambda: parse_chat_body(encoded(text, as_bytes), limits))
    if isinstance(result, ChatRequest):
        assert_accepted_request_is_sound(result, limits)


@PURE
@given(data=st.binary(max_size=200), limits=LIMITS)
def test_any_bytes_are_read_or_refused_with_a_4xx(data: bytes, limits: RequestLimits) -> None:
    show(data=data, limits=limits)
    result = outcome(lambda: parse_chat_body(data, limits))
    if isinstance(result, ChatRequest):
        assert_accepted_request_is_sound(result, limits)


@PURE_STRUCTURED
@given(
    payload=chat_requests(CHAT_IDS), ascii_only=st.booleans(), as_bytes=st.booleans(), limits=LIMITS
)
# A str holding a lone surrogate, as this test first found it (TypeError from from_json).
@example(
    payload=chat_body("c", user_message("\ud800", "u-1")),
    ascii_only=False,
    as_bytes=False,
    limits=DEFAULT_LIMITS,
)
def test_a_near_valid_request_is_taken_exactly_as_sent_or_refused(
    payload: dict[str, Any], ascii_only: bool, as_bytes: bool, limits: RequestLimits
) -> None:
    show(payload=payload, ascii_only=ascii_only, as_bytes=as_bytes, limits=limits)
    body = encoded(dumps(payload, ascii_only), as_bytes)
    result = outcome(lambda: parse_chat_body(body, limits))
    if isinstance(result, ChatRequest):
        assert_holds_what_was_sent(result, payload)
        for decision in sent_decisions(payload):
            assert type(decision) is bool, f"the decision {decision!r} was accepted"
        assert_accepted_request_is_sound(result, limits)


def around(limit: int, least: int) -> Strategy[int]:
    """Counts that matter for a limit: small, just under it, at it, just past it."""
    return st.sampled_from([least, limit - 1, limit, limit + 1])


@PURE
@given(
    messages=st.sampled_from([1, 2, 3, 4]),  # counted by no limit (ADR 0069)
    parts=around(SMALL_LIMITS.max_parts_per_message, 2),  # a text and a file at least
    chars=around(SMALL_LIMITS.max_message_chars, 0),
    file_bytes=around(SMALL_LIMITS.max_file_bytes, 0),
    base64_file=st.booleans(),
)
# A file of exactly the limit: its base64 padding counted as data, it was refused as larger.
@example(messages=1, parts=2, chars=2, file_bytes=16, base64_file=True)
def test_a_request_within_the_limits_is_read_and_one_past_a_limit_refused_with_413(
    messages: int, parts: int, chars: int, file_bytes: int, base64_file: bool
) -> None:
    show(messages=messages, parts=parts, chars=chars, file_bytes=file_bytes, base64=base64_file)
    limits = SMALL_LIMITS
    data = b"x" * file_bytes
    url = (
        "data:application/octet-stream;base64," + base64.b64encode(data).decode()
        if base64_file
        else "data:text/plain," + data.decode()
    )
    last = user_message(
        "w" * chars, "u-last", files=[{"type": "file", "mediaType": "x/y", "url": url}]
    )
    last["parts"].extend({"type": "step-start"} for _ in range(parts - 2))
    earlier = [user_message("hi", f"u-{n}") for n in range(messages - 1)]
    result = outcome(lambda: parse_chat_body(json.dumps(chat_body("c", *earlier, last)), limits))
    over = (
        parts > limits.max_parts_per_message
        or chars > limits.max_message_chars
        or file_bytes > limits.max_file_bytes
    )
    if over:
        assert isinstance(result, RequestError) and result.status == 413, result
    else:
        assert isinstance(result, ChatRequest), result


def payment_answer(decision: Any) -> dict[str, Any]:
    """The body that answers an approval request for a payment with ``decision``."""
    payment = {
        "type": "tool-process_payment",
        "toolCallId": "function-call-1",
        "state": "approval-responded",
        "input": {"amount": 50, "recipient": "Hanako", "currency": "USD"},
        "approval": {"id": "approval-1", "approved": decision},
    }
    answer = {"id": "a-1", "role": "assistant", "parts": [{"type": "step-start"}, payment]}
    return chat_body("c", user_message("Send 50 dollars to Hanako", "u-1"), answer, messageId="a-1")


@PURE
@given(decision=APPROVED | JSON_VALUES, in_frame=st.booleans())
def test_a_decision_is_a_json_boolean_or_the_request_is_refused(
    decision: Any, in_frame: bool
) -> None:
    show(decision=decision, in_frame=in_frame)
    body = payment_answer(decision)
    if in_frame:
        frame = outcome(lambda: read_frame(json.dumps({"type": "message", **body}), DEFAULT_LIMITS))
        result = (
            outcome(lambda: parse_frame(frame, DEFAULT_LIMITS))
            if isinstance(frame, dict)
            else frame
        )
    else:
        result = outcome(lambda: parse_chat_body(json.dumps(body), DEFAULT_LIMITS))
    if type(decision) in (bool, type(None)):
        assert isinstance(result, ChatRequest), result
        assert_holds_what_was_sent(result, body)
    else:
        assert isinstance(result, RequestError), f"the decision {decision!r} was accepted"
        # Refused for the decision, or before that for a lone surrogate inside it.
        assert result.status == 422, result.message
        assert "approval.approved" in result.message or "surrogate" in result.message


@PURE
@given(nested=nested_json(), limits=LIMITS)
@example(nested=("[" * 10_000 + "0" + "]" * 10_000, 10_000), limits=DEFAULT_LIMITS)
def test_json_deeper_than_the_limit_is_refused_and_within_it_read(
    nested: tuple[str, int], limits: RequestLimits
) -> None:
    show(nested=nested, limits=limits)
    value, levels = nested
    body = (
        '{"id":"c","messages":[{"id":"m","role":"user","metadata":'
        + value
        + ',"parts":[{"type":"text","text":"hi"}]}]}'
    )
    # body > messages > message > metadata (levels deep); parts reach 5 levels.
    depth = max(5, 3 + levels)
    result = outcome(lambda: parse_chat_body(body, limits))
    if depth > limits.max_json_depth:
        assert isinstance(result, RequestError) and result.status == 422, result
        assert f"nested more than {limits.max_json_depth} levels" in result.message
    else:
        assert isinstance(result, ChatRequest), result


@PURE
@given(text=raw_texts(), limits=LIMITS)
# The same lone surrogate in a frame's text (a Starlette TestClient can send such a str).
@example(text='{"type": "ping", "timestamp": "\ud800"}', limits=DEFAULT_LIMITS)
def test_any_frame_text_is_read_or_refused_with_a_4xx(text: str, limits: RequestLimits) -> None:
    show(text=text, limits=limits)
    frame = outcome(lambda: read_frame(text, limits))
    if isinstance(frame, dict):
        outcome(lambda: parse_frame(frame, limits))


@PURE
@given(frame=FRAMES, ascii_only=st.booleans(), limits=LIMITS)
@example(frame={"type": "ping", "timestamp": "\ud800"}, ascii_only=False, limits=DEFAULT_LIMITS)
# A rate as a string: a lax parser takes it as 16000.
@example(
    frame={"type": "audio_chunk", "chunk": "AAAA", "sampleRate": "16000"},
    ascii_only=True,
    limits=DEFAULT_LIMITS,
)
def test_a_near_valid_frame_is_taken_exactly_as_sent_or_refused(
    frame: dict[str, Any], ascii_only: bool, limits: RequestLimits
) -> None:
    show(frame=frame, ascii_only=ascii_only, limits=limits)
    text = dumps(frame, ascii_only)
    raw = outcome(lambda: read_frame(text, limits))
    if isinstance(raw, RequestError):
        return
    result = outcome(lambda: parse_frame(raw, limits))
    if isinstance(result, ChatRequest):
        body = {k: v for k, v in frame.items() if k not in ("type", "version", "timestamp")}
        assert_holds_what_was_sent(result, body)
        for decision in sent_decisions(body):
            assert type(decision) is bool, f"the decision {decision!r} was accepted"
        assert_accepted_request_is_sound(result, limits)
    elif isinstance(result, BaseModel):
        assert_holds_what_was_sent(result, frame)


# -- 2a. POST /stream, in-process ------------------------------------------------------------------

# Seconds one request may take in-process, and one /live answer on the real server (the offline
# model answers in well under a second): past that it counts as a hang.
REQUEST_TIMEOUT = 20.0
LIVE_TIMEOUT = 10.0
# The statuses POST /stream documents (stream.py `_openapi`).
DOCUMENTED_STATUSES = {200, 408, 409, 413, 415, 422, 503}
# The only error a 200 response may carry: the offline model's deliberate failure ("fail").
# Anything else in an error chunk is an exception inside the run (error_detail names it).
DEMO_FAILURE = "DEMO_MODEL_FAILURE: "
WALLET = "demo:wallet_balance"


class AppOnItsOwnLoop:
    """The app with its lifespan entered (``ASGITransport`` does not run it), on an event loop
    in a thread of its own, so that every call waits with a deadline: a request that hangs
    fails the test instead of blocking the run."""

    def __init__(self, workdir: Path) -> None:
        self.app = create_app(
            settings=Settings(
                model="offline-demo",
                session_store=f"sqlite:///{workdir / 'sessions.db'}",
                playground_dir=None,
                error_detail=True,
            )
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fuzz-app", daemon=True)
        self._stack = AsyncExitStack()
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://127.0.0.1"
        )

    def __enter__(self) -> AppOnItsOwnLoop:
        self._thread.start()
        self.run(self._stack.enter_async_context(self.app.router.lifespan_context(self.app)))
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.run(self.client.aclose())
            self.run(self._stack.aclose())
            self.run(self._cancel_the_rest())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self._loop.close()

    @staticmethod
    async def _cancel_the_rest() -> None:
        # Whatever a request left running (a stream's listener, a turn's timers).
        rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def run(self, work: Coroutine[Any, Any, T], timeout: float = REQUEST_TIMEOUT) -> T:
        try:
            return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout)
        except TimeoutError:
            raise AssertionError(f"no answer within {timeout} s: the app hangs") from None

    def post(self, body: bytes, content_type: str = "application/json") -> httpx.Response:
        return self.run(
            self.client.post(
                "/stream", content=body, headers={"content-type": content_type}, timeout=None
            )
        )

    def state(self, chat_id: str) -> dict[str, Any]:
        async def read() -> dict[str, Any]:
            sessions = self.app.state.bridge.sessions
            session = await sessions.service.get_session(
                app_name=sessions.app_name, user_id="local-user", session_id=chat_id
            )
            return dict(session.state) if session is not None else {}

        return self.run(read())


@pytest.fixture(scope="module")
def stream_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppOnItsOwnLoop]:
    with AppOnItsOwnLoop(tmp_path_factory.mktemp("fuzz-stream")) as app:
        yield app


def stream_result(response: httpx.Response) -> StreamResult:
    payloads = sse_payloads(response.text)
    chunks = [json.loads(p) for p in payloads if p != "[DONE]"]
    return StreamResult(response.status_code, response.headers, response.text, payloads, chunks)


def assert_answered_well(response: httpx.Response) -> StreamResult | None:
    """No 5xx; a refusal is a documented status with a sentence; a 200 is a well-formed stream
    whose only error is the offline model's deliberate one."""
    status = response.status_code
    event(f"status {status}")  # --hypothesis-show-statistics tells what the examples reached
    assert status < 500, f"{status}: {response.text[:500]}"
    assert status in DOCUMENTED_STATUSES, f"{status}: {response.text[:500]}"
    if status != 200:
        detail = response.json()["detail"]
        assert isinstance(detail, str) and detail
        return None
    assert response.headers["content-type"].startswith("text/event-stream")
    result = stream_result(response)
    assert_valid_stream(result)
    for error in result.of_type("error"):
        assert error["errorText"].startswith(DEMO_FAILURE), error
    return result


CONTENT_TYPES = st.sampled_from(
    [
        *["application/json"] * 6,
        "application/json; charset=utf-8",
        "Application/JSON",
        "text/plain",
        "",
    ]
)
# A few chats, so that requests meet the histories earlier examples left.
STREAM_CHATS = st.sampled_from(["fuzz-a", "fuzz-b", "fuzz-c"]) | CHAT_IDS


APP_SETTINGS = settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@APP_SETTINGS
@given(
    body=st.one_of(
        st.builds(dumps, chat_payloads(STREAM_CHATS), st.booleans()).map(
            lambda text: text.encode("utf-8", "surrogatepass")
        ),
        raw_texts().map(lambda text: text.encode("utf-8", "surrogatepass")),
        st.binary(max_size=100),
    ),
    content_type=CONTENT_TYPES,
)
# Once HTTP 500: the body was read with json.loads, which recursed until RecursionError.
@example(body=b"[" * 10_000 + b"]" * 10_000, content_type="application/json")
def test_stream_never_answers_5xx_to_any_body(
    stream_app: AppOnItsOwnLoop, body: bytes, content_type: str
) -> None:
    show(body=body, content_type=content_type)
    assert_answered_well(stream_app.post(body, content_type))


@APP_SETTINGS
@given(body=changed_once(chat_turns(STREAM_CHATS)))
def test_a_turn_changed_in_one_place_is_streamed_whole_or_refused_never_5xx(
    stream_app: AppOnItsOwnLoop, body: dict[str, Any]
) -> None:
    show(body=body)
    response = stream_app.post(json.dumps(body).encode())
    assert_answered_well(response)
    if any(type(decision) is not bool for decision in sent_decisions(body)):
        assert response.status_code == 422, "a decision that is no JSON boolean was not refused"


MISSING = object()


@settings(max_examples=20, deadline=None, database=None)
@given(
    approved=APPROVED | st.just(MISSING),
    state=PART_STATES,
    other_approval_id=st.booleans(),
)
def test_an_answer_to_a_real_approval_runs_the_payment_only_on_a_json_true(
    stream_app: AppOnItsOwnLoop, approved: Any, state: str, other_approval_id: bool
) -> None:
    show(approved=approved, state=state, other_approval_id=other_approval_id)
    chat_id = f"fuzz-pay-{uuid.uuid4().hex[:12]}"
    ask = user_message("Send 50 dollars to Hanako", "u-1")
    first = assert_answered_well(stream_app.post(json.dumps(chat_body(chat_id, ask)).encode()))
    assert first is not None and first.of_type("tool-approval-request"), first
    message = assistant_message(first)
    (part,) = [p for p in message["parts"] if p.get("approval")]
    part["state"] = state
    if other_approval_id:
        part["approval"]["id"] = "approval-of-nothing"
    if approved is not MISSING:
        part["approval"]["approved"] = approved
    answer = chat_body(chat_id, ask, message, messageId=message["id"])
    response = stream_app.post(json.dumps(answer).encode())
    assert_answered_well(response)
    if approved is not MISSING and type(approved) not in (bool, type(None)):
        assert response.status_code == 422, f"the decision {approved!r} was not refused"
    if approved is not True:
        assert stream_app.state(chat_id).get(WALLET, 1000) == 1000, f"paid on {approved!r}"


# -- 2b. WS /live, on the wire ----------------------------------------------------------------

# The app's API docs on (schemathesis reads /openapi.json) and error details shown (an exception
# inside a run is told apart from the demo model's deliberate failure). No playground: the API
# alone, the same whether or not the playground is built.
FUZZ_SETTINGS: dict[str, Any] = {"api_docs": True, "error_detail": True, "playground_dir": None}


class LogTail(logging.Handler):
    """What the app logged, kept to show a failing example's chat."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Real uvicorn, not Starlette's TestClient: the test client hands the app a frame the
    moment it is sent, which turns a race in /live (a message that lands while an interrupted
    turn is about to ask for an approval waits 10 s for that turn to end) from rare into
    nearly every example that meets it, hiding what else the examples would find."""
    with serve_in_thread(tmp_path_factory.mktemp("fuzz-live"), **FUZZ_SETTINGS) as server:
        yield server


@pytest.fixture(scope="module")
def log_tail() -> Iterator[LogTail]:
    logger = logging.getLogger("adk_stream_protocol")
    handler, level = LogTail(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


# Shrinking would rerun a hanging sequence many times, each waiting LIVE_TIMEOUT: the failing
# sequence is reported as drawn instead.
LIVE_FUZZING = settings(
    max_examples=25,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class LiveProbe:
    """A /live socket under fuzzing. After each frame it sends a ping and reads up to its pong,
    checking every frame on the way: controls are pongs or errors (never the answer to an
    exception of ours), and each response is a whole, well-formed stream ending in [DONE]."""

    def __init__(self, server: LiveServer, log: LogTail) -> None:
        self.log = log
        self.chat_id = f"fuzz-live-{uuid.uuid4().hex[:12]}"
        self.ws = server.connect(f"/live?chatId={self.chat_id}", max_size=None)
        self.open: list[str] | None = None  # frames of the response still streaming
        self.responses: list[StreamResult] = []
        self._checkpoints = 0

    def send(self, text: str) -> None:
        self.ws.send(text.replace(LIVE_CHAT, self.chat_id))

    def checkpoint(self) -> None:
        """Ping, and read until its pong: the socket still answers."""
        self._checkpoints += 1
        stamp = f"fuzz-checkpoint-{self._checkpoints}"
        self.ws.send(json.dumps({"type": "ping", "timestamp": stamp}))
        while (control := self._next_control()) != {"type": "pong", "timestamp": stamp}:
            assert control.get("type") in ("pong", "error"), control

    def next_response(self) -> StreamResult:
        """Read until the next response ends."""
        count = len(self.responses)
        while len(self.responses) == count:
            self._next_control(stop_after_response=True)
        return self.responses[-1]

    def close(self) -> None:
        self.ws.close()

    def _next_control(self, *, stop_after_response: bool = False) -> dict[str, Any]:
        while True:
            frame = self._receive()
            if not frame.startswith("data: "):
                control: dict[str, Any] = json.loads(frame)
                if control.get("type") == "error":
                    message = control.get("message")
                    assert isinstance(message, str) and message, control
                    assert not message.startswith("the server could not handle"), (
                        f"{message}\n{self._log_tail()}"
                    )
                return control
            assert frame.endswith("\n\n"), f"not one whole SSE event: {frame!r}"
            self.open = [*(self.open or []), frame]
            if frame == "data: [DONE]\n\n":
                self._response_ended()
                if stop_after_response:
                    return {}

    def _response_ended(self) -> None:
        body, self.open = "".join(self.open or []), None
        payloads = sse_payloads(body)
        chunks = [json.loads(p) for p in payloads if p != "[DONE]"]
        result = StreamResult(200, httpx.Headers(), body, payloads, chunks)
        for chunk in chunks:
            assert_strict_chunk(chunk)
        if chunks and chunks[0]["type"] == "start":
            assert_valid_stream(result)
            for error in result.of_type("error"):
                assert error["errorText"].startswith(DEMO_FAILURE), f"{error}\n{self._log_tail()}"
        else:  # a refused request: one error chunk, then [DONE]
            assert result.types() == ["error"], result.types()
        self.responses.append(result)

    def _receive(self) -> str:
        try:
            frame = self.ws.recv(timeout=LIVE_TIMEOUT)
        except TimeoutError:
            raise AssertionError(
                f"no answer within {LIVE_TIMEOUT} s; open response: {self.open}\n{self._log_tail()}"
            ) from None
        except SocketClosed as exc:
            raise AssertionError(
                f"the server closed the socket: {exc}\n{self._log_tail()}"
            ) from None
        return frame

    def _log_tail(self) -> str:
        lines = [line for line in self.log.lines if self.chat_id in line]
        return "app log of this chat:\n" + "\n".join(lines[-15:])


VOICE_TURN = json.dumps(
    {
        "type": "message",
        "id": LIVE_CHAT,
        "messages": [{"id": "u-voice", "role": "user", "parts": [{"type": "step-start"}]}],
    }
)


@LIVE_FUZZING
@given(
    frames=st.lists(
        st.one_of(
            st.builds(dumps, LIVE_TURNS, st.just(True)),
            st.builds(dumps, CONTROL_FRAMES, st.just(True)),
            st.builds(dumps, message_frames(st.just(LIVE_CHAT) | CHAT_IDS), st.just(True)),
            # A client cannot send a lone surrogate (it is no UTF-8): only its escape, above.
            raw_texts().filter(lambda text: not has_lone_surrogate(text)),
        ),
        min_size=1,
        max_size=4,
    )
)
# Once closed the socket: a frame nested 10,000 levels (json.loads recursed).
@example(frames=["[" * 10_000 + "]" * 10_000])
@example(frames=[VOICE_TURN])
def test_live_answers_every_frame_and_leaves_no_response_open(
    fuzz_server: LiveServer, log_tail: LogTail, frames: list[str]
) -> None:
    show(frames=frames)
    probe = LiveProbe(fuzz_server, log_tail)
    try:
        for frame in frames:
            probe.send(frame)
            probe.checkpoint()
        if probe.open is not None:  # what a client's stop() does
            probe.send('{"type": "interrupt"}')
            probe.checkpoint()
            assert probe.open is None, "an interrupt left the response without its [DONE]"
        # The socket still serves a whole turn.
        probe.send(
            json.dumps(
                {
                    "type": "message",
                    **chat_body(probe.chat_id, user_message("final check", "u-final-check")),
                }
            )
        )
        final = probe.next_response()
        assert final.types()[0] == "start" and "final check" in final.text(), final.types()
        event(f"{len(probe.responses) - 1} responses before the final check")
    finally:
        probe.close()


# -- 2c. WS /live in ai 7's protocol, on real uvicorn ---------------------------------------------

# Stands for the probe's chat id in generated frames; replaced when sent.
V7_CHAT = "fuzz-v7-chat"
# requestIds as a careless client might send them; the valid ones are drawn fresh per frame.
BAD_REQUEST_IDS = st.sampled_from([None, 1, "", ["r"], {"r": 1}, "r" * 129, True])


@st.composite
def v7_frames(draw: st.DrawFn) -> dict[str, Any]:
    """A frame of ai 7's transport, near-valid (at most one change, never to its requestId),
    and now and then with a requestId no request can have."""
    kind = draw(st.sampled_from(["send", "send", "resume", "abort"]))
    if kind == "send":
        body = draw(chat_turns(st.just(V7_CHAT)))
        frame: dict[str, Any] = {
            "type": "send",
            "id": body.pop("id"),
            "trigger": body.pop("trigger"),
            "messages": body.pop("messages"),
            "headers": {},
            "body": body,  # messageId, when drawn, travels in the body: a near miss
        }
        if "messageId" in body and draw(st.booleans()):
            frame["messageId"] = body.pop("messageId")
    elif kind == "resume":
        frame = {"type": "resume", "id": draw(st.just(V7_CHAT) | CHAT_IDS), "headers": {}}
        frame["body"] = {}
        if draw(st.booleans()):
            frame["lastSequence"] = draw(st.integers(-2, 40))
    else:
        frame = {"type": "abort"}
    frame = draw(changed_once(st.just(frame)))
    request_id: Any = f"r-{uuid.uuid4().hex[:12]}"
    if draw(st.integers(0, 9)) == 0:
        request_id = draw(BAD_REQUEST_IDS)
    if request_id is not None:
        frame["requestId"] = request_id
    return frame


def names_a_request(text: str, limits: RequestLimits) -> bool:
    """Whether the server can tell which request a frame is for (else it must close)."""
    try:
        frame = read_frame(text, limits)
    except RequestError:
        return False
    request_id = frame.get("requestId")
    return isinstance(request_id, str) and 0 < len(request_id) <= 128


class V7Probe:
    """A socket of ai 7's protocol under fuzzing. After each frame it resumes a chat that has
    nothing running and reads up to that request's ``no-active``, checking every frame on the
    way: each names a request, chunks are numbered from 0 without a gap, each response is
    whole and well formed (for ai 7), and an ``error`` is never an exception of ours."""

    def __init__(self, server: LiveServer, log: LogTail) -> None:
        self.log = log
        self.chat_id = f"fuzz-v7-{uuid.uuid4().hex[:12]}"
        self.ws = server.connect("/live", max_size=None)
        self.requests: dict[str, list[dict[str, Any]]] = {}
        self.ended: set[str] = set()
        self._checkpoints = 0

    def send(self, text: str) -> None:
        self.ws.send(text.replace(V7_CHAT, self.chat_id))

    def checkpoint(self) -> None:
        self._checkpoints += 1
        request_id = f"checkpoint-{self._checkpoints}"
        nothing = f"{self.chat_id}-idle"
        self.send(
            json.dumps(
                {
                    "type": "resume",
                    "requestId": request_id,
                    "id": nothing,
                    "headers": {},
                    "body": {},
                }
            )
        )
        self.until_ended(request_id)
        assert [f["type"] for f in self.requests[request_id]] == ["no-active"]

    def until_ended(self, request_id: str) -> list[dict[str, Any]]:
        while request_id not in self.ended:
            self._receive()
        return self.requests[request_id]

    def close(self) -> None:
        self.ws.close()

    def _receive(self) -> None:
        try:
            text = self.ws.recv(timeout=LIVE_TIMEOUT)
        except TimeoutError:
            raise AssertionError(f"no answer within {LIVE_TIMEOUT} s\n{self._log_tail()}") from None
        frame = json.loads(text)
        request_id = frame.get("requestId")
        assert isinstance(request_id, str), f"a frame that names no request: {frame}"
        assert request_id not in self.ended, f"a frame after the request ended: {frame}"
        frames = self.requests.setdefault(request_id, [])
        frames.append(frame)
        kind = frame["type"]
        if kind == "chunk":
            assert frame["sequence"] == sum(f["type"] == "chunk" for f in frames) - 1, frames
            assert_strict_chunk(frame["chunk"], ai_sdk=7)
        elif kind == "error":
            assert set(frame) == {"type", "requestId", "errorText"}, frame
            assert isinstance(frame["errorText"], str) and frame["errorText"], frame
            assert "could not handle" not in frame["errorText"], self._log_tail()
        else:
            assert kind in ("start", "end", "no-active") and set(frame) == {"type", "requestId"}
        if kind in ("end", "error", "no-active"):
            self.ended.add(request_id)
        if kind == "end":
            chunks = [f["chunk"] for f in frames if f["type"] == "chunk"]
            payloads = [*(json.dumps(c) for c in chunks), "[DONE]"]
            body = "".join(f"data: {p}\n\n" for p in payloads)
            assert_valid_stream(StreamResult(200, httpx.Headers(), body, payloads, chunks), 7)
            for error in [c for c in chunks if c["type"] == "error"]:
                assert error["errorText"].startswith(DEMO_FAILURE), f"{error}\n{self._log_tail()}"

    def _log_tail(self) -> str:
        lines = [line for line in self.log.lines if self.chat_id in line]
        return "app log of this chat:\n" + "\n".join(lines[-15:])


@LIVE_FUZZING
@given(
    frames=st.lists(
        st.builds(dumps, v7_frames(), st.just(True))
        | raw_texts().filter(lambda text: not has_lone_surrogate(text)),
        min_size=1,
        max_size=4,
    )
)
@example(frames=["[" * 10_000 + "]" * 10_000])
@example(frames=['{"type": ["send"], "requestId": "r-1"}'])
def test_live_ai7_names_the_request_of_every_answer_or_closes_with_a_reason(
    fuzz_server: LiveServer, log_tail: LogTail, frames: list[str]
) -> None:
    show(frames=frames)
    probe = V7Probe(fuzz_server, log_tail)
    try:
        for frame in frames:
            probe.send(frame)
            try:
                probe.checkpoint()
            except SocketClosed as closed:
                assert not names_a_request(frame, DEFAULT_LIMITS), f"closed for {frame!r}: {closed}"
                assert closed.code in (4400, 1009) and closed.reason, closed
                probe.close()
                probe = V7Probe(fuzz_server, log_tail)
        # Every request that the server took ends; then the socket serves a whole turn.
        for request_id, answered in list(probe.requests.items()):
            if answered and answered[0]["type"] != "no-active":
                probe.until_ended(request_id)
        final = {
            "type": "send",
            "requestId": "final-check",
            **chat_body(probe.chat_id, user_message("final check", "u-final-check")),
            "headers": {},
            "body": {},
        }
        probe.ws.send(json.dumps(final))
        answer = [f["chunk"] for f in probe.until_ended("final-check") if f["type"] == "chunk"]
        text = "".join(c.get("delta", "") for c in answer if c["type"] == "text-delta")
        assert answer and answer[0]["type"] == "start" and "final check" in text, answer
    finally:
        probe.close()


# -- 3. schemathesis against the published OpenAPI schema ----------------------------------------

# The schema as the app publishes it: create_app builds the same document without starting
# anything (the fixture checks that the app serves exactly this). Loading it lazily from the
# app (schemathesis.pytest.from_fixture) fails on pytest 9, whose items have no `_nodeid`
# attribute any more.
OPENAPI = create_app(settings=Settings(api_docs=True, playground_dir=None)).openapi()
API_BASE_URL = "http://localhost"
API = schemathesis.openapi.from_dict(
    OPENAPI,
    # Explicit, so that no schemathesis.toml found on the way up changes what runs.
    config=SchemathesisConfig(),
)


@pytest.fixture(scope="module")
def api_app(tmp_path_factory: pytest.TempPathFactory) -> FastAPI:
    """The app schemathesis calls in-process. Schemathesis enters its lifespan itself (once,
    until the end of the run), so this app is no other fixture's."""
    app = create_app(settings=app_settings(tmp_path_factory.mktemp("fuzz-api"), **FUZZ_SETTINGS))
    # Without the lifespan: the document needs nothing started.
    served = TestClient(app, base_url=API_BASE_URL).get("/openapi.json")
    assert served.json() == OPENAPI
    return app


# Besides these examples, schemathesis' coverage phase sends the cases the schema implies (each
# field missing, of another type, at its bounds; undeclared methods): some 450 quick requests.
@API.parametrize()
@settings(max_examples=15, deadline=None, database=None)
def test_no_operation_answers_5xx(case: schemathesis.Case[Any], api_app: FastAPI) -> None:
    # Every default check runs, not_a_server_error first among them, except two that judge the
    # schema rather than the server: response_schema_conformance validates each SSE event of a
    # 200 as an object against the declared `string` body, and positive_data_acceptance expects
    # 2xx for any body the JSON schema allows, which cannot say "a user message needs text" or
    # "an approval must answer a pending one" (those are 409 and 422 by design).
    case.call_and_validate(
        app=api_app,
        base_url=API_BASE_URL,  # a host the app trusts (schemathesis' own is `testserver`)
        excluded_checks=[response_schema_conformance, positive_data_acceptance],
        timeout=REQUEST_TIMEOUT,
    )
