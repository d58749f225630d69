"""What the tests share, beside the tests themselves (fixtures stay in the conftest.py files):

- ``rig``: the targets (the app in this process, uvicorn in a thread or a subprocess), SSE
  parsing, the protocol's invariants and the session store read directly;
- ``forked_servers``: the fork server the rig's uvicorn processes are forked from;
- ``services``: PostgreSQL and Redis (fixtures, imported by tests/conftest.py);
- ``agents``: the agents and apps served to the tests, beside the demo;
- ``apps``: apps with identities as a deployment would plug them in;
- ``ai7_socket``, ``table_chat``, ``real_client``: clients (ai 7's socket protocol, one chat on
  any transport, the real AI SDK client in Node);
- ``catalogue``: the scenario catalogue, and the real client's runs of it made once;
- ``recordings``, ``fold_cases``: recorded and hand-written conversations;
- ``waiting``: waits on a condition with a deadline, where there is no event to wait on;
- ``tiers``: which tests are ``fast`` and which ``out_of_process``, and the fast tier's guard;
- ``faults``, ``browser``: what the fault tests and the browser tests use.
"""
