"""The lab: hostapp's reference MCP server.

A real process that speaks every mechanism of the protocol digest (SSE resumption, tasks,
the tasks extension, multi round-trip requests, resume tokens, streams, resumable
requests, asynchronous tools), with fault injection and its own SQLite state so that a
restarted lab continues its work. Start it with ``python -m hostapp.lab serve``; see
:mod:`hostapp.lab.server`. It imports nothing of the client side except
:mod:`hostapp.protocol`.

How it implements mechanism X: :mod:`hostapp.lab.mechanisms` (one module per mechanism);
what they share (stored streams, jobs, dispatch): :mod:`hostapp.lab.core`.
"""
