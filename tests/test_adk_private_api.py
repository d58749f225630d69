"""The private parts of google-adk this package relies on, each checked for the shape we use
(docs/adr/0039 lists them and why no public API replaces them).

ADK may change any of these in a release without notice. An upgrade that does fails here
first, with a message that says what breaks and where we use it, instead of failing deep in a
PostgreSQL start-up, or as a log filter that quietly stops filtering. Each test checks only
what our code reads or writes; the behaviour built on it is tested where it is used.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from pathlib import Path

import pytest
from google.adk.sessions.database_session_service import DatabaseSessionService
from sqlalchemy import create_engine
from sqlalchemy import inspect as inspect_db

from adk_stream_protocol.foundation.errors import ABORTED_CODE
from adk_stream_protocol.observability.adk_logs import _FAILURE_LOGGERS, ADK_LOGGERS, UNKNOWN_AGENT
from adk_stream_protocol.turns.runners import _REGISTERED

TABLES = (
    "store/sessions.py (_prepare_postgres_tables) creates ADK's tables on PostgreSQL in one "
    "transaction under an advisory lock, then tells DatabaseSessionService they exist"
)


def _service(tmp_path: Path) -> DatabaseSessionService:
    return DatabaseSessionService(f"sqlite+aiosqlite:///{tmp_path / 'sessions.db'}")


@pytest.mark.asyncio
async def test_the_database_service_keeps_its_table_state_where_we_set_it(tmp_path: Path) -> None:
    service = _service(tmp_path)
    try:
        lock = getattr(service, "_table_creation_lock", None)
        assert isinstance(lock, asyncio.Lock), (
            f"DatabaseSessionService._table_creation_lock is gone: {TABLES}, holding it"
        )
        assert getattr(service, "_tables_created", None) is False, (
            f"DatabaseSessionService._tables_created is gone: {TABLES} by setting it"
        )
        assert hasattr(service, "_db_schema_version"), (
            f"DatabaseSessionService._db_schema_version is gone: {TABLES}, and sets it"
        )
        assert service._db_schema_version is None
        # The flag is what ADK's lazy preparation checks: set, it creates nothing.
        service._tables_created = True
        await service.prepare_tables()
        async with service.db_engine.connect() as connection:
            names = await connection.run_sync(lambda c: inspect_db(c).get_table_names())
        assert names == [], (
            "DatabaseSessionService.prepare_tables no longer stops at _tables_created: "
            f"{TABLES}; ADK would create them again, without our lock"
        )
    finally:
        await service.close()


@pytest.mark.asyncio
async def test_the_database_service_records_the_schema_version_we_write(tmp_path: Path) -> None:
    from google.adk.sessions.migration import _schema_check_utils as schema_check

    service = _service(tmp_path)
    try:
        await service.prepare_tables()
        assert service._tables_created is True
        assert service._db_schema_version == schema_check.LATEST_SCHEMA_VERSION, (
            "DatabaseSessionService._db_schema_version no longer holds "
            f"_schema_check_utils.LATEST_SCHEMA_VERSION once prepared: {TABLES} with that value"
        )
    finally:
        await service.close()


def test_the_schema_helpers_we_call_have_our_shape() -> None:
    where = "store/sessions.py (_create_tables, _schema_version, _recorded_version) uses it"
    try:
        database = importlib.import_module("google.adk.sessions.database_session_service")
        schema_check = importlib.import_module("google.adk.sessions.migration._schema_check_utils")
        from google.adk.sessions.schemas import v0, v1
    except ImportError as exc:  # pragma: no cover - what an ADK upgrade may do
        raise AssertionError(f"an ADK module moved ({exc}): {where}") from exc
    setup = getattr(database, "_setup_database_schema", None)
    assert setup is not None, f"database_session_service._setup_database_schema is gone: {where}"
    assert list(inspect.signature(setup).parameters) == ["connection", "metadata"], where
    for name in ("LATEST_SCHEMA_VERSION", "SCHEMA_VERSION_KEY"):
        assert isinstance(getattr(schema_check, name, None), str), f"{name} changed: {where}"
    reads = getattr(schema_check, "get_db_schema_version_from_connection", None)
    assert callable(reads), f"get_db_schema_version_from_connection is gone: {where}"
    assert hasattr(v0.Base, "metadata"), f"schemas.v0.Base changed: {where}"
    columns = set(v1.StorageMetadata.__table__.columns.keys())
    assert {"key", "value"} <= columns, f"schemas.v1.StorageMetadata changed: {where}"

    engine = create_engine("sqlite://")
    with engine.begin() as connection:
        assert reads(connection) == schema_check.LATEST_SCHEMA_VERSION, where
        setup(connection, v1.Base.metadata)
        assert inspect_db(connection).has_table(v1.StorageMetadata.__tablename__), where
    engine.dispose()


# Modules of only some of the versions we support (docs/adr/0039): each logs a live tool's
# failure in its version.
_ONLY_SOME_VERSIONS = {
    "flows.llm_flows.tools._batch_executor",  # 2.11
    "flows.llm_flows.tools._live_caller",  # 2.12 on
}


def test_the_loggers_we_filter_are_adks_modules_loggers() -> None:
    where = (
        "observability/adk_logs.py moves ADK's records of a store's outage to DEBUG on this "
        "logger; without it they reach the log at ERROR with a traceback"
    )
    found = 0
    for name in _FAILURE_LOGGERS:
        module = name.removeprefix(f"{ADK_LOGGERS}.google.adk.")
        try:
            imported = importlib.import_module(f"google.adk.{module}")
        except ModuleNotFoundError:
            assert module in _ONLY_SOME_VERSIONS, f"google.adk.{module} is gone: {where}"
            continue
        logger = getattr(imported, "logger", None)
        assert logger is not None and logger.name == name, (
            f"google.adk.{module} logs elsewhere now: {where}"
        )
        found += 1
    assert found >= len(_FAILURE_LOGGERS) - 1, "both of a version's live tool modules are gone"


def test_the_lines_we_recognise_are_adks() -> None:
    router = importlib.import_module("google.adk.agents._agent_router")
    assert UNKNOWN_AGENT in inspect.getsource(router), (
        "ADK's 'Event from an unknown agent' warning changed (google.adk.agents._agent_router): "
        "observability/adk_logs.py no longer recognises it for the app's fence author, and "
        "each chat's next run after a fence warns"
    )
    from google.adk.plugins import plugin_manager

    assert _REGISTERED in inspect.getsource(plugin_manager), (
        "ADK's 'Plugin registered' line changed (google.adk.plugins.plugin_manager): "
        "turns/runners.py no longer drops its repeat when a second runner is built"
    )


def test_an_aborted_run_has_the_code_we_expect() -> None:
    events = importlib.import_module("google.adk.events._abort_events")
    assert getattr(events, "_INVOCATION_ABORTED", None) == ABORTED_CODE, (
        "ADK's error code of a run stopped through Runner.run_async(abort_signal=...) changed "
        "(google.adk.events._abort_events): foundation/errors.py ABORTED_CODE no longer matches, "
        "so a client's stop is logged at ERROR and shown as a failure (protocol/converter.py)"
    )


REWINDS = (
    "store/rewinds.py removes the keys a rewound turn added from the stored state (ADK's "
    "rewind leaves them None, docs/adr/0036)"
)


@pytest.mark.asyncio
async def test_the_sqlite_service_lends_its_connection_to_sessions_rows(tmp_path: Path) -> None:
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    service = SqliteSessionService(str(tmp_path / "sessions.db"))
    session = await service.create_session(app_name="app", user_id="u", session_id="s")
    connect = getattr(service, "_get_db_connection", None)
    assert connect is not None, f"SqliteSessionService._get_db_connection is gone: {REWINDS}"
    async with connect() as db:
        query = "SELECT state, update_time FROM sessions WHERE app_name=? AND user_id=? AND id=?"
        async with db.execute(query, ("app", "u", "s")) as cursor:
            row = await cursor.fetchone()
    assert row is not None and row["update_time"] == session.last_update_time, (
        f"SqliteSessionService's sessions table (state, update_time) changed: {REWINDS}"
    )


@pytest.mark.asyncio
async def test_the_database_service_names_its_session_table_class(tmp_path: Path) -> None:
    from sqlalchemy import select

    service = _service(tmp_path)
    try:
        session = await service.create_session(app_name="app", user_id="u", session_id="s")
        classes = getattr(service, "_get_schema_classes", None)
        assert classes is not None, f"DatabaseSessionService._get_schema_classes is gone: {REWINDS}"
        storage = classes().StorageSession
        async with service.database_session_factory() as sql:
            query = select(storage).where(storage.app_name == "app", storage.id == "s")
            row = (await sql.execute(query)).scalars().one()
        assert row.get_update_timestamp() == session.last_update_time, (
            f"ADK's StorageSession (get_update_timestamp) changed: {REWINDS}"
        )
        assert isinstance(row.state, dict), f"ADK's StorageSession.state changed: {REWINDS}"
    finally:
        await service.close()


@pytest.mark.asyncio
async def test_a_database_sessions_revision_marker_is_where_the_cache_reads_it(
    tmp_path: Path,
) -> None:
    """store/session_cache.py (``revision_of``) compares ``Session._storage_update_marker``, the
    exact revision ADK's database service checks appends against, to tell whether a chat
    moved since it was cached (docs/adr/0070)."""
    service = _service(tmp_path)
    try:
        await service.create_session(app_name="a", user_id="u", session_id="s")
        session = await service.get_session(app_name="a", user_id="u", session_id="s")
        assert session is not None
        marker = getattr(session, "_storage_update_marker", "gone")
        assert isinstance(marker, str), (
            "Session._storage_update_marker is gone or no longer a string: store/session_cache.py "
            "reads it as the session's revision"
        )
    finally:
        await service.close()


def test_the_compaction_summarizer_helper_has_our_shape() -> None:
    """turns/compaction.py (``guarded``) makes ADK's default summarizer with ADK's own helper
    before wrapping it, as the runner would make it lazily (docs/adr/0070)."""
    from google.adk.apps import compaction

    helper = getattr(compaction, "_ensure_compaction_summarizer", None)
    assert helper is not None, (
        "google.adk.apps.compaction._ensure_compaction_summarizer is gone: turns/compaction.py "
        "calls it to make the default summarizer it wraps"
    )
    assert list(inspect.signature(helper).parameters) == ["config", "agent"]
