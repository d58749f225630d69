"""README.md is the front door: at most 300 lines, its links leading to files that exist (the
docs site's pages, mostly) and to headings those pages have. The site itself is built by
`mkdocs build --strict` in scripts/test, which fails on a broken link or anchor between its
pages; the tests of the examples are tests/test_readme_example.py and
tests/test_readme_examples.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.doc_pages import README, doc_pages, page_name
from tests.support.rig import ROOT

MAX_README_LINES = 300
LINK = re.compile(r"!?\[[^\]\n]*\]\((?P<target>[^)\s]+)\)")


def outside_code(text: str) -> str:
    kept: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return "\n".join(kept)


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub makes them (and the site, mkdocs.yml's
    `toc.slugify`): lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", outside_code(page.read_text(encoding="utf-8")), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
        found.add(slug.replace(" ", "-"))
    return found


def test_the_readme_is_at_most_300_lines() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines: move a section into docs/"


@pytest.mark.parametrize("page", doc_pages(), ids=page_name)
def test_each_relative_link_leads_to_a_file_and_a_heading_it_has(page: Path) -> None:
    broken = []
    for match in LINK.finditer(outside_code(page.read_text(encoding="utf-8"))):
        target = match["target"]
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or not file.resolve().is_relative_to(ROOT):
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: {page_name(file)} has no heading #{anchor}")
    assert not broken, f"{page_name(page)}: " + "; ".join(broken)


def test_the_anchors_are_githubs() -> None:
    # What the link test above relies on, on headings of this project's kind.
    page = ROOT / "docs" / "frontend" / "transports.md"
    assert {"point-usechat-at-it", "ws-live"} <= anchors(page)
    assert "sub-agents-and-transfer_to_agent" in anchors(ROOT / "docs" / "agent" / "testing.md")
