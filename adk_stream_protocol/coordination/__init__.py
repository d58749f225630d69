"""The seams between processes: the chat lease, waiting calls, stop signals and chunk logs
(``base.py``), in this process (``local.py``, the default) or in Redis (``redis/``)."""
