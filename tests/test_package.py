"""The package as a user gets it. `python -m build` makes the sdist and, from it, the wheel; the
wheel carries the built playground page and the command `adk-stream-protocol`. Installed into
a fresh virtual environment (its dependencies from the package index, as `pip install` gets
them), the command serves the page and answers: the demo agent, a folder of agents, and an
agent named as `module:attribute`. `pip wheel .` (what `pip install .` builds) carries the page
too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.rig import (
    ROOT,
    LiveServer,
    chat_body,
    listening_socket,
    stop_process,
    stream_result,
    user_message,
    wait_until_healthy,
)

pytestmark = pytest.mark.out_of_process  # builds the package and runs its command in a virtualenv

BUILD_TIMEOUT = 600
AGENT = """
from google.adk.agents import Agent


def get_weather(location: str) -> dict:
    \"\"\"The weather at a place.\"\"\"
    return {"location": location, "temperature": 23, "condition": "cloudy"}


root_agent = Agent(name="NAME", model="offline-demo", tools=[get_weather])
"""


def run(command: list[str], cwd: Path, timeout: float = BUILD_TIMEOUT) -> str:
    done = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sdist and the wheel `python -m build` makes of this checkout."""
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], cwd=out)
    (sdist,) = out.glob("adk_stream_protocol-*.tar.gz")
    (wheel,) = out.glob("adk_stream_protocol-*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def installed(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed: its `bin` folder."""
    venv = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", str(venv)], cwd=venv)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    # --no-compile: the same files, without the bytecode of every module of every dependency
    # (a third of the install's CPU); the command compiles what it imports when it runs.
    run([*pip, "install", "--no-compile", str(built[1])], cwd=venv)
    return venv / "bin"


def page_files(names: list[str], prefix: str) -> set[str]:
    return {name.removeprefix(prefix) for name in names if name.startswith(prefix)}


def test_the_sdist_and_the_wheel_carry_the_built_page(built: tuple[Path, Path]) -> None:
    sdist, wheel = built
    built_page = {
        str(path.relative_to(ROOT / "playground" / "dist"))
        for path in (ROOT / "playground" / "dist").rglob("*")
        if path.is_file() and path.name != ".built"
    }
    assert "index.html" in built_page and any(p.endswith(".js") for p in built_page)
    with tarfile.open(sdist) as archive:
        files = [member.name for member in archive.getmembers() if member.isfile()]
        top = files[0].split("/")[0]
        assert page_files(files, f"{top}/playground/dist/") == built_page
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert page_files(names, "adk_stream_protocol/playground/") == built_page
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
    assert "adk-stream-protocol = adk_stream_protocol.cli:main" in scripts
    assert [n for n in names if n.endswith(".dist-info/licenses/LICENSE")], "no license file"
    assert not [n for n in names if n.startswith(("tests/", "bench/", "scenarios/"))]


def test_pip_wheel_of_the_checkout_carries_the_page(tmp_path: Path) -> None:
    """The in-tree build (`pip install .`, `pip wheel .`): setup.py builds the page when it
    is out of date (here it is current) and copies it in."""
    python = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    run([*python, "wheel", "--no-deps", "-w", str(tmp_path), str(ROOT)], cwd=tmp_path)
    (wheel,) = tmp_path.glob("adk_stream_protocol-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert "adk_stream_protocol/playground/index.html" in archive.namelist()


@contextmanager
def command(
    bin_dir: Path, args: list[str], cwd: Path, env: Mapping[str, str] | None = None
) -> Iterator[LiveServer]:
    """`adk-stream-protocol ARGS --port P` of the installed package, in `cwd`, with none of
    this checkout's settings or its import path."""
    sock = listening_socket()
    port = sock.getsockname()[1]
    sock.close()  # the command binds it itself, as a user's would
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ADK_STREAM_", "GOOGLE_", "GEMINI_")) and k != "PYTHONPATH"
    }
    clean.update(env or {})
    log_path = cwd / f"serve-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(bin_dir / "adk-stream-protocol"), *args, "--port", str(port)],
            cwd=cwd,
            env=clean,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=base_url, timeout=60) as http:
        server = LiveServer(base_url, cwd, http, log_path, process)
        try:
            wait_until_healthy(server, lambda: process.poll() is not None)
            yield server
        finally:
            stop_process(process)


def assert_serves_the_page(server: LiveServer, folder: str) -> None:
    page = server.http.get(folder)
    assert page.status_code == 200 and '<div id="root">' in page.text, page.text[:300]
    script = page.text.split('src="./', 1)[1].split('"', 1)[0]
    assert server.http.get(folder + script).status_code == 200


def assert_answers(server: LiveServer, path: str, place: str, temperature: int | None) -> None:
    body = chat_body("c1", user_message(f"What's the weather in {place}?", "u1"))
    result = stream_result(server.http.post(path, json=body))
    assert result.status == 200 and result.of_type("error") == [], result.body
    assert place in result.text()
    if temperature is not None:
        outputs = [c["output"] for c in result.of_type("tool-output-available")]
        assert [o["temperature"] for o in outputs] == [temperature]


def test_the_installed_command_serves_the_demo(installed: Path, tmp_path: Path) -> None:
    with command(installed, ["serve"], tmp_path) as server:
        assert_serves_the_page(server, "/")
        assert_answers(server, "/stream", "Tokyo", None)
    # The chats are where docs/getting-started.md says: in the working folder, one file for the app.
    assert (tmp_path / ".adk-stream" / "adk_stream_protocol.db").is_file()
    assert not (Path(str(installed)).parent / ".adk-stream").exists()


def test_the_installed_command_serves_a_folder_of_agents(installed: Path, tmp_path: Path) -> None:
    for name in ("pkg_weather", "pkg_other"):
        (tmp_path / "agents" / name).mkdir(parents=True)
        (tmp_path / "agents" / name / "__init__.py").write_text("from . import agent\n")
        (tmp_path / "agents" / name / "agent.py").write_text(AGENT.replace("NAME", name))
    with command(installed, ["serve", "agents"], tmp_path) as server:
        assert server.http.get("/apps").json() == {"apps": ["pkg_other", "pkg_weather"]}
        assert_serves_the_page(server, "/apps/pkg_weather/")
        assert_answers(server, "/apps/pkg_weather/stream", "Oslo", 23)
        assert_answers(server, "/apps/pkg_other/stream", "Lima", 23)
    assert sorted(p.name for p in (tmp_path / ".adk-stream").iterdir()) == [
        "pkg_other.db",
        "pkg_weather.db",
    ]


def test_the_installed_command_serves_a_module_attribute(installed: Path, tmp_path: Path) -> None:
    (tmp_path / "my_agent.py").write_text(AGENT.replace("NAME", "mine"))
    with command(installed, ["serve", "my_agent:root_agent"], tmp_path) as server:
        assert_answers(server, "/stream", "Quito", 23)
        health = server.http.get("/health")
    assert json.loads(health.text) == {"status": "ok"}


def test_the_installed_command_records_and_replays(installed: Path, tmp_path: Path) -> None:
    """`serve` with ADK_STREAM_RECORD_DIR records; `replay DIR` then answers the same message
    with the same chunks, with no agent."""
    record = {"ADK_STREAM_RECORD_DIR": str(tmp_path / "recordings")}
    body = chat_body("c-rec", user_message("What's the weather in Tokyo?", "u1"))
    with command(installed, ["serve"], tmp_path, record) as server:
        recorded = stream_result(server.http.post("/stream", json=body))
    assert recorded.status == 200 and "Tokyo" in recorded.text()
    (recording,) = (tmp_path / "recordings").glob("*.jsonl")
    assert json.loads(recording.read_text().splitlines()[0])["kind"] == "request"
    with command(installed, ["replay", "recordings", "--speed", "0"], tmp_path) as server:
        replayed = stream_result(server.http.post("/stream", json=body))
        missing = server.http.post(
            "/stream", json=chat_body("c-rec", user_message("Something never asked", "u1"))
        )
        assert_serves_the_page(server, "/")
    assert replayed.chunks == recorded.chunks
    assert missing.status_code == 404


def test_the_command_refuses_what_is_neither_a_folder_nor_a_module(installed: Path) -> None:
    done = subprocess.run(
        [str(installed / "adk-stream-protocol"), "serve", "no-such-thing"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "'no-such-thing' is neither a folder nor 'package.module:attribute'" in done.stderr
