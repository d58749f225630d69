"""Turns: the bridge every turn runs against, the plan, the run (``run_async`` for a request,
``run_live`` for a socket) and the ``Response`` that converts, holds back and delivers."""
