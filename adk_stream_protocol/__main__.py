"""``python -m adk_stream_protocol serve ...``: the command ``adk-stream-protocol``."""

import sys

from adk_stream_protocol.cli import main

sys.exit(main())
