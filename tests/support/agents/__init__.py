"""Agents the tests serve, in-process or as
``ADK_STREAM_AGENT=tests.support.agents.<module>:<name>``."""
