"""The AI SDK client's reading of a tool call's input while it streams (``parsePartialJson``).

While ``tool-input-delta`` chunks arrive, the client shows the input parsed from the text so
far: valid JSON as it is, otherwise the text closed by ``fixJson`` (open strings, objects,
arrays and literals completed, a dangling number or key dropped), otherwise nothing. This is a
port of ``ai``'s ``fix-json.ts`` and ``parse-partial-json.ts`` (the same in ai 6 and 7 but for
one line: ai 6 counts the first character of an array as valid before reading it as a value).
"""

from __future__ import annotations

import json
from typing import Any

# The value a failed parse gives: the part's input is then undefined (absent).
NO_VALUE: Any = object()

_LITERALS = ("true", "false", "null")
_HEX = frozenset("0123456789abcdefABCDEF")
_CLOSERS = {
    "INSIDE_STRING": '"',
    "INSIDE_OBJECT_KEY": "}",
    "INSIDE_OBJECT_AFTER_KEY": "}",
    "INSIDE_OBJECT_AFTER_COMMA": "}",
    "INSIDE_OBJECT_START": "}",
    "INSIDE_OBJECT_BEFORE_VALUE": "}",
    "INSIDE_OBJECT_AFTER_VALUE": "}",
    "INSIDE_ARRAY_START": "]",
    "INSIDE_ARRAY_AFTER_COMMA": "]",
    "INSIDE_ARRAY_AFTER_VALUE": "]",
}


def parse_partial_json(text: str, *, ai_sdk: int = 6) -> Any:
    """The client's value for a partial JSON text, or ``NO_VALUE``."""
    for candidate in (text, fix_json(text, ai_sdk=ai_sdk)):
        try:
            return _secure_loads(candidate)
        except ValueError:
            continue
    return NO_VALUE


def _secure_loads(text: str) -> Any:
    """``JSON.parse`` with secure-json-parse's refusals: a ``__proto__`` key, or a
    ``constructor`` object with a ``prototype`` key."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        value = dict(items)
        constructor = value.get("constructor")
        if "__proto__" in value or (isinstance(constructor, dict) and "prototype" in constructor):
            raise ValueError("Object contains forbidden prototype property")
        return value

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")  # JSON.parse refuses NaN and Infinity

    return json.loads(text, object_pairs_hook=pairs, parse_constant=no_constant)


class _Scanner:
    """One pass over the text, as ``fixJson``: a stack of states and the last index that
    ends something valid."""

    def __init__(self, text: str, ai_sdk: int) -> None:
        self.text = text
        self.ai_sdk = ai_sdk
        self.stack = ["ROOT"]
        self.last_valid = -1
        self.literal_start = 0
        self.unicode_digits = 0

    def swap(self, *states: str) -> None:
        self.stack.pop()
        self.stack.extend(states)

    def value_start(self, char: str, i: int, after: str) -> None:
        if char == '"':
            self.last_valid = i
            self.swap(after, "INSIDE_STRING")
        elif char in "ftn":
            self.last_valid = i
            self.literal_start = i
            self.swap(after, "INSIDE_LITERAL")
        elif char == "-":
            self.swap(after, "INSIDE_NUMBER")
        elif "0" <= char <= "9":
            self.last_valid = i
            self.swap(after, "INSIDE_NUMBER")
        elif char == "{":
            self.last_valid = i
            self.swap(after, "INSIDE_OBJECT_START")
        elif char == "[":
            self.last_valid = i
            self.swap(after, "INSIDE_ARRAY_START")

    def after_value(self, char: str, i: int, closer: str, after_comma: str) -> None:
        if char == ",":
            self.swap(after_comma)
        elif char == closer:
            self.last_valid = i
            self.stack.pop()

    def after_object_value(self, char: str, i: int) -> None:
        self.after_value(char, i, "}", "INSIDE_OBJECT_AFTER_COMMA")

    def after_array_value(self, char: str, i: int) -> None:
        self.after_value(char, i, "]", "INSIDE_ARRAY_AFTER_COMMA")

    # One branch per state of fixJson's machine, kept as the AI SDK writes it so that the two
    # can be read side by side: splitting it would hide the correspondence.
    def step(self, char: str, i: int) -> None:  # noqa: C901
        state = self.stack[-1]
        if state == "ROOT":
            self.value_start(char, i, "FINISH")
        elif state in ("INSIDE_OBJECT_START", "INSIDE_OBJECT_AFTER_COMMA"):
            if char == '"':
                self.swap("INSIDE_OBJECT_KEY")
            elif char == "}" and state == "INSIDE_OBJECT_START":
                self.last_valid = i
                self.stack.pop()
        elif state == "INSIDE_OBJECT_KEY":
            if char == '"':
                self.swap("INSIDE_OBJECT_AFTER_KEY")
        elif state == "INSIDE_OBJECT_AFTER_KEY":
            if char == ":":
                self.swap("INSIDE_OBJECT_BEFORE_VALUE")
        elif state == "INSIDE_OBJECT_BEFORE_VALUE":
            self.value_start(char, i, "INSIDE_OBJECT_AFTER_VALUE")
        elif state == "INSIDE_OBJECT_AFTER_VALUE":
            self.after_object_value(char, i)
        elif state == "INSIDE_STRING":
            if char == '"':
                self.stack.pop()
                self.last_valid = i
            elif char == "\\":
                self.stack.append("INSIDE_STRING_ESCAPE")
            else:
                self.last_valid = i
        elif state == "INSIDE_ARRAY_START":
            if char == "]":
                self.last_valid = i
                self.stack.pop()
            else:
                if self.ai_sdk < 7:
                    self.last_valid = i
                self.value_start(char, i, "INSIDE_ARRAY_AFTER_VALUE")
        elif state == "INSIDE_ARRAY_AFTER_VALUE":
            if char in ",]":
                self.after_array_value(char, i)
            else:
                self.last_valid = i
        elif state == "INSIDE_ARRAY_AFTER_COMMA":
            self.value_start(char, i, "INSIDE_ARRAY_AFTER_VALUE")
        elif state == "INSIDE_STRING_ESCAPE":
            self.stack.pop()
            if char == "u":
                self.unicode_digits = 0
                self.stack.append("INSIDE_STRING_UNICODE_ESCAPE")
            else:
                self.last_valid = i
        elif state == "INSIDE_STRING_UNICODE_ESCAPE":
            if char in _HEX:
                self.unicode_digits += 1
                if self.unicode_digits == 4:
                    self.stack.pop()
                    self.last_valid = i
        elif state == "INSIDE_NUMBER":
            self.number(char, i)
        elif state == "INSIDE_LITERAL":
            partial = self.text[self.literal_start : i + 1]
            if any(literal.startswith(partial) for literal in _LITERALS):
                self.last_valid = i
                return
            self.stack.pop()
            if self.stack[-1] == "INSIDE_OBJECT_AFTER_VALUE":
                self.after_object_value(char, i)
            elif self.stack[-1] == "INSIDE_ARRAY_AFTER_VALUE":
                self.after_array_value(char, i)

    def number(self, char: str, i: int) -> None:
        if "0" <= char <= "9":
            self.last_valid = i
        elif char in "eE-.":
            pass
        else:
            self.stack.pop()
            if char in ",}" and self.stack[-1] == "INSIDE_OBJECT_AFTER_VALUE":
                self.after_object_value(char, i)
            if char in ",]" and self.stack[-1] == "INSIDE_ARRAY_AFTER_VALUE":
                self.after_array_value(char, i)

    def fixed(self) -> str:
        result = self.text[: self.last_valid + 1]
        for state in reversed(self.stack):
            if state in _CLOSERS:
                result += _CLOSERS[state]
            elif state == "INSIDE_LITERAL":
                partial = self.text[self.literal_start :]
                literal = next((lit for lit in _LITERALS if lit.startswith(partial)), None)
                if literal is not None:
                    result += literal[len(partial) :]
        return result


def fix_json(text: str, *, ai_sdk: int = 6) -> str:
    """``fixJson``: the partial JSON text completed so that it parses, when it can be."""
    scanner = _Scanner(text, ai_sdk)
    for i, char in enumerate(text):
        scanner.step(char, i)
    return scanner.fixed()
