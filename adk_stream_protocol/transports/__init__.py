"""The endpoints that carry the stream: ``POST /stream`` (SSE) with resume and stop, and
``WS /live`` in its two protocols (our envelope with ``?chatId=``, and ai 7's
``WebSocketChatTransport``)."""
