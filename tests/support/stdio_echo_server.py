"""A tiny stdio MCP-ish server for the transport tests: it answers every request with its params.

Methods with a scripted behaviour: ``malformed`` (writes a line that is not JSON first),
``oversized`` (writes a notification line of ``params.size`` bytes first), ``deep`` (writes
a line of JSON nested ``params.depth`` levels deep first), ``log`` (writes
``params.lines`` to stderr), ``die`` (writes to stderr and exits with ``params.code``
without answering). ``--stubborn`` makes it ignore SIGTERM and stdin EOF, so only SIGKILL
ends it.
"""

import json
import signal
import sys
import time


def write(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    stubborn = "--stubborn" in sys.argv
    if stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("echo server ready", file=sys.stderr, flush=True)
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method, params = message["method"], message.get("params") or {}
        if method == "malformed":
            sys.stdout.write("this is not json\n")
        elif method == "oversized":
            filler = "x" * int(params["size"])
            write({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": filler}})
        elif method == "deep":
            depth = int(params.get("depth", 100_000))
            sys.stdout.write("[" * depth + "]" * depth + "\n")
        elif method == "log":
            for text in params["lines"]:
                print(text, file=sys.stderr, flush=True)
        elif method == "die":
            print("fatal: the database is locked", file=sys.stderr, flush=True)
            sys.exit(int(params.get("code", 3)))
        write({"jsonrpc": "2.0", "id": message["id"], "result": {"method": method, "params": params}})
    if stubborn:
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
