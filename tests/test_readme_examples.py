"""The examples of the wire (the site's pages "Chunks on the wire" and "Chats", or wherever
README.md and the docs site's pages show them: tests/support/doc_pages.py) against the real
server, so that they cannot drift from it.

Each example is a fenced block right after an HTML comment `<!-- readme-example: NAME -->`:

- `stream-request`: a `curl` command. Run as written (with `curl` when the machine has it, else
  the same request with httpx) against `server:app` under uvicorn, its URL's
  `http://127.0.0.1:8000` pointed at that server.
- `stream-response`: what that command prints, line by line (the blank lines between events
  included; the one after `data: [DONE]` left out).
- `chats-list-request`, `chat-get-request`, `chat-rename-request`, `chat-delete-request`: `curl`
  commands (the last piped into `python3 -m json.tool`, run with this Python), run in that
  order on a server of their own, after `stream-request` has made its chat there. Each
  `…-response` is what its command prints (a last line break left out).
- `live-ai7`, `live-envelope`: a `/live` exchange. The first line, `open URL`, opens a real
  WebSocket; each `→ FRAME` line is a text frame to send as written, each `← FRAME` line the
  next text frame the server must send (a frame shown as `data: …` ends with `\\n\\n`, an SSE
  event). Then no other frame may follow.

Everything must match exactly, except the placeholders `<message-id>`, `<tool-call-id>` and
`<text-id>`, and in the chats' examples `<created-at>` and `<updated-at>`: each stands for the
value the server made (it must look like one of its kind), and the same placeholder for the
same value throughout one example, or throughout the chats' examples.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path

import httpx
import pytest

from tests.support.doc_pages import doc_pages, page_name
from tests.support.rig import HTTP_TIMEOUT, ROOT, LiveServer, run_server

# Where the README's examples say the server is (`scripts/serve`'s address).
README_BASE_URL = "http://127.0.0.1:8000"
EXAMPLE = re.compile(
    r"^<!-- readme-example: (?P<name>[a-z0-9-]+) -->\n```[a-z]*\n(?P<body>.*?)\n```$",
    re.DOTALL | re.MULTILINE,
)
# The chats' examples, in the README's order: each a `-request` and its `-response`.
CHAT_EXAMPLES = ("chats-list", "chat-get", "chat-rename", "chat-delete")
EXAMPLE_NAMES = {
    *("stream-request", "stream-response", "live-ai7", "live-envelope"),
    *(f"{name}-{side}" for name in CHAT_EXAMPLES for side in ("request", "response")),
}
# A time as the server writes it: ISO 8601 in UTC (whole seconds have no fraction).
ISO_TIME = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?Z"
# The values that differ from one response to the next, and what each must look like.
PLACEHOLDERS = {
    "message-id": r"msg_[0-9a-f]{32}",
    "tool-call-id": r"adk-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    "text-id": r"txt_[0-9a-f]+_[0-9]+",
    "created-at": ISO_TIME,
    "updated-at": ISO_TIME,
}
PLACEHOLDER = re.compile(r"<([a-z][a-z-]*)>")
FRAME_TIMEOUT = 30.0
# How long the server gets to send a frame that the README does not show.
QUIET_SECONDS = 0.5


def readme_examples(pages: list[Path]) -> dict[str, str]:
    examples: dict[str, str] = {}
    where: dict[str, str] = {}
    for page in pages:
        for match in EXAMPLE.finditer(page.read_text(encoding="utf-8")):
            name = match["name"]
            assert name not in examples or examples[name] == match["body"], (
                f"two examples named {name} differ: {where[name]} and {page_name(page)}"
            )
            examples[name] = match["body"]
            where.setdefault(name, page_name(page))
    return examples


@pytest.fixture(scope="module")
def examples() -> dict[str, str]:
    found = readme_examples(doc_pages())
    assert set(found) == EXAMPLE_NAMES, "the pages: missing or unknown `readme-example` blocks"
    return found


@pytest.fixture(scope="module")
def readme_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """`server:app` under uvicorn with a store of its own: the README's chat ids are new. Its
    deltas as the model gives them, as the README says (a window merges them by timing)."""
    with run_server(
        tmp_path_factory.mktemp("readme-server"), {"ADK_STREAM_DELTA_COALESCING_MS": "0"}
    ) as server:
        yield server


# -- comparing lines with placeholders -------------------------------------------------------


class Lines:
    """Compares the server's lines with an example's, one by one, binding the placeholders."""

    def __init__(self, example: str, bound: dict[str, str] | None = None) -> None:
        """``bound``: the values earlier examples bound, when this one must use the same."""
        self.example = example
        self.bound: dict[str, str] = {} if bound is None else bound

    def pattern(self, expected: str) -> re.Pattern[str]:
        parts: list[str] = []
        seen: set[str] = set()
        position = 0
        for found in PLACEHOLDER.finditer(expected):
            name = found[1]
            assert name in PLACEHOLDERS, (
                f"{self.example}: <{name}> is no placeholder; only {sorted(PLACEHOLDERS)} vary"
            )
            group = name.replace("-", "_")
            parts.append(re.escape(expected[position : found.start()]))
            if name in self.bound:
                parts.append(re.escape(self.bound[name]))
            elif name in seen:
                parts.append(f"(?P={group})")
            else:
                parts.append(f"(?P<{group}>{PLACEHOLDERS[name]})")
                seen.add(name)
            position = found.end()
        parts.append(re.escape(expected[position:]))
        return re.compile("".join(parts))

    def check(self, number: int, expected: str, actual: str) -> None:
        match = self.pattern(expected).fullmatch(actual)
        assert match is not None, (
            f"README example {self.example}, line {number}, drifted from the server:\n"
            f"  README: {expected!r}\n  server: {actual!r}"
        )
        for group, value in match.groupdict().items():
            self.bound[group.replace("_", "-")] = value

    def check_all(self, expected: list[str], actual: list[str]) -> None:
        for number, (want, got) in enumerate(zip_longest(expected, actual), start=1):
            assert want is not None, (
                f"README example {self.example}: the server sent more, from line {number}:\n"
                + "\n".join(actual[number - 1 :])
            )
            assert got is not None, (
                f"README example {self.example}: the server sent less, "
                f"{number - 1} lines of the README's {len(expected)}"
            )
            self.check(number, want, got)


def test_placeholders_must_match_what_varies_and_nothing_else() -> None:
    # What the tests below rely on: a placeholder matches only a value of its kind, the same
    # one each time; text around it must be exact.
    lines = Lines("self-check")
    lines.check(1, '{"messageId":"<message-id>"}', '{"messageId":"msg_' + "a" * 32 + '"}')
    for bad in ('{"messageId":"msg_' + "b" * 32 + '"}', '{"messageId":"hello"}'):
        with pytest.raises(AssertionError, match="drifted"):
            lines.check(2, '{"messageId":"<message-id>"}', bad)
    with pytest.raises(AssertionError, match="drifted"):
        Lines("self-check").check(1, '{"text":"It is 18°C"}', '{"text":"It is 19°C"}')
    with pytest.raises(AssertionError, match="no placeholder"):
        Lines("self-check").check(1, '"<finish-reason>"', '"stop"')


# -- curl -------------------------------------------------------------------------------------


def readme_command(command: str, base_url: str) -> tuple[list[str], list[str]]:
    """The README's command (continued lines joined): its `curl` as an argument list, pointed
    at `base_url`, and what it is piped into (or nothing)."""
    argv = shlex.split(command.replace("\\\n", " "))
    pipe = argv.index("|") if "|" in argv else len(argv)
    curl, into = argv[:pipe], argv[pipe + 1 :]
    assert curl[0] == "curl", command
    urls = [arg for arg in curl if arg.startswith(README_BASE_URL)]
    assert len(urls) == 1, f"one URL on {README_BASE_URL} expected: {curl}"
    pointed = [base_url + arg.removeprefix(README_BASE_URL) if arg in urls else arg for arg in curl]
    return pointed, into


def run_with_httpx(argv: list[str]) -> str:
    """What `curl` would print for `argv`, for a machine without curl: the options the README
    uses, nothing else."""
    headers: dict[str, str] = {}
    data: str | None = None
    url: str | None = None
    method: str | None = None
    write_out: str | None = None
    args = iter(argv[1:])
    for arg in args:
        if arg in ("-N", "-s"):  # no buffering, no progress meter: httpx has neither
            continue
        if arg == "-H":
            name, _, value = next(args).partition(":")
            headers[name.strip()] = value.strip()
        elif arg == "-d":
            data = next(args)
        elif arg == "-X":
            method = next(args)
        elif arg == "-w":
            write_out = next(args)
            assert write_out == "%{http_code}\\n", f"run_with_httpx does not know -w {write_out!r}"
        elif not arg.startswith("-") and url is None:
            url = arg
        else:
            pytest.fail(f"the README's curl uses {arg!r}, which run_with_httpx does not know")
    assert url is not None, argv
    with httpx.stream(
        method or ("GET" if data is None else "POST"),
        url,
        headers=headers,
        content=None if data is None else data.encode(),
        timeout=HTTP_TIMEOUT,
    ) as response:
        printed = "".join(response.iter_text())
    return printed if write_out is None else f"{printed}{response.status_code}\n"


def run_readme_command(command: str, base_url: str) -> str:
    """What the README's command prints: its `curl` run with curl when the machine has it,
    else with httpx; then, if it is piped into `python3 -m json.tool`, that, with this
    Python."""
    curl, into = readme_command(command, base_url)
    if shutil.which("curl"):
        done = subprocess.run(curl, capture_output=True, timeout=HTTP_TIMEOUT, check=False)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        printed = done.stdout.decode()
    else:
        printed = run_with_httpx(curl)
    if not into:
        return printed
    assert into[:3] == ["python3", "-m", "json.tool"], f"piped into {into}, not json.tool"
    tool = subprocess.run(
        [sys.executable, *into[1:]],
        input=printed.encode(),
        capture_output=True,
        env={**os.environ, "PYTHONUTF8": "1"},
        timeout=HTTP_TIMEOUT,
        check=False,
    )
    assert tool.returncode == 0, tool.stderr.decode(errors="replace")
    return tool.stdout.decode()


@pytest.mark.out_of_process  # uvicorn in a subprocess, and curl
def test_the_curl_example_prints_what_the_readme_shows(
    examples: dict[str, str], readme_server: LiveServer
) -> None:
    printed = run_readme_command(examples["stream-request"], readme_server.base_url)
    assert printed.endswith("data: [DONE]\n\n"), printed
    Lines("stream-response").check_all(
        examples["stream-response"].split("\n"), printed.removesuffix("\n\n").split("\n")
    )


@pytest.mark.out_of_process  # uvicorn in a subprocess, and curl
def test_the_chats_examples_print_what_the_readme_shows(
    examples: dict[str, str], tmp_path: Path
) -> None:
    # A server of their own: the list shows every chat of the user, and the examples' one only.
    with run_server(tmp_path) as server:
        made = run_readme_command(examples["stream-request"], server.base_url)
        assert made.endswith("data: [DONE]\n\n"), made
        bound: dict[str, str] = {}  # one chat: the same times in every example
        for name in CHAT_EXAMPLES:
            printed = run_readme_command(examples[f"{name}-request"], server.base_url)
            Lines(f"{name}-response", bound).check_all(
                examples[f"{name}-response"].split("\n"), printed.removesuffix("\n").split("\n")
            )
        # As the README says after the delete: the list is empty, the chat is gone.
        listed = httpx.get(f"{server.base_url}/chats", timeout=HTTP_TIMEOUT)
        assert listed.json() == {"chats": [], "nextCursor": None}
        assert httpx.get(f"{server.base_url}/chats/chat-1", timeout=HTTP_TIMEOUT).status_code == 404


# -- WS /live ---------------------------------------------------------------------------------


def play_exchange(name: str, example: str, server: LiveServer) -> None:
    lines = example.split("\n")
    opening, _, url = lines[0].partition(" ")
    assert opening == "open", f"{name}: the first line is `open ws://...`"
    readme_ws = README_BASE_URL.replace("http://", "ws://")
    assert url.startswith(readme_ws + "/"), url
    socket = server.connect(url.removeprefix(readme_ws))
    compare = Lines(name)
    try:
        for number, line in enumerate(lines[1:], start=2):
            direction, _, frame = line.partition(" ")
            if direction == "→":
                socket.send(frame)
            elif direction == "←":
                expected = frame + "\n\n" if frame.startswith("data: ") else frame
                compare.check(number, expected, socket.recv(timeout=FRAME_TIMEOUT))
            else:
                pytest.fail(f"{name}, line {number}: `→ ` or `← ` expected: {line!r}")
        with pytest.raises(TimeoutError):
            extra = socket.recv(timeout=QUIET_SECONDS)
            pytest.fail(f"{name}: the server sent a frame the README does not show: {extra!r}")
    finally:
        socket.close()


@pytest.mark.out_of_process  # uvicorn in a subprocess, and curl
@pytest.mark.parametrize("name", ["live-ai7", "live-envelope"])
def test_the_live_exchanges_are_what_the_server_does(
    name: str, examples: dict[str, str], readme_server: LiveServer
) -> None:
    play_exchange(name, examples[name], readme_server)


def test_the_example_frames_are_json(examples: dict[str, str]) -> None:
    # Each frame a client sends is one JSON object, and so is each the server sends (the
    # envelope's after `data: `, but for `[DONE]`).
    for name in ("live-ai7", "live-envelope"):
        for line in examples[name].split("\n")[1:]:
            frame = line.partition(" ")[2].removeprefix("data: ")
            if frame != "[DONE]":
                assert isinstance(json.loads(frame), dict), (name, line)


# -- the client's tarball ---------------------------------------------------------------------


def test_the_readmes_name_the_clients_tarball_of_this_version() -> None:
    version = json.loads((ROOT / "client" / "package.json").read_text(encoding="utf-8"))["version"]
    tarball = re.compile(r"adk-stream-protocol-client-(\d[^\s/]*?)\.tgz")
    # The site's pages (one of them shows the install) and the client's own README.
    for pages in (doc_pages(), [ROOT / "client" / "README.md"]):
        named = {
            page_name(page): tarball.findall(page.read_text(encoding="utf-8")) for page in pages
        }
        assert any(named.values()), f"{list(named)}: no page shows an install of the tarball"
        for page, versions in named.items():
            assert set(versions) <= {version}, f"{page}: {versions}, not {version}"
