"""A graph ``Workflow`` shaped like ADK's workflow samples (``google.adk.workflow``), for the
workflow rows of the behaviour table (issue 37, point 1): a trip planner whose first node reads
the user's message, fans out to two searches that a ``JoinNode`` gathers, decides by budget
(a conditional route, with ``DEFAULT_ROUTE`` for the rest) and ends either in a node that
returns a pydantic model (the summary) or in an ``LlmAgent`` node whose text is its output
(ADK's ``message_as_output``). Each node's messages to the user are ``Event(message=...)``;
the model is a ``ScriptedLlm``.

``trip_planner()`` builds fresh nodes (a node has one graph); a ``Ledger`` holds one line
per run of the node that books, so a test sees what ran."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.events import Event
from google.adk.workflow import DEFAULT_ROUTE, START, JoinNode, Workflow
from pydantic import BaseModel

from adk_stream_protocol.testing import ScriptedLlm
from tests.support.agents.samples import Ledger

FLIGHT: dict[str, Any] = {"airline": "Nordic Air", "price": 320}
HOTEL: dict[str, Any] = {"hotel": "Harbour Inn", "price": 540}
TOTAL = 860  # the flight's price and the hotel's
ADVICE = "That trip is over your budget: try two nights fewer, or a hostel."


class TripSummary(BaseModel):
    """What the planner booked: the workflow's output when the trip fits the budget."""

    destination: str
    airline: str
    hotel: str
    total: int


def trip_planner(ledger: Ledger, *, resumable: bool = False) -> App:
    """``intake`` → (``flights``, ``hotels``) → ``gather`` (a ``JoinNode``) → ``decide``,
    which routes ``within_budget`` to ``book`` (a ``TripSummary``) and anything else
    (``DEFAULT_ROUTE``) to ``advisor``, an ``LlmAgent``. The budget is the last number of the
    user's message ("a trip to Oslo under 1000"). ``resumable``: in an ``App`` with ADK's
    ``ResumabilityConfig``, whose workflow also emits its checkpoints (``agent_state``)."""

    def intake(node_input: str) -> Iterator[Event]:
        destination = re.search(r"to (\w+)", node_input)
        budget = re.findall(r"\d+", node_input)
        yield Event(message="Looking for flights and hotels.")
        yield Event(
            output={
                "destination": destination.group(1) if destination else "Oslo",
                "budget": int(budget[-1]) if budget else 0,
            }
        )

    def flights(node_input: dict[str, Any]) -> Iterator[Event]:
        yield Event(message=f"Found a flight to {node_input['destination']}.")
        yield Event(output={**FLIGHT, "destination": node_input["destination"]})

    def hotels(node_input: dict[str, Any]) -> Iterator[Event]:
        yield Event(message="Found a hotel.")
        yield Event(output={**HOTEL, "budget": node_input["budget"]})

    gather = JoinNode(name="gather")

    def decide(node_input: dict[str, Any]) -> Event:
        flight, hotel = node_input["flights"], node_input["hotels"]
        total = flight["price"] + hotel["price"]
        fits = total <= hotel["budget"]
        return Event(
            route="within_budget" if fits else "over_budget",
            output={
                "destination": flight["destination"],
                "airline": flight["airline"],
                "hotel": hotel["hotel"],
                "total": total,
            },
        )

    def book(node_input: dict[str, Any]) -> TripSummary:
        ledger.record(f"book {node_input['destination']} {node_input['total']}")
        return TripSummary(**node_input)

    advisor = LlmAgent(
        name="advisor",
        model=ScriptedLlm(script={"": [ADVICE]}),
        instruction="Tell the user how to bring the trip within the budget.",
    )
    workflow = Workflow(
        name="trip_planner",
        edges=[
            (START, intake, (flights, hotels), gather, decide),
            (decide, {"within_budget": book, DEFAULT_ROUTE: advisor}),
        ],
    )
    config = ResumabilityConfig(is_resumable=True) if resumable else None
    return App(name="trip_planner", root_agent=workflow, resumability_config=config)


# The planner as a server of its own serves it (``ADK_STREAM_AGENT=
# tests.support.agents.workflows:served_planner``), for the real clients.
served_planner = trip_planner(Ledger())
