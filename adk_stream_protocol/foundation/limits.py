"""What one request may ask of the server, and reading untrusted JSON within it.

Every limit is a setting (docs/adr/0019). A request over a limit is refused before anything
runs, with 413 (too large) or 422 (malformed) and a sentence that names the limit. Within the
limits, reading a request costs linear time, and large ones are read off the event loop so
that one request never stalls the others.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from pydantic_core import from_json

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.settings import DEFAULT_STATE_PREFIX, Settings

# Bodies and frames up to this size are read on the event loop (well under a millisecond);
# larger ones in a worker thread.
_INLINE_READ_BYTES = 64 * 1024


@dataclass(frozen=True)
class RequestLimits:
    max_request_bytes: int
    max_message_chars: int
    max_parts_per_message: int
    # Bytes of JSON a request adds to the chat's record: checked once the request is joined to
    # the record, before the record or the session is touched.
    max_added_bytes: int
    max_json_depth: int
    max_file_bytes: int
    # What a request's `state` field may write: keys under the prefix (none when it is empty),
    # so many keys, so many bytes of JSON.
    state_prefix: str = DEFAULT_STATE_PREFIX
    max_state_keys: int = 64
    max_state_bytes: int = 64 * 1024

    @classmethod
    def from_settings(cls, settings: Settings) -> RequestLimits:
        return cls(
            max_request_bytes=settings.max_request_bytes,
            max_message_chars=settings.max_message_chars,
            max_parts_per_message=settings.max_parts_per_message,
            max_added_bytes=settings.max_added_bytes,
            max_json_depth=settings.max_json_depth,
            max_file_bytes=settings.max_file_bytes,
            state_prefix=settings.shared_state_prefix,
            max_state_keys=settings.max_state_keys,
            max_state_bytes=settings.max_state_bytes,
        )


def read_json(raw: bytes | str, max_depth: int) -> Any:
    """Parse untrusted JSON: strict UTF-8 (no lone surrogates), at most ``max_depth`` levels.

    pydantic-core's parser refuses what Python's ``json`` lets through (a lone surrogate, which
    no UTF-8 encoder downstream can write) and stops at 200 levels instead of recursing until
    the interpreter gives up.
    """
    if isinstance(raw, str):
        try:  # a str can hold what no UTF-8 text can (ASGI clients in tests send such)
            raw = raw.encode()
        except UnicodeEncodeError:
            raise RequestError(422, "not valid JSON: the text holds a lone surrogate") from None
    try:
        value = from_json(raw)
    except ValueError as exc:
        if "recursion limit" in str(exc):
            raise _too_deep(max_depth) from None
        if "hex escape" in str(exc):
            raise RequestError(
                422,
                f"not valid JSON: a \\u escape is no Unicode character, such as a lone "
                f"surrogate ({exc})",
            ) from None
        raise RequestError(422, f"not valid JSON: {exc}") from None
    if _depth_exceeds(value, max_depth):
        raise _too_deep(max_depth)
    return value


async def run_bounded(size: int, work: Any, *args: Any) -> Any:
    """Run ``work(*args)`` inline for a small input, in a worker thread for a large one."""
    if size <= _INLINE_READ_BYTES:
        return work(*args)
    return await asyncio.to_thread(work, *args)


def _too_deep(max_depth: int) -> RequestError:
    return RequestError(422, f"the JSON is nested more than {max_depth} levels deep")


def _depth_exceeds(value: Any, max_depth: int) -> bool:
    # Iterative, so the check itself cannot overflow the stack; visits each node once.
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


class ResponseSlots:
    """How many responses this process streams at once (``max_concurrent_responses``).

    Past the cap a request is refused at once with 503 and ``Retry-After``: a client that
    retries later is better served than one queued behind hundreds of others.
    """

    # Seconds a refused client is asked to wait.
    RETRY_AFTER_SECONDS = 1

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity  # 0: no cap
        self._in_use = 0

    @property
    def in_use(self) -> int:
        return self._in_use

    def try_acquire(self) -> bool:
        if self._capacity and self._in_use >= self._capacity:
            return False
        self._in_use += 1
        return True

    def release(self) -> None:
        self._in_use -= 1

    def busy_error(self) -> RequestError:
        return RequestError(
            503,
            f"the server is busy ({self._capacity} responses at once); "
            f"try again in {self.RETRY_AFTER_SECONDS} s",
            retry_after=self.RETRY_AFTER_SECONDS,
        )
