"""A stdio MCP server that breaks the rules on purpose, for the client's bad-input tests.

Handshake era only (it answers ``server/discover`` with -32601, as a 2025 server does).
Tools: ``noisy`` (a garbage line, an answer to an id nobody asked, progress for an
unknown token and a backwards progress value, then its result), ``bad_schema`` (asks an
elicitation whose schema is outside MCP's subset and reports what the client answered),
``die`` (exits mid-call with a message on stderr), ``replayed_question`` (sends one
elicitation twice under the same id, as a replaying server does, then a ping, and reports
how many answers the question drew before the ping's).
"""

import json
import sys

TOOLS = [{"name": n, "description": d, "inputSchema": {"type": "object"}} for n, d in [
    ("noisy", "misbehaves, then answers"), ("bad_schema", "asks an invalid question"), ("die", "exits mid-call"),
    ("replayed_question", "asks the same question twice")]]


def write(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def read() -> dict:
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)


def main() -> None:
    while True:
        msg = read()
        if "id" not in msg or "method" not in msg:
            continue
        rid, method, params = msg["id"], msg["method"], msg.get("params") or {}
        if method == "initialize":
            write({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "misbehaving", "version": "1"}}})
        elif method == "tools/list":
            write({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
        elif method == "ping":
            write({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "tools/call" and params.get("name") == "noisy":
            token = (params.get("_meta") or {}).get("progressToken")
            sys.stdout.write("{this is not json\n")
            write({"jsonrpc": "2.0", "id": 424242, "result": {"stray": True}})
            write({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": "nobody-asked", "progress": 1}})
            for value in (1, 5, 3, 6):
                write({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": token, "progress": value, "total": 6}})
            write({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "noisy done"}]}})
        elif method == "tools/call" and params.get("name") == "bad_schema":
            write({"jsonrpc": "2.0", "id": "ask-1", "method": "elicitation/create", "params": {
                "message": "nested?", "requestedSchema": {"type": "object", "properties": {
                    "address": {"type": "object", "properties": {"city": {"type": "string"}}}}}}})
            answer = read()
            while answer.get("id") != "ask-1":
                answer = read()
            text = json.dumps({k: answer[k] for k in ("result", "error") if k in answer})
            write({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
        elif method == "tools/call" and params.get("name") == "replayed_question":
            ask = {"jsonrpc": "2.0", "id": "ask-2", "method": "elicitation/create", "params": {
                "message": "once?", "requestedSchema": {"type": "object", "properties": {}}}}
            write(ask)
            write(ask)  # the replay
            write({"jsonrpc": "2.0", "id": "ask-3", "method": "ping"})
            answers = 0
            while True:
                answer = read()
                if answer.get("id") == "ask-2":
                    answers += 1
                elif answer.get("id") == "ask-3":
                    break
            write({"jsonrpc": "2.0", "id": rid, "result": {"content": [
                {"type": "text", "text": f"answers to ask-2: {answers}"}]}})
        elif method == "tools/call" and params.get("name") == "die":
            print("fatal: out of disk space while writing the report", file=sys.stderr, flush=True)
            sys.exit(7)
        else:
            write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
