"""The AI SDK UI message stream, both ways: the chunk catalogue and its SSE framing, the request
models and their parts as ADK content, and the converter from ADK events to chunks."""
