"""What of a credential request's answer may be shown again: its shape, never its secrets
(docs/adr/0065).

The page answers a ``tool-adk_request_credential`` part with ADK's ``AuthConfig`` carrying
the user's credential: an API key, or OAuth2's redirect URL with its authorization code; the
server's callback route gives the same answer. ADK needs it whole, once, to store or exchange
the credential (``planning.py`` hands it over as it came). Everything that keeps or shows
the answer afterwards gets ``shown_answer`` instead: the chunk that puts the answer on the
call's part, the chat's record of the page's messages, a response's recording. It keeps
what says which credential it was (the scheme, the key's name, the OAuth2 client and its
URLs) and puts ``REDACTED`` where a value was; a value not known to be harmless counts as a
secret.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adk_stream_protocol.protocol.interrupts import CREDENTIAL_TOOL

REDACTED = "[redacted]"

_PART_TYPE = f"tool-{CREDENTIAL_TOOL}"
# An AuthConfig's fields that hold no credential, in either spelling ADK reads.
_PLAIN_CONFIG = frozenset({"authScheme", "auth_scheme", "credentialKey", "credential_key"})
_CREDENTIALS = frozenset(
    {
        "rawAuthCredential",
        "raw_auth_credential",
        "exchangedAuthCredential",
        "exchanged_auth_credential",
    }
)
_PLAIN_CREDENTIAL = frozenset({"authType", "auth_type"})
# OAuth2's fields that the page was shown in the request anyway: who asks, and where to.
_PLAIN_OAUTH2 = frozenset(
    {"clientId", "client_id", "authUri", "auth_uri", "redirectUri", "redirect_uri"}
)


def shown_answer(answer: Any) -> Any:
    """``answer`` (a credential request's) as it may be shown and kept: each value that is
    or may be a secret replaced by ``REDACTED``. A failure the page reported
    (``{"error": "…"}``) stays as it is."""
    if not isinstance(answer, Mapping):
        return REDACTED
    if set(answer) == {"error"} and isinstance(answer["error"], str):
        return dict(answer)
    shown: dict[str, Any] = {}
    for key, value in answer.items():
        if key in _PLAIN_CONFIG:
            shown[key] = value
        elif key in _CREDENTIALS and isinstance(value, Mapping):
            shown[key] = _shown_credential(value)
        else:
            shown[key] = REDACTED
    return shown


def _shown_credential(credential: Mapping[str, Any]) -> dict[str, Any]:
    shown: dict[str, Any] = {}
    for key, value in credential.items():
        if key in _PLAIN_CREDENTIAL:
            shown[key] = value
        elif key == "oauth2" and isinstance(value, Mapping):
            shown[key] = {k: v if k in _PLAIN_OAUTH2 else REDACTED for k, v in value.items()}
        else:
            shown[key] = REDACTED
    return shown


def is_credential_part(part: Mapping[str, Any]) -> bool:
    """Whether a UI message part is a credential request's tool part."""
    kind = part.get("type")
    return kind == _PART_TYPE or (
        kind == "dynamic-tool" and part.get("toolName") == CREDENTIAL_TOOL
    )


def messages_without_secrets(messages: Sequence[Any]) -> list[Any]:
    """The page's messages (as it sent them) with each credential request's answer shown as
    ``shown_answer`` gives it; the messages and parts without one are the same objects."""
    return [_message_without_secrets(message) for message in messages]


def _message_without_secrets(message: Any) -> Any:
    parts = message.get("parts") if isinstance(message, Mapping) else None
    if not isinstance(parts, list) or not any(
        isinstance(p, Mapping) and is_credential_part(p) and "output" in p for p in parts
    ):
        return message
    shown = [
        {**p, "output": shown_answer(p["output"])}
        if isinstance(p, Mapping) and is_credential_part(p) and "output" in p
        else p
        for p in parts
    ]
    return {**message, "parts": shown}


def payload_without_secrets(payload: Any) -> Any:
    """A chat request as the client sent it, its messages as ``messages_without_secrets``
    gives them (for a recording)."""
    if not isinstance(payload, Mapping) or not isinstance(payload.get("messages"), list):
        return payload
    return {**payload, "messages": messages_without_secrets(payload["messages"])}
