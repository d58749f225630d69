"""``ChatTools``: our plugins as a turn talks to them, built once per application and carried
by both runners (docs/adr/0053).

A turn opens its chat's route for the data parts its tools send (``ui``) and holds the lease
their starts are marked under (``starts``); a restart waits for the tools that run now
(``running``). On ``/live`` the approval gate waits for the user's answers (``gate``) and
stores the page's state that came with them (``page_states``). With a sign-in callback, OAuth2
sign-ins come back to the server (``sign_ins``).
"""

from __future__ import annotations

from collections.abc import Callable

from adk_stream_protocol.coordination.base import Outcome, PendingCalls
from adk_stream_protocol.plugins.approvals import LiveApprovalPlugin
from adk_stream_protocol.plugins.page_states import PageStates
from adk_stream_protocol.plugins.running_tools import RunningTools
from adk_stream_protocol.plugins.sign_ins import SignInPlugin
from adk_stream_protocol.plugins.tool_starts import ToolStartPlugin
from adk_stream_protocol.plugins.tool_ui import ToolUiPlugin


class ChatTools:
    """The plugins that stand between a chat's tools and its turn."""

    def __init__(
        self,
        starts: ToolStartPlugin,
        pending: PendingCalls,
        *,
        approval_timeout_seconds: float,
        on_outcome: Callable[[Outcome], None],
        sign_ins: SignInPlugin | None = None,
    ) -> None:
        self.ui = ToolUiPlugin()  # where a chat's data parts go
        # A durable mark before each tool body runs; it says whether the tool may run again.
        self.starts = starts
        self.running = RunningTools()  # which tools of a chat run now
        self.page_states = PageStates()  # the page's changes sent with an answer on /live
        # OAuth2 sign-ins that come back to the server's callback, when it has one.
        self.sign_ins = sign_ins
        # /live's gate: ADK's live flow cannot confirm a tool, so the server asks itself.
        self.gate = LiveApprovalPlugin(
            pending,
            approval_timeout_seconds,
            on_outcome=on_outcome,
            page_states=self.page_states,
            append=self.starts.append,
        )
