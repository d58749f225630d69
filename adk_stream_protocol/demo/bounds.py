"""Bounds on the offline model's work and output.

The model runs on the server's event loop and reads untrusted text, so neither its work
nor its output may grow without limit with what a client sends.
"""

from __future__ import annotations

# A longer message is echoed (and recalled) by its beginning and its length only.
MAX_QUOTE_CHARS = 1_000
# A longer answer is cut, saying so: it is streamed, stored and sent in every later request.
MAX_REPLY_CHARS = 4_000
# Partial responses per streamed text: ADK and the transport handle each one separately.
MAX_STREAM_PIECES = 64
# Attachments listed by name in the note; the others are only counted.
MAX_LISTED_ATTACHMENTS = 5
# A longer MIME type or file URI is shortened in the attachments note.
MAX_DETAIL_CHARS = 100
# Messages with more text than this are read in a worker thread: linear, but at the text
# limit (200,000 characters) the rules take longer than one request may hold the event loop.
OFF_LOOP_CHARS = 16_000
# Python's own int(str) limit: longer numbers raise, and converting them is quadratic.
MAX_NUMBER_DIGITS = 4_300
# Each payment is a tool call and an approval request; more are left out, saying so.
MAX_PAYMENTS_PER_MESSAGE = 10
