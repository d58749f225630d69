"""Artifacts a tool saves, as ``file`` parts of the response (docs/adr/0025).

When an event's ``actions.artifact_delta`` names artifacts (``tool_context.save_artifact``),
each becomes a ``file`` chunk: a ``data:`` URL when it is small, else the URL of the download
route (``server/artifacts.py``), which serves it only to the chat's own user.
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path
from urllib.parse import quote

from google.adk.artifacts import BaseArtifactService, InMemoryArtifactService
from google.adk.artifacts.file_artifact_service import FileArtifactService
from google.adk.events import Event
from google.genai import types

from adk_stream_protocol.protocol.chunks import FileChunk

logger = logging.getLogger(__name__)

ARTIFACTS_PATH = "/artifacts"
# ADK's prefix of an artifact saved for the user rather than the chat (session).
USER_SCOPE = "user:"


def create_artifact_service(url: str) -> BaseArtifactService:
    """``memory://`` (this process only), ``file:///dir`` or ``file://relative/dir`` (a
    directory; shared between instances only on a shared filesystem), ``gs://bucket``
    (Google Cloud Storage; needs ``google-cloud-storage``)."""
    scheme, _, rest = url.partition("://")
    if scheme == "memory" and not rest:
        return InMemoryArtifactService()
    if scheme == "file" and rest:
        return FileArtifactService(Path(rest))
    if scheme == "gs" and rest:
        from google.adk.artifacts.gcs_artifact_service import GcsArtifactService

        return GcsArtifactService(bucket_name=rest)
    raise ValueError(f"unknown artifact store {url!r}: use memory://, file://DIR or gs://BUCKET")


def download_url(chat_id: str, filename: str, version: int, root_path: str = "") -> str:
    """The route's URL path, under the path the app is reached at (``settings.root_path``)."""
    path = f"{quote(chat_id, safe='')}/{quote(filename, safe='')}"
    return f"{root_path}{ARTIFACTS_PATH}/{path}?version={version}"


class ChatArtifacts:
    """The artifacts of one chat, read for the chat's responses, and deleted with it."""

    def __init__(
        self,
        service: BaseArtifactService,
        *,
        app_name: str,
        user_id: str,
        chat_id: str,
        inline_max_bytes: int,
        root_path: str = "",
    ) -> None:
        self._service = service
        self._app_name = app_name
        self._user_id = user_id
        self._chat_id = chat_id
        self._inline_max = inline_max_bytes
        self._root_path = root_path

    async def files_of(self, event: Event) -> list[FileChunk]:
        """A ``file`` chunk for every artifact the event says was saved."""
        delta = event.actions.artifact_delta if event.actions else None
        if not delta or event.partial:
            return []
        chunks: list[FileChunk] = []
        for filename, version in delta.items():
            part = await self._service.load_artifact(
                app_name=self._app_name,
                user_id=self._user_id,
                session_id=self._chat_id,
                filename=filename,
                version=version,
            )
            chunk = self._chunk(filename, version, part)
            if chunk is not None:
                chunks.append(chunk)
        return chunks

    async def delete_all(self) -> int:
        """Delete the chat's own artifacts, every version; not the user's (``user:``), which
        every chat of the user shares. How many were deleted."""
        service, scope = self._service, {"app_name": self._app_name, "user_id": self._user_id}
        filenames = await service.list_artifact_keys(**scope, session_id=self._chat_id)
        own = [name for name in filenames if not name.startswith(USER_SCOPE)]
        for filename in own:
            await service.delete_artifact(**scope, filename=filename, session_id=self._chat_id)
        return len(own)

    def _chunk(self, filename: str, version: int, part: types.Part | None) -> FileChunk | None:
        blob = part.inline_data if part is not None else None
        if blob is None or blob.data is None:
            # A text artifact or one already gone: nothing the page can show as a file.
            logger.info("artifact not sent chat=%s version=%s", self._chat_id, version)
            return None
        media_type = blob.mime_type or "application/octet-stream"
        if len(blob.data) <= self._inline_max:
            encoded = base64.b64encode(blob.data).decode("ascii")
            return FileChunk(url=f"data:{media_type};base64,{encoded}", media_type=media_type)
        url = download_url(self._chat_id, filename, version, self._root_path)
        return FileChunk(url=url, media_type=media_type)
