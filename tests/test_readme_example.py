"""The README's examples of Python, run as they are written there: "Testing your agent" (its
code block is read from README.md and its tests are run) and the tool of "Tools that reach the
page" (served with a scripted model), so the README cannot drift from the package."""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from pathlib import Path

import pytest
from google.adk.agents import LlmAgent

from adk_stream_protocol.testing import ScriptedLlm, call, serve_agent

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_example(heading: str = "### Testing your agent") -> types.ModuleType:
    section = README.read_text(encoding="utf-8").split(heading, 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the section has a Python example"
    module = types.ModuleType("readme_example")
    exec(compile(match[1], f"{README}:{heading}", "exec"), module.__dict__)
    return module


EXAMPLE = readme_example()
EXAMPLE_TESTS = {name: f for name, f in vars(EXAMPLE).items() if name.startswith("test_")}


def test_the_example_has_tests() -> None:
    assert sorted(EXAMPLE_TESTS) == ["test_booking_waits_for_approval", "test_weather"]


@pytest.mark.parametrize("name", sorted(EXAMPLE_TESTS))
def test_the_readme_example_passes(name: str) -> None:
    example_test: Callable[[], None] = EXAMPLE_TESTS[name]
    example_test()


def test_the_readme_tool_sends_its_progress_to_the_page() -> None:
    tool = readme_example("## Tools that reach the page").import_rows
    model = ScriptedLlm(script={"import": [call("import_rows", path="rows.csv"), "Imported."]})
    with serve_agent(LlmAgent(name="importer", model=model, tools=[tool])) as chat:
        answer = chat.send("Import rows.csv")
    types_sent = answer.types()
    progress = [c for c in answer.chunks if c["type"] == "data-progress"]
    assert [c["data"]["percent"] for c in progress] == [0, 25, 50, 75, 100]
    call_id = answer.tool_calls[0]["toolCallId"]
    assert {c["id"] for c in progress} == {call_id}
    # Between the call and its result; the notice is transient.
    assert types_sent.index("tool-input-available") < types_sent.index("data-progress")
    assert types_sent.index("data-notice") < types_sent.index("tool-output-available")
    assert [c.get("transient") for c in answer.chunks if c["type"] == "data-notice"] == [True]
    # The message the page holds: one progress part, replaced in place, and no notice.
    assert answer.message is not None
    parts = [p for p in answer.message["parts"] if p["type"].startswith("data-")]
    assert parts == [{"type": "data-progress", "id": call_id, "data": {"percent": 100}}]
