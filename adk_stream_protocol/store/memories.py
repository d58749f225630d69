"""The memory service both runners carry: what ``load_memory`` and ``preload_memory`` search
(docs/adr/0063).

Named by a URI in ADK's own forms (``adk api_server --memory_service_uri``), and made by ADK's
own service registry, so a scheme a user registers there (``register_memory_service``) works
here too. What goes into memory is the agent's to say, as on ADK's servers: its callback calls
``add_session_to_memory``; the server adds nothing by itself.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from google.adk.cli.service_registry import get_service_registry
from google.adk.memory import BaseMemoryService

SETTING = "ADK_STREAM_MEMORY_STORE"
_FORMS = (
    "memory:// (this process), sqlite:///FILE.db, rag://CORPUS (Vertex AI RAG), "
    "agentengine://ID (Vertex AI Memory Bank), or a scheme registered with ADK's service registry"
)


def create_memory_service(url: str, *, agents_dir: Path | None = None) -> BaseMemoryService:
    """The memory service ``url`` names. ``agents_dir``: where ADK's Vertex AI forms read a
    ``.env`` for the project and location (as ``adk api_server`` reads its agents' folder).
    A URI ADK does not know, or one its factory refuses, is a ``ValueError`` that names the
    setting; only the scheme is repeated, since a URI may carry a credential."""
    if "://" not in url:
        raise ValueError(f"{SETTING} is not a URI; use {_FORMS}")
    scheme = urlsplit(url).scheme
    registry = get_service_registry()
    try:
        service = registry.create_memory_service(url, agents_dir=str(agents_dir or Path.cwd()))
    except ValueError as exc:
        raise ValueError(f"{SETTING} ({scheme}://): {exc}") from exc
    if service is None:
        raise ValueError(f"{SETTING}: ADK knows no memory service {scheme}://; use {_FORMS}")
    return service
