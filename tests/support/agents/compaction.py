"""An app with ADK's events compaction (docs/adr/0070): an ``LlmAgent`` on ``ScriptedLlm`` whose
turns can pause for each kind the page answers (an approval, ADK's ``request_input``, a
browser tool), summarized by ADK's own ``LlmEventSummarizer`` on a scripted model (a fixed
summary: the tests look for it in what the model is sent).

Two triggers, as ``EventsCompactionConfig`` has them: ``sliding`` (every 2 new invocations,
overlapping 1) and ``tokens`` (past 1 prompt token, so after every turn, keeping the last 2
raw events)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.apps.app import EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools import FunctionTool, LongRunningFunctionTool, request_input
from pydantic import Field
from typing_extensions import override

from adk_stream_protocol.testing import Answer, Branch, ScriptedLlm, call
from tests.support.agents.samples import Ledger

SUMMARY = "Summary: the user chatted about the weather."
TRIGGERS = ("sliding", "tokens")


class SeenModel(ScriptedLlm):
    """The scripted model, keeping every request's text so a test sees what the model saw."""

    seen: list[str] = Field(default_factory=list)

    @override
    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        text = " ".join(p.text or "" for c in llm_request.contents for p in c.parts or [] if p.text)
        self.seen.append(text)
        async for response in super().generate_content_async(llm_request, stream):
            yield response


def compaction_config(trigger: str) -> EventsCompactionConfig:
    summarizer = LlmEventSummarizer(llm=ScriptedLlm(script={"": [SUMMARY]}))
    if trigger == "sliding":
        return EventsCompactionConfig(summarizer=summarizer, compaction_interval=2, overlap_size=1)
    return EventsCompactionConfig(summarizer=summarizer, token_threshold=1, event_retention_size=2)


def compacting_app(trigger: str, ledger: Ledger, model: SeenModel | None = None) -> App:
    def transfer_money(amount: float, to: str) -> dict[str, Any]:
        ledger.record(f"transfer {amount} {to}")
        return {"sent": amount, "to": to}

    def scan_barcode() -> None:
        """Scanned by the browser (a long-running tool the page answers)."""
        return None

    model = model or SeenModel(
        script={
            "pay": [
                call("transfer_money", amount=50, to="Hanako"),
                Branch(approved=Answer(text="Sent."), denied=Answer(text="Not sent.")),
            ],
            "logo": [
                call(
                    "adk_request_input", message="Which colour?", response_schema={"type": "string"}
                ),
                Branch(browser=Answer(text="A logo in your colour.")),
            ],
            "scan": [call("scan_barcode"), Branch(browser=Answer(text="Scanned."))],
            "": ["It is sunny today, and tomorrow looks sunny too."],
        }
    )
    agent = LlmAgent(
        name="weather",
        model=model,
        instruction="Answer about the weather.",
        tools=[
            FunctionTool(transfer_money, require_confirmation=True),
            request_input,
            LongRunningFunctionTool(scan_barcode),
        ],
    )
    return App(
        name="compacting", root_agent=agent, events_compaction_config=compaction_config(trigger)
    )


# The setting's form (`ADK_STREAM_AGENT=tests.support.agents.compaction:sliding_app`), for the
# real-client tests' servers.
sliding_app = compacting_app("sliding", Ledger())
