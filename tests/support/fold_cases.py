"""Hand-written responses for the message fold's check against the real clients
(tests/protocol/test_message_fold.py): what the server's own streams never hold, or hold only
in rare orders (open parts at a step's end, ids that change, writes that never come, chunks
only ai 7 knows, partial tool input), each folded by ai 6.0.25, the newest 6.x and ai 7.

A case names the clients it runs on; those it leaves out are where 6.0.25 differs from the
newest 6.x, which the fold does not model (the server cannot tell the two apart)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CLIENTS = ("6.0.25", "6", "7")
NEWER = ("6", "7")  # 6.0.25 differs, see the case
USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
PM = {"google": {"thoughtSignature": "abc"}}
PM2 = {"google": {"other": 1}}


@dataclass
class FoldCase:
    name: str
    chunks: list[dict[str, Any]]
    messages: list[dict[str, Any]] = field(default_factory=lambda: [USER])
    clients: tuple[str, ...] = CLIENTS
    trigger: str = "submit-message"
    message_id: str | None = None


def start(message_id: str | None = "m1", **fields: Any) -> dict[str, Any]:
    chunk: dict[str, Any] = {"type": "start", **fields}
    if message_id is not None:
        chunk["messageId"] = message_id
    return chunk


def text(block: str, *deltas: str, end: bool = True, **fields: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"type": "text-start", "id": block}]
    out += [{"type": "text-delta", "id": block, "delta": d} for d in deltas]
    return out + ([{"type": "text-end", "id": block, **fields}] if end else [])


def reasoning(block: str, *deltas: str, **start_fields: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"type": "reasoning-start", "id": block, **start_fields}]
    out += [{"type": "reasoning-delta", "id": block, "delta": d} for d in deltas]
    return [*out, {"type": "reasoning-end", "id": block}]


def call(call_id: str, name: str, args: Any, **fields: Any) -> list[dict[str, Any]]:
    return [
        {"type": "tool-input-start", "toolCallId": call_id, "toolName": name, **fields},
        {"type": "tool-input-available", "toolCallId": call_id, "toolName": name, "input": args}
        | fields,
    ]


def streamed_call(call_id: str, name: str, *pieces: str, **fields: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"type": "tool-input-start", "toolCallId": call_id, "toolName": name, **fields}
    ]
    return out + [
        {"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": p} for p in pieces
    ]


def output(call_id: str, value: Any, **fields: Any) -> dict[str, Any]:
    return {"type": "tool-output-available", "toolCallId": call_id, "output": value, **fields}


STEP, END_STEP = {"type": "start-step"}, {"type": "finish-step"}
FINISH = {"type": "finish", "finishReason": "stop"}


def waiting_message(state: str, **part: Any) -> dict[str, Any]:
    """An answer whose payment call waits: for approval, or for the page's answer."""
    tool = {"type": "tool-pay", "toolCallId": "c1", "state": state, "input": {"amount": 5}}
    return {
        "id": "m1",
        "role": "assistant",
        "parts": [{"type": "step-start"}, tool | part],
        "metadata": {"usage": {"inputTokens": 3}},
    }


APPROVED = waiting_message(
    "approval-responded", approval={"id": "a1", "approved": True, "reason": "ok"}
)
DENIED = waiting_message("approval-responded", approval={"id": "a1", "approved": False})
OUTPUT_GIVEN = waiting_message("output-available", output={"paid": True})

CASES = [
    FoldCase("plain text", [start(), STEP, *text("t", "Hel", "lo"), END_STEP, FINISH]),
    FoldCase(
        "provider metadata on text and reasoning",
        [
            start(),
            STEP,
            *reasoning("r", "think", providerMetadata=PM),
            {"type": "text-start", "id": "t", "providerMetadata": PM},
            {"type": "text-delta", "id": "t", "delta": "a", "providerMetadata": PM2},
            {"type": "text-end", "id": "t"},
            FINISH,
        ],
        clients=NEWER,  # 6.0.25's reasoning part has no id
    ),
    FoldCase(
        "reasoning", [start(), STEP, *reasoning("r", "a", "b"), *text("t", "c")], clients=NEWER
    ),
    FoldCase("a new message without an id", [start(None), STEP, *text("t", "x"), FINISH]),
    FoldCase("no write at all", [start(None), STEP, END_STEP, FINISH]),
    FoldCase("a step start after the last write", [start(), *text("t", "x"), STEP, FINISH]),
    FoldCase(
        "a step start after the only write", [start(), STEP, {"type": "error", "errorText": "e"}]
    ),
    FoldCase("metadata only at the start", [start(None, messageMetadata={"a": 1}), STEP]),
    FoldCase(
        "metadata merged",
        [
            start(messageMetadata={"usage": {"in": 1, "deep": {"x": 1}}, "list": [1, 2]}),
            {"type": "message-metadata", "messageMetadata": {"usage": {"out": 2}, "list": [3]}},
            {"type": "finish", "messageMetadata": {"usage": {"deep": {"y": 2}}, "n": None}},
        ],
    ),
    FoldCase(
        "metadata that is not an object",
        [start(messageMetadata="s"), {"type": "message-metadata", "messageMetadata": {"k": 1}}],
    ),
    FoldCase(
        "text left open across a step's end",
        [start(), STEP, *text("t", "a", end=False), END_STEP, STEP, *text("u", "b"), FINISH],
    ),
    FoldCase(
        "a delta after its step ended (ai 6 stops reading there, ai 7 goes on)",
        [start(), STEP, *text("t", "a", end=False), END_STEP, *text("t", "b")[1:], FINISH],
    ),
    FoldCase(
        "an error, then chunks the client never reads",
        [
            start(),
            STEP,
            *text("t", "a"),
            {"type": "error", "errorText": "boom"},
            *text("u", "b"),
            FINISH,
        ],
    ),
    FoldCase("abort", [start(), STEP, *text("t", "a", end=False), {"type": "abort"}, FINISH]),
    FoldCase("a delta for no part", [start(), STEP, *text("t", "a")[1:], FINISH]),
    FoldCase("an unknown chunk type", [start(), STEP, {"type": "mystery"}, *text("t", "a")]),
    FoldCase(
        "tools: call, result, error, denial, approval",
        [
            start(),
            STEP,
            *call("c1", "weather", {"city": "Tokyo"}),
            *call("c2", "pay", {"amount": 5}),
            {"type": "tool-approval-request", "approvalId": "a2", "toolCallId": "c2"},
            *call("c3", "fail", {}),
            *call("c4", "deny", {"x": None}),
            output("c1", {"temperature": 18}),
            {"type": "tool-output-error", "toolCallId": "c3", "errorText": "nope"},
            {"type": "tool-output-denied", "toolCallId": "c4"},
            output("c5", 1),
        ],
    ),
    FoldCase(
        "provider-executed call with metadata and a preliminary result",
        [
            start(),
            STEP,
            *call("c1", "search", {"q": "x"}, providerExecuted=True, title="Search"),
            output("c1", {"partial": 1}, preliminary=True),
            output("c1", {"done": 1}, providerExecuted=True),
        ],
    ),
    FoldCase(
        "call and result provider metadata (6.0.25's schema refuses a result's)",
        [
            start(),
            STEP,
            {"type": "tool-input-start", "toolCallId": "c1", "toolName": "t"},
            {
                "type": "tool-input-available",
                "toolCallId": "c1",
                "toolName": "t",
                "input": {},
                "providerMetadata": PM,
            },
            {
                "type": "tool-input-available",
                "toolCallId": "c2",
                "toolName": "t",
                "input": {},
                "providerMetadata": PM,
            },
            output("c2", 1, providerMetadata=PM2),
        ],
        clients=NEWER,
    ),
    FoldCase(
        "dynamic tools",
        [
            start(),
            STEP,
            *call("d1", "mcp_search", {"q": 1}, dynamic=True),
            output("d1", [1, 2], dynamic=True),
            *call("d2", "mcp_fail", {"q": 2}, dynamic=True),
            {"type": "tool-output-error", "toolCallId": "d2", "errorText": "bad"},
            {
                "type": "tool-input-error",
                "toolCallId": "d3",
                "toolName": "mcp_x",
                "input": "{bad",
                "errorText": "parse",
                "dynamic": True,
            },
        ],
    ),
    FoldCase(
        "a call whose input fails to parse (ai 6 keeps it raw, ai 7 as input)",
        [
            start(),
            STEP,
            {"type": "tool-input-start", "toolCallId": "c1", "toolName": "t"},
            {
                "type": "tool-input-error",
                "toolCallId": "c1",
                "toolName": "t",
                "input": "{bad",
                "errorText": "parse",
            },
            {
                "type": "tool-input-error",
                "toolCallId": "c2",
                "toolName": "t",
                "input": {"a": 1},
                "errorText": "invalid",
            },
        ],
    ),
    FoldCase(
        "input streamed and complete",
        [
            start(),
            STEP,
            *streamed_call("c1", "t", '{"a": [1, ', '2], "b": "x"}'),
            *call("c1", "t", {"a": [1, 2], "b": "x"})[1:],
        ],
    ),
    *[
        FoldCase(
            f"input cut while it streams: {piece!r}",
            [start(), STEP, *streamed_call("c1", "t", piece)],
            # 6.0.25 keeps no rawInput while the input streams, and reads no \u escape
            clients=NEWER,
        )
        for piece in (
            '{"a": [1, 2',
            '{"a": tr',
            '{"a": "x\\u00',
            '{"a": -',
            '{"a": 1.5e',
            '[{"k": nul',
            '{"a": [',
            '["a", ',
            '{"a',
            '{"a": "b"}, junk',
            '{"__proto__": {"x": 1}}',
            '{"a": 12, "b": [tru',
            "",
        )
    ],
    FoldCase(
        "input streamed as text (6.0.25's schema refuses inputEncoding)",
        [start(), STEP, *streamed_call("c1", "t", "plain ", "words", inputEncoding="text")],
        clients=NEWER,
    ),
    FoldCase(
        "files and sources",
        [
            start(),
            STEP,
            {"type": "file", "url": "data:image/png;base64,AA==", "mediaType": "image/png"},
            {"type": "source-url", "sourceId": "s1", "url": "https://a.example", "title": "A"},
            {"type": "source-url", "sourceId": "s2", "url": "https://b.example"},
            {
                "type": "source-document",
                "sourceId": "s3",
                "mediaType": "text/plain",
                "title": "Doc",
                "filename": "d.txt",
            },
        ],
    ),
    FoldCase(
        "a file with provider metadata (6.0.25 drops it)",
        [
            start(),
            STEP,
            {
                "type": "file",
                "url": "https://f.example/x.png",
                "mediaType": "image/png",
                "providerMetadata": PM,
            },
        ],
        clients=NEWER,
    ),
    FoldCase(
        "data parts: transient, updated in place, without id",
        [
            start(),
            STEP,
            {"type": "data-progress", "id": "p", "data": {"pct": 10}},
            {"type": "data-notice", "data": "hello", "transient": True},
            {"type": "data-progress", "id": "p", "data": {"pct": 100}},
            {"type": "data-other", "id": "p", "data": 1},
            {"type": "data-log", "data": [1]},
            {"type": "data-log", "data": [2], "transient": False},
            {"type": "data-null", "id": "n", "data": None},
        ],
    ),
    FoldCase(
        "a continued answer after an approval",
        [start(), output("c1", {"paid": True}), STEP, *text("t", "Paid."), FINISH],
        messages=[USER, APPROVED],
        message_id="m1",
    ),
    FoldCase(
        "a continued answer after a denial",
        [start(), {"type": "tool-output-denied", "toolCallId": "c1"}, STEP, *text("t", "No.")],
        messages=[USER, DENIED],
        message_id="m1",
    ),
    FoldCase(
        "a continued answer after the page's output",
        [start(), STEP, *text("t", "Done.")],
        messages=[USER, OUTPUT_GIVEN],
    ),
    FoldCase(
        "a continued answer whose call is handed back (no step between)",
        [start(), *call("c1", "pay", {"amount": 5})[1:], FINISH],
        messages=[USER, APPROVED],
    ),
    FoldCase(
        "a call handed back after a step start (6.0.25 finds it in the whole message)",
        [start(), STEP, *call("c1", "pay", {"amount": 5})[1:], FINISH],
        messages=[USER, APPROVED],
        clients=NEWER,
    ),
    FoldCase(
        "a continued answer that gets another id",
        [start("m2"), STEP, *text("t", "new")],
        messages=[USER, APPROVED],
    ),
    FoldCase(
        "an id that changes after the first write",
        [
            start(None),
            STEP,
            *text("t", "a"),
            start("m9", messageMetadata={"k": 1}),
            *text("u", "b"),
        ],
    ),
    FoldCase(
        "a continued answer whose id changes after a write",
        [start(), *text("t", "a"), start("m9"), *text("u", "b")],
        messages=[USER, APPROVED],
    ),
    FoldCase(
        "an earlier answer continued by its id (6.0.25 always answers the last message)",
        [start(), output("c1", 1), STEP, *text("t", "late")],
        messages=[
            USER,
            APPROVED,
            {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "more"}]},
        ],
        message_id="m1",
        clients=NEWER,
    ),
    FoldCase(
        "a regeneration of an answer still in the list (6.0.25 continues it)",
        [start("m3"), STEP, *text("t", "again")],
        messages=[USER, OUTPUT_GIVEN],
        trigger="regenerate-message",
        clients=NEWER,
    ),
    FoldCase(
        "a tool result for a call of an earlier step",
        [start(), STEP, *call("c1", "t", {}), STEP, *text("t", "x"), output("c1", 2)],
    ),
    FoldCase(
        "what only ai 7 knows",
        [
            start(),
            STEP,
            *text(
                "t",
                "cited",
                citations=[
                    {
                        "source": {
                            "type": "source",
                            "sourceType": "url",
                            "id": "s",
                            "url": "https://c.example",
                        }
                    }
                ],
            ),
            *call("c1", "pay", {"amount": 1}),
            {
                "type": "tool-approval-request",
                "approvalId": "a1",
                "toolCallId": "c1",
                "reason": "why",
                "isAutomatic": True,
                "approvalDescriptor": {"p": 1},
            },
            {
                "type": "tool-approval-response",
                "approvalId": "a1",
                "approved": False,
                "reason": "no",
            },
            {"type": "custom", "kind": "google.thing", "providerMetadata": PM},
            {
                "type": "reasoning-file",
                "url": "data:image/png;base64,AA==",
                "mediaType": "image/png",
            },
            {"type": "steering-message", "id": "s1", "parts": [{"type": "text", "text": "steer"}]},
            STEP,
            *text("u", "dropped"),
            {"type": "reset-step"},
            *text("v", "kept"),
            {"type": "finish", "finishReason": "interrupted"},
        ],
        clients=NEWER,
    ),
    FoldCase(
        "the decision of a continued approval (ai 7)",
        [
            start(),
            {"type": "tool-approval-response", "approvalId": "a1", "approved": True},
            output("c1", 3),
        ],
        messages=[USER, waiting_message("approval-requested", approval={"id": "a1"})],
        clients=NEWER,
    ),
    FoldCase(
        "a finish an ai 6 client refuses",
        [start(), *text("t", "a"), {"type": "finish", "finishReason": "interrupted"}],
    ),
    FoldCase(
        "a reset of an empty step", [start(), STEP, {"type": "reset-step"}, FINISH], clients=("7",)
    ),
]
