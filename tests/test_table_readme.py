"""The behaviour table ("Every ADK feature on every transport", on whichever page of README.md
and the docs site holds it) names the tests behind its cells: each name is a test of the
table's modules, and each of those tests is named there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.doc_pages import section

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted((ROOT / "tests").glob("test_table_*.py"))


def _table() -> str:
    return section("Every ADK feature on every transport")


def _tests() -> set[str]:
    names = set()
    for module in MODULES:
        if module.name == Path(__file__).name:
            continue
        for node in ast.parse(module.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                names.add(node.name)
    return names


def test_the_table_names_exactly_the_tests_behind_it() -> None:
    named = set(re.findall(r"`(test_\w+)`", _table()))
    tests = _tests()
    assert named - tests == set(), "the table names tests that do not exist"
    assert tests - named == set(), "tests of the table that it does not name"
