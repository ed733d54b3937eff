"""A stdio MCP server (2025-11-25, task-augmented tools) whose tasks stall, for the host's
liveness tests.

Usage: ``python stalling_server.py RECORD_FILE``. Every ``tools/call`` and every
``tasks/get`` appends a line to RECORD_FILE (``call TOOL``, ``get TASK``): the server's
word on what it was asked. Tasks poll every 50 ms (``pollInterval``).

- ``needs_input``: the task says ``input_required`` from its first poll on, and its
  ``tasks/result`` never answers: a question the host could fetch never comes;
- ``falls_silent``: the first poll is answered ``working``, later ones never are;
- ``wakes_up``: as ``falls_silent``, until the file ``RECORD_FILE.wake`` exists: then
  the polls it held are answered (the task completed), and so is what comes after;
- ``keeps_working``: every poll is answered ``working``: a task that never stalls.

Its tasks are kept in ``RECORD_FILE.tasks`` (JSON), so that the process a restarted host
starts knows them as the first one did.
"""

import json
import sys
import threading
import time
from pathlib import Path

RECORD = Path(sys.argv[1])
TOOLS = [{"name": name, "description": text, "inputSchema": {"type": "object"},
          "execution": {"taskSupport": "required"}}
         for name, text in [("needs_input", "says it needs input, asks nothing"),
                            ("falls_silent", "stops answering its polls"),
                            ("wakes_up", "stops answering its polls until woken"),
                            ("keeps_working", "answers every poll: working")]]


def note(line: str) -> None:
    with RECORD.open("a", encoding="utf-8") as f:
        f.write(line + "\n")


_WRITING = threading.Lock()
#: Polls of ``wakes_up`` tasks held unanswered: (request id, task id).
_HELD: list[tuple[object, str]] = []


def write(obj: dict) -> None:
    with _WRITING:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def awake() -> bool:
    return Path(f"{RECORD}.wake").exists()


def wake_when_told() -> None:
    """Answer the held polls once the wake file exists."""
    while not awake():
        time.sleep(0.02)
    with _WRITING:
        held = list(_HELD)
        _HELD.clear()
    for rid, task_id in held:
        write({"jsonrpc": "2.0", "id": rid, "result": task(task_id, "completed")})


def task(task_id: str, status: str) -> dict:
    return {"taskId": task_id, "status": status, "pollInterval": 50, "ttl": 600000,
            "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z"}


def main() -> None:
    kept = Path(f"{RECORD}.tasks")
    # task id -> {"tool": name, "gets": count}
    tasks: dict[str, dict] = json.loads(kept.read_text()) if kept.exists() else {}
    threading.Thread(target=wake_when_told, daemon=True).start()
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg or "method" not in msg:
            continue
        rid, method, params = msg["id"], msg["method"], msg.get("params") or {}
        if method == "initialize":
            write({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}, "cancel": {}}},
                "serverInfo": {"name": "stalling", "version": "1"}}})
        elif method == "tools/list":
            write({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
        elif method == "ping":
            write({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "tools/call":
            name = params.get("name")
            note(f"call {name}")
            task_id = f"task-{name}-{len(tasks) + 1}"
            tasks[task_id] = {"tool": name, "gets": 0}
            kept.write_text(json.dumps(tasks))
            write({"jsonrpc": "2.0", "id": rid, "result": {"task": task(task_id, "working")}})
        elif method == "tasks/get":
            task_id = params.get("taskId")
            note(f"get {task_id}")
            entry = tasks.get(task_id)
            if entry is None:
                write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no such task"}})
                continue
            entry["gets"] += 1
            kept.write_text(json.dumps(tasks))
            if entry["tool"] == "keeps_working":
                write({"jsonrpc": "2.0", "id": rid, "result": task(task_id, "working")})
            elif entry["tool"] == "needs_input":
                write({"jsonrpc": "2.0", "id": rid, "result": task(task_id, "input_required")})
            elif entry["tool"] == "wakes_up" and awake():
                write({"jsonrpc": "2.0", "id": rid, "result": task(task_id, "completed")})
            elif entry["gets"] == 1:
                write({"jsonrpc": "2.0", "id": rid, "result": task(task_id, "working")})
            elif entry["tool"] == "wakes_up":
                with _WRITING:
                    if not awake():
                        _HELD.append((rid, task_id))
                        continue
                write({"jsonrpc": "2.0", "id": rid, "result": task(task_id, "completed")})
            # else: no answer, ever
        elif method == "tasks/result":
            task_id = params.get("taskId")
            entry = tasks.get(task_id)
            if entry is not None and entry["tool"] == "wakes_up" and awake():
                write({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "awake"}]}})
            # else: never answered
        elif method == "tasks/cancel":
            write({"jsonrpc": "2.0", "id": rid, "result": task(params.get("taskId"), "cancelled")})
        elif method.startswith("notifications/"):
            continue
        else:
            write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
