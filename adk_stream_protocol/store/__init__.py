"""What a chat keeps: ADK's session store, reading a session's history, and the artifact store."""
