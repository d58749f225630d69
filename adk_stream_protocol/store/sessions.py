"""Chats and ADK sessions (docs/adr/0004-chat-sessions.md).

A chat is identified by the authenticated user and the client's chat id; it maps to exactly
one ADK session whose id is the chat id. Runs on one chat are serialised by the chat lease
(``coordination.ChatLeases``): ADK's persistent stores reject concurrent writers, and two
answers interleaving in one history make no sense.

Several processes may share one PostgreSQL store, so two of them may create ADK's tables, or
the same chat, at the same moment: ``prepare`` and ``open`` make either harmless.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events import Event
from google.adk.sessions import BaseSessionService, InMemorySessionService, Session

from adk_stream_protocol.foundation.outages import SESSION_POOL, SESSION_STORE, Outages
from adk_stream_protocol.foundation.settings import DEFAULT_SESSION_STORE
from adk_stream_protocol.store.session_cache import SessionCache

if TYPE_CHECKING:
    from google.adk.sessions.database_session_service import DatabaseSessionService
    from sqlalchemy.engine import Connection
    from sqlalchemy.exc import DBAPIError
    from sqlalchemy.ext.asyncio import AsyncEngine

logger = logging.getLogger(__name__)

# A PostgreSQL that does not answer (frozen, or a network that drops packets) is given up on:
# a new connection after CONNECT_TIMEOUT_SECONDS, a statement after COMMAND_TIMEOUT_SECONDS
# (also the pool's pre-ping of a connection it hands out). Without them a request would hang
# for as long as the server does.
CONNECT_TIMEOUT_SECONDS = 2.0
COMMAND_TIMEOUT_SECONDS = 5.0

# The PostgreSQL advisory lock under which ``prepare`` creates ADK's tables, so that processes
# starting together create them one at a time. A fixed key of ours: the first 8 bytes of
# sha256(b"adk-stream-protocol/adk-session-tables") as a signed 64-bit integer (0xf904a2aa783067b7).
TABLES_LOCK_KEY = -503098405314074697

_ASYNCPG_SCHEME = "postgresql+asyncpg"
# Schemes of libpq-style URLs (what hosting providers hand out). SQLAlchemy reads
# `postgresql://` as the synchronous psycopg2 driver and no longer knows `postgres://`.
_LIBPQ_SCHEMES = ("postgresql", "postgres")
# SQLSTATEs of "someone else created it first": duplicate_table, duplicate_object,
# unique_violation (two CREATE TABLEs collide on pg_type_typname_nsp_index), duplicate_schema.
_ALREADY_EXISTS = frozenset({"42P07", "42710", "23505", "42P06"})
# A process without our lock (ADK's own lazy creation) can win at most once per table set;
# after a collision the next attempt sees its tables.
_TABLE_ATTEMPTS = 3


# Custom metadata of the content-less event a chat's new holder appends after an unclean
# takeover: the lease's generation (docs/adr/0034). It moves the session's revision, so every
# later append of the former holder, which may still run, is refused as stale.
FENCE_KEY = "ui_fence"
FENCE_ATTEMPTS = 3

# The store every app run in one folder shared before each app had its own.
LEGACY_SESSION_STORE = "sqlite:///.adk-stream/sessions.db"
_SQLITE = "sqlite:///"


def store_url(setting: str, app_name: str) -> str:
    """The store an app uses: the setting with ``{app}`` replaced by the app's name. With
    the default setting, a folder that still has the old shared file and no file of this
    app's keeps using the old one (and says how to move), so no one loses their chats."""
    url = setting.replace("{app}", app_name)
    if setting != DEFAULT_SESSION_STORE:
        return url
    own, legacy = Path(url.removeprefix(_SQLITE)), Path(LEGACY_SESSION_STORE.removeprefix(_SQLITE))
    if own.exists() or not legacy.is_file():
        return url
    logger.warning(
        "chats are read from %s, the store every app in this folder used to share; this "
        "app's own is %s. To keep the shared one, set ADK_STREAM_SESSION_STORE=%s; to give "
        "this app its own, copy the file there (docs/operating/settings.md, Where chats live)",
        legacy,
        own,
        LEGACY_SESSION_STORE,
    )
    return LEGACY_SESSION_STORE


def create_session_service(url: str) -> BaseSessionService:
    """Build the session store a URL names: ``memory://``, ``sqlite:///file.db``, or a
    database URL for ADK's DatabaseSessionService (``postgresql+asyncpg://…``; libpq's
    ``postgresql://`` and ``postgres://`` are read as that)."""
    if url in ("memory://", "memory:"):
        return InMemorySessionService()
    if url.startswith("sqlite:///"):
        from google.adk.sessions.sqlite_session_service import SqliteSessionService

        path = Path(url.removeprefix("sqlite:///"))
        path.parent.mkdir(parents=True, exist_ok=True)
        return SqliteSessionService(str(path))
    try:
        from google.adk.sessions.database_session_service import DatabaseSessionService
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise RuntimeError(
            f"session store {url.split('://')[0]}:// needs `pip install google-adk[db]` and an "
            "async driver"
        ) from exc
    url = asyncpg_url(url)
    if not url.startswith(_ASYNCPG_SCHEME):
        return DatabaseSessionService(url)
    return DatabaseSessionService(
        url,
        connect_args={
            "timeout": CONNECT_TIMEOUT_SECONDS,
            "command_timeout": COMMAND_TIMEOUT_SECONDS,
        },
    )


def asyncpg_url(url: str) -> str:
    """``postgresql://`` and ``postgres://`` URLs as ``postgresql+asyncpg://``, the async
    driver ADK needs; any other URL as it is. libpq's ``sslmode`` becomes asyncpg's ``ssl``
    (same values), which asyncpg would otherwise refuse as an unknown argument."""
    parts = urlsplit(url)
    if parts.scheme not in _LIBPQ_SCHEMES:
        return url
    query = [
        ("ssl" if key == "sslmode" else key, value)
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
    ]
    logger.info("session store: %s:// read as %s://", parts.scheme, _ASYNCPG_SCHEME)
    return urlunsplit(parts._replace(scheme=_ASYNCPG_SCHEME, query=urlencode(query)))


class ChatSessions:
    """Maps (user, chat id) to an ADK session."""

    def __init__(
        self, service: BaseSessionService, app_name: str, outages: Outages | None = None
    ) -> None:
        self.service = service
        self.app_name = app_name
        self._outages = outages or Outages()
        # The chats' histories this process read; None: every read is whole.
        self.cache = session_cache(service)

    @property
    def outages(self) -> Outages:
        """Which stores are down: where a read of the chat's stores meets an outage."""
        return self._outages

    async def prepare(self) -> None:
        """Get the store ready before the first request: create a database's tables now, so
        that a broken store stops the start-up rather than the first request. On PostgreSQL
        under an advisory lock, since processes starting together on a fresh database collide
        in ADK's own lazy creation (duplicate key on ``pg_type_typname_nsp_index``)."""
        database = _database_service(self.service)
        if database is None:
            return  # memory and SQLite need nothing
        if database.db_engine.dialect.name == "postgresql":
            await _prepare_postgres_tables(database)
        else:
            await database.prepare_tables()

    async def open(self, user_id: str, chat_id: str) -> Session:
        """The chat's session, created on its first message. A store that cannot take the
        request now (its connections all busy, or unreachable) is a 503, not a failure."""
        try:
            session = await self._open(user_id, chat_id)
        except Exception as exc:
            refusal = self._outages.refusal(exc, f"opening chat={chat_id}")
            if refusal is None:
                raise
            raise refusal from exc
        self._outages.up(SESSION_STORE, SESSION_POOL)
        return session

    def forget(self, user_id: str, chat_id: str) -> None:
        """The chat's store was changed behind the cache (a rewind, a fence): read it anew."""
        if self.cache is not None:
            self.cache.forget(self.app_name, user_id, chat_id)

    async def fence(self, user_id: str, chat_id: str, generation: int) -> Session:
        """Fence off the chat's former holder, whose lease lapsed (it crashed or stalled, and
        may still write): append a content-less event, so the store refuses that holder's
        next append as stale. The chat's session, with the fence.

        Authored by the app, never ``"user"`` (the last user event is the one ADK reads
        approvals from), and in an invocation of its own: ADK's routing skips an author it
        does not know (with a warning), the history and ``TurnCalls`` skip the event."""
        self.forget(user_id, chat_id)  # the former holder may have written behind our back
        for attempt in range(1, FENCE_ATTEMPTS + 1):
            session = await self.open(user_id, chat_id)
            fence = Event(
                author=self.app_name,
                invocation_id=f"fence-{generation}",
                custom_metadata={FENCE_KEY: generation},
            )
            try:
                await self.service.append_event(session, fence)
                break
            except StaleSessionError:  # the former holder wrote between our read and our write
                if attempt == FENCE_ATTEMPTS:
                    raise
        logger.info("chat=%s fenced after an unclean takeover (generation %s)", chat_id, generation)
        return session

    async def _open(self, user_id: str, chat_id: str) -> Session:
        session = await self._get(user_id, chat_id)
        if session is not None:
            return session
        try:
            session = await self.service.create_session(
                app_name=self.app_name, user_id=user_id, session_id=chat_id
            )
        except AlreadyExistsError:
            # Another process created this chat between our read and our insert (ADK raises
            # this for the duplicate `sessions_pkey`, from the IntegrityError): theirs it is.
            session = await self._get(user_id, chat_id)
            if session is None:
                raise
            logger.info("chat created by another process user=%s chat=%s", user_id, chat_id)
            return session
        logger.info("chat created user=%s chat=%s", user_id, chat_id)
        return session

    async def _get(self, user_id: str, chat_id: str) -> Session | None:
        return await self.service.get_session(
            app_name=self.app_name, user_id=user_id, session_id=chat_id
        )


def database_engine(service: BaseSessionService) -> AsyncEngine | None:
    """The SQLAlchemy engine of a database store (PostgreSQL), which the chat index shares;
    None for memory and SQLite."""
    database = _database_service(service)
    return database.db_engine if database is not None else None


def adk_service(service: BaseSessionService) -> BaseSessionService:
    """ADK's own service inside the app's wrappers (``ResultOutbox``, ``SessionCache``)."""
    while (inner := getattr(service, "inner", None)) is not None:
        service = inner
    return service


def session_cache(service: BaseSessionService) -> SessionCache | None:
    """The ``SessionCache`` among the service's wrappers, if any."""
    current: BaseSessionService | None = service
    while current is not None:
        if isinstance(current, SessionCache):
            return current
        current = getattr(current, "inner", None)
    return None


def _database_service(service: BaseSessionService) -> DatabaseSessionService | None:
    service = adk_service(service)
    try:
        from google.adk.sessions.database_session_service import DatabaseSessionService
    except ImportError:  # pragma: no cover - depends on the installed extras
        return None
    return service if isinstance(service, DatabaseSessionService) else None


async def _prepare_postgres_tables(service: DatabaseSessionService) -> None:
    """Create ADK's tables (its own metadata) in one transaction holding our advisory lock,
    then mark them created in the service, the flag its lazy ``prepare_tables`` checks, so
    that this process never creates them again. A process that waits for the lock finds the
    tables there and only reads them."""
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    async with service._table_creation_lock:  # ADK's own, against its lazy creation here
        if service._tables_created:
            return
        for attempt in range(1, _TABLE_ATTEMPTS + 1):
            try:
                async with service.db_engine.begin() as connection:
                    await connection.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": TABLES_LOCK_KEY}
                    )
                    version = await connection.run_sync(_create_tables)
                break
            except DBAPIError as exc:
                if attempt == _TABLE_ATTEMPTS or not _already_exists(exc):
                    raise
                # Created meanwhile by a process without our lock: read what it made.
                logger.info("session tables created by another process; reading them")
        service._db_schema_version = version
        service._tables_created = True
        logger.info("session tables ready (ADK schema %s)", version)


def _create_tables(connection: Connection) -> str:
    """Create whatever of ADK's schema is missing, as ADK's ``prepare_tables`` would, and
    record its version in the same transaction; the schema version."""
    from google.adk.sessions.database_session_service import _setup_database_schema
    from google.adk.sessions.migration import _schema_check_utils as schema_check
    from google.adk.sessions.schemas import v0, v1
    from sqlalchemy.dialects.postgresql import insert

    version = _schema_version(connection)
    if version != schema_check.LATEST_SCHEMA_VERSION:
        # A database of ADK's legacy schema: keep it, as ADK does (its warning says why).
        _setup_database_schema(connection, v0.Base.metadata)
        return version
    _setup_database_schema(connection, v1.Base.metadata)
    if _recorded_version(connection) is None:  # read first: writing needs more privileges
        record = insert(v1.StorageMetadata).values(
            key=schema_check.SCHEMA_VERSION_KEY, value=schema_check.LATEST_SCHEMA_VERSION
        )
        connection.execute(record.on_conflict_do_nothing(index_elements=["key"]))
    return version


def _schema_version(connection: Connection) -> str:
    """ADK's schema version of the database (ADK reads it). ADK records the version in a
    second transaction after creating the tables, so a process without our lock may have
    left the tables without it yet: those are the latest schema."""
    from google.adk.sessions.migration import _schema_check_utils as schema_check
    from google.adk.sessions.schemas import v1
    from sqlalchemy import inspect

    if (
        inspect(connection).has_table(v1.StorageMetadata.__tablename__)
        and _recorded_version(connection) is None
    ):
        return schema_check.LATEST_SCHEMA_VERSION
    version: str = schema_check.get_db_schema_version_from_connection(connection)
    return version


def _recorded_version(connection: Connection) -> str | None:
    """The schema version recorded in ADK's metadata table (which must exist)."""
    from google.adk.sessions.migration import _schema_check_utils as schema_check
    from google.adk.sessions.schemas import v1
    from sqlalchemy import select

    metadata = v1.StorageMetadata
    key = metadata.key == schema_check.SCHEMA_VERSION_KEY
    value: str | None = connection.execute(select(metadata.value).where(key)).scalar()
    return value


def _already_exists(error: DBAPIError) -> bool:
    sqlstate: Any = getattr(error.orig, "sqlstate", None) or getattr(error.orig, "pgcode", None)
    return sqlstate in _ALREADY_EXISTS
