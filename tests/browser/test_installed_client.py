"""The page the browser tests open bundles our transport as an app gets it from npm: the
playground depends on the tarball `npm pack` makes of client/ (scripts/setup.sh packs it), and
`npm ci` copies that into playground/node_modules. Not a link to ../client, whose sources, build
and node_modules a user never sees."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.rig import ROOT

pytestmark = pytest.mark.browser

CLIENT = ROOT / "client"
PLAYGROUND = ROOT / "playground"
# What the published package holds: its ESM, its types, and what npm always adds.
PACKAGE_FILES = [
    "LICENSE",
    "README.md",
    "dist/ws-chat-transport.d.ts",
    "dist/ws-chat-transport.js",
    "package.json",
]


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _client_tarball() -> tuple[str, Path]:
    manifest = _json(CLIENT / "package.json")
    name: str = manifest["name"]
    tarball = CLIENT / f"{name}-{manifest['version']}.tgz"
    if not tarball.is_file():
        pytest.fail(
            f"{tarball} is missing: scripts/test packs it (or `npm pack` in client/)",
            pytrace=False,
        )
    return name, tarball


def _tarball_files(tarball: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():
            assert member.isfile(), f"{member.name}: only files in an npm tarball"
            assert member.name.startswith("package/"), member.name
            extracted = tar.extractfile(member)
            assert extracted is not None
            files[member.name.removeprefix("package/")] = extracted.read()
    return files


def test_the_client_tarball_is_a_publishable_package() -> None:
    name, tarball = _client_tarball()
    files = _tarball_files(tarball)
    assert sorted(files) == PACKAGE_FILES
    manifest = json.loads(files["package.json"])
    assert "private" not in manifest
    assert manifest["name"] == name
    assert manifest["license"] == "Apache-2.0"
    assert manifest["type"] == "module"
    assert manifest["sideEffects"] is False
    assert manifest["peerDependencies"] == {"ai": "^6.0.0 || ^7.0.0"}
    assert "dependencies" not in manifest, "ai is the only dependency, and a peer"
    # Every path the package exports is in the tarball.
    entry = manifest["exports"]["."]
    for target in (entry["types"], entry["import"], manifest["main"], manifest["types"]):
        assert target.removeprefix("./") in files, target
    # It holds the client as built now, not an older pack.
    for built in ("dist/ws-chat-transport.js", "dist/ws-chat-transport.d.ts"):
        assert files[built] == (CLIENT / built).read_bytes(), f"{tarball.name}: stale {built}"


def test_the_playground_installs_the_tarball_not_the_folder() -> None:
    name, tarball = _client_tarball()
    spec = f"file:../client/{tarball.name}"
    assert _json(PLAYGROUND / "package.json")["dependencies"][name] == spec
    lock = _json(PLAYGROUND / "package-lock.json")["packages"]
    assert "../client" not in lock, "the lock file still links the client's folder"
    entry = lock[f"node_modules/{name}"]
    assert entry["resolved"] == spec
    assert not entry.get("link")
    # With an integrity hash npm installs its cached copy of an earlier pack of the same name
    # (or, on a fresh machine, refuses the new one): the tarball changes with the client.
    assert "integrity" not in entry, (
        "remove the client's `integrity` from playground/package-lock.json (npm adds it back"
        " on `npm install`)"
    )

    installed = PLAYGROUND / "node_modules" / name
    assert installed.is_dir()
    assert not installed.is_symlink(), f"{installed} links to {installed.resolve()}"
    assert installed.resolve() == installed.absolute(), "a link on the way to it"
    copied = {
        path.relative_to(installed).as_posix(): path.read_bytes()
        for path in sorted(installed.rglob("*"))
        if path.is_file()
    }
    assert copied == _tarball_files(tarball), "the installed client is not the tarball's"
