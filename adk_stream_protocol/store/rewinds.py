"""Rewinding a chat's session: the state from before the rewound turn given back
(docs/adr/0036), and a rewind to before one event inside an invocation (docs/adr/0046).

ADK's ``Runner.rewind_async`` appends one event whose ``state_delta`` undoes the rewound
events' changes. A key they changed gets its old value back; a key they *added* gets the
value ``None``, because a delta can only set keys: every session service merges it with
``dict.update``. An agent that tests ``if "cart" not in state`` then finds the key, with
``None`` in it, and fails on its next run.

``rewind`` runs ADK's rewind, then removes those keys in the store itself: exactly the keys
ADK's rewind event set to ``None`` that the state before the rewound invocation did not
hold. The removal is a conditional write on the session's revision after the rewind event,
so a writer fenced off meanwhile cannot be overwritten, and it changes no revision: the
session's events stay as ADK wrote them.

Only session-scoped keys: ADK does not rewind ``app:`` and ``user:`` state (they are shared
with other chats), and ``temp:`` state is never stored.

``rewind_before_event``: a rewind to before one event of a chat, which may be inside an
invocation.

ADK rewinds by invocation: ``rewind_async`` drops every event from the first one of the
invocation on. A ``POST /stream`` turn is an invocation of its own, but a ``/live`` socket's
``run_live`` is one invocation for the socket's whole life, with every user message sent on it.
To rewind to before one of those messages, ``rewind_before_event`` rewinds the invocation
(``rewind``: ADK's rewind, with the keys it leaves ``None`` removed), then appends
again the events of the rewound stretch that came before the message: copies with the same
content, state changes and invocation, and new ids and times. ADK's rewind gave every artifact
back its version from before the invocation, so the artifacts those events saved are saved
again at the versions they had.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from google.adk.artifacts import BaseArtifactService
from google.adk.errors import StaleSessionError
from google.adk.events import Event
from google.adk.sessions import BaseSessionService, InMemorySessionService, Session
from google.adk.sessions.state import State

from adk_stream_protocol.store.history import live_events
from adk_stream_protocol.store.sessions import FENCE_KEY, adk_service

if TYPE_CHECKING:
    from google.adk.sessions.database_session_service import DatabaseSessionService
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

logger = logging.getLogger(__name__)

_NOT_SESSION_SCOPED = (State.APP_PREFIX, State.USER_PREFIX, State.TEMP_PREFIX)


class Rewinder(Protocol):
    """What of ADK's ``Runner`` a rewind needs."""

    async def rewind_async(
        self, *, user_id: str, session_id: str, rewind_before_invocation_id: str
    ) -> None: ...


async def rewind(
    runner: Rewinder,
    service: BaseSessionService,
    session: Session,
    rewind_before_invocation_id: str,
) -> None:
    """Rewind ``session``'s chat to before the invocation, with the keys the rewound events
    added removed, not ``None``. ``service`` is the one the runner writes to."""
    await runner.rewind_async(
        user_id=session.user_id,
        session_id=session.id,
        rewind_before_invocation_id=rewind_before_invocation_id,
    )
    rewound = await service.get_session(
        app_name=session.app_name, user_id=session.user_id, session_id=session.id
    )
    if rewound is None:  # pragma: no cover - the rewind just wrote to it
        return
    keys = keys_left_none(rewound.events, rewound.state)
    if keys:
        await remove_state_keys(service, rewound, keys)
        logger.info("chat=%s rewound: %d added state keys removed", session.id, len(keys))


def keys_left_none(events: Sequence[Event], state: dict[str, Any]) -> list[str]:
    """The keys the last event, a rewind, set to ``None`` although the state before the
    invocation it rewinds did not hold them: the keys the rewound events added."""
    if not events or not events[-1].actions.rewind_before_invocation_id:
        return []
    rewind_event = events[-1]
    target = rewind_event.actions.rewind_before_invocation_id
    start = next((i for i, e in enumerate(events) if e.invocation_id == target), None)
    if start is None:
        return []
    before = state_before(events[:start])
    return sorted(
        key
        for key, value in (rewind_event.actions.state_delta or {}).items()
        if value is None
        and not key.startswith(_NOT_SESSION_SCOPED)
        and key not in before
        and key in state
        and state[key] is None
    )


def state_before(events: Iterable[Event]) -> dict[str, Any]:
    """The session-scoped state the events leave, replayed in order as ADK replays them. A
    ``None`` an agent wrote is a value; a ``None`` of a rewind event is a key removed (what
    the rewind meant, whether or not its key was removed after it)."""
    state: dict[str, Any] = {}
    for event in events:
        removes = bool(event.actions.rewind_before_invocation_id)
        for key, value in (event.actions.state_delta or {}).items():
            if key.startswith(_NOT_SESSION_SCOPED):
                continue
            if value is None and removes:
                state.pop(key, None)
            else:
                state[key] = value
    return state


async def remove_state_keys(service: BaseSessionService, session: Session, keys: list[str]) -> None:
    """Remove session-scoped keys from the stored state, if the session's revision is still
    the one ``session`` was read at (else ``StaleSessionError``). The session's revision and
    events do not change. A store we cannot write to this way keeps ADK's ``None``s."""
    inner = adk_service(service)  # ``ResultOutbox`` and ``SessionCache`` wrap ADK's service
    if isinstance(inner, InMemorySessionService):
        _remove_in_memory(inner, session, keys)
        return
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    if isinstance(inner, SqliteSessionService):
        await _remove_in_sqlite(inner, session, keys)
        return
    database = _database_service(inner)
    if database is not None:
        await _remove_in_database(database, session, keys)
        return
    logger.warning(
        "chat=%s rewound on %s: %d keys the rewound turn added stay None in its state "
        "(ADK's rewind; docs/adr/0036)",
        session.id,
        type(inner).__name__,
        len(keys),
    )


def _database_service(service: BaseSessionService) -> DatabaseSessionService | None:
    try:
        from google.adk.sessions.database_session_service import DatabaseSessionService
    except ImportError:  # pragma: no cover - depends on the installed extras
        return None
    return service if isinstance(service, DatabaseSessionService) else None


def _stale(session: Session) -> StaleSessionError:
    return StaleSessionError(f"session {session.id} changed after its rewind; keys not removed")


def _remove_in_memory(service: InMemorySessionService, session: Session, keys: list[str]) -> None:
    stored = service.sessions.get(session.app_name, {}).get(session.user_id, {}).get(session.id)
    if stored is None or stored.last_update_time != session.last_update_time:
        raise _stale(session)
    for key in keys:
        stored.state.pop(key, None)


async def _remove_in_sqlite(
    service: SqliteSessionService, session: Session, keys: list[str]
) -> None:
    """One compare-and-set ``UPDATE`` of the session's row: its state and update time as
    read, the state without the keys written (ADK's own ``sessions`` table)."""
    where = "app_name=? AND user_id=? AND id=?"
    row_key = (session.app_name, session.user_id, session.id)
    async with service._get_db_connection() as db:
        async with db.execute(
            f"SELECT state, update_time FROM sessions WHERE {where}", row_key
        ) as c:
            row = await c.fetchone()
        if row is None or row["update_time"] != session.last_update_time:
            raise _stale(session)
        state = json.loads(row["state"])
        for key in keys:
            state.pop(key, None)
        cursor = await db.execute(
            f"UPDATE sessions SET state=? WHERE {where} AND update_time=? AND state=?",
            (json.dumps(state), *row_key, row["update_time"], row["state"]),
        )
        if cursor.rowcount != 1:
            raise _stale(session)
        await db.commit()


async def _remove_in_database(
    service: DatabaseSessionService, session: Session, keys: list[str]
) -> None:
    """The session's row, locked where the database can (as ADK's own ``append_event`` locks
    it), checked against the revision read, and written without the keys."""
    from sqlalchemy import select

    await service.prepare_tables()
    # ADK's table class of the schema version the database has (v0 or v1; both alike here).
    storage: Any = service._get_schema_classes().StorageSession
    query = select(storage).where(
        storage.app_name == session.app_name,
        storage.user_id == session.user_id,
        storage.id == session.id,
    )
    if service.db_engine.dialect.name != "sqlite":
        query = query.with_for_update()
    async with service.database_session_factory() as sql:
        row = (await sql.execute(query)).scalars().one_or_none()
        if row is None or row.get_update_timestamp() != session.last_update_time:
            await sql.rollback()
            raise _stale(session)
        row.state = {k: v for k, v in (row.state or {}).items() if k not in keys}
        await sql.commit()


# -- a rewind to before one event, inside an invocation -----------------------------------

# ADK does not rewind a user's artifacts (shared with the user's other chats).
_USER_ARTIFACT_PREFIX = "user:"


async def rewind_before_event(
    runner: Rewinder,
    service: BaseSessionService,
    session: Session,
    event_id: str,
    *,
    artifacts: BaseArtifactService | None,
) -> None:
    """Rewind ``session``'s chat to just before the event ``event_id``: the history, state and
    artifacts are what they were when it was appended. ``service`` is the runner's."""
    events = session.events
    index = next((i for i, e in enumerate(events) if e.id == event_id), None)
    if index is None:
        raise ValueError(f"event {event_id!r} is not in chat {session.id!r}")
    invocation = events[index].invocation_id
    # ADK's rewind starts at the invocation's first event, rewound since or not.
    first = next(i for i, e in enumerate(events) if e.invocation_id == invocation)
    live = {id(e) for e in live_events(events[:index])}
    # A fence marks a take-over at its own time: not copied.
    kept = [
        e
        for e in events[first:index]
        if id(e) in live and FENCE_KEY not in (e.custom_metadata or {})
    ]
    await rewind(runner, service, session, invocation)
    if not kept:
        return
    rewound = await service.get_session(
        app_name=session.app_name, user_id=session.user_id, session_id=session.id
    )
    if rewound is None:  # pragma: no cover - the rewind just wrote to it
        return
    stamp = time.time()
    for event in kept:
        stamp = max(time.time(), stamp + 0.001)  # after the rewind, in their order
        copy = event.model_copy(deep=True, update={"id": Event.new_id(), "timestamp": stamp})
        if copy.actions.artifact_delta and artifacts is not None:
            copy.actions.artifact_delta = await _saved_again(
                artifacts, rewound, copy.actions.artifact_delta
            )
        await service.append_event(rewound, copy)
    logger.info(
        "chat=%s rewound inside invocation %s: %d earlier events kept",
        session.id,
        invocation,
        len(kept),
    )


async def _saved_again(
    artifacts: BaseArtifactService, session: Session, delta: Mapping[str, int]
) -> dict[str, int]:
    """Each artifact of ``delta`` saved again at its version there: its new versions."""
    saved: dict[str, int] = {}
    for filename, version in delta.items():
        if filename.startswith(_USER_ARTIFACT_PREFIX):
            saved[filename] = version  # not rewound: still at its version
            continue
        part = await artifacts.load_artifact(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            filename=filename,
            version=version,
        )
        if part is None:
            logger.warning(
                "chat=%s: artifact %s v%d gone; not restored", session.id, filename, version
            )
            continue
        saved[filename] = await artifacts.save_artifact(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            filename=filename,
            artifact=part,
        )
    return saved
