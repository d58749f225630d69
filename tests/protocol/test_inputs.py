"""Turning what the client sent into ADK content (``inputs.py``)."""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest
from google.genai import types

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.protocol.inputs import browser_result, is_voice_turn, user_content
from adk_stream_protocol.protocol.parts.tools import AnyToolUIPart
from adk_stream_protocol.protocol.ui_messages import UIMessage


def message(*parts: dict[str, Any], role: str = "user") -> UIMessage:
    return UIMessage.model_validate({"id": "m1", "role": role, "parts": list(parts)})


def file(url: str, media_type: str) -> dict[str, Any]:
    return {"type": "file", "mediaType": media_type, "url": url}


def refusal(msg: UIMessage) -> RequestError:
    with pytest.raises(RequestError) as caught:
        user_content(msg)
    return caught.value


def test_text_and_base64_file_in_order() -> None:
    png = b"\x89PNG\r\n\x1a\n\x00binary"
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    content = user_content(
        message(
            {"type": "text", "text": "Look:"},
            file(url, "image/png"),
            {"type": "text", "text": "What is it?"},
        )
    )
    assert content == types.Content(
        role="user",
        parts=[
            types.Part(text="Look:"),
            types.Part(inline_data=types.Blob(mime_type="image/png", data=png)),
            types.Part(text="What is it?"),
        ],
    )


@pytest.mark.parametrize(
    ("url", "data"),
    [
        ("data:text/plain,hello%20world", b"hello world"),
        ("data:text/plain;charset=utf-8,caf%C3%A9", "café".encode()),
        ("data:,plain", b"plain"),
        ("data:text/plain;charset=utf-8;base64,aGk=", b"hi"),
    ],
)
def test_data_urls_are_decoded(url: str, data: bytes) -> None:
    content = user_content(message(file(url, "text/plain")))
    assert content.parts is not None
    (part,) = content.parts
    assert part.inline_data == types.Blob(mime_type="text/plain", data=data)


@pytest.mark.parametrize(
    "url", ["https://example.com/cat.png", "file:///etc/passwd", "data:image/png;base64"]
)
def test_urls_other_than_data_urls_are_refused(url: str) -> None:
    error = refusal(message(file(url, "image/png")))
    assert error.status == 422
    assert "data: URL" in error.message


@pytest.mark.parametrize("data", ["not base64!", "aGk", "aG=k", "aGk!=", "aG k="])
def test_bad_base64_is_refused(data: str) -> None:
    error = refusal(message(file(f"data:image/png;base64,{data}", "image/png")))
    assert error.status == 422
    assert "not valid base64" in error.message


@pytest.mark.parametrize("media_type", ["application/zip", "application/x-msdownload"])
def test_unaccepted_media_type_is_refused(media_type: str) -> None:
    error = refusal(message(file("data:;base64,aGk=", media_type)))
    assert error.status == 422
    assert repr(media_type) in error.message


@pytest.mark.parametrize("media_type", ["application/pdf", "application/json", "AUDIO/wav"])
def test_accepted_non_image_media_types(media_type: str) -> None:
    content = user_content(message(file("data:;base64,aGk=", media_type)))
    assert content.parts is not None
    assert content.parts[0].inline_data == types.Blob(mime_type=media_type, data=b"hi")


def test_display_only_parts_are_skipped() -> None:
    content = user_content(
        message(
            {"type": "step-start"},
            {"type": "reasoning", "text": "..."},
            {"type": "data-note", "data": {"x": 1}},
            {"type": "source-url", "sourceId": "s1", "url": "https://example.com"},
            {"type": "text", "text": ""},
            {"type": "text", "text": "Hi"},
        )
    )
    assert content == types.Content(role="user", parts=[types.Part(text="Hi")])


def test_message_with_nothing_to_send_is_refused() -> None:
    error = refusal(message({"type": "step-start"}, {"type": "text", "text": ""}))
    assert error.status == 422
    assert "no text or file" in error.message


def test_tool_part_in_a_user_message_is_refused() -> None:
    part = {"type": "tool-x", "toolCallId": "c1", "state": "input-available", "input": {}}
    error = refusal(message(part))
    assert error.status == 422
    assert "'tool-x'" in error.message


def test_assistant_message_is_no_user_content() -> None:
    error = refusal(message({"type": "text", "text": "Hi"}, role="assistant"))
    assert error.status == 422


# -- browser results -----------------------------------------------------------------------------


def tool_part(**fields: Any) -> AnyToolUIPart:
    msg = message({"type": "tool-get_location", "toolCallId": "c1", "input": {}, **fields})
    (part,) = msg.tool_parts()
    return part


def test_browser_object_output_is_the_result() -> None:
    output = {"lat": 35.6, "lon": 139.7}
    part = tool_part(state="output-available", output=output)
    result = browser_result(part)
    assert result == output
    result["lat"] = 0  # a copy: the request is not changed through it
    assert part.output == {"lat": 35.6, "lon": 139.7}


@pytest.mark.parametrize("output", ["Tokyo", 42, [1, 2], None, True])
def test_browser_non_object_output_is_wrapped(output: Any) -> None:
    assert browser_result(tool_part(state="output-available", output=output)) == {"result": output}


def test_browser_error_becomes_an_error_result() -> None:
    part = tool_part(state="output-error", errorText="permission denied")
    assert browser_result(part) == {"error": "permission denied"}
    assert browser_result(tool_part(state="output-error")) == {
        "error": "The tool failed in the browser."
    }


# -- voice turns ---------------------------------------------------------------------------------


def test_voice_turn_has_no_text_or_file() -> None:
    assert is_voice_turn(message({"type": "data-audio", "data": {"seconds": 2}}))
    assert is_voice_turn(message({"type": "step-start"}, {"type": "data-audio", "data": None}))


def test_messages_with_words_or_nothing_are_no_voice_turn() -> None:
    assert not is_voice_turn(message())
    assert not is_voice_turn(message({"type": "text", "text": "Hi"}))
    assert not is_voice_turn(
        message({"type": "data-audio", "data": {}}, file("data:,x", "text/plain"))
    )


# -- ai 7: bare media types, provider references, new parts ---------------------------------------

PNG = b"\x89PNG\r\n\x1a\n\x00rest"
PDF = b"%PDF-1.7\n..."
# An MP3 frame behind an ID3v2 tag of 20 bytes.
TAGGED_MP3 = b"ID3\x04\x00\x00\x00\x00\x00\x14" + b"\x00" * 20 + b"\xff\xfb\x90\x00"


def b64_url(data: bytes, mime: str = "") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def inline(content: types.Content) -> list[types.Blob | None]:
    assert content.parts is not None
    return [p.inline_data for p in content.parts]


@pytest.mark.parametrize(
    ("media_type", "url", "mime"),
    [
        ("image", b64_url(PNG), "image/png"),  # the bytes tell
        ("image/*", b64_url(PNG), "image/png"),  # a wildcard is the top-level type alone
        ("IMAGE", b64_url(b"GIF89a..."), "image/gif"),
        ("image", b64_url(b"RIFF\x00\x00\x00\x00WEBPVP8 "), "image/webp"),
        ("image", b64_url(b"\xff\xd8\xff\xe0"), "image/jpeg"),
        ("image", b64_url(b"?", "image/svg+xml"), "image/svg+xml"),  # the header names it
        ("application", b64_url(PDF), "application/pdf"),
        ("audio", b64_url(TAGGED_MP3), "audio/mpeg"),
        ("audio", b64_url(b"RIFF\x00\x00\x00\x00WAVEfmt "), "audio/wav"),
        ("video", b64_url(b"\x00\x00\x00\x18ftypmp42"), "video/mp4"),
        ("text", "data:text/plain;charset=utf-8,hi", "text/plain"),
    ],
)
def test_a_bare_top_level_type_is_narrowed_by_the_header_or_the_bytes(
    media_type: str, url: str, mime: str
) -> None:
    (blob,) = inline(user_content(message(file(url, media_type))))
    assert blob is not None
    assert blob.mime_type == mime


@pytest.mark.parametrize(
    ("media_type", "url"),
    [
        ("image", b64_url(b"not an image")),
        ("image", b64_url(PDF, "application/pdf")),  # a header of another type does not count
        ("text", "data:,hello"),  # text has no magic bytes
        ("audio", b64_url(b"ID3\x04\x00\x00\x7f\x7f\x7f\x7f" + b"\xff\xfb")),  # tag too large
    ],
)
def test_a_bare_type_whose_data_cannot_be_told_is_refused_saying_so(
    media_type: str, url: str
) -> None:
    error = refusal(message(file(url, media_type)))
    assert error.status == 422
    assert f"file type {media_type!r} names no subtype" in error.message
    assert "cannot be told" in error.message


@pytest.mark.parametrize("media_type", ["png", "", "font", "application/*"])
def test_bare_types_that_are_no_accepted_kind_are_refused(media_type: str) -> None:
    error = refusal(message(file(b64_url(PNG), media_type)))
    assert error.status == 422
    # application/* is narrowed like "application", and PNG bytes are no PDF.
    assert "not accepted" in error.message or "cannot be told" in error.message


def test_a_sniffed_type_must_be_accepted() -> None:
    # The header names the type; application/zip is not something the model takes.
    error = refusal(message(file(b64_url(b"PK\x03\x04", "application/zip"), "application")))
    assert error.status == 422
    assert "'application/zip' is not accepted" in error.message


@pytest.mark.parametrize("url", ["", "https://files.example.com/f-1"])
def test_a_file_with_only_a_provider_reference_is_refused_naming_the_reason(url: str) -> None:
    part = {**file(url, "image/png"), "providerReference": {"openai": "file-1", "google": "f"}}
    error = refusal(message(part))
    assert error.status == 422
    assert "uploaded to google, openai (providerReference)" in error.message
    assert "never fetches" in error.message


def test_a_provider_reference_beside_a_data_url_leaves_the_data_in_use() -> None:
    part = {**file(b64_url(PNG), "image/png"), "providerReference": {"openai": "file-1"}}
    assert inline(user_content(message(part))) == [types.Blob(mime_type="image/png", data=PNG)]


def test_v7_display_parts_are_left_out_and_logged_at_debug_without_content(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="adk_stream_protocol.protocol.inputs")
    content = user_content(
        message(
            {"type": "custom", "kind": "openai.compaction", "providerMetadata": {"openai": {}}},
            {"type": "reasoning-file", "mediaType": "image/png", "url": b64_url(PNG)},
            {"type": "text", "text": "secret words", "citations": [{"source": {}}]},
        )
    )
    assert content == types.Content(role="user", parts=[types.Part(text="secret words")])
    (record,) = [r for r in caplog.records if "left out" in r.getMessage()]
    assert record.levelno == logging.DEBUG
    assert "custom" in record.getMessage() and "reasoning-file" in record.getMessage()
    assert "secret" not in record.getMessage()


def test_a_message_of_display_parts_only_is_refused() -> None:
    error = refusal(message({"type": "custom", "kind": "openai.x"}))
    assert error.status == 422
    assert "no text or file" in error.message


def test_steering_in_a_user_message_joins_its_content_in_order() -> None:
    steering = {
        "type": "steering-message",
        "id": "steer-1",
        "parts": [
            {"type": "text", "text": "and also"},
            {"type": "text", "text": ""},
            file(b64_url(PNG), "image"),
        ],
    }
    content = user_content(message({"type": "text", "text": "first"}, steering))
    assert content == types.Content(
        role="user",
        parts=[
            types.Part(text="first"),
            types.Part(text="and also"),
            types.Part(inline_data=types.Blob(mime_type="image/png", data=PNG)),
        ],
    )
    assert not is_voice_turn(message(steering))


def test_a_steering_file_is_held_to_the_file_rules() -> None:
    steering = {"type": "steering-message", "id": "s", "parts": [file("", "image")]}
    assert refusal(message(steering)).status == 422
