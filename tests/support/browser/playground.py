"""The playground page as a user sees it: locators by `data-testid` (playground/README.md).

The playground is built twice (playground/README.md): on ai 7 (`dist/`, what it ships) and on
ai 6 (`dist-v6/`, from the npm aliases `ai-6` and `@ai-sdk/react-3`). A `Mode` is one build and
the transport chosen on its switch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from playwright.sync_api import Locator, Page, WebSocket, expect


@dataclass(frozen=True)
class Mode:
    page: str  # "ai7" (dist/) or "ai6" (dist-v6/)
    transport: str  # "stream", "live" or "voice": the page's transport switch

    def __str__(self) -> str:
        return f"{self.page}-{self.transport}"

    @property
    def ours(self) -> bool:
        """Our transport (adk-stream-protocol-client, `/live?chatId=`, the live model): voice,
        and /live on the ai 6 page, which has no WebSocketChatTransport of its own."""
        return self.transport == "voice" or (self.transport == "live" and self.page == "ai6")

    @property
    def transport_name(self) -> str:
        """What the page says it talks through."""
        if self.transport == "stream":
            return "DefaultChatTransport (ai)"
        if self.ours:
            return "WebSocketChatTransport (adk-stream-protocol-client)"
        return "WebSocketChatTransport (ai)"


# The page the playground ships, on /stream and on ai 7's own WebSocket transport: every flow.
AI7 = (Mode("ai7", "stream"), Mode("ai7", "live"))
# Our transport on the ai 7 page: voice, and what needs the live model (interrupts).
AI7_VOICE = Mode("ai7", "voice")
# The ai 6 build, for the main flows: a chat, an approval, browser tools.
AI6 = (Mode("ai6", "stream"), Mode("ai6", "live"))


@dataclass
class SocketLog:
    """A WebSocket the page opened, and its text frames (what Playwright observed)."""

    url: str
    sent: list[str] = field(default_factory=list)
    received: list[str] = field(default_factory=list)

    @classmethod
    def follow(cls, socket: WebSocket) -> SocketLog:
        log = cls(socket.url)
        socket.on("framesent", lambda payload: log.sent.append(_text(payload)))
        socket.on("framereceived", lambda payload: log.received.append(_text(payload)))
        return log


def _text(payload: str | bytes) -> str:
    return payload if isinstance(payload, str) else f"<{len(payload)} bytes>"


@dataclass
class Playground:
    page: Page
    mode: Mode
    sockets: list[SocketLog]  # every WebSocket the page opened, in order

    @property
    def transport(self) -> str:
        return self.mode.transport

    def by_id(self, test_id: str) -> Locator:
        return self.page.get_by_test_id(test_id)

    @property
    def status(self) -> Locator:
        return self.by_id("chat-status")

    @property
    def input(self) -> Locator:
        return self.by_id("message-input")

    def expect_fresh_chat(self) -> None:
        """A new chat on this mode's page and transport."""
        expect(self.by_id("ai-version")).to_contain_text(f"ai {self.mode.page[-1]}.")
        expect(self.by_id("active-transport")).to_have_text(self.transport)
        expect(self.by_id("transport-name")).to_have_text(self.mode.transport_name)
        expect(self.by_id("empty-hint")).to_be_visible()
        expect(self.status).to_have_text("ready")

    @property
    def chat_id(self) -> str:
        """The open chat's id (the page shows it below the conversation)."""
        return self.by_id("chat-id").inner_text()

    def expect_chat(self, chat_id: str) -> None:
        """That chat is open on this mode's page and transport, as the URL says."""
        expect(self.by_id("active-transport")).to_have_text(self.transport)
        expect(self.by_id("transport-name")).to_have_text(self.mode.transport_name)
        expect(self.by_id("chat-id")).to_have_text(chat_id)
        assert parse_qs(urlsplit(self.page.url).query).get("chat") == [chat_id], self.page.url

    def reload(self) -> None:
        """Reload the page (F5): it opens the chat its URL names."""
        chat_id = self.chat_id
        self.page.reload()
        self.expect_chat(chat_id)

    def chat_item(self, chat_id: str) -> Locator:
        """The chat's entry in the chat list."""
        return self.page.locator(f'[data-testid="chat-item"][data-chat-id="{chat_id}"]')

    def open_chat(self, chat_id: str) -> None:
        """Click the chat in the list."""
        self.chat_item(chat_id).get_by_test_id("chat-open").click()
        self.expect_chat(chat_id)

    def send(self, text: str) -> None:
        """Type a message and press Send (as a user would)."""
        self.input.fill(text)
        expect(self.by_id("send-button")).to_be_enabled()
        self.by_id("send-button").click()

    def expect_ready(self) -> None:
        expect(self.status).to_have_text("ready")

    def messages(self, role: str) -> Locator:
        return self.page.locator(f'[data-testid="message"][data-role="{role}"]')

    def assistant(self, index: int = -1) -> Locator:
        """One assistant message (the last by default), all that it shows."""
        messages = self.messages("assistant")
        return messages.last if index == -1 else messages.nth(index)

    def answer_text(self, index: int = -1) -> str:
        """The text parts of one assistant message, joined (no tool cards, no usage)."""
        return "".join(self.assistant(index).get_by_test_id("text-part").all_text_contents())

    def tool(self, name: str, has_text: str | None = None) -> Locator:
        """The tool part(s) of this tool, optionally the one whose card shows `has_text`."""
        parts = self.page.locator(f'[data-testid="tool-part"][data-tool-name="{name}"]')
        return parts.filter(has_text=has_text) if has_text else parts

    def expect_tool_state(self, tool: Locator, state: str) -> None:
        """The state shows as text on the card and as its attribute."""
        expect(tool.get_by_test_id("tool-state")).to_have_text(state)
        expect(tool).to_have_attribute("data-tool-state", state)
