"""A rewind to before one event of a chat, which may be inside an invocation (docs/adr/0046).

ADK rewinds by invocation: ``rewind_async`` drops every event from the first one of the
invocation on. A ``POST /stream`` turn is an invocation of its own, but a ``/live`` socket's
``run_live`` is one invocation for the socket's whole life, with every user message sent on it.
To rewind to before one of those messages, ``rewind_before_event`` rewinds the invocation
(``rewinds.rewind``: ADK's rewind, with the keys it leaves ``None`` removed), then appends
again the events of the rewound stretch that came before the message: copies with the same
content, state changes and invocation, and new ids and times. ADK's rewind gave every artifact
back its version from before the invocation, so the artifacts those events saved are saved
again at the versions they had.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from google.adk.artifacts import BaseArtifactService
from google.adk.events import Event
from google.adk.sessions import BaseSessionService, Session

from adk_stream_protocol.store.history import live_events
from adk_stream_protocol.store.rewinds import Rewinder, rewind
from adk_stream_protocol.store.sessions import FENCE_KEY

logger = logging.getLogger(__name__)

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
    # A fence marks a take-over at its own time (docs/adr/0034): not copied.
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
