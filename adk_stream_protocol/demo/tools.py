"""Tools of the offline demo agent.

Two kinds of tools live here:

* server tools (`get_weather`, `process_payment`) run inside ADK;
* browser tools (`get_location`, `change_bgm`) are long-running: ADK records the
  call and ends the run, the browser executes it and sends the result back as a
  FunctionResponse carrying the original call id.

`process_payment` and `get_location` need the user's approval first.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.adk.tools.tool_context import ToolContext
from typing_extensions import override

from .reports import draw_chart

logger = logging.getLogger(__name__)

# Session-scoped state key (no `app:`/`user:` prefix), so every chat starts
# with a fresh mock wallet.
WALLET_STATE_KEY = "demo:wallet_balance"
# What the page is shown of the wallet: a key under the shared state's prefix (`ui:` by
# default). A copy, never read back: the page may write `ui:` keys, and a balance it could set
# would be money it could print.
WALLET_UI_KEY = "ui:wallet"
INITIAL_WALLET_BALANCE = 1000.0

_WEATHER: dict[str, dict[str, Any]] = {
    "tokyo": {"location": "Tokyo", "temperature": 18, "condition": "Cloudy", "humidity": 65},
    "san francisco": {
        "location": "San Francisco",
        "temperature": 15,
        "condition": "Foggy",
        "humidity": 80,
    },
    "london": {"location": "London", "temperature": 12, "condition": "Rainy", "humidity": 85},
    "new york": {"location": "New York", "temperature": 22, "condition": "Sunny", "humidity": 55},
}


def get_weather(location: str) -> dict[str, Any]:
    """Returns the current weather for a city.

    Args:
        location: City name in English, e.g. "Tokyo" or "San Francisco".

    Returns:
        A dict with location, temperature (Celsius), condition and humidity (%).
    """
    known = _WEATHER.get(location.strip().lower())
    if known is not None:
        return {**known, "unit": "celsius"}
    # Offline demo: no network, so unknown cities get a clearly marked default.
    return {
        "location": location,
        "temperature": 20,
        "condition": "Unknown",
        "humidity": 60,
        "unit": "celsius",
        "note": "No offline data for this city; showing default values.",
    }


def process_payment(
    amount: float,
    recipient: str,
    currency: str = "USD",
    description: str = "",
    *,
    tool_context: ToolContext,
) -> dict[str, Any]:
    """Sends money from the user's wallet to a recipient. Requires the user's approval.

    Args:
        amount: Amount to send; must be positive.
        recipient: Name of the person receiving the money.
        currency: ISO currency code such as "USD", "JPY" or "EUR".
        description: Optional note attached to the payment.

    Returns:
        On success: success, transaction_id, amount, currency, recipient,
        description and the new wallet_balance. On failure: success=False and error.
    """
    balance = float(tool_context.state.get(WALLET_STATE_KEY, INITIAL_WALLET_BALANCE))
    if amount <= 0:
        return {"success": False, "error": f"Invalid amount {amount}: it must be positive."}
    if amount > balance:
        return {
            "success": False,
            "error": (
                f"Insufficient funds: {amount:g} {currency} requested,"
                f" wallet balance is {balance:g}."
            ),
        }
    new_balance = round(balance - amount, 2)
    tool_context.state[WALLET_STATE_KEY] = new_balance
    tool_context.state[WALLET_UI_KEY] = {"balance": new_balance}
    transaction_id = f"txn_{uuid.uuid4().hex[:12]}"
    logger.debug("demo payment %s: %s %s to %s", transaction_id, amount, currency, recipient)
    return {
        "success": True,
        "transaction_id": transaction_id,
        "amount": amount,
        "currency": currency,
        "recipient": recipient,
        "description": description,
        "wallet_balance": new_balance,
    }


def get_location() -> None:
    """Gets the user's current location from the browser. Requires the user's approval.

    The browser answers with the coordinates (latitude, longitude, accuracy).
    """
    # Executed in the browser: returning None tells ADK "no response yet".
    return None


def change_bgm(track: int) -> None:
    """Changes the background music playing in the user's browser.

    Args:
        track: Track number to play (1 or 2).
    """
    # Executed in the browser: returning None tells ADK "no response yet".
    return None


class ApprovalLongRunningFunctionTool(LongRunningFunctionTool):
    """A browser-executed (long-running) tool that also requires approval.

    `LongRunningFunctionTool.__init__` has no `require_confirmation`, so the
    requirement is declared through the public `check_require_confirmation`
    hook that ADK's confirmation gate and resume validation both call. The
    server sends the approval to ADK only together with the browser's result
    (docs/adr/0011), so the model never sees an approved call without it.
    """

    @override
    async def check_require_confirmation(
        self, args: dict[str, Any], tool_context: ToolContext
    ) -> bool:
        return True


def demo_tools() -> list[BaseTool]:
    """Builds the demo tools (fresh instances, safe to share across agents)."""
    return [
        FunctionTool(get_weather),
        FunctionTool(draw_chart),
        FunctionTool(process_payment, require_confirmation=True),
        ApprovalLongRunningFunctionTool(get_location),
        LongRunningFunctionTool(change_bgm),
    ]
