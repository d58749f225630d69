"""How the tool chunks of a response change the response message's tool parts, as the AI SDK
client's ``processUIMessageStream`` does (``updateToolPart`` / ``updateDynamicToolPart``): the
fold of the tool kind (``tools.py``).

A call's part is ``tool-<name>`` (or ``dynamic-tool`` with ``toolName``), found in the
current step first. Undefined fields leave no key: a part's JSON holds only what was set.
Where the clients differ (``tool-input-error``'s input, the approval's ``requestReason`` and
``isAutomatic``, a partial input's reading) the client's table says (``clients.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adk_stream_protocol.protocol.clients import AiSdkClient
from adk_stream_protocol.protocol.partial_json import NO_VALUE, parse_partial_json
from adk_stream_protocol.protocol.parts.base import (
    ABSENT,
    Part,
    Refused,
    chunk_id,
    given,
    put,
    step_parts,
)

_RESULT_STATES = ("output-available", "output-error")


@dataclass
class PartialCall:
    """A call whose input is still streaming (``tool-input-start`` until it is complete)."""

    tool_name: str
    dynamic: bool
    text: str = ""
    input_encoding: Any = ABSENT
    title: Any = ABSENT
    tool_metadata: Any = ABSENT


def is_tool_part(part: Mapping[str, Any]) -> bool:
    kind = str(part.get("type", ""))
    return kind.startswith("tool-") or kind == "dynamic-tool"


def _pick(chunk: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    """The chunk's fields by name, an absent one as ``ABSENT``."""
    return {key: chunk.get(key, ABSENT) for key in keys}


def _tool_name(part: Mapping[str, Any]) -> Any:
    if part["type"] == "dynamic-tool":
        return part.get("toolName", ABSENT)
    return "-".join(part["type"].split("-")[1:])


class ToolParts:
    """The tool parts of one response message."""

    def __init__(self, message: Part, client: AiSdkClient) -> None:
        self.message = message
        self.client = client
        self.partial_calls: dict[str, PartialCall] = {}
        # A continued message's calls still streaming their input go on streaming it.
        for part in step_parts(message):
            if is_tool_part(part) and part.get("state") == "input-streaming":
                self.partial_calls[part.get("toolCallId", "")] = PartialCall(
                    tool_name=_tool_name(part),
                    dynamic=part["type"] == "dynamic-tool",
                    text=part["rawInput"] if given(part.get("rawInput")) else "",
                    input_encoding=part.get("inputEncoding", ABSENT),
                    title=part.get("title", ABSENT),
                    tool_metadata=part.get("toolMetadata", ABSENT),
                )

    def apply(self, chunk: Mapping[str, Any]) -> None:
        kind = chunk["type"]
        if kind == "tool-approval-response":
            self._approval_response(chunk)
            return
        call_id = chunk_id(chunk, "toolCallId")
        if kind == "tool-input-start":
            self.partial_calls[call_id] = PartialCall(
                tool_name=chunk.get("toolName", ""),
                dynamic=bool(chunk.get("dynamic")),
                input_encoding=chunk.get("inputEncoding", ABSENT),
                title=chunk.get("title", ABSENT),
                tool_metadata=chunk.get("toolMetadata", ABSENT),
            )
            fields = _pick(chunk, "toolName", "inputEncoding", "providerExecuted", "title")
            fields.update(_pick(chunk, "toolMetadata", "providerMetadata"), input=ABSENT)
            self._update(call_id, "input-streaming", fields, dynamic=bool(chunk.get("dynamic")))
        elif kind == "tool-input-delta":
            self._input_delta(call_id, chunk.get("inputTextDelta", ""))
        elif kind == "tool-input-available":
            fields = _pick(chunk, "toolName", "input", "providerExecuted", "providerMetadata")
            fields.update(_pick(chunk, "title", "toolMetadata"))
            self._update(call_id, "input-available", fields, dynamic=bool(chunk.get("dynamic")))
        elif kind == "tool-input-error":
            self._input_error(call_id, chunk)
        elif kind == "tool-approval-request":
            self._approval_request(self.invocation(call_id), chunk)
        elif kind == "tool-output-denied":
            self.invocation(call_id)["state"] = "output-denied"
        else:  # tool-output-available / tool-output-error
            self._result(self.invocation(call_id), chunk)

    def invocation(self, call_id: Any) -> Part:
        """``getToolInvocation``: the call's part in the current step, else the last in the
        message; the client stops reading when there is none."""
        for part in step_parts(self.message):
            if is_tool_part(part) and part.get("toolCallId") == call_id:
                return part
        parts: list[Part] = self.message["parts"]
        for part in reversed(parts):
            if is_tool_part(part) and part.get("toolCallId") == call_id:
                return part
        raise Refused(f"no tool invocation found for tool call {call_id!r}")

    # -- the chunks --------------------------------------------------------------------------

    def _input_delta(self, call_id: Any, delta: str) -> None:
        call = self.partial_calls.get(call_id)
        if call is None:
            raise Refused(f"tool-input-delta for no streaming call {call_id!r}")
        call.text += delta
        if call.input_encoding == "text":
            value: Any = call.text
        else:
            value = parse_partial_json(call.text, self.client)
        fields = {
            "toolName": call.tool_name,
            "inputEncoding": call.input_encoding,
            "input": ABSENT if value is NO_VALUE else value,
            "rawInput": call.text,
            "title": call.title,
            "toolMetadata": call.tool_metadata,
        }
        self._update(call_id, "input-streaming", fields, dynamic=call.dynamic)

    def _input_error(self, call_id: Any, chunk: Mapping[str, Any]) -> None:
        existing = next(
            (
                p
                for p in step_parts(self.message)
                if is_tool_part(p) and p.get("toolCallId") == call_id
            ),
            None,
        )
        dynamic = existing["type"] == "dynamic-tool" if existing else bool(chunk.get("dynamic"))
        fields = _pick(chunk, "toolName", "errorText", "providerExecuted", "providerMetadata")
        fields["toolMetadata"] = chunk.get("toolMetadata", ABSENT)
        if dynamic or not self.client.input_error_raw_input:
            fields["input"] = chunk.get("input", ABSENT)
        else:  # the input that failed to parse is kept raw
            fields.update(input=ABSENT, rawInput=chunk.get("input", ABSENT))
        self._update(call_id, "output-error", fields, dynamic=dynamic)

    def _approval_request(self, part: Part, chunk: Mapping[str, Any]) -> None:
        part["state"] = "approval-requested"
        approval: Part = {"id": chunk.get("approvalId")}
        if given(chunk.get("approvalDescriptor")):
            approval["descriptor"] = chunk["approvalDescriptor"]
        if "inputSchemaInput" in chunk:
            approval["inputSchemaInput"] = chunk["inputSchemaInput"]
        if self.client.approval_request_reason and given(chunk.get("reason")):
            approval["requestReason"] = chunk["reason"]
        if self.client.approval_request_reason and chunk.get("isAutomatic") is True:
            approval["isAutomatic"] = True
        if given(chunk.get("signature")):
            approval["signature"] = chunk["signature"]
        part["approval"] = approval

    def _approval_response(self, chunk: Mapping[str, Any]) -> None:
        approval_id = chunk_id(chunk, "approvalId")
        part = next(
            (
                p
                for p in self.message["parts"]
                if is_tool_part(p)
                and isinstance(p.get("approval"), dict)
                and p["approval"].get("id") == approval_id
            ),
            None,
        )
        if part is None:
            raise Refused(f"no tool invocation found for approval {approval_id!r}")
        part["state"] = "approval-responded"
        approval = {**part["approval"], "id": approval_id, "approved": chunk.get("approved")}
        if given(chunk.get("reason")):
            approval["reason"] = chunk["reason"]
        part["approval"] = approval
        if given(chunk.get("providerExecuted")):
            part["providerExecuted"] = chunk["providerExecuted"]
        if given(chunk.get("providerMetadata")):
            part["callProviderMetadata"] = chunk["providerMetadata"]

    def _result(self, part: Part, chunk: Mapping[str, Any]) -> None:
        available = chunk["type"] == "tool-output-available"
        metadata = chunk.get("toolMetadata")
        fields = _pick(chunk, "providerExecuted", "providerMetadata")
        fields.update(
            toolName=_tool_name(part),
            input=part.get("input", ABSENT),
            title=part.get("title", ABSENT),
            toolMetadata=metadata if given(metadata) else part.get("toolMetadata", ABSENT),
        )
        if available:
            fields.update(_pick(chunk, "output", "preliminary"))
        else:
            fields["errorText"] = chunk.get("errorText", ABSENT)
            if part["type"] != "dynamic-tool":
                fields["rawInput"] = part.get("rawInput", ABSENT)
        state = "output-available" if available else "output-error"
        self._update(part.get("toolCallId"), state, fields, part["type"] == "dynamic-tool", part)

    # -- updateToolPart / updateDynamicToolPart ----------------------------------------------

    def _update(
        self,
        call_id: Any,
        state: str,
        fields: dict[str, Any],
        dynamic: bool,
        existing: Part | None = None,
    ) -> None:
        def value(key: str) -> Any:
            return fields.get(key, ABSENT)

        part = (
            existing
            if existing is not None
            else next(
                (
                    p
                    for p in step_parts(self.message)
                    if p.get("toolCallId") == call_id
                    and (p["type"] == "dynamic-tool" if dynamic else p["type"].startswith("tool-"))
                ),
                None,
            )
        )
        metadata_key = (
            "resultProviderMetadata" if state in _RESULT_STATES else "callProviderMetadata"
        )
        if part is None:
            part = {"type": "dynamic-tool" if dynamic else f"tool-{value('toolName')}"}
            if dynamic:
                put(part, "toolName", value("toolName"))
            part.update(toolCallId=call_id, state=state)
            keys = ["title", "input", "output", "errorText", "providerExecuted", "preliminary"]
            for key in keys if dynamic else [*keys, "rawInput"]:
                put(part, key, value(key))
            if value("toolMetadata") is not ABSENT:
                part["toolMetadata"] = value("toolMetadata")
            if given(value("inputEncoding")):
                part["inputEncoding"] = value("inputEncoding")
            if given(value("providerMetadata")):
                part[metadata_key] = value("providerMetadata")
            self.message["parts"].append(part)
            return
        part["state"] = state
        if dynamic:
            put(part, "toolName", value("toolName"))
        else:
            part["type"] = f"tool-{value('toolName')}"
        for key in ("input", "output", "errorText", "rawInput", "preliminary"):
            put(part, key, value(key))
        if given(value("inputEncoding")):
            part["inputEncoding"] = value("inputEncoding")
        else:
            part.pop("inputEncoding", None)
        for key in ("title", "toolMetadata"):
            if value(key) is not ABSENT:
                part[key] = value(key)
        executed = value("providerExecuted")
        put(
            part,
            "providerExecuted",
            executed if given(executed) else part.get("providerExecuted", ABSENT),
        )
        if given(value("providerMetadata")):
            part[metadata_key] = value("providerMetadata")
