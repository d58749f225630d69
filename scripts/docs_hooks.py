"""MkDocs hooks (mkdocs.yml): the site's links to the repository's files outside docs/.

The pages link to files as GitHub shows them (`../../bench/RESULTS.md`), so that the same
Markdown reads on GitHub and on the site. A built site has no repository beside it, so:

- a Markdown file or an image outside docs/ that a page links to is put into the site, under
  `repository/` (`repository/bench/RESULTS.md`), and the link is pointed there; its own links
  are treated the same way, so the README's links into docs/ lead to the site's pages;
- a link to any other file or folder of the repository (a test module, `client/`) keeps its
  text and loses its target, which is a path the reader can open in a checkout;
- a link to nothing that exists is a warning, which `mkdocs build --strict` turns into a
  failure, as MkDocs does for a broken link between pages.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.plugins.docs_hooks")

REPOSITORY = "repository"
IMAGES = {".png", ".svg", ".jpg", ".jpeg", ".gif", ".webp"}
# `[text](target)` or `![text](target)`: an inline link whose target has no spaces.
LINK = re.compile(r"(?P<image>!?)\[(?P<text>[^\]\n]*)\]\((?P<target>[^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def _root(config: MkDocsConfig) -> Path:
    return Path(config.config_file_path).resolve().parent


def _real_path(file: File, config: MkDocsConfig) -> Path:
    """Where the page's Markdown is in the checkout."""
    assert file.abs_src_path is not None
    return Path(file.abs_src_path).resolve()


def _outside_code(markdown: str) -> list[tuple[bool, str]]:
    """The Markdown cut into runs of lines, each marked True when it is outside fenced code."""
    runs: list[tuple[bool, str]] = []
    fenced = False
    for line in markdown.splitlines(keepends=True):
        if FENCE.match(line):
            fenced = not fenced
            runs.append((False, line))
            continue
        runs.append((not fenced, line))
    return runs


def _local(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith(("#", "/"))


def _resolve(page: Path, target: str) -> tuple[Path, str]:
    path, _, anchor = target.partition("#")
    return (page.parent / path).resolve(), anchor


def _site_uri(resolved: Path, root: Path, docs: Path) -> str | None:
    """The site's name for a file of the checkout, if the site holds it."""
    if resolved.is_dir() and (resolved / "index.md").is_file():
        resolved = resolved / "index.md"
    if resolved.is_relative_to(docs):
        return resolved.relative_to(docs).as_posix()
    if resolved.is_file() and (resolved.suffix == ".md" or resolved.suffix.lower() in IMAGES):
        return f"{REPOSITORY}/{resolved.relative_to(root).as_posix()}"
    return None


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Adds the repository's Markdown files and images that the pages link to, transitively."""
    root, docs = _root(config), Path(config.docs_dir).resolve()
    pending = [file for file in files.documentation_pages()]
    while pending:
        file = pending.pop()
        real = _real_path(file, config)
        markdown = real.read_text(encoding="utf-8")
        for outside, line in _outside_code(markdown):
            for match in LINK.finditer(line) if outside else ():
                if not _local(match["target"]):
                    continue
                resolved, _ = _resolve(real, match["target"])
                if resolved.is_relative_to(docs) or not resolved.is_relative_to(root):
                    continue
                uri = _site_uri(resolved, root, docs)
                if uri is None or files.get_file_from_path(uri) is not None:
                    continue
                added = File.generated(
                    config, uri, abs_src_path=str(resolved), inclusion=InclusionLevel.NOT_IN_NAV
                )
                files.append(added)
                if added.is_documentation_page():
                    pending.append(added)
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Points the page's links outside docs/ at the site's copies, or unlinks them."""
    root, docs = _root(config), Path(config.docs_dir).resolve()
    real = _real_path(page.file, config)
    here = posixpath.dirname(page.file.src_uri)

    def relink(match: re.Match[str]) -> str:
        target = match["target"]
        if not _local(target):
            return match[0]
        resolved, anchor = _resolve(real, target)
        if not resolved.exists():
            log.warning(f"{page.file.src_uri}: the link {target!r} leads to no file")
            return match[0]
        if resolved.is_relative_to(docs) and not page.file.src_uri.startswith(REPOSITORY):
            return match[0]  # between pages of docs/: MkDocs checks it
        uri = _site_uri(resolved, root, docs)
        if uri is None:
            return match["text"]  # a file of the checkout the site does not hold
        new = posixpath.relpath(uri, here or ".") + (f"#{anchor}" if anchor else "")
        return f"{match['image']}[{match['text']}]({new})"

    return "".join(
        LINK.sub(relink, line) if outside else line for outside, line in _outside_code(markdown)
    )
