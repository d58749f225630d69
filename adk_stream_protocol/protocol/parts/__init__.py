"""The part kinds of a UI message, one module each: how ADK content becomes a kind's chunks,
how its chunks fold onto a message, how a message rebuilds them, and its request-side model
(docs/adr/0059-part-kinds.md). ``kinds.py`` lists them."""
