"""A stand-in server that answers with recorded responses, no agent (``adk-stream-protocol
replay``, docs/adr/0026)."""
