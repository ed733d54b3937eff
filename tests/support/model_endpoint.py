"""A tiny OpenAI-compatible chat-completions endpoint, the model of the sampling tests.

Run as a process of its own (``python -m tests.support.model_endpoint --log FILE``): it
listens on 127.0.0.1 (the port printed as ``model listening on http://127.0.0.1:PORT/v1``),
answers ``POST /v1/chat/completions`` with a reply that quotes the last user message, and
writes each request (its Authorization header and its JSON body) as a line of ``--log``.
With ``--key K`` it answers 401 to a request without ``Authorization: Bearer K``.
:class:`ModelEndpoint` runs it for a test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


def reply_to(body: dict[str, Any]) -> str:
    """What the endpoint answers: the last user message, quoted."""
    users = [m.get("content") for m in body.get("messages") or [] if m.get("role") == "user"]
    return f"model reply to: {users[-1] if users else ''}"


def serve(log: Path, key: str | None) -> None:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            auth = self.headers.get("Authorization")
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            with lock, log.open("a") as out:
                out.write(json.dumps({"path": self.path, "authorization": auth, "body": body}) + "\n")
            if self.path != "/v1/chat/completions" or not isinstance(body, dict):
                self._send(404, {"error": {"message": "no such endpoint"}})
            elif key is not None and auth != f"Bearer {key}":
                self._send(401, {"error": {"message": "Incorrect API key provided"}})
            else:
                self._send(200, {"id": "chatcmpl-1", "object": "chat.completion", "model": body.get("model"),
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": reply_to(body)}}]})

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"model listening on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


class ModelEndpoint:
    """The endpoint as a child process; ``base_url`` once started, ``requests()`` read from its log."""

    def __init__(self, log: Path, key: str | None = None):
        self.log = log
        self.key = key
        self.base_url = ""
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> ModelEndpoint:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.model_endpoint", "--log", str(self.log),
             *(["--key", self.key] if self.key else [])],
            cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("model listening on "):
            self.stop()
            raise RuntimeError(f"the model endpoint did not start: {line!r}")
        self.base_url = line.removeprefix("model listening on ").strip()
        return self

    def requests(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--key")
    args = parser.parse_args()
    serve(args.log, args.key)
