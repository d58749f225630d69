"""What of a credential request's answer is shown and kept again (docs/adr/0065): its shape,
each secret ``[redacted]``, whatever part or spelling it comes in."""

from __future__ import annotations

from adk_stream_protocol.protocol.credentials import (
    REDACTED,
    messages_without_secrets,
    payload_without_secrets,
    shown_answer,
)

SCHEME = {"type": "oauth2", "flows": {}}
OAUTH2_ANSWER = {
    "authScheme": SCHEME,
    "credentialKey": "k",
    "exchangedAuthCredential": {
        "authType": "oauth2",
        "oauth2": {
            "clientId": "agent",
            "authUri": "https://provider/authorize?state=s",
            "redirectUri": "https://page/back",
            "authResponseUri": "https://page/back?code=c0de&state=s",
            "accessToken": "t0ken",
            "codeVerifier": "v",
        },
    },
    "somethingElse": {"apiKey": "k3y"},
}


def test_an_oauth2_answer_keeps_its_shape_and_loses_its_secrets() -> None:
    shown = shown_answer(OAUTH2_ANSWER)
    assert shown["authScheme"] == SCHEME and shown["credentialKey"] == "k"
    assert shown["exchangedAuthCredential"]["oauth2"] == {
        "clientId": "agent",
        "authUri": "https://provider/authorize?state=s",
        "redirectUri": "https://page/back",
        "authResponseUri": REDACTED,
        "accessToken": REDACTED,
        "codeVerifier": REDACTED,
    }
    assert shown["somethingElse"] == REDACTED  # not known to be harmless: a secret


def test_an_api_key_in_either_spelling_and_a_bare_value_are_redacted() -> None:
    snake = {
        "auth_scheme": SCHEME,
        "exchanged_auth_credential": {"auth_type": "apiKey", "api_key": "k"},
    }
    assert shown_answer(snake)["exchanged_auth_credential"] == {
        "auth_type": "apiKey",
        "api_key": REDACTED,
    }
    assert shown_answer("a-bare-key") == REDACTED
    assert shown_answer({"error": "the page could not sign in"}) == {
        "error": "the page could not sign in"
    }


def test_only_credential_parts_of_the_pages_messages_change() -> None:
    other = {
        "type": "tool-get_forecast",
        "toolCallId": "a",
        "state": "output-available",
        "output": {"apiKey": "x"},
    }
    asked = {
        "type": "tool-adk_request_credential",
        "toolCallId": "b",
        "state": "input-available",
        "input": {},
    }
    answered = {
        "type": "tool-adk_request_credential",
        "toolCallId": "c",
        "state": "output-available",
        "output": OAUTH2_ANSWER,
    }
    dynamic = {
        "type": "dynamic-tool",
        "toolName": "adk_request_credential",
        "toolCallId": "d",
        "state": "output-available",
        "output": "k",
    }
    user = {"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    assistant = {"id": "m", "role": "assistant", "parts": [other, asked, answered, dynamic]}
    shown_user, shown_assistant = messages_without_secrets([user, assistant])
    assert shown_user is user  # nothing to hide: the same object
    parts = shown_assistant["parts"]
    assert parts[0] is other and parts[1] is asked
    assert parts[2]["output"] == shown_answer(OAUTH2_ANSWER) and parts[3]["output"] == REDACTED
    assert answered["output"] is OAUTH2_ANSWER  # the page's request itself is not changed
    payload = payload_without_secrets(
        {"id": "chat", "messages": [assistant], "trigger": "submit-message"}
    )
    assert payload["messages"][0]["parts"][2]["output"] == shown_answer(OAUTH2_ANSWER)
