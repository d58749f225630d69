"""``/chats``: the caller's chats, read back as the page held them (docs/adr/0043-chat-index.md).

- ``GET /chats``: newest activity first, a page at a time (``limit``, ``cursor``), from the
  chat index alone; ``active`` from the coordination's chunk logs, never from events.
- ``GET /chats/{chatId}``: one chat with its messages.
- ``PATCH /chats/{chatId}`` ``{"title": …}``: a title the user chose, kept from then on.
- ``DELETE /chats/{chatId}``: stops the chat's response wherever it runs and closes a
  ``/live?chatId=`` socket open on it (a deleting stop), waits for them to let the chat go
  (its lease, for at most the busy timeout), then removes the chat's artifacts, its session,
  its chunk log and its index row, in that order, so that a failure half-way leaves the chat
  listed and the DELETE can be sent again.

Every route is behind the identity dependency, and a chat of another user does not exist
(404), as on every route.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response
from google.adk.sessions.base_session_service import GetSessionConfig
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from adk_stream_protocol.coordination.base import ChatKey
from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.foundation.identity import current_user
from adk_stream_protocol.foundation.limits import RequestLimits, read_json, run_bounded
from adk_stream_protocol.foundation.outages import REDIS
from adk_stream_protocol.protocol.ui_messages import CHAT_ID_PATTERN
from adk_stream_protocol.store.chat_index import (
    ChatSummary,
    InvalidCursorError,
    Waiting,
    is_control,
)
from adk_stream_protocol.transports.stream import read_body
from adk_stream_protocol.turns.bridge import Bridge, bridge_of
from adk_stream_protocol.turns.request_turns import take_chat
from adk_stream_protocol.turns.resumed_turns import has_cut_turn

logger = logging.getLogger(__name__)

router = APIRouter()

DEFAULT_PAGE = 50
MAX_PAGE = 200
MAX_CURSOR_CHARS = 256
MAX_TITLE_CHARS = 200
NO_SUCH_CHAT = "no such chat"
STAYS_BUSY = (
    "the chat did not come free in time (its answer or its /live socket did not end); "
    "nothing was removed, try again"
)


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class ChatListing(_Camel):
    """A chat as a list shows it."""

    id: Annotated[str, Field(description="The chat's id (useChat's `id`)")]
    title: Annotated[str, Field(description="The first user text, shortened, until renamed")]
    created_at: datetime
    updated_at: Annotated[
        datetime, Field(description="Its last activity: a response's start or end")
    ]
    active: Annotated[bool, Field(description="A response is being written now (resumable)")]
    waiting: Annotated[
        Waiting | None,
        Field(
            description="What its last answer waits for: an approval, or a browser tool's output"
        ),
    ]


class ChatList(_Camel):
    chats: list[ChatListing]
    next_cursor: Annotated[
        str | None, Field(description="The next page's `cursor`; null on the last page")
    ]


class ChatWithMessages(ChatListing):
    messages: Annotated[
        list[dict[str, Any]],
        Field(description="Its UIMessages, as useChat held them when its last response ended"),
    ]


class ChatRename(BaseModel):
    """The body of ``PATCH /chats/{chatId}``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    title: str

    @field_validator("title")
    @classmethod
    def _one_line(cls, title: str) -> str:
        title = " ".join(title.split())
        if not title:
            raise ValueError("the title is empty")
        if len(title) > MAX_TITLE_CHARS:
            raise ValueError(f"the title is longer than {MAX_TITLE_CHARS} characters")
        if any(is_control(char) for char in title):
            raise ValueError("the title holds control characters")
        return title


# A refusal's body is `{"detail": "why"}`; FastAPI's own 422, for a query value of the wrong
# type or out of range, has a list of errors as its detail.
_WHY: dict[str, Any] = {"type": "string"}
_ERROR_LIST: dict[str, Any] = {"type": "array", "items": {"type": "object"}}


def _refusal_doc(description: str, detail: dict[str, Any] | None = None) -> dict[str, Any]:
    body = {"type": "object", "properties": {"detail": detail or _WHY}, "required": ["detail"]}
    return {"description": description, "content": {"application/json": {"schema": body}}}


_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: _refusal_doc("No such chat for this user")}
_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: _refusal_doc("A store is unavailable; retry after Retry-After")
}


@router.get(
    "/chats",
    response_model=ChatList,
    responses={
        422: _refusal_doc(
            "Not a limit, or not a cursor of this list", {"anyOf": [_WHY, _ERROR_LIST]}
        ),
        **_UNAVAILABLE,
    },
)
async def list_chats(
    request: Request,
    user_id: Annotated[str, Depends(current_user)],
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    cursor: Annotated[str | None, Query(min_length=1, max_length=MAX_CURSOR_CHARS)] = None,
) -> ChatList | JSONResponse:
    """The caller's chats, newest activity first."""
    bridge = bridge_of(request.app.state)
    try:
        page = await bridge.chats.list_chats(
            bridge.sessions.app_name, user_id, limit=limit, cursor=cursor
        )
        active = await _active(bridge, [(user_id, chat.chat_id) for chat in page.chats])
    except InvalidCursorError as exc:
        return _refused(RequestError(422, str(exc)))
    except RequestError as exc:
        return _refused(exc)
    chats = [_listing(chat, (user_id, chat.chat_id) in active) for chat in page.chats]
    return ChatList(chats=chats, next_cursor=page.next_cursor)


@router.get(
    "/chats/{chat_id}",
    response_model=ChatWithMessages,
    responses={**_NOT_FOUND, **_UNAVAILABLE},
)
async def get_chat(
    chat_id: str, request: Request, user_id: Annotated[str, Depends(current_user)]
) -> ChatWithMessages | JSONResponse:
    """The chat and its messages, as its page held them when its last response ended."""
    bridge = bridge_of(request.app.state)
    try:
        chat = _chat_key(user_id, chat_id)
        record = await _stored(bridge, bridge.chats.get_chat(bridge.sessions.app_name, *chat))
        if record is None:
            raise RequestError(404, NO_SUCH_CHAT)
        active = chat in await _active(bridge, [chat]) or await _cut(bridge, chat, record.messages)
    except RequestError as exc:
        return _refused(exc)
    listing = _listing(record.summary, active)
    return ChatWithMessages(**listing.model_dump(), messages=record.messages)


def _rename_openapi() -> dict[str, Any]:
    """The body is read by hand (size, time and depth limits first), as ``/stream``'s."""
    schema = ChatRename.model_json_schema()
    schema["properties"]["title"].update({"minLength": 1, "maxLength": MAX_TITLE_CHARS})
    content = {"application/json": {"schema": schema}}
    return {"requestBody": {"required": True, "content": content}}


@router.patch(
    "/chats/{chat_id}",
    response_model=ChatListing,
    openapi_extra=_rename_openapi(),
    responses={
        **_NOT_FOUND,
        408: _refusal_doc("The body arrived too slowly"),
        413: _refusal_doc("The body is over the request limit"),
        415: _refusal_doc("Not JSON"),
        422: _refusal_doc("Not a title"),
        **_UNAVAILABLE,
    },
)
async def rename_chat(
    chat_id: str, request: Request, user_id: Annotated[str, Depends(current_user)]
) -> ChatListing | JSONResponse:
    """Give the chat a title of the user's; it is kept from then on."""
    bridge = bridge_of(request.app.state)
    try:
        chat = _chat_key(user_id, chat_id)
        rename = await _read_rename(request, bridge)
        app_name = bridge.sessions.app_name
        renamed = await _stored(bridge, bridge.chats.rename(app_name, *chat, rename.title))
        record = await _stored(bridge, bridge.chats.get_chat(app_name, *chat)) if renamed else None
        if record is None:
            raise RequestError(404, NO_SUCH_CHAT)
        active = chat in await _active(bridge, [chat])
    except RequestError as exc:
        return _refused(exc)
    logger.info("chat renamed chat=%s", chat_id)
    return _listing(record.summary, active)


@router.delete(
    "/chats/{chat_id}",
    status_code=204,
    response_model=None,
    responses={
        204: {"description": "The chat is gone: its session, artifacts and chunk log too"},
        **_NOT_FOUND,
        409: _refusal_doc(
            "The chat stayed busy: its answer or its /live socket did not end within the busy "
            "timeout; nothing was removed"
        ),
        **_UNAVAILABLE,
    },
)
async def delete_chat(
    chat_id: str, request: Request, user_id: Annotated[str, Depends(current_user)]
) -> Response:
    """Stop the chat's response and close its `/live?chatId=` socket (on whichever instance
    runs them: the socket ends its open response, then closes with 4410), wait for them to
    let the chat go, then remove everything the chat keeps: its session, artifacts, chunk log
    and index row. A waiting approval or browser call does not run."""
    bridge = bridge_of(request.app.state)
    try:
        chat = _chat_key(user_id, chat_id)
        if not await _stored(bridge, _exists(bridge, chat)):
            raise RequestError(404, NO_SUCH_CHAT)
        await _stored(bridge, _stop_and_remove(bridge, chat))
    except RequestError as exc:
        return _refused(exc)
    logger.info("chat deleted user=%s chat=%s", user_id, chat_id)
    return Response(status_code=204)


# A method none of the routes takes: otherwise the router would answer 405 with only the
# first route's method in `Allow`.
@router.api_route(
    "/chats/{chat_id}", methods=["HEAD", "OPTIONS", "POST", "PUT"], include_in_schema=False
)
async def chat_other_methods() -> Response:
    return JSONResponse(
        {"detail": "Method Not Allowed"}, status_code=405, headers={"allow": "GET, PATCH, DELETE"}
    )


async def _exists(bridge: Bridge, chat: ChatKey) -> bool:
    """Listed, or with a session only: a chat from before the index was kept, or one whose
    first response has not been recorded yet."""
    app_name = bridge.sessions.app_name
    if await bridge.chats.get_chat(app_name, *chat) is not None:
        return True
    session = await bridge.sessions.service.get_session(
        app_name=app_name,
        user_id=chat[0],
        session_id=chat[1],
        config=GetSessionConfig(num_recent_events=0),
    )
    return session is not None


async def _stop_and_remove(bridge: Bridge, chat: ChatKey) -> None:
    await bridge.coordination.stops.stop(chat, deleted=True)
    try:
        # The running response ends on the stop, and a /live socket closes, letting the chat
        # go; holding it, no new request of the chat runs while its things are removed.
        lease = await take_chat(bridge.turns, chat)
    except RequestError as exc:
        if exc.status == 409:
            raise RequestError(409, STAYS_BUSY) from None
        raise
    try:
        await bridge.chat_artifacts(*chat).delete_all()
        app_name, (user_id, chat_id) = bridge.sessions.app_name, chat
        await bridge.sessions.service.delete_session(
            app_name=app_name, user_id=user_id, session_id=chat_id
        )
        await bridge.coordination.chunk_logs.discard(chat)
        await bridge.chats.delete(app_name, user_id, chat_id)
    finally:
        await lease.release()


async def _read_rename(request: Request, bridge: Bridge) -> ChatRename:
    body = await read_body(request, bridge.settings)
    depth = RequestLimits.from_settings(bridge.settings).max_json_depth
    value = await run_bounded(len(body), read_json, body, depth)
    if not isinstance(value, dict):
        raise RequestError(422, 'send a JSON object: {"title": "…"}')
    try:
        return ChatRename.model_validate(value)
    except ValidationError as exc:
        raise RequestError(422, _first_error(exc)) from None


async def _stored(bridge: Bridge, work: Any) -> Any:
    """What a store operation returned; a store that is down is a 503."""
    try:
        return await work
    except RequestError:
        raise
    except Exception as exc:
        refusal = bridge.outages.refusal(exc, "a chats request")
        if refusal is None:
            raise
        raise refusal from exc


async def _active(bridge: Bridge, chats: list[ChatKey]) -> set[ChatKey]:
    active: set[ChatKey] = await _stored(
        bridge, bridge.coordination.chunk_logs.with_active_response(chats)
    )
    bridge.outages.up(REDIS)
    return active


async def _cut(bridge: Bridge, chat: ChatKey, messages: list[Any]) -> bool:
    """A chat whose last assistant message a crash cut short reads as answering: a page's
    resume finishes that turn, and its response rebuilds the message first, so a page following
    the recipe of docs/frontend/chats.md must start without it. Read from the session, only for
    a chat with no response running whose last message may be such a turn's."""
    if not messages or not _may_be_cut(messages[-1]):
        return False
    return bool(await _stored(bridge, has_cut_turn(bridge.turns, chat)))


# A tool part's states while its turn goes on: the page answered it, or the server runs it.
_GOING_ON = frozenset({"input-streaming", "input-available", "approval-responded"})


def _may_be_cut(message: dict[str, Any]) -> bool:
    """Whether an assistant message may be a cut turn's: the record keeps it as the
    continuing request sent it, so a call still going on, or a tool part with nothing of the
    answer after it. An answered turn ends otherwise (its text, a call that waits for the
    page is read from the session only then: rare), so most reads cost no session."""
    if message.get("role") != "assistant":
        return False
    parts = [p for p in message.get("parts") or [] if isinstance(p, dict)]
    if any(p.get("state") in _GOING_ON for p in parts if _is_tool(p)):
        return True
    shown = [p for p in parts if p.get("type") != "step-start" and not _is_data(p)]
    return bool(shown) and _is_tool(shown[-1])


def _is_tool(part: dict[str, Any]) -> bool:
    kind = str(part.get("type", ""))
    return kind.startswith("tool-") or kind == "dynamic-tool"


def _is_data(part: dict[str, Any]) -> bool:
    return str(part.get("type", "")).startswith("data-")


def _chat_key(user_id: str, chat_id: str) -> ChatKey:
    if not re.fullmatch(CHAT_ID_PATTERN, chat_id):
        raise RequestError(404, NO_SUCH_CHAT)  # no chat can have that id
    return (user_id, chat_id)


def _listing(summary: ChatSummary, active: bool) -> ChatListing:
    return ChatListing(
        id=summary.chat_id,
        title=summary.title,
        created_at=summary.created_at,
        updated_at=summary.updated_at,
        active=active,
        waiting=summary.waiting,
    )


def _refused(exc: RequestError) -> JSONResponse:
    headers = {"retry-after": str(exc.retry_after)} if exc.retry_after is not None else None
    return JSONResponse({"detail": exc.message}, status_code=exc.status, headers=headers)


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error.get("loc", ()))
    message = str(error.get("msg", "not a title")).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message
