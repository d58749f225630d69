"""The README's "Testing your agent" example, run as it is written there: its code block is
read from README.md and its tests are run, so the README cannot drift from the package."""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_example() -> types.ModuleType:
    section = README.read_text(encoding="utf-8").split("### Testing your agent", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the section has a Python example"
    module = types.ModuleType("readme_example")
    exec(compile(match[1], f"{README}:Testing your agent", "exec"), module.__dict__)
    return module


EXAMPLE = readme_example()
EXAMPLE_TESTS = {name: f for name, f in vars(EXAMPLE).items() if name.startswith("test_")}


def test_the_example_has_tests() -> None:
    assert sorted(EXAMPLE_TESTS) == ["test_booking_waits_for_approval", "test_weather"]


@pytest.mark.parametrize("name", sorted(EXAMPLE_TESTS))
def test_the_readme_example_passes(name: str) -> None:
    example_test: Callable[[], None] = EXAMPLE_TESTS[name]
    example_test()
