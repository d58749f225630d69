"""README.md's examples of the wire (its section "On the wire") against the real server, so that
they cannot drift from it.

Each example is a fenced block right after an HTML comment `<!-- readme-example: NAME -->`:

- `stream-request`: a `curl` command. Run as written (with `curl` when the machine has it, else
  the same request with httpx) against `server:app` under uvicorn, its URL's
  `http://127.0.0.1:8000` pointed at that server.
- `stream-response`: what that command prints, line by line (the blank lines between events
  included; the one after `data: [DONE]` left out).
- `live-ai7`, `live-envelope`: a `/live` exchange. The first line, `open URL`, opens a real
  WebSocket; each `→ FRAME` line is a text frame to send as written, each `← FRAME` line the
  next text frame the server must send (a frame shown as `data: …` ends with `\\n\\n`, an SSE
  event). Then no other frame may follow.

Everything must match exactly, except the placeholders `<message-id>`, `<tool-call-id>` and
`<text-id>`: each stands for the value the server made for that response (it must look like
one of its kind), and the same placeholder for the same value throughout one example.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from itertools import zip_longest

import httpx
import pytest

from tests.support import HTTP_TIMEOUT, ROOT, LiveServer, run_server

README = ROOT / "README.md"
# Where the README's examples say the server is (`scripts/serve`'s address).
README_BASE_URL = "http://127.0.0.1:8000"
EXAMPLE = re.compile(
    r"^<!-- readme-example: (?P<name>[a-z0-9-]+) -->\n```[a-z]*\n(?P<body>.*?)\n```$",
    re.DOTALL | re.MULTILINE,
)
EXAMPLE_NAMES = {"stream-request", "stream-response", "live-ai7", "live-envelope"}
# The values that differ from one response to the next, and what each must look like.
PLACEHOLDERS = {
    "message-id": r"msg_[0-9a-f]{32}",
    "tool-call-id": r"adk-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    "text-id": r"txt_[0-9a-f]+_[0-9]+",
}
PLACEHOLDER = re.compile(r"<([a-z][a-z-]*)>")
FRAME_TIMEOUT = 30.0
# How long the server gets to send a frame that the README does not show.
QUIET_SECONDS = 0.5


def readme_examples(text: str) -> dict[str, str]:
    examples: dict[str, str] = {}
    for match in EXAMPLE.finditer(text):
        name = match["name"]
        assert name not in examples, f"two README examples named {name}"
        examples[name] = match["body"]
    return examples


@pytest.fixture(scope="module")
def examples() -> dict[str, str]:
    found = readme_examples(README.read_text(encoding="utf-8"))
    assert set(found) == EXAMPLE_NAMES, "README.md: missing or unknown `readme-example` blocks"
    return found


@pytest.fixture(scope="module")
def readme_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """`server:app` under uvicorn with a store of its own: the README's chat ids are new."""
    with run_server(tmp_path_factory.mktemp("readme-server")) as server:
        yield server


# -- comparing lines with placeholders -------------------------------------------------------


class Lines:
    """Compares the server's lines with an example's, one by one, binding the placeholders."""

    def __init__(self, example: str) -> None:
        self.example = example
        self.bound: dict[str, str] = {}

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


# -- POST /stream with curl -------------------------------------------------------------------


def curl_argv(command: str, base_url: str) -> list[str]:
    """The README's `curl` command (continued lines joined) as an argument list, pointed at
    `base_url`."""
    argv = shlex.split(command.replace("\\\n", " "))
    assert argv[0] == "curl", command
    urls = [arg for arg in argv if arg.startswith(README_BASE_URL)]
    assert len(urls) == 1, f"one URL on {README_BASE_URL} expected: {argv}"
    return [base_url + arg.removeprefix(README_BASE_URL) if arg in urls else arg for arg in argv]


def run_with_httpx(argv: list[str]) -> str:
    """What `curl` would print for `argv`, for a machine without curl: the options the README
    uses, nothing else."""
    headers: dict[str, str] = {}
    data: str | None = None
    url: str | None = None
    args = iter(argv[1:])
    for arg in args:
        if arg == "-N":  # no buffering: httpx reads the body as it comes anyway
            continue
        if arg == "-H":
            name, _, value = next(args).partition(":")
            headers[name.strip()] = value.strip()
        elif arg == "-d":
            data = next(args)
        elif not arg.startswith("-") and url is None:
            url = arg
        else:
            pytest.fail(f"the README's curl uses {arg!r}, which run_with_httpx does not know")
    assert url is not None and data is not None, argv
    with httpx.stream(
        "POST", url, headers=headers, content=data.encode(), timeout=HTTP_TIMEOUT
    ) as response:
        return "".join(response.iter_text())


def test_the_curl_example_prints_what_the_readme_shows(
    examples: dict[str, str], readme_server: LiveServer
) -> None:
    argv = curl_argv(examples["stream-request"], readme_server.base_url)
    if shutil.which("curl"):
        done = subprocess.run(argv, capture_output=True, timeout=HTTP_TIMEOUT, check=False)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        printed = done.stdout.decode()
    else:
        printed = run_with_httpx(argv)
    assert printed.endswith("data: [DONE]\n\n"), printed
    Lines("stream-response").check_all(
        examples["stream-response"].split("\n"), printed.removesuffix("\n\n").split("\n")
    )


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
    for readme in (README, ROOT / "client" / "README.md"):
        named = re.findall(
            r"adk-stream-protocol-client-(\d[^\s/]*?)\.tgz", readme.read_text(encoding="utf-8")
        )
        assert named, f"{readme.relative_to(ROOT)} shows no install of the tarball"
        assert set(named) == {version}, f"{readme.relative_to(ROOT)}: {named}, not {version}"
