"""The engine facade on the far side of the owner's socket: :class:`RemoteEngine`.

It implements :class:`~hostapp.engine.api.EngineApi` by sending each call over the wire
(:mod:`hostapp.agent.wire`) and hands the owner's events to its listener, so the window and
the CLI are written once, against the facade, whether the engine runs in their process or in
the agent. Failures arrive as the facade's own exceptions; a connection that breaks fails
every call in flight with :class:`AgentGone` (a facade :class:`~hostapp.engine.api.EngineError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

from hostapp.agent import wire
from hostapp.engine import api

log = logging.getLogger(__name__)


class AgentGone(api.EngineError):
    """The connection to the agent closed (it stopped, or it died)."""


class AgentUnavailable(api.EngineError):
    """No agent answers on the home's socket."""


class _NullListener:
    def operation_changed(self, op: api.OperationView) -> None: ...

    def operation_event(self, op_id: str, kind: str, data: api.JsonObject) -> None: ...

    def server_changed(self, server: api.ServerView) -> None: ...

    def input_requested(self, request: api.InputRequest) -> None: ...

    def input_withdrawn(self, request_id: str) -> None: ...

    def server_removed(self, name: str) -> None: ...

    def problem(self, kind: str, message: str) -> None: ...


class RemoteEngine:
    """:class:`~hostapp.engine.api.EngineApi` over a connection to the home's owner."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hello: dict[str, Any],
                 listener: api.EngineListener | None = None) -> None:
        self._reader = reader
        self._writer = writer
        self.agent = hello  # the owner's answer to hello: version, pid, since
        self.listener: api.EngineListener = listener or _NullListener()
        self._ids = itertools.count(2)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._closed: asyncio.Event = asyncio.Event()
        #: Why the owner said it stops on purpose, if it did (then its end is no crash).
        self.owner_stopping: str | None = None
        self._reading = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(cls, path: Path, listener: api.EngineListener | None = None, *,
                      client: str = "client", timeout: float = 5.0) -> RemoteEngine:
        """Connect to the endpoint at ``path`` (a Unix socket, or a loopback endpoint file:
        see :mod:`hostapp.agent.endpoint`) and say hello; :class:`AgentUnavailable` when
        nobody listens there."""
        from hostapp.agent.endpoint import LOOPBACK_FILE, read_loopback_file

        hello: dict[str, Any] = {"version": wire.VERSION, "client": client, "pid": os.getpid()}
        try:
            if path.name == LOOPBACK_FILE:
                port, hello["key"] = read_loopback_file(path)
                opening = asyncio.open_connection("127.0.0.1", port, limit=wire.MAX_MESSAGE)
            else:
                opening = asyncio.open_unix_connection(str(path), limit=wire.MAX_MESSAGE)
            reader, writer = await asyncio.wait_for(opening, timeout)
        except (FileNotFoundError, ConnectionRefusedError, TimeoutError, OSError) as exc:
            raise AgentUnavailable(f"no agent answers at {path}: {exc.strerror or exc}") from None
        except ValueError as exc:  # an endpoint file half written, or not one (never quotes the key)
            raise AgentUnavailable(f"no agent answers at {path}: {exc}") from None
        writer.write(wire.dumps({"jsonrpc": "2.0", "id": 1, "method": "hello", "params": hello}))
        try:
            line = await asyncio.wait_for(reader.readline(), timeout)
            answer = wire.loads(line) if line else None
        except (TimeoutError, ConnectionError, wire.WireError) as exc:
            writer.close()
            raise AgentUnavailable(f"the agent at {path} did not answer hello: {exc}") from None
        if answer is None:
            writer.close()
            raise AgentUnavailable(f"the agent at {path} closed the connection")
        if "error" in answer:
            writer.close()
            raise AgentUnavailable(str(wire.decode_error(answer["error"])))
        return cls(reader, writer, dict(answer.get("result") or {}), listener)

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
        self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading
        self._fail_all(AgentGone("the connection to the agent was closed"))

    # -- the wire ---------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                try:
                    message = wire.loads(line)
                except wire.WireError as exc:
                    log.warning("the agent sent a bad message: %s", exc)
                    continue
                if message.get("method") == "event":
                    self._dispatch(message.get("params"))
                    continue
                rid = message.get("id")
                future = self._waiting.pop(rid, None) if isinstance(rid, int) else None
                if future is None or future.done():
                    continue
                if "error" in message:
                    future.set_exception(wire.decode_error(message["error"]))
                else:
                    future.set_result(message.get("result"))
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self._closed.set()
            self._fail_all(AgentGone("the agent stopped; the work it was doing goes on when it starts again"))

    def _fail_all(self, exc: Exception) -> None:
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(exc)

    def _dispatch(self, params: Any) -> None:
        if not isinstance(params, dict):
            return
        kind = params.get("kind")
        listener = self.listener
        try:
            if kind == "operation_changed":
                listener.operation_changed(wire.operation_view(params.get("op")))
            elif kind == "operation_event":
                data = params.get("data")
                listener.operation_event(str(params.get("op_id") or ""), str(params.get("event")),
                                         data if isinstance(data, dict) else {})
            elif kind == "server_changed":
                listener.server_changed(wire.server_view(params.get("server")))
            elif kind == "input_requested":
                listener.input_requested(wire.input_request(params.get("request")))
            elif kind == "input_withdrawn":
                listener.input_withdrawn(str(params.get("request_id")))
            elif kind == "server_removed":
                listener.server_removed(str(params.get("name")))
            elif kind == "problem":
                listener.problem(str(params.get("problem")), str(params.get("message")))
            elif kind == "owner_stopping":
                self.owner_stopping = str(params.get("reason") or "it was stopped")
        except wire.WireError as exc:
            log.warning("the agent sent a bad %s event: %s", kind, exc)

    async def _call(self, method: str, **params: Any) -> Any:
        return wire.RESULTS[method](await self._call_raw(method, **params))

    async def request_owner(self, method: str) -> Any:
        """A request the owner answers itself (``agent.status``, ``agent.stop``)."""
        return await self._call_raw(method)

    async def _call_raw(self, method: str, **params: Any) -> Any:
        if self._closed.is_set():
            raise AgentGone("the agent stopped")
        rid = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = future
        self._writer.write(wire.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": wire.encode(params)}))
        try:
            return await future
        finally:
            self._waiting.pop(rid, None)

    # -- EngineApi ----------------------------------------------------------------------

    async def list_skills(self, server: str) -> list[api.JsonObject]:
        return await self._call("list_skills", server=server)

    async def load_skill(self, server: str, name: str) -> api.JsonObject:
        return await self._call("load_skill", server=server, name=name)

    async def start(self, *, resume: bool = True, only: frozenset[str] | None = None) -> None:
        """The owner started its engine when it took the home; nothing to do."""

    async def stop(self) -> None:
        """A client's stop ends its connection; the owner and its work go on."""
        await self.close()

    async def keyring_problem(self) -> str | None:
        return await self._call("keyring_problem")

    async def servers(self) -> list[api.ServerView]:
        return await self._call("servers")

    async def server_configs(self) -> list[api.ServerConfig]:
        return await self._call("server_configs")

    async def server_config(self, name: str) -> api.ServerConfig | None:
        return await self._call("server_config", name=name)

    async def add_server(self, cfg: api.ServerConfig, secrets: api.ServerSecrets | None = None) -> None:
        await self._call("add_server", cfg=cfg, secrets=secrets)

    async def update_server(self, cfg: api.ServerConfig, secrets: api.ServerSecrets | None = None) -> None:
        await self._call("update_server", cfg=cfg, secrets=secrets)

    async def replace_server(self, old_name: str, cfg: api.ServerConfig,
                             secrets: api.ServerSecrets | None = None) -> None:
        await self._call("replace_server", old_name=old_name, cfg=cfg, secrets=secrets)

    async def remove_server(self, name: str) -> None:
        await self._call("remove_server", name=name)

    async def forget_server(self, name: str) -> list[str]:
        return await self._call("forget_server", name=name)

    async def reconnect(self, name: str) -> None:
        await self._call("reconnect", name=name)

    async def wait_connected(self, name: str, timeout: float = 60.0) -> api.ServerView:
        return await self._call("wait_connected", name=name, timeout=timeout)

    async def list_tools(self, server: str, timeout: float = 30.0) -> list[api.JsonObject]:
        return await self._call("list_tools", server=server, timeout=timeout)

    async def probe_tools(self, server: str, timeout: float | None = None) -> list[api.JsonObject]:
        return await self._call("probe_tools", server=server, timeout=timeout)

    async def check_server(self, cfg: api.ServerConfig, secrets: api.ServerSecrets | None = None,
                           timeout: float | None = None) -> api.JsonObject:
        return await self._call("check_server", cfg=cfg, secrets=secrets, timeout=timeout)

    async def stop_retrying(self, name: str) -> None:
        await self._call("stop_retrying", name=name)

    async def begin_sign_in(self, server: str, timeout: float | None = None) -> str:
        return await self._call("begin_sign_in", server=server, timeout=timeout)

    async def finish_sign_in(self, server: str) -> None:
        await self._call("finish_sign_in", server=server)

    async def sign_out(self, server: str) -> None:
        await self._call("sign_out", server=server)

    async def start_call(self, server: str, tool: str, arguments: api.JsonObject | None = None) -> api.OperationView:
        return await self._call("start_call", server=server, tool=tool, arguments=arguments)

    async def cancel(self, op_id: str) -> None:
        await self._call("cancel", op_id=op_id)

    async def rerun(self, op_id: str) -> api.OperationView:
        return await self._call("rerun", op_id=op_id)

    async def operation(self, op_id: str) -> api.OperationView | None:
        return await self._call("operation", op_id=op_id)

    async def operations(self, statuses: set[str] | None = None, limit: int = 200,
                         offset: int = 0) -> list[api.OperationView]:
        return await self._call("operations", statuses=statuses, limit=limit, offset=offset)

    async def count_operations(self, statuses: set[str] | None = None) -> int:
        return await self._call("count_operations", statuses=statuses)

    async def unfinished_operations(self) -> list[api.OperationView]:
        return await self._call("unfinished_operations")

    async def operation_rows(self, limit: int = 200) -> list[api.JsonObject]:
        return await self._call("operation_rows", limit=limit)

    async def events(self, op_id: str) -> list[api.JsonObject]:
        return await self._call("events", op_id=op_id)

    async def wait_finished(self, op_id: str) -> api.OperationView:
        return await self._call("wait_finished", op_id=op_id)

    async def answer_input(self, request_id: str, answer: api.JsonObject) -> None:
        await self._call("answer_input", request_id=request_id, answer=answer)

    async def open_questions(self) -> list[api.InputRequest]:
        return await self._call("open_questions")

    # MCP Apps
    async def read_app_view(self, server: str, uri: str) -> api.JsonObject:
        return await self._call("read_app_view", server=server, uri=uri)

    async def start_app_call(self, server: str, tool: str, arguments: api.JsonObject | None,
                             view_of: str) -> api.OperationView:
        return await self._call("start_app_call", server=server, tool=tool, arguments=arguments, view_of=view_of)


#: How often a client that waits for an owner to come up tries its socket again.
_RETRY_SECONDS = 0.05

#: How many owners one client starts at most while it waits (one that lost the race for
#: the lock exits at once; one that died starting says why in its log).
_MAX_SPAWNS = 3


def spawn_agent(home: Path, *, verbose: bool = False) -> subprocess.Popen[bytes]:
    """Start ``hostapp agent`` for ``home``, detached from this process (its own session,
    no terminal: a Ctrl+C, a closed terminal or a killed client do not reach it), so the
    work it owns outlives whoever started it."""
    from hostapp.agent.autostart import self_command
    from hostapp.store.paths import HOME_ENV

    env = {**os.environ, HOME_ENV: str(Path(home).resolve())}
    # Windows has no sessions (the flags exist there only): a new process group without
    # a console does the same.
    flags = getattr(subprocess, "DETACHED_PROCESS", 0) | getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
    proc = subprocess.Popen(
        [*self_command(), *(["-v"] if verbose else []), "agent"], env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
        creationflags=flags)
    # A client that lives on (the window) reaps the agent if it ends first, so no zombie
    # stays behind; a short-lived client exits and the agent is adopted by init.
    threading.Thread(target=proc.wait, name="hostapp-agent-reaper", daemon=True).start()
    return proc


async def connect_or_spawn(home: Path, listener: api.EngineListener | None = None, *, client: str = "client",
                           timeout: float = 30.0, verbose: bool = False) -> RemoteEngine:
    """Connect to the owner of ``home``, starting one when none runs.

    Safe when many clients start at once on a home with no owner: a client starts an
    owner only while the home's lock is free and it holds the spawn lock (so clients that
    start together start one owner between them); should two owners start all the same,
    exactly one takes the home's lock (the other exits at once); every client connects to
    it. A lock held by an owner still starting (or stopping) is waited for. A stale socket
    of a dead owner is answered by nobody: the new owner takes the lock and the socket; the
    kernel lets go of a dead process's locks, so none of them is ever stale."""
    from hostapp.agent.endpoint import endpoint_path
    from hostapp.agent.lock import SPAWN_LOCK_NAME, HomeLock

    path = endpoint_path(home)
    lock, spawning = HomeLock(home), HomeLock(home, SPAWN_LOCK_NAME)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    started: subprocess.Popen[bytes] | None = None
    spawns = 0
    try:
        while True:
            try:
                return await RemoteEngine.connect(path, listener, client=client)
            except AgentUnavailable:
                pass
            if (started is None or started.poll() is not None) and spawns < _MAX_SPAWNS and lock.free() \
                    and spawning.acquire():
                started = spawn_agent(home, verbose=verbose)
                spawns += 1
            if loop.time() >= deadline:
                raise AgentUnavailable(
                    f"the agent did not start within {timeout:.0f} s (its log: {Path(home) / 'logs' / 'agent.log'})")
            await asyncio.sleep(_RETRY_SECONDS)
    finally:
        spawning.release()
