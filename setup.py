"""Packaging beyond pyproject.toml: the wheel carries the built playground page.

``build_py`` copies ``playground/dist`` into the package as ``adk_stream_protocol/playground``,
which the server serves at ``/`` (docs/adr/0028-package-and-command.md). In a checkout with
Node it first builds the page (``scripts/build-playground``, which does nothing when the page
is current); an sdist carries the built page, so a wheel built from it needs no Node.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PAGE = ROOT / "playground" / "dist"
BUILD_SCRIPT = ROOT / "scripts" / "build-playground"
# Set to build a wheel without the page (the server then serves only the API).
WITHOUT_PAGE = "ADK_STREAM_BUILD_WITHOUT_PLAYGROUND"


class BuildWithPlayground(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return  # an editable install serves playground/dist where it is
        if os.environ.get(WITHOUT_PAGE):
            self.announce(f"{WITHOUT_PAGE} is set: the wheel has no playground page", level=2)
            return
        if BUILD_SCRIPT.is_file() and shutil.which("npm"):
            # The slow step of a build, announced before it starts (the script prints a line
            # per step it runs). `python -m build` and `pip install -v` show these lines;
            # plain pip hides a build's output and says only "still running...".
            print(
                "Playground page: scripts/build-playground builds it when its sources changed"
                " (npm ci + vite: ~15 s, a minute or two the first time)...",
                file=sys.stderr,
                flush=True,
            )
            subprocess.run(["bash", str(BUILD_SCRIPT)], check=True, cwd=ROOT)
        if not (PAGE / "index.html").is_file():
            raise SystemExit(
                "The playground page is not built (playground/dist) and cannot be built here: "
                "install Node 20 with npm, or set "
                f"{WITHOUT_PAGE}=1 to build a package without the page."
            )
        target = Path(self.build_lib) / "adk_stream_protocol" / "playground"
        shutil.rmtree(target, ignore_errors=True)
        # Only the page: not the build stamp of scripts/setup.sh.
        shutil.copytree(PAGE, target, ignore=shutil.ignore_patterns(".built"))


setup(cmdclass={"build_py": BuildWithPlayground})
