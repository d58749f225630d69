"""The calls a paused turn waits on the page to answer, by kind, and whether an answer fits
its call (docs/adr/0064-input-and-credential-interrupts.md).

ADK 2 pauses a run the same way whatever it waits for (``google/adk/events/_interrupts.py``):
a function call whose id is in its event's ``long_running_tool_ids`` (older sessions: named
``adk_request_input`` or ``adk_request_credential``), open until a user event carries a
``FunctionResponse`` with that id. What differs is what an answer must be:

- a **browser call**, a long-running tool the page runs: any output;
- an **input request** (``adk_request_input``: a workflow's ``RequestInput``, or the
  ``request_input`` tool): the user's answer, which must fit the request's
  ``response_schema`` (a JSON Schema; none means any value);
- a **credential request** (``adk_request_credential``): the ``AuthConfig`` the request
  carried, back with the credential (an API key, or OAuth2's redirect URL, which must carry
  the ``state`` the request's authorization URL was made with).

The page answers all three alike, with ``addToolOutput``. Approvals (``adk_request_confirmation``)
are the fourth kind of interrupt; the page answers them with ``addToolApprovalResponse``
(``confirmations.py``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from enum import Enum
from typing import Any
from urllib.parse import parse_qs, urlsplit

from google.adk.auth.auth_tool import AuthConfig
from google.genai import types
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import ValidationError

INPUT_TOOL = "adk_request_input"
CREDENTIAL_TOOL = "adk_request_credential"
# ADK's own key for a value that is not an object, in a function response (its web UI and
# its workflows wrap and unwrap it alike).
RESULT_KEY = "result"

logger = logging.getLogger(__name__)


class PageCall(Enum):
    """The kind of a call the page answers with ``addToolOutput``."""

    BROWSER = "browser"
    INPUT = "input"
    CREDENTIAL = "credential"


_BY_NAME = {INPUT_TOOL: PageCall.INPUT, CREDENTIAL_TOOL: PageCall.CREDENTIAL}


def page_call_kind(name: str) -> PageCall:
    """The kind of a call the page answers, by its function's name."""
    return _BY_NAME.get(name, PageCall.BROWSER)


def waits_for_page(call: types.FunctionCall, long_running: Collection[str]) -> bool:
    """Whether a call pauses the run until the page answers it: ADK's rule, with its fallback
    for sessions stored without ``long_running_tool_ids``."""
    return call.id in long_running or (call.name or "") in _BY_NAME


def answer_problem(kind: PageCall, args: dict[str, Any], result: dict[str, Any]) -> str | None:
    """Why ``result`` (a function response, as ``inputs.browser_result`` makes it) cannot
    answer a call of ``kind`` asked with ``args``; None when it can. A result that reports
    the page's failure (``{"error": …}``, from ``output-error``) answers any kind."""
    if kind is PageCall.BROWSER or set(result) == {"error"}:
        return None
    if kind is PageCall.INPUT:
        return _input_problem(args, result)
    return _credential_problem(args, result)


def _input_problem(args: dict[str, Any], result: dict[str, Any]) -> str | None:
    schema = args.get("response_schema", args.get("responseSchema"))
    if not isinstance(schema, dict):
        return None  # no schema: any value (ADK's None), or one ADK could not express
    value = result[RESULT_KEY] if set(result) == {RESULT_KEY} else result
    try:
        validator = Draft202012Validator(schema)
        error = next(iter(validator.iter_errors(value)), None)
    except SchemaError:
        logger.debug("an input request's response_schema is not a JSON Schema: not checked")
        return None
    if error is None:
        return None
    # The schema's words, not the value's: refusals are logged, and the value is the user's.
    where = "/".join(str(p) for p in error.absolute_path) or "the top"
    rule = json.dumps(error.validator_value)[:200]
    return f"its response_schema's {error.validator!r} ({rule}) fails at {where}"


def _credential_problem(args: dict[str, Any], result: dict[str, Any]) -> str | None:
    try:
        config = AuthConfig.model_validate(result)
    except ValidationError as exc:
        # Field locations only: the values may be secrets.
        fields = sorted({".".join(str(p) for p in e["loc"]) for e in exc.errors()})
        return f"it is not the request's authConfig ({', '.join(fields)} invalid)"
    if config.exchanged_auth_credential is None:
        return "its authConfig carries no credential (exchangedAuthCredential)"
    # OAuth2: the provider sends back the state the request's authUri carried; a redirect
    # with another is not this sign-in's.
    oauth2 = config.exchanged_auth_credential.oauth2
    asked = _requested_state(args)
    if asked is None or oauth2 is None or not oauth2.auth_response_uri:
        return None
    query = parse_qs(urlsplit(oauth2.auth_response_uri).query)
    if query.get("state") != [asked]:
        return "its authResponseUri does not carry the state of the request's authUri"
    return None


def _requested_state(args: dict[str, Any]) -> str | None:
    """The ``state`` a credential request's OAuth2 authorization URL was made with."""
    config = args.get("authConfig")
    credential = config.get("exchangedAuthCredential") if isinstance(config, dict) else None
    oauth2 = credential.get("oauth2") if isinstance(credential, dict) else None
    state = oauth2.get("state") if isinstance(oauth2, dict) else None
    return state if isinstance(state, str) and state else None
