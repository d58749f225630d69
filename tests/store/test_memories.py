"""The memory service ``load_memory`` and ``preload_memory`` search (``ADK_STREAM_MEMORY_STORE``,
docs/adr/0063): named in ADK's own URI forms and made by ADK's service registry, one user's
memories kept from another's, a file's kept across a restart, and a URI ADK does not know
stopping the app at start-up with a message that names the setting."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from adk_stream_protocol import create_app
from adk_stream_protocol.testing import ChatResponse, serve_agent, settings_for_tests
from tests.support.agents.recall import ASKED, TOLD, loading_agent
from tests.support.apps import user_from_header
from tests.support.table_chat import TableChat


def _recalled(chat: TableChat) -> list[object]:
    """What ``load_memory`` found for the question, as the page shows it."""
    response: ChatResponse = chat.send(ASKED)
    assert response.errors == [], response.chunks
    (output,) = [c["output"] for c in response.of_type("tool-output-available")]
    return list(output["result"]["memories"])


def test_another_users_chats_are_not_in_a_users_memory() -> None:
    settings = settings_for_tests()
    with serve_agent(loading_agent(), settings, identity=user_from_header) as client:
        http = client.http
        http.headers["x-test-user"] = "ann"
        assert TableChat(http, "stream").send(TOLD).errors == []
        http.headers["x-test-user"] = "bob"
        assert _recalled(TableChat(http, "stream")) == []
        http.headers["x-test-user"] = "ann"
        assert len(_recalled(TableChat(http, "stream"))) == 1


def test_a_sqlite_memory_store_keeps_its_memories_across_a_restart(tmp_path: Path) -> None:
    """``sqlite:///FILE.db``, as ``adk api_server --memory_service_uri`` takes it."""
    settings = settings_for_tests(memory_store=f"sqlite:///{tmp_path / 'memories.db'}")
    with serve_agent(loading_agent(), settings) as client:
        assert TableChat(client.http, "stream").send(TOLD).errors == []
    with serve_agent(loading_agent(), settings) as client:
        (memory,) = _recalled(TableChat(client.http, "stream"))
    assert memory["content"]["parts"][0]["text"] == TOLD  # type: ignore[index]


# What ADK's registry makes, as the message lists it.
FORMS = "use memory:// (this process), sqlite:///FILE.db, rag://CORPUS"


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        (
            "nosuch://memories",
            f"ADK_STREAM_MEMORY_STORE: ADK knows no memory service nosuch://; {FORMS}",
        ),
        ("memories.db", f"ADK_STREAM_MEMORY_STORE is not a URI; {FORMS}"),
        ("rag://", "ADK_STREAM_MEMORY_STORE (rag://): Rag corpus can not be empty."),
    ],
)
def test_a_memory_store_adk_cannot_make_stops_the_app_at_start_up(setting: str, says: str) -> None:
    app = create_app(settings=settings_for_tests(memory_store=setting))
    with pytest.raises(ValueError) as refused, TestClient(app, base_url="http://localhost"):
        pytest.fail("the app started")
    assert str(refused.value).startswith(says)
