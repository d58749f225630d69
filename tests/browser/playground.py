"""The playground page as a user sees it: locators by `data-testid` (playground/README.md)."""

from __future__ import annotations

from dataclasses import dataclass

from playwright.sync_api import Locator, Page, expect


@dataclass
class Playground:
    page: Page
    transport: str  # "stream" or "live"

    def by_id(self, test_id: str) -> Locator:
        return self.page.get_by_test_id(test_id)

    @property
    def status(self) -> Locator:
        return self.by_id("chat-status")

    @property
    def input(self) -> Locator:
        return self.by_id("message-input")

    def expect_fresh_chat(self) -> None:
        expect(self.by_id("active-transport")).to_have_text(f"/{self.transport}")
        expect(self.by_id("empty-hint")).to_be_visible()
        expect(self.status).to_have_text("ready")

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
