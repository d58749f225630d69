"""Turns: the application's parts (the bridge builds them; a turn gets what it uses), the
plan, the run (``run_async`` for a request, ``run_live`` for a socket) and the ``Response``
that converts, holds back and delivers."""
