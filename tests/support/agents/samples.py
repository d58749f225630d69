"""Agents shaped like the ones people bring (ADK's samples, Google's agent samples), written
for the behaviour table's tests (docs/agent/features.md): a bank with
declared and in-tool confirmations, a support desk with long-running tools, a travel desk with
parallel calls, sub-agents and an ``AgentTool``, a guarded shop with callbacks, a reporter that
saves artifacts, and a counter that keeps and checks its own state. Each model is a
``ScriptedLlm``; everything else is plain ADK.

Each factory builds fresh agents (an agent has one parent, and each test its own ledger). A
``Ledger`` holds one line per run of a tool body that acts, so a test sees what ran, and how
often, whatever the server said."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Collection, Sequence
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.apps import App, ResumabilityConfig
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools import BaseTool, FunctionTool, LongRunningFunctionTool, ToolContext
from google.adk.tools.agent_tool import AgentTool
from google.genai import types
from pydantic import BaseModel

from adk_stream_protocol.demo.history import text_of
from adk_stream_protocol.testing import Answer, ScriptedLlm, call


class Ledger:
    """What the tools' bodies did, one line per run that acted."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def record(self, line: str) -> None:
        self.lines.append(line)


# -- confirmations: a bank ------------------------------------------------------------------

LOAN_HINT = "Approve a loan of 5000 over 12 months?"
LOAN_PAYLOAD = {"amount": 5000, "term_months": 12}


def bank_agent(ledger: Ledger) -> LlmAgent:
    """A declared confirmation (``True``), one a callable decides per call (bills over 100),
    and a tool that asks from its body with a hint and a payload."""

    def transfer_money(amount: float, to: str) -> dict[str, Any]:
        """Sends money to someone; always needs the user's approval."""
        ledger.record(f"transfer {amount:g} {to}")
        return {"status": "sent", "amount": amount, "to": to}

    def pay_bill(bill: str, amount: float) -> dict[str, Any]:
        """Pays a bill; a large one needs the user's approval."""
        ledger.record(f"bill {bill} {amount:g}")
        return {"status": "paid", "bill": bill}

    def large(amount: float, **_: Any) -> bool:
        return amount > 100

    def request_loan(amount: int, tool_context: ToolContext) -> dict[str, Any]:
        """Opens a loan; the user confirms its terms, which they may change."""
        confirmation = tool_context.tool_confirmation
        if confirmation is None:
            tool_context.request_confirmation(
                hint=f"Approve a loan of {amount} over 12 months?",
                payload={"amount": amount, "term_months": 12},
            )
            return {"status": "Waiting for the user to confirm the loan."}
        if not confirmation.confirmed:
            ledger.record("loan refused")
            return {"status": "The loan was not taken."}
        terms = confirmation.payload or {}
        ledger.record(f"loan {terms.get('amount')} {terms.get('term_months')}")
        return {"status": "opened", **terms}

    def get_balance() -> dict[str, int]:
        return {"balance": 1200}

    model = ScriptedLlm(
        script={
            "send": [call("transfer_money", amount=50, to="Ana"), "Done with the transfer."],
            "water bill": [call("pay_bill", bill="water", amount=30), "Water bill paid."],
            "rent": [call("pay_bill", bill="rent", amount=900), "Done with the rent."],
            "loan": [call("request_loan", amount=5000), "Done with the loan."],
            "balance": [call("get_balance"), "You have 1200."],
        }
    )
    return LlmAgent(
        name="bank",
        model=model,
        instruction="Move money only as the user asks.",
        tools=[
            FunctionTool(transfer_money, require_confirmation=True),
            FunctionTool(pay_bill, require_confirmation=large),
            request_loan,
            get_balance,
        ],
    )


def resumable_bank_app(ledger: Ledger) -> App:
    """The bank as a resumable ``App``, as ADK's human-in-the-loop samples serve it."""
    return App(
        name="bank_app",
        root_agent=bank_agent(ledger),
        resumability_config=ResumabilityConfig(is_resumable=True),
    )


# -- long-running tools: a support desk -----------------------------------------------------


class TicketLlm(ScriptedLlm):
    """The script, and answers about the ticket once its final result is in: the turn a
    backend's result continues (held until ``release`` is set, so that a test's resume
    attaches first), and any later question about it."""

    release: Any = None

    def answer(
        self, contents: Sequence[types.Content], *, browser_tools: Collection[str] = ()
    ) -> Answer:
        status = _ticket_status(contents)
        last = contents[-1] if contents else None
        if status and last is not None and any(p.function_response for p in last.parts or []):
            return Answer(text=f"The ticket is {status}.")
        if status and "ticket" in text_of(last):
            return Answer(text=f"Your ticket is {status}.")
        return super().answer(contents, browser_tools=browser_tools)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        if self.release is not None and _ticket_status(llm_request.contents):
            await asyncio.to_thread(self.release.wait, 10)
        async for response in super().generate_content_async(llm_request, stream):
            yield response


def _ticket_status(contents: Sequence[types.Content]) -> str | None:
    """The ticket's final status, once a result other than "pending" came back."""
    status = None
    for content in contents:
        for part in content.parts or []:
            response = part.function_response
            if response is not None and response.name == "escalate_ticket":
                status = (response.response or {}).get("status")
    return None if status in (None, "pending") else str(status)


def support_agent(ledger: Ledger, release: threading.Event | None = None) -> LlmAgent:
    """A long-running tool a backend completes later (it answers "pending" at once), and one
    the browser runs (its function returns nothing)."""

    def escalate_ticket(issue: str, tool_context: ToolContext) -> dict[str, str]:
        """Hands the issue to a person; they decide later."""
        ledger.record(f"escalated {issue}")
        return {"status": "pending", "ticket": f"T-{issue}"}

    def scan_barcode(tool_context: ToolContext) -> None:
        """The page scans a barcode with the camera; nothing to do here."""
        ledger.record("scan asked")

    model = TicketLlm(
        script={
            "broken": [call("escalate_ticket", issue="screen"), "A person will look at it."],
            "scan": [call("scan_barcode"), "Thanks, I have the code."],
        }
    )
    model.release = release
    return LlmAgent(
        name="support",
        model=model,
        tools=[LongRunningFunctionTool(escalate_ticket), LongRunningFunctionTool(scan_barcode)],
    )


# -- parallel calls, sub-agents, AgentTool: a travel desk -----------------------------------


class Summary(BaseModel):
    """What the summarizer agent must answer (its ``output_schema``)."""

    title: str
    nights: int


def travel_agent(ledger: Ledger) -> LlmAgent:
    """A coordinator that books a flight and a hotel in one response (each writes its own
    state key), hands visa questions to a sub-agent (``transfer_to_agent``), and asks a
    structured summarizer through an ``AgentTool``."""

    def book_flight(city: str, tool_context: ToolContext) -> dict[str, str]:
        ledger.record(f"flight {city}")
        tool_context.state["flight"] = city
        return {"flight": f"FL-{city}"}

    def book_hotel(city: str, tool_context: ToolContext) -> dict[str, str]:
        ledger.record(f"hotel {city}")
        tool_context.state["hotel"] = city
        return {"hotel": f"HT-{city}"}

    def itinerary(tool_context: ToolContext) -> dict[str, Any]:
        return {"flight": tool_context.state.get("flight"), "hotel": tool_context.state["hotel"]}

    def check_visa(country: str) -> dict[str, Any]:
        ledger.record(f"visa {country}")
        return {"country": country, "visa_needed": False}

    visas = LlmAgent(
        name="visas",
        description="Answers visa questions.",
        # After a transfer, the latest "user" message a sub-agent's model sees is ADK's "For
        # context: ..." account of the transfer, so its script answers any message ("").
        model=ScriptedLlm(
            script={"": [call("check_visa", country="France"), "No visa needed for France."]}
        ),
        tools=[check_visa],
    )
    summarizer = LlmAgent(
        name="summarizer",
        description="Summarizes a trip.",
        model=ScriptedLlm(script={"": ['{"title": "Paris getaway", "nights": 3}']}),
        output_schema=Summary,
    )
    both = Answer(calls=[call("book_flight", city="Paris"), call("book_hotel", city="Paris")])
    model = ScriptedLlm(
        script={
            "book": [both, call("itinerary"), "Flight and hotel booked for Paris."],
            "visa": [call("transfer_to_agent", agent_name="visas")],
            "summar": [call("summarizer", request="3 nights in Paris"), "Here is your summary."],
        }
    )
    return LlmAgent(
        name="travel",
        model=model,
        instruction="Plan trips; visa questions go to the visas agent.",
        tools=[book_flight, book_hotel, itinerary, AgentTool(agent=summarizer)],
        sub_agents=[visas],
    )


# -- callbacks: a guarded shop --------------------------------------------------------------


def shop_agent(ledger: Ledger) -> LlmAgent:
    """Chains of callbacks, as the samples use them: an after-tool callback that replaces a
    result, and a before-tool callback that answers a call itself (the tool never runs)."""

    def get_price(item: str) -> dict[str, Any]:
        ledger.record(f"price {item}")
        return {"item": item, "cents": 1999}

    def delete_account() -> dict[str, str]:
        ledger.record("account deleted")
        return {"status": "deleted"}

    def log_call(tool: BaseTool, args: dict[str, Any], tool_context: ToolContext) -> None:
        tool_context.state["calls"] = tool_context.state.get("calls", 0) + 1  # goes on

    def refuse_deletes(
        tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        if tool.name == "delete_account":
            return {"status": "refused", "reason": "Accounts are deleted by support only."}
        return None

    def in_dollars(
        tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, tool_response: Any
    ) -> dict[str, Any] | None:
        if tool.name == "get_price":
            return {"item": tool_response["item"], "price": f"${tool_response['cents'] / 100}"}
        return None

    model = ScriptedLlm(
        script={
            "price": [call("get_price", item="lamp"), "The lamp costs $19.99."],
            "delete": [call("delete_account"), "I cannot delete your account."],
        }
    )
    return LlmAgent(
        name="shop",
        model=model,
        tools=[get_price, delete_account],
        before_tool_callback=[log_call, refuse_deletes],
        after_tool_callback=[in_dollars],
    )


# -- artifacts and state --------------------------------------------------------------------

REPORT = b"quarter,revenue\nQ1,10\n"


def reporter_agent(ledger: Ledger) -> LlmAgent:
    """A tool that saves its output as an artifact."""

    async def export_report(quarter: str, tool_context: ToolContext) -> dict[str, Any]:
        part = types.Part.from_bytes(data=REPORT, mime_type="text/csv")
        version = await tool_context.save_artifact(f"{quarter}.csv", part)
        ledger.record(f"report {quarter}")
        return {"saved": f"{quarter}.csv", "version": version}

    model = ScriptedLlm(
        script={"report": [call("export_report", quarter="Q1"), "Your report is saved."]}
    )
    return LlmAgent(name="reporter", model=model, tools=[export_report])


def counter_agent(ledger: Ledger, count_turns: bool = False) -> LlmAgent:
    """Tools that read and write session state, and an agent that checks its own state after
    each turn (it fails loudly when the state is not what its tools left); with
    ``count_turns``, a before-agent callback also counts the turns in state."""

    def add_note(text: str, tool_context: ToolContext) -> dict[str, Any]:
        if "notes" not in tool_context.state:
            tool_context.state["notes"] = []
        notes = [*tool_context.state["notes"], text]
        tool_context.state["notes"] = notes
        ledger.record(f"note {text}")
        return {"count": len(notes)}

    def list_notes(tool_context: ToolContext) -> dict[str, Any]:
        return {"notes": tool_context.state.get("notes", [])}

    def add_turn(callback_context: CallbackContext) -> None:
        callback_context.state["turns"] = callback_context.state.get("turns", 0) + 1

    def check_state(callback_context: CallbackContext) -> None:
        notes = callback_context.state.get("notes", [])
        assert isinstance(notes, list), f"notes is {notes!r}"
        assert len(set(notes)) == len(notes), f"a note was added twice: {notes}"
        if count_turns:
            assert callback_context.state["turns"] >= len(notes), callback_context.state

    model = ScriptedLlm(
        script={
            "milk": [call("add_note", text="milk"), "Noted."],
            "eggs": [call("add_note", text="eggs"), "Noted."],
            "notes": [call("list_notes"), "Those are your notes."],
        }
    )
    return LlmAgent(
        name="counter",
        model=model,
        tools=[add_note, list_notes],
        before_agent_callback=add_turn if count_turns else None,
        after_agent_callback=check_state,
    )


# The bank as a server process serves it
# (ADK_STREAM_AGENT=tests.support.agents.samples:served_bank): what its tools did is read from the
# stored session there, not from this ledger.
served_bank = bank_agent(Ledger())
