"""ADK plugins the runners carry: the live approval gate, the route from a tool to the page
(``send_data``), and steering messages."""
