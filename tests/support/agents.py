"""Owner processes for tests: ``hostapp agent`` started on a test's home, and always
stopped at the end, whatever the test did to them (an owner a client spawned included)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hostapp.agent.lock import HomeLock
from tests.support.keyring_daemon import KeyringDaemon
from tests.support.waiting import DEADLINE, until_async


def kill_owner(home: Path, timeout: float = 10.0) -> int | None:
    """SIGKILL the process that owns ``home`` (the agent a command started), if one does,
    and wait until the kernel let go of its lock. Its pid, or None."""
    lock = HomeLock(home)
    if lock.free():
        return None
    owner = lock.owner()
    if owner is None:
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(owner.pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while not lock.free():
        if time.monotonic() > deadline:
            raise AssertionError(f"the owner of {home} (pid {owner.pid}) still holds its lock")
        time.sleep(0.02)
    return owner.pid


def agent_processes() -> Iterator[tuple[int, str, Path | None]]:
    """Every running ``hostapp agent``: its pid, its command line and its HOSTAPP_HOME (a
    zombie has no command line: it is left out)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"agent" not in argv or not any(a.endswith(b"hostapp") for a in argv):
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        home = next((e[len(b"HOSTAPP_HOME="):] for e in environ if e.startswith(b"HOSTAPP_HOME=")), b"")
        yield int(entry.name), b" ".join(argv).decode(errors="replace"), Path(os.fsdecode(home)) if home else None


def agent_pids(home: Path) -> list[int]:
    """The ``hostapp agent`` processes running on ``home`` (zombies left out)."""
    want = Path(home).resolve()
    return [pid for pid, _, on in agent_processes() if on == want]


class Agents:
    """Starts ``hostapp agent`` processes on a home and kills what is left at the end."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home = home
        self.env = env
        self.procs: list[subprocess.Popen[bytes]] = []
        self._outputs: list[Path] = []

    def start(self, *args: str, verbose: bool = False) -> subprocess.Popen[bytes]:
        """``hostapp agent ARGS`` on the home (``hostapp -v agent ARGS`` when ``verbose``);
        what it prints goes to a file beside the home (:meth:`output`), so that a full pipe
        never stops it and a test can say why it died."""
        path = self.home.parent / f"{self.home.name}-agent-{len(self.procs)}.out"
        flags = ["-v"] if verbose else []
        with open(path, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "hostapp", *flags, "agent", *args], env=self.env,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.procs.append(proc)
        self._outputs.append(path)
        return proc

    def output(self) -> str:
        """What the agents this test started printed, each with its exit status."""
        parts = []
        for proc, path in zip(self.procs, self._outputs, strict=True):
            status = "running" if proc.poll() is None else f"exit {proc.returncode}"
            text = path.read_text(errors="replace")[-4000:] if path.exists() else ""
            parts.append(f"--- agent {proc.pid} ({status}):\n{text}")
        return "\n".join(parts)

    async def connect(self, listener: Any = None, timeout: float = DEADLINE) -> Any:
        """The RemoteEngine of the home's owner once it answers. Fails at once, with what
        the agents printed, when every agent this test started has ended without one."""
        from hostapp.agent.client import AgentUnavailable, RemoteEngine
        from hostapp.agent.endpoint import endpoint_path

        async def attempt() -> Any:
            try:
                return await RemoteEngine.connect(endpoint_path(self.home), listener, client="test")
            except AgentUnavailable:
                if self.procs and all(p.poll() is not None for p in self.procs):
                    raise AssertionError(f"no agent runs on the home:\n{self.output()}") from None
                return None

        try:
            return await until_async(attempt, timeout, what="the home's owner to answer")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.output()}") from None

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hostapp", *args], env=self.env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        # An owner this test did not start itself (spawned by a client, or by a launcher).
        lock = HomeLock(self.home)
        if not lock.acquire():
            owner = lock.owner()
            if owner is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(owner.pid, signal.SIGKILL)
        lock.release()


def agents_fixture(isolated_home: Path, real_keyring: KeyringDaemon) -> Iterator[Agents]:
    env = {**os.environ, **real_keyring.env, "HOSTAPP_HOME": str(isolated_home),
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    made = Agents(isolated_home, env)
    yield made
    made.kill_all()


def exchange(sock: socket.socket, *lines: bytes) -> list[dict[str, Any]]:
    """Send ``lines`` on a connected socket to an owner's endpoint, close the sending side
    and read every answer until the owner closes: its JSON lines, parsed."""
    with sock:
        sock.settimeout(10)
        try:
            for line in lines:
                sock.sendall(line)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the owner answered and closed first (a refused hello): read what it sent
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass  # closed with our later lines unread: what it sent before is read
    return [json.loads(x) for x in data.splitlines()]
