"""ADK's optional ``a2a`` extra, when it is not installed: its import failed once is failed
for good, instead of being tried again on every run.

ADK builds its agents' run graph on every invocation, and each time it tries to import
``RemoteA2aAgent``, whose module needs the ``a2a`` package (an extra). Python keeps no record
of a failed import, so without the package every run loads ADK's module again, up to the
missing import: about 4 % of the server's CPU under load (bench/PROFILE.md). A ``None`` in
``sys.modules`` is Python's documented way to say "this module is absent": the import then
fails at once, as it would have after the work (docs/adr/0049). ADK's files are untouched,
and nothing changes where ``a2a`` is installed.
"""

from __future__ import annotations

import importlib.util
import logging
import sys

logger = logging.getLogger(__name__)

# The module ADK imports per run, and the package it needs.
REMOTE_AGENT_MODULE = "google.adk.agents.remote_a2a_agent"
A2A_PACKAGE = "a2a"


def skip_absent_a2a() -> bool:
    """Mark ADK's remote-agent module absent when ``a2a`` is not installed; True if marked."""
    if REMOTE_AGENT_MODULE in sys.modules:
        return sys.modules[REMOTE_AGENT_MODULE] is None  # loaded already, or marked before
    if importlib.util.find_spec(A2A_PACKAGE) is not None:
        return False
    sys.modules[REMOTE_AGENT_MODULE] = None  # type: ignore[assignment]
    logger.debug("%s marked absent: %s is not installed", REMOTE_AGENT_MODULE, A2A_PACKAGE)
    return True
