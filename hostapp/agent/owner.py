"""The owner of a home: ``hostapp agent``, the engine run headless behind the home's lock.

It takes the home's lock (:mod:`hostapp.agent.lock`), starts the engine (which resumes every
unfinished operation), and serves the facade on the home's socket
(:mod:`hostapp.agent.endpoint`). It needs no display. Besides the facade, the socket
answers the owner's own requests, :class:`~hostapp.engine.api.AgentControl`'s: ``agent.status``,
``agent.stop``, ``agent.unsurvivable`` and ``agent.carried``.

An owner started on demand exits by itself once nothing is in flight, no question is
open and no client has been connected for :data:`IDLE_EXIT_SECONDS`; one started at login
(``--autostart``) stays, so an operation started later from anywhere has its owner. With
``--tray`` too (the login entries) and a display, it starts hostapp's tray icon: the window
process, hidden until the icon is clicked.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import logging.handlers
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hostapp.agent.endpoint import AgentEndpoint, endpoint_path
from hostapp.agent.lock import HomeLock
from hostapp.agent.notify import Notifier, make_notifier
from hostapp.engine import api
from hostapp.engine.facade import LocalEngine
from hostapp.engine.service import Engine
from hostapp.protocol.shown_text import RedactUrlSecrets
from hostapp.store.paths import log_dir, private_file

log = logging.getLogger(__name__)

#: How long an on-demand owner stays with nothing to do and nobody connected.
IDLE_EXIT_SECONDS = 180.0
_IDLE_CHECK_SECONDS = 2.0


class _OwnerListener:
    """The engine's listener in the owner: everything goes to the clients; what a person
    should hear about also becomes a desktop notification while no window is open."""

    def __init__(self, endpoint: AgentEndpoint, notifier: Notifier) -> None:
        self.endpoint = endpoint
        self.notifier = notifier
        self._tasks: set[asyncio.Task[None]] = set()

    def operation_changed(self, op: api.OperationView) -> None:
        self.endpoint.operation_changed(op)
        if (op.status in api.TERMINAL or op.needs_input) and not self.endpoint.has_client("window"):
            task = asyncio.get_running_loop().create_task(self.notifier.operation_changed(op))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def operation_event(self, op_id: str, kind: str, data: api.JsonObject) -> None:
        self.endpoint.operation_event(op_id, kind, data)

    def server_changed(self, server: api.ServerView) -> None:
        self.endpoint.server_changed(server)

    def input_requested(self, request: api.InputRequest) -> None:
        self.endpoint.input_requested(request)

    def input_withdrawn(self, request_id: str) -> None:
        self.endpoint.input_withdrawn(request_id)

    def server_removed(self, name: str) -> None:
        self.endpoint.server_removed(name)

    def problem(self, kind: str, message: str) -> None:
        self.endpoint.problem(kind, message)


def open_window(op_id: str) -> None:
    """A notification's action: open the window at the operation (a process of its own,
    detached; a window already open comes forward there instead)."""
    import subprocess

    from hostapp.agent.autostart import self_command

    log.info("opening the window for %s", op_id)
    subprocess.Popen([*self_command(), "--show-operation", op_id], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def display_available(environ: Mapping[str, str] | None = None, platform: str | None = None) -> bool:
    """Whether the session has a display a tray icon can live on."""
    env = os.environ if environ is None else environ
    name = platform or sys.platform
    return name.startswith("win") or name == "darwin" or bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def open_tray() -> None:
    """At login: hostapp's tray icon, the window hidden until it is asked for (a process of
    its own, detached; when a window runs already it stays as it is)."""
    import subprocess

    from hostapp.agent.autostart import self_command

    log.info("showing the tray icon")
    subprocess.Popen([*self_command(), "--tray"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


class Owner(api.AgentControl):
    """The engine of one home, its endpoint, and the reasons it keeps running; it answers
    the ``agent.*`` methods itself."""

    def __init__(self, home: Path, *, autostart: bool = False, idle_exit: float | None = IDLE_EXIT_SECONDS,
                 tray: bool = False) -> None:
        self.home = home
        self.autostart = autostart
        self.tray = tray
        self.idle_exit = None if autostart else idle_exit
        self.since = time.time()
        self.lock = HomeLock(home)
        self._stopping = asyncio.Event()
        #: Why the owner stops on purpose (told to its clients); a signal unless asked.
        self._stop_reason = "it received a signal to stop"
        self._last_client = time.monotonic()
        self.endpoint = AgentEndpoint(
            engine=None,  # set below: the engine is made with the endpoint as its listener
            path=endpoint_path(home),
            info={"pid": os.getpid(), "since": self.since, "autostart": autostart},
            on_clients=self._clients_changed,
            control=self,
        )
        self.notifier = make_notifier(on_open=open_window)
        self._engine = Engine(home, _OwnerListener(self.endpoint, self.notifier))
        self.engine: api.EngineApi = LocalEngine(self._engine)
        # Its restoring at start-up lets the clients' answers out between batches.
        self._engine.clients_caught_up = self.endpoint.clients_caught_up
        self.endpoint.engine = self.engine

    def _clients_changed(self, count: int) -> None:
        self._last_client = time.monotonic()

    async def status(self) -> api.AgentStatus:
        in_flight = await self.engine.count_operations(set(api.IN_FLIGHT))
        return {"running": True, "pid": os.getpid(), "since": self.since, "autostart": self.autostart,
                "operations": in_flight, "clients": self.endpoint.client_count}

    async def carried(self) -> list[str]:
        """The operations this owner drives now (a client never waits on one it does not)."""
        await self.endpoint.ready.wait()  # what the journal held is resumed by then
        return sorted(self._engine.runners)

    async def unsurvivable(self) -> list[api.LostOperation]:
        """The operations in flight that a stop would not leave to be resumed, each with the
        reason (its view's ``lost_at_stop``): a call sent ends 'unknown' now, one never sent
        ends 'never sent' at the next start."""
        await self.endpoint.ready.wait()
        return [{"id": op.id, "server": op.server, "tool": op.tool, "status": op.status, "why": op.lost_at_stop}
                for op in await self.engine.unfinished_operations() if op.lost_at_stop is not None]

    async def stop(self) -> dict[str, Any]:
        """Stop, asked by a client: what cannot survive the stop ends now, with the reason,
        and the answer names it ("ended")."""
        self._stop_reason = "it was asked to stop"
        ended = await self._end_what_cannot_survive()
        self._stopping.set()
        return {"stopping": True, "ended": ended}

    async def _end_what_cannot_survive(self) -> list[dict[str, Any]]:
        if not self.endpoint.ready.is_set():
            return []  # still starting: nothing of this run is in flight yet
        ended = await self._engine.end_what_cannot_survive("hostapp's agent was stopped")
        return [{"id": op.id, "server": op.server, "tool": op.tool, "status": op.status, "why": why}
                for op, why in ended]

    async def _idle(self) -> bool:
        if self.idle_exit is None or self.endpoint.client_count:
            return False
        if time.monotonic() - self._last_client < self.idle_exit:
            return False
        if await self.engine.open_questions():
            return False
        return await self.engine.count_operations(set(api.IN_FLIGHT)) == 0

    async def run(self) -> int:
        """Own the home until stopped (a signal, ``agent.stop``, or idleness); 0 on a clean
        end, 3 when another process owns the home already."""
        if not self.lock.acquire(wait=1.0):
            owner = self.lock.owner()
            log.info("the home is owned already (pid %s)", owner.pid if owner else "?")
            return 3
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", signal.SIGTERM)):  # no SIGHUP on Windows
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._stopping.set)
        try:
            await self.endpoint.start()
            await self.notifier.start()
            # The owner alone drives the home's operations: what a crash left unsent ends.
            await self._engine.start(resume=True, end_unsent=True)
            self.endpoint.ready.set()
            log.info("agent %s owns %s", os.getpid(), self.home)
            if self.tray and display_available():
                open_tray()  # now that there is an owner to connect to
            while not self._stopping.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), _IDLE_CHECK_SECONDS)
                if not self._stopping.is_set() and await self._idle():
                    log.info("nothing in flight and nobody connected for %.0f s: exiting", self.idle_exit)
                    break
        finally:
            if self._stopping.is_set():
                # A signal is a clean stop too: what it ends is told to the clients before
                # the farewell (nothing, when agent.stop has ended it already).
                await self._end_what_cannot_survive()
                await self.endpoint.farewell(self._stop_reason)
            await self.endpoint.close()
            await self.engine.stop()
            await self.notifier.close()
            self.lock.release()
        return 0


class _PrivateLog(logging.handlers.RotatingFileHandler):
    """A rotating log whose every file is this user's alone: the file a rotation starts is
    made 0600 before it is opened (the handler's own would follow the umask, often 0644)."""

    def _open(self) -> io.TextIOWrapper:
        private_file(Path(self.baseFilename))
        return super()._open()


#: How large ``agent.log`` grows before it is rotated (three earlier files are kept).
LOG_BYTES = 2_000_000


def setup_agent_logging(home: Path, verbose: bool) -> logging.Handler:
    """The agent has no terminal of its own: it logs to ``<home>/logs/agent.log`` (the
    handler is returned, for a test to take off again)."""
    handler = _PrivateLog(log_dir(home) / "agent.log", maxBytes=LOG_BYTES, backupCount=3, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactUrlSecrets())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    # httpcore's debug lines quote whole headers (session ids, secret values).
    logging.getLogger("httpcore").setLevel(logging.INFO)
    # httpx says every request at INFO: a line per poll and per resumed stream, which at
    # ten thousand operations rotated a restart's own lines out of the log within seconds.
    # They are kept for --verbose.
    logging.getLogger("httpx").setLevel(logging.INFO if verbose else logging.WARNING)
    return handler
