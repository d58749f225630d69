"""The pages whose examples the tests run: README.md and every page of the docs site (docs/,
mkdocs.yml), but for the design records (docs/adr/), which quote code as it was when each was
decided. A marked block (`<!-- readme-python: NAME -->` and its kin) may be on any of them."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.rig import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"


def doc_pages() -> list[Path]:
    """README.md, then the site's pages in path order."""
    site = sorted(path for path in DOCS.rglob("*.md") if path.relative_to(DOCS).parts[0] != "adr")
    return [README, *site]


def page_name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def marked_blocks(pattern: re.Pattern[str], kind: str) -> dict[str, str]:
    """Each block `pattern` finds (groups `name` and `body`), by name, on every page. The same
    example may be shown on two pages (README's front door and the site's page), as one body."""
    found: dict[str, tuple[str, str]] = {}
    for path in doc_pages():
        for match in pattern.finditer(path.read_text(encoding="utf-8")):
            name, body = match["name"], match["body"]
            if name in found:
                where, seen = found[name]
                assert body == seen, (
                    f"two {kind} blocks named {name} differ: {where} and {page_name(path)}"
                )
                continue
            found[name] = (page_name(path), body)
    return {name: body for name, (_, body) in found.items()}


def section(heading: str) -> str:
    """The text of the section with this heading (any level), on whichever page holds it, up to
    the next heading of the same or a higher level (a `#` line in fenced code is no heading)."""
    for path in doc_pages():
        lines = path.read_text(encoding="utf-8").split("\n")
        kept: list[str] = []
        level = 0
        fenced = False
        for line in lines:
            if line.startswith("```"):
                fenced = not fenced
            found = None if fenced else re.match(r"^(#+) (.*)$", line)
            if found and level and len(found[1]) <= level:
                break
            if found and not level and found[2] == heading:
                level = len(found[1])
            if level:
                kept.append(line)
        if kept:
            return "\n".join(kept)
    raise AssertionError(f"no page has a section {heading!r}")
