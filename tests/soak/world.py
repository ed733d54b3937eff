"""What a soak or reboot run is made of: a home, its owner (``hostapp agent``), lab servers
over HTTP behind chaos proxies, and the plan of which lab tool exercises which mechanism.

Everything is a real process on loopback: the lab (``hostapp lab serve --http``) with its
state file, the agent, ``hostapp call`` processes. The agent is started explicitly and
killed by the pid it wrote into the home's lock, so an owner a client spawned is found
too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostapp.agent.client import AgentUnavailable, RemoteEngine
from hostapp.agent.endpoint import endpoint_path
from hostapp.agent.lock import HomeLock
from hostapp.engine import api
from tests.support.chaos_proxy import ChaosProxy
from tests.support.faults import REPO_ROOT, LabProcess

#: The mechanism each long lab tool exercises, per era (docs/protocol.md). The handshake
#: era is what a server that refuses ``server/discover`` gets; the stateless one is the
#: lab as it is. ``long_mrtr`` runs in the stateless era only: in the handshake era it is a
#: plain call on an SSE stream (its question an ``elicitation/create``) that the lab
#: answers from a coroutine, not a job, so a lab restart ends its stream without an
#: answer, and the host then keeps such an operation ``running`` without end (a known
#: defect of the engine: after a resumed stream is given up, nothing drives the operation).
HANDSHAKE_TOOLS = {
    "long_sse": "http_resumption",
    "long_task": "tasks_2025",
    "long_resume_token": "resume_token",
    "long_stream": "streams",
    "long_resumable": "resumable_requests",
    "long_async": "async_tool",
}
STATELESS_TOOLS = {
    "long_task_ext": "tasks_extension",
    "long_mrtr": "mrtr",
    "long_resume_token": "resume_token",
    "long_stream": "streams",
    "long_resumable": "resumable_requests",
    "long_async": "async_tool",
}


def answer_for(params: dict[str, Any]) -> dict[str, Any]:
    """An accepting answer to a form question: each required field (and each with a
    default) filled with its default or a plain value of its type."""
    schema = params.get("requestedSchema") or {}
    content: dict[str, Any] = {}
    props = schema.get("properties") or {}
    for name, prop in props.items():
        if "default" in prop:
            content[name] = prop["default"]
        elif name in (schema.get("required") or ()):
            content[name] = {"boolean": True, "integer": 1, "number": 1}.get(prop.get("type"), "soak")
    if "proceed" in props:
        content["proceed"] = True
    return {"action": "accept", "content": content}


@dataclass
class Lab:
    """One lab server behind a chaos proxy; ``name`` is its server name in the home."""

    name: str
    handshake: bool
    process: LabProcess
    proxy: ChaosProxy
    restarts: int = 0

    @property
    def tools(self) -> dict[str, str]:
        return HANDSHAKE_TOOLS if self.handshake else STATELESS_TOOLS

    def config(self) -> Any:
        return api.ServerConfig(name=self.name, transport="http", url=self.proxy.url())

    async def kill(self) -> None:
        await self.proxy.server_down()
        await asyncio.to_thread(self.process.kill)

    async def start(self) -> None:
        """Start on the same port with the same state file (the port may linger a moment)."""
        port = self.process.port
        deadline = time.monotonic() + 30
        while True:
            try:
                await asyncio.to_thread(self.process.start, port)
                await self.proxy.server_up()
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    @property
    def running(self) -> bool:
        return self.process.proc is not None and self.process.proc.poll() is None


async def start_lab(name: str, state_dir: Path, *, handshake: bool) -> Lab:
    process = await asyncio.to_thread(LabProcess(state_dir / f"{name}.sqlite3").start)
    proxy = await ChaosProxy(process.port, handshake_only=handshake).start()
    return Lab(name, handshake, process, proxy)


@dataclass
class Owner:
    """Starts and kills ``hostapp agent`` on one home."""

    home: Path
    env: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    kills: int = 0

    def spawn(self, *args: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-m", "hostapp", "agent", "--home", str(self.home), *args],
                                env=self.env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(proc)
        return proc

    async def start(self, *args: str, timeout: float = 60) -> None:
        """Start an owner (unless one answers already) and wait until it answers."""
        if await self.connect(client="probe", timeout=0) is None:
            self.spawn("--idle-exit", "3600", *args)
        if await self.connect(client="probe", timeout=timeout) is None:
            raise RuntimeError(f"no agent answered within {timeout} s (log: {self.home / 'logs' / 'agent.log'})")

    async def connect(self, listener: api.EngineListener | None = None, *, client: str = "soak",
                      timeout: float = 30) -> RemoteEngine | None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                engine = await RemoteEngine.connect(endpoint_path(self.home), listener, client=client)
            except AgentUnavailable:
                if time.monotonic() >= deadline:
                    return None
                await asyncio.sleep(0.1)
                continue
            if client == "probe":
                await engine.close()
            return engine

    def owner_pid(self) -> int | None:
        lock = HomeLock(self.home)
        if lock.acquire():
            lock.release()
            return None
        info = lock.owner()
        return None if info is None else info.pid

    def kill(self) -> bool:
        """SIGKILL the owner of the home, whoever started it; True when one was killed."""
        pid = self.owner_pid()
        if pid is None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        self.kills += 1
        deadline = time.monotonic() + 10
        while self.owner_pid() == pid and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.02)
        self.reap()
        return True

    def reap(self) -> None:
        for proc in self.procs:
            proc.poll()

    def stop(self) -> None:
        """Stop cleanly (``agent stop --yes``), or SIGKILL what is left."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run([sys.executable, "-m", "hostapp", "agent", "stop", "--yes"], env=self.env, cwd=REPO_ROOT,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=90)
        self.kill()
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


def host_env(home: Path, keyring_env: dict[str, str]) -> dict[str, str]:
    """The environment of every hostapp process of a run."""
    return {**os.environ, **keyring_env, "HOSTAPP_HOME": str(home), "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *(p for p in sys.path if p)])}
