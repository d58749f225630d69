"""The Python and TypeScript examples of README.md and of the docs site's pages (docs/, but for
the design records: tests/support/doc_pages.py), run as they are written there, so that no page
can drift from the package. A block may be on any page, and the same block (name and body) on
two. Each Python example is a fenced block right after `<!-- readme-python: NAME -->`:

- `testing`, `testing-live`, `testing-fixture`, `testing-branch`, `testing-transfer`
  ("Testing your agent"): one test file, as a
  user saves it (the blocks in order), run by pytest in a process of its own as a user runs
  it: every test passes, and Starlette does not warn (the `testing` extra brings the client
  its ``TestClient`` wants).
- `tool-progress` ("Tools that reach the page"): the tool, served with a scripted model.
- `shared-state` ("Shared state"): the tool, served: the page gets its shared key only.
- `own-agent` ("Your own agent"): the app it builds.
- `idempotency` ("Approvals and browser tools"): the tool, served, hands its backend the call's
  id that the page sees and the chat's fencing token, and is declared idempotent.

Any other Python block of the pages is named in `NOT_RUN`, with why no test runs it.

A TypeScript block right after `<!-- readme-tsx: NAME -->` is type-checked as the page's own
code, with the playground's TypeScript and settings, once on ai 7 (`@ai-sdk/react` 4) and once
on ai 6 (`@ai-sdk/react` 3), as the playground's two builds: `chat-recipe` ("Chats"), with
`TSX_NAMES` for what it takes from the rest of the page, and `last-message-recipe` ("Sending
only the last message"); `last-message-socket` (ai 7's own socket transport) on ai 7 only. Any
other TypeScript block (`tsx`, `ts`) of the pages is named in `NOT_RUN_TS`, with why not.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from fastapi import FastAPI
from google.adk.agents import LlmAgent

from adk_stream_protocol.testing import ScriptedLlm, call, serve_agent
from tests.support.doc_pages import doc_pages, marked_blocks, page_name
from tests.support.rig import ROOT

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
MARKED_BLOCK = re.compile(
    r"^<!-- readme-python: (?P<name>[a-z0-9-]+) -->\n```python\n(?P<body>.*?)^```$",
    re.DOTALL | re.MULTILINE,
)
# The blocks that make the README's test file, in this order.
TEST_FILE = ("testing", "testing-live", "testing-fixture", "testing-branch", "testing-transfer")
EXAMPLE_NAMES = {*TEST_FILE, "tool-progress", "shared-state", "own-agent", "idempotency"}
# Python blocks no test runs, by the first line of code: each is code for a user's own setup.
NOT_RUN = {
    # Identity: it calls the user's own `verify`.
    "from fastapi import HTTPException",
    # Traces: an entry module's OpenTelemetry setup (the `otel` extra's exporter).
    "from opentelemetry import trace",
}
# The tests of the README's test file.
README_TESTS = {
    "test_weather",
    "test_booking_waits_for_approval",
    "test_weather_on_the_live_connection",
    "test_the_live_socket_answers_a_ping",
    "test_each_chat_is_its_own",
    "test_each_outcome_has_its_answer",
    "test_the_sub_agent_answers_after_the_transfer[False]",
    "test_the_sub_agent_answers_after_the_transfer[True]",
}


def readme_blocks() -> dict[str, str]:
    return marked_blocks(MARKED_BLOCK, "readme-python")


def unmarked_first_lines(block: re.Pattern[str], marked: set[str]) -> set[str]:
    """The first line of each block `block` finds on the pages that is not a marked one."""
    return {
        body.strip().split("\n", 1)[0]
        for path in doc_pages()
        for body in block.findall(path.read_text(encoding="utf-8"))
        if body not in marked
    }


def run_block(name: str, **names: object) -> types.ModuleType:
    """Run a block as a module; ``names`` are what the block takes from the user's code."""
    module = types.ModuleType(f"readme_{name.replace('-', '_')}")
    module.__dict__.update(names)
    exec(compile(readme_blocks()[name], f"readme-python:{name}", "exec"), module.__dict__)
    return module


def test_every_python_block_of_the_pages_is_run_or_says_why_not() -> None:
    blocks = readme_blocks()
    assert set(blocks) == EXAMPLE_NAMES, "the pages: missing or unknown `readme-python` blocks"
    unmarked = unmarked_first_lines(PYTHON_BLOCK, set(blocks.values()))
    assert unmarked == NOT_RUN, (
        "a Python block of the pages is neither run (`<!-- readme-python: NAME -->` before it) "
        "nor in NOT_RUN (or NOT_RUN names a block no page has)"
    )


def test_every_typescript_block_of_the_pages_is_checked_or_says_why_not() -> None:
    blocks = marked_blocks(TSX_BLOCK, "readme-tsx")
    assert set(blocks) == set(TSX_BLOCKS), "the pages: missing or unknown `readme-tsx` blocks"
    unmarked = unmarked_first_lines(TS_BLOCK, set(blocks.values()))
    assert unmarked == NOT_RUN_TS, (
        "a TypeScript block of the pages is neither type-checked (`<!-- readme-tsx: NAME -->` "
        "before it) nor in NOT_RUN_TS (or NOT_RUN_TS names a block no page has)"
    )


def test_the_pages_are_readme_and_the_sites_own() -> None:
    # What the tests above read: a page moved out of docs/, or docs/ gone, must not leave its
    # examples unread.
    names = [page_name(path) for path in doc_pages()]
    assert names[0] == "README.md"
    for page in ("docs/agent/testing.md", "docs/frontend/chats.md", "docs/wire/chunks.md"):
        assert page in names, names
    assert not [name for name in names if name.startswith("docs/adr/")]


@pytest.mark.out_of_process  # pytest, as a user runs it
def test_the_readme_test_file_passes_as_a_user_runs_it(tmp_path: Path) -> None:
    blocks = readme_blocks()
    (tmp_path / "test_helper.py").write_text(
        "\n\n".join(blocks[name] for name in TEST_FILE), encoding="utf-8"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ADK_STREAM_")},
        # This checkout's package, whatever the environment has installed.
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider"),
            *("-W", "error::starlette.exceptions.StarletteDeprecationWarning"),
            "test_helper.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    passed = set(re.findall(r"test_helper\.py::([\w\[\]-]+) PASSED", output))
    assert passed == README_TESTS, output
    # Starlette's TestClient warns when it has only `httpx` (it wants `httpx2`).
    assert "StarletteDeprecationWarning" not in output and "httpx2" not in output, output


def test_the_readme_app_is_built() -> None:
    assert isinstance(run_block("own-agent").app, FastAPI)


def test_the_readme_tool_sends_its_progress_to_the_page() -> None:
    tool = run_block("tool-progress").import_rows
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


def test_the_readme_tool_shares_its_cart_with_the_page() -> None:
    tool = run_block("shared-state").add_to_cart
    model = ScriptedLlm(script={"lamp": [call("add_to_cart", item="lamp"), "Added."]})
    with serve_agent(LlmAgent(name="shop", model=model, tools=[tool])) as chat:
        answer = chat.send("A lamp, please")
    assert answer.of_type("data-state") == [
        {"type": "data-state", "id": "state", "data": {"ui:cart": ["lamp"]}}
    ]
    assert "stock_hold" not in answer.body
    assert answer.message is not None
    assert [p for p in answer.message["parts"] if p["type"] == "data-state"] == [
        {"type": "data-state", "id": "state", "data": {"ui:cart": ["lamp"]}}
    ]


class PaymentsBackend:
    """The backend of the README's idempotent tool: it remembers the keys it was given."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.tokens: list[int] = []

    def transfer(
        self, *, amount: float, to: str, idempotency_key: str, fencing_token: int
    ) -> dict[str, object]:
        self.keys.append(idempotency_key)
        self.tokens.append(fencing_token)
        return {"paid": amount, "to": to}


def test_the_readme_tool_passes_its_call_id_as_the_idempotency_key() -> None:
    backend = PaymentsBackend()
    pay = run_block("idempotency", payments_backend=backend).pay
    from google.adk.tools import FunctionTool

    model = ScriptedLlm(script={"pay": [call("pay", amount=5, to="Bob"), "Paid."]})
    agent = LlmAgent(
        name="payer", model=model, tools=[FunctionTool(pay, require_confirmation=True)]
    )
    with serve_agent(agent) as chat:
        asked = chat.send("Pay Bob 5")
        (call_part,) = asked.of_type("tool-input-available")
        paid = chat.approve(True)
    assert paid.of_type("tool-output-available")[0]["output"] == {"paid": 5, "to": "Bob"}
    assert backend.keys == [call_part["toolCallId"]]
    assert backend.tokens == [1]  # the chat's first holder to start a tool, in one process
    assert getattr(pay, "__adk_stream_idempotent__", False) is True  # the marker is on it


# -- TypeScript -------------------------------------------------------------------------------

TSX_BLOCK = re.compile(
    r"^<!-- readme-tsx: (?P<name>[a-z0-9-]+) -->\n```tsx\n(?P<body>.*?)^```$",
    re.DOTALL | re.MULTILINE,
)
TS_BLOCK = re.compile(r"^```(?:tsx|ts|typescript)\n(.*?)^```$", re.DOTALL | re.MULTILINE)
# TypeScript blocks no test type-checks, by their first line: each is a fragment of a page,
# using names the page has around it (`part`, `message`, `chatId`, `transport`, its handlers).
NOT_RUN_TS = {
    # `useChat` on each transport: the page's `useChat` call, its results unused here.
    'import { useChat } from "@ai-sdk/react";',
    # Our /live transport: `useMemo` and `chatId` are the page's.
    'import { WebSocketChatTransport } from "adk-stream-protocol-client";',
    # Resume and stop: `chatId` and `transport` are the page's.
    "const { stop, ...chat } = useChat({ id: chatId, transport, resume: true });",
    # Approvals: `playTrack` and `part` are the page's.
    "const { messages, addToolApprovalResponse, addToolOutput } = useChat({",
    # The add-output pattern: `getLocation` and the tool part are the page's.
    "const running = new Set<string>(); // browser tools the page runs now",
    # A confirmation's payload: `message`, `part`, `edited` and `setMessages` are the page's.
    "const asked = message.parts.find(",
    # Tool sign-in: `part` and `apiKey` are the page's.
    "addToolOutput({",
    # Shared state: `transport` and `setShared` are the page's.
    "const { messages, sendMessage } = useChat({ transport, onData: part => {",
    # Who answered: `message` and `render` are the page's.
    'let agent = "";',
    # Workflows: `transport`, `message` and the render functions are the page's.
    "const { messages } = useChat({ transport, onData: part => {",
}
PLAYGROUND = ROOT / "playground"
# What the recipe takes from the rest of the page: its rendering of a chat.
TSX_NAMES = """\
import type { UIMessage } from "ai";
import type { ReactNode } from "react";

declare global {
  function ChatView(props: {
    messages: UIMessage[];
    onSend: (text: string) => void;
    onApprove: (approvalId: string, approved: boolean) => void;
  }): ReactNode;
}
"""
# The packages each build resolves `ai` and `@ai-sdk/react` to (playground/package.json).
AI_PACKAGES = {
    "7": {"ai": "ai", "@ai-sdk/react": "@ai-sdk/react"},
    "6": {"ai": "ai-6", "@ai-sdk/react": "@ai-sdk/react-3"},
}


# Each block, and the builds it is for: ai 7's own socket transport is not in ai 6.
TSX_BLOCKS = {
    "chat-recipe": ("6", "7"),
    "last-message-recipe": ("6", "7"),
    "last-message-socket": ("7",),
}


@pytest.mark.out_of_process  # tsc, in Node
@pytest.mark.parametrize(
    ("name", "ai"), [(name, ai) for name, builds in TSX_BLOCKS.items() for ai in builds]
)
def test_the_readme_chat_recipes_type_check(name: str, ai: str, tmp_path: Path) -> None:
    blocks = marked_blocks(TSX_BLOCK, "readme-tsx")
    assert set(blocks) == set(TSX_BLOCKS), "the pages: missing or unknown `readme-tsx` blocks"
    node = shutil.which("node")
    modules = PLAYGROUND / "node_modules"
    tsc = modules / "typescript" / "bin" / "tsc"
    assert node is not None and tsc.is_file(), "needs Node and playground/node_modules (npm ci)"
    (tmp_path / "recipe.tsx").write_text(blocks[name], encoding="utf-8")
    (tmp_path / "names.ts").write_text(TSX_NAMES, encoding="utf-8")
    options = json.loads((PLAYGROUND / "tsconfig.json").read_text(encoding="utf-8"))
    paths = {name: [str(modules / package)] for name, package in AI_PACKAGES[ai].items()}
    # Everything else from the playground's packages, types first (react's are in @types).
    paths["*"] = [str(modules / "@types" / "*"), str(modules / "*")]
    config = {
        "compilerOptions": {**options["compilerOptions"], "paths": paths},
        "files": ["recipe.tsx", "names.ts"],
    }
    (tmp_path / "tsconfig.json").write_text(json.dumps(config), encoding="utf-8")
    done = subprocess.run(
        [node, str(tsc), "-p", str(tmp_path / "tsconfig.json"), "--listFiles"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Checked against the build's own packages (those the block imports).
    imported = [p for name_, p in AI_PACKAGES[ai].items() if f'from "{name_}"' in blocks[name]]
    assert imported, f"{name} imports neither ai nor @ai-sdk/react"
    for package in imported:
        assert f"/node_modules/{package}/dist/" in done.stdout, (package, done.stdout)
