"""A stdio "MCP server" that never answers, for the command line's time limits.

Without arguments it reads every request and answers none (not even ``initialize``).
Its arguments name the methods it does answer: ``initialize`` (2025-06-18, tools; then it
refuses ``server/discover`` with -32601, as a 2025 server does) and ``tools/list`` (one
tool, ``hang``). Every other request, ``tools/call`` among them, stays unanswered.
"""

import json
import sys


def write(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    answers = set(sys.argv[1:])
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg or msg.get("method") not in answers | {"server/discover"}:
            continue
        rid, method = msg["id"], msg["method"]
        if method == "initialize":
            write({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "silent", "version": "1"}}})
        elif method == "tools/list":
            write({"jsonrpc": "2.0", "id": rid, "result": {"tools": [
                {"name": "hang", "description": "never answers", "inputSchema": {"type": "object"}}]}})
        elif method == "server/discover" and "initialize" in answers:
            write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
