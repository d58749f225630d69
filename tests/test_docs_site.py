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


def test_the_site_loads_nothing_from_the_internet(tmp_path: Path) -> None:
    """The site built as scripts/test builds it (strict): search works from the file system
    (the offline plugin's index as a script, iframe-worker's shim from the site itself) and
    Mermaid is the site's own copy (scripts/setup.sh, ensure_mermaid), never a CDN's."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"), site_dir=str(tmp_path / "site"))
    assert "material/search" in config.plugins and "material/offline" in config.plugins
    build(config)
    site = tmp_path / "site"
    assert (site / "search" / "search_index.js").is_file()
    loaded = re.compile(r"<(?:script|link)\b[^>]*(?:src|href)=\"(?P<url>[^\"]+)\"")
    for page in site.rglob("*.html"):
        for url in loaded.findall(page.read_text(encoding="utf-8")):
            assert not re.match(r"^(https?:)?//", url), f"{page.relative_to(site)} loads {url}"
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'src="assets/mermaid/mermaid.min.js"' in index
    assert 'src="assets/iframe-worker/shim.js"' in index
    assert (site / "assets" / "iframe-worker" / "shim.js").is_file()
    assert 'dir="$ROOT/docs/assets/mermaid"' in (ROOT / "scripts" / "setup.sh").read_text()


def test_a_mermaid_fence_becomes_a_diagram_for_the_site(tmp_path: Path) -> None:
    import markdown  # type: ignore[import-untyped]  # Python-Markdown (mkdocs's) ships no types
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"), site_dir=str(tmp_path / "site"))
    html = markdown.markdown(
        "```mermaid\nflowchart LR\n  page --> server\n```\n",
        extensions=config.markdown_extensions,
        extension_configs=config.mdx_configs,
    )
    assert html.startswith('<pre class="mermaid"><code>flowchart LR'), html
