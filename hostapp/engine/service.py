"""The engine: servers kept connected, operations started, carried and resumed.

:class:`Engine` does the work behind the facade (:mod:`hostapp.engine.api`): clients never
hold it, they hold an :class:`~hostapp.engine.api.EngineApi`, which in the agent (and in
the CLI's in-process commands) is :class:`~hostapp.engine.facade.LocalEngine` around an
Engine, translating what fails below into the facade's exceptions. It owns the journal
and one :class:`~hostapp.engine.supervisor.ServerConnection` per enabled server, and
composes the parts that do the work:

- :mod:`hostapp.engine.runner`: one :class:`OperationRunner` per operation, its mechanism
  fed and its actions carried out (write-ahead: see that module), with the parts that own
  its state (its view and progress, its sessions, its committed handle, its requests, its
  cancel, its kept question);
- :mod:`hostapp.engine.operation`: what a runner needs from the engine (``RunnerContext``),
  its policy constants, and how an operation is shown;
- :mod:`hostapp.engine.traffic`: what a server sends on its own, routed to operations;
- :mod:`hostapp.engine.routing`: which operation owns which request of which session;
- :mod:`hostapp.engine.handles`: the handles in the OS keyring, its health, the positions
  kept at a clean quit;
- :mod:`hostapp.engine.questions`: questions to the person and their answers;
- :mod:`hostapp.engine.first_contact`: after a restart, each restored operation's first
  word before anyone's repeat polls, and the poll budgets;
- :mod:`hostapp.engine.context`: the one object through which those parts share them.

At start-up every unfinished row is restored and resumed without being asked; one whose
outcome cannot be known ends as ``unknown``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from hostapp import mechanisms
from hostapp.auth.tokens import TokenStore
from hostapp.engine import accounts, api, diagnostics, resources, server_settings, skills
from hostapp.engine.context import EngineContext
from hostapp.engine.first_contact import FirstContactGate
from hostapp.engine.handles import (
    HANDLE_NOT_KEPT,
    HandleKeeper,
    unwrap_secret,
)
from hostapp.engine.operation import mechanism_for, operation_view
from hostapp.engine.questions import QuestionDesk
from hostapp.engine.routing import RequestRouting
from hostapp.engine.runner import OperationRunner
from hostapp.engine.sampling import SamplingGate
from hostapp.engine.session import ClientSession
from hostapp.engine.supervisor import ServerConnection
from hostapp.engine.traffic import ServerTraffic
from hostapp.mechanisms import actions as A
from hostapp.protocol.jsonrpc import IdAllocator
from hostapp.protocol.timing import Timing
from hostapp.store.status import TERMINAL, OperationStatus
from hostapp.transport.base import TransportError

if TYPE_CHECKING:
    from hostapp.store.journal import OperationJournal, OperationRecord, ServerConfig
    from hostapp.store.secrets import SecretStore

log = logging.getLogger(__name__)

T = TypeVar("T")

#: An operation with no deadline of its own is given up (as expired) after this long
#: without any sign of life from the server: a week covers every realistic tool.
DEFAULT_DEADLINE_SECONDS = 7 * 24 * 3600

#: How an operation a crash left journaled but unsent ends.
UNSENT_MESSAGE = "never sent: hostapp stopped before the call left, so it did not run"

#: Request ids a session reserves in the journal at a time. A reservation is one short
#: write; a busy session polling 200 times a second reserves again every 20 s.
REQUEST_ID_BLOCK = 4096
#: Operations restored at start-up in one turn of the event loop (see :meth:`Engine.start`).
RESTORE_BATCH = 200
#: How long the restoring at start-up waits in all for its clients to be sent what waits
#: for them (the agent's window, its list), and at most at once, between two batches: a
#: client that does not read delays the start by no more than that.
RESTORE_CLIENT_WAIT = 2.0
RESTORE_CLIENT_WAIT_AT_ONCE = 0.25
#: How long the start waits, once it has read what is in flight, for the lists that waited
#: for that read to be answered (see :meth:`Engine.operations`).
LISTS_AT_START_WAIT = 1.0


class _NullListener:
    def operation_changed(self, op: api.OperationView) -> None: ...
    def operation_event(self, op_id: str, kind: str, data: dict[str, Any]) -> None: ...
    def server_changed(self, server: api.ServerView) -> None: ...
    def input_requested(self, request: api.InputRequest) -> None: ...
    def input_withdrawn(self, request_id: str) -> None: ...
    def server_removed(self, name: str) -> None: ...
    def problem(self, kind: str, message: str) -> None: ...


class ClientsCaughtUp(Protocol):
    """Waits, at most ``within`` seconds, until the clients have been sent what waits for
    them: below their high water, or with ``everything`` all of it (the agent's endpoint)."""

    def __call__(self, within: float, *, everything: bool = False) -> Awaitable[None]: ...


class Engine:
    """The facade over journal, keyring, connections and operations (see module doc).

    States: built → started (:meth:`start`) → stopping → stopped (:meth:`stop`); it may be
    started again. ``listener`` may be replaced once built (the window's adapter).
    """

    def __init__(self, home: Path, listener: api.EngineListener | None = None, *,
                 journal: OperationJournal | None = None, secrets: SecretStore | None = None,
                 clock: Callable[[], float] = time.time, timing: Timing | None = None, connect: bool = True):
        self.home = Path(home)
        self.clock = clock
        # How long the engine's waits last (polls, back-off, retries): the product's own,
        # unless the environment names a time scale (HOSTAPP_TIME_SCALE, for the tests).
        self.timing = Timing.from_environment() if timing is None else timing
        self._journal = journal
        self._connect = connect
        # the records Engine.start is restoring (their request ids are taken)
        self._restoring: list[OperationRecord] = []
        # What was in flight when Engine.start read it, until every one is restored: the
        # clients' lists of what is in flight are answered from it (see _in_flight_at_start).
        self._at_start: asyncio.Future[list[OperationRecord]] | None = None
        self._restored_at_start: set[str] = set()  # of those, the ids restored so far
        self._lists_at_start: set[asyncio.Future[None]] = set()  # lists waiting for that read
        #: Waits (at most the seconds given) until the clients have been sent what waits for
        #: them; the agent sets it (its endpoint's), and the restoring at start-up gives them
        #: time between its batches (:data:`RESTORE_CLIENT_WAIT`).
        self.clients_caught_up: ClientsCaughtUp | None = None
        self.connections: dict[str, ServerConnection] = {}
        self._routing = RequestRouting()
        self._contacts = FirstContactGate()
        self._handles = HandleKeeper(self.home, secrets, lambda kind, message: self.listener.problem(kind, message))
        # The clients' journal reads on a thread of their own: in the shared pool they
        # waited behind the keyring calls of thousands of operations resuming (the window's
        # list of 10,000 after a restart: 3.5 s for a read of 0.3 s). One thread: the
        # journal reads on one connection, one read at a time.
        self._reads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal-read")
        #: Sampling: the model endpoint, the per-server policy and the request bounds.
        self.sampling = SamplingGate(self.home, lambda: self.secrets)
        self._questions = QuestionDesk(lambda: self.journal, lambda: self.listener, self.sampling)
        self._context = EngineContext(
            journal=lambda: self.journal, listener=listener or _NullListener(), clock=clock, timing=self.timing,
            handles=self._handles, routing=self._routing, contacts=self._contacts,
            questions=self._questions, connection=self._connection)
        self._started = False
        self._sign_ins: accounts.SignIns | None = None
        #: The resources clients watch, subscribed on each server's live connection.
        self.resource_watches = resources.ResourceWatches()
        from hostapp.engine.apps import ViewCallBudget

        #: How many calls each MCP App view may still make.
        self.view_call_budget = ViewCallBudget(time.monotonic)

    # -- composition -------------------------------------------------------------

    @property
    def listener(self) -> api.EngineListener:
        return self._context.listener

    @listener.setter
    def listener(self, listener: api.EngineListener) -> None:
        self._context.listener = listener

    @property
    def stopping(self) -> bool:
        """True from the start of :meth:`stop` until the next :meth:`start`."""
        return self._context.stopping

    @property
    def runners(self) -> dict[str, OperationRunner]:
        """The operations this process carries now, by id (ended ones leave)."""
        return self._routing.runners

    @property
    def keyring_problem(self) -> str | None:
        """Why handles cannot go to the OS keyring now, in plain words; None when they can."""
        return self._handles.keyring_problem

    @property
    def journal(self) -> OperationJournal:
        if self._journal is None:
            from hostapp.store.journal import OperationJournal
            from hostapp.store.paths import journal_path

            self._journal = OperationJournal(journal_path(self.home))
        return self._journal

    @property
    def secrets(self) -> SecretStore:
        return self._handles.secrets

    @property
    def context(self) -> EngineContext:
        """The parts the engine shares with its operations and helpers."""
        return self._context

    def capabilities(self) -> Callable[[str], dict[str, Any]]:
        """Everything the client supports, per era (the mechanisms package decides), and
        the app views it renders (MCP Apps, :mod:`hostapp.engine.apps`)."""
        from hostapp.engine.apps import with_app_views

        return with_app_views(mechanisms.client_capabilities)

    async def start(self, *, resume: bool = True, only: set[str] | None = None, end_unsent: bool = False) -> None:
        """Open the journal, check the keyring, connect servers, resume operations.

        ``only`` limits the servers connected at start (the CLI's one-off commands).
        ``end_unsent``: the agent (the only process driving the home's operations)
        ends every operation a crash left ``pending``: journaled, never sent, so it did not
        run; it is not sent now, hours later, behind the person's back.
        """
        if self._started:
            return
        self._started = True
        self._context.stopping = False
        await self._handles.check_keyring()
        journal = self.journal
        records: list[OperationRecord] = []
        # A client that asks what is in flight while this start reads and restores it (the
        # window, after a restart) is answered from the same read: its own read of the same
        # rows waited behind this one on the journal's read thread, and then for the event
        # loop busy restoring (10,000 operations: 0.6 s more before its answer left).
        at_start = self._at_start = asyncio.get_running_loop().create_future() if resume and only is None else None
        try:
            if resume:
                records = [r for r in await self._read(journal.unfinished_operations)
                           if only is None or r.server in only]
            if end_unsent:
                records = await self._end_unsent(records)
        except BaseException as exc:
            self._at_start = None
            if at_start is not None:
                at_start.set_exception(RuntimeError(f"the engine's start failed: {type(exc).__name__}"))
                at_start.exception()  # retrieved here: a client's list then reads the journal
            raise
        if at_start is not None:
            at_start.set_result(list(records))
            # The lists that waited for this read are answered before the servers are
            # connected and the keyring's handles read (a thread that held the interpreter
            # 0.16 s at 10,000 while the window's answer waited for its turn).
            if self._lists_at_start:
                await asyncio.wait(set(self._lists_at_start), timeout=LISTS_AT_START_WAIT)
                # ... and sent: all of them (the last of a list of 10,000 otherwise waited
                # 0.2-0.4 s for the turns of a loop busy with the handles and the servers).
                await self._let_clients_catch_up(RESTORE_CLIENT_WAIT_AT_ONCE, everything=True)
        try:
            await self._restore_all(records, only)
        finally:
            self._at_start = None  # every one restored (or the start failed): a list reads the journal
            self._restored_at_start = set()

    async def _restore_all(self, records: list[OperationRecord], only: set[str] | None) -> None:
        """Connect the servers and take up ``records`` again (see :meth:`start`)."""
        journal = self.journal
        # The servers are connected while the keyring reads the handles (a few hundred
        # milliseconds for a thousand operations); a new session's request ids start above
        # those the operations about to be restored were sent under.
        self._restoring = records
        for cfg in journal.list_servers():
            if cfg.enabled and self._connect and (only is None or cfg.name in only):
                self._supervise(cfg)
        handles = await self._handles.load_handles(records)
        # A server that is ready when an operation is restored gets it attached by
        # _restore; one that becomes ready later attaches what is restored by then in
        # _on_ready. Between batches the event loop serves the rest (a client's list, the
        # answers of the operations attached so far): ten thousand restored in one turn held
        # it for seconds, and an agent's answer to its window then waited behind them.
        self._restoring = []
        waited = 0.0
        for done, record in enumerate(records, 1):
            runner = self._restore(record, handles.get(record.id))
            self._restored_at_start.add(record.id)
            runner.restored_at_start = True
            self._contacts.expect(runner)
            if not runner.done and not runner.restore_refused:
                self._note_resumed(runner)
            if done % RESTORE_BATCH == 0:
                await asyncio.sleep(0)
                waited += await self._let_clients_catch_up(RESTORE_CLIENT_WAIT - waited)

    async def _let_clients_catch_up(self, budget: float, *, everything: bool = False) -> float:
        """Between two batches of the restoring: the clients' answers (the window's list)
        go out before more is restored, within ``budget`` seconds; the seconds it took.
        ``everything``: until nothing waits to be sent (else below the high water)."""
        if self.clients_caught_up is None or budget <= 0:
            return 0.0
        began = time.monotonic()
        await self.clients_caught_up(min(budget, RESTORE_CLIENT_WAIT_AT_ONCE), everything=everything)
        return time.monotonic() - began

    def _note_resumed(self, runner: OperationRunner) -> None:
        """The timeline says that this start took the operation up again (batched, like progress)."""
        data = {"mechanism": runner.mech.name, "message": "resumed after hostapp restarted"}
        self.journal.append_event(runner.id, api.EVENT_RESUMED, data)
        self._context.operation_event(runner.id, api.EVENT_RESUMED, data)

    async def _end_unsent(self, records: list[OperationRecord]) -> list[OperationRecord]:
        """End the ``pending`` operations among ``records`` (see :meth:`start`); the others."""
        kept = []
        for record in records:
            if record.status != OperationStatus.PENDING or record.jsonrpc_id is not None:
                kept.append(record)
                continue
            await self.journal.finish_operation(record.id, OperationStatus.FAILED,
                                                error={"code": None, "message": UNSENT_MESSAGE})
            view = operation_view(self.journal.get_operation(record.id) or record)
            self.listener.operation_changed(view)
        return kept

    async def end_what_cannot_survive(self, reason: str) -> list[tuple[api.OperationView, str]]:
        """Before a clean stop: end each operation in flight that the stop would leave
        with nothing to resume it, now and with the reason, instead of leaving it
        ``running`` in the journal until the next start finds it lost. A call not sent
        yet is left to the next start (it ends there as never sent). What was ended,
        each with why it could not survive."""
        ended: list[tuple[api.OperationView, str]] = []
        for runner in list(self.runners.values()):
            if runner.done or runner.record.jsonrpc_id is None:
                continue
            why = runner.view.lost_at_stop
            if why is None:
                continue
            lost: list[A.Action] = [A.Unknown(f"{reason} while the request was in flight ({why}); "
                                              "it may or may not have run")]
            await runner.feed(functools.partial(list, lost))
            if runner.done:
                ended.append((runner.view, why))
        return ended

    async def stop(self) -> None:
        """Quit: operations in flight stay as they are in the journal, to be resumed by
        the next start; nothing they would do during the shutdown is acted on."""
        self._context.stopping = True
        self._context.liveness.close()
        await self._save_positions()
        for runner in list(self.runners.values()):
            runner.shutdown()
        for conn in list(self.connections.values()):
            await conn.stop(keep_session=bool(self._routing.in_flight_of(conn.name)))
        self._context.cancel_tasks()
        self._questions.cancel_all()
        self._context.progress.publish()  # the progress taken but not yet told nor journaled
        if self._journal is not None:
            await self._journal.flush()
            self._journal.close()
        await self._handles.close()
        self._started = False

    async def _save_positions(self) -> None:
        """At a clean quit, keep where each operation had got to beyond its last committed
        handle (an SSE stream's newest event id: commits are spaced out, see
        http_resumption.COMMIT_EVERY_SECONDS), in one keyring entry for all of them, so the
        next start resumes from there instead of replaying what this run already saw. One
        write whatever the number of operations: a write per operation at quit would take
        seconds with a large keyring. Each position names the handle it extends and is
        used only while that handle is the operation's current one."""
        positions: dict[str, list[str]] = {}
        for runner in self.runners.values():
            position = runner.position_to_keep()
            if position is not None:
                positions[runner.id] = position
        if not positions or self.keyring_problem is not None:
            return
        # Positions another process kept (a one-off command's engine holds only its own
        # operations) stay, for the operations still unfinished in the journal.
        others = {i for i in await self._read(self.journal.unfinished_ids) if i not in self.runners}
        await self._handles.save_positions(positions, others)

    # -- servers -------------------------------------------------------------------

    def _supervise(self, cfg: ServerConfig) -> ServerConnection:
        conn = ServerConnection(
            cfg, secret_store=self._secrets_or_none(cfg),
            handlers_factory=lambda c, scope=None: ServerTraffic(self._context, c, scope),
            capabilities=self.capabilities(),
            on_change=self.listener.server_changed,
            on_ready=self._on_ready,
            request_ids=lambda: self._request_ids(cfg.name),
            timing=self.timing,
            keeps_sign_in=lambda: TokenStore(self.secrets).holds_sign_in(cfg.name),
        )
        self.connections[cfg.name] = conn
        conn.start()
        return conn

    def _request_ids(self, server: str) -> IdAllocator:
        """A new session's ids: blocks reserved in the journal, so that no two operations of
        one server are sent under one id by two processes (or two lifetimes) of the host."""
        def reserve() -> int:
            return self.journal.reserve_request_ids(server, REQUEST_ID_BLOCK)

        try:
            return IdAllocator(reserve(), reserve=reserve, block=REQUEST_ID_BLOCK)
        except (sqlite3.Error, RuntimeError) as exc:  # a journal that is closing, or broken
            log.warning("%s: cannot reserve request ids in the journal (%s); ids from memory", server, exc)
            return IdAllocator(self._first_request_id(server))

    def _first_request_id(self, server: str) -> int:
        """Above every integer id an unfinished operation of this server was sent under."""
        ids = [r.record.jsonrpc_id for r in self._routing.in_flight_of(server)]
        ids += [r.jsonrpc_id for r in self._restoring if r.server == server]
        return 1 + max([i for i in ids if isinstance(i, int) and not isinstance(i, bool)], default=0)

    def _secrets_or_none(self, cfg: ServerConfig) -> SecretStore | None:
        return self.secrets if (cfg.secret_headers or cfg.secret_env) else None

    def _connection(self, name: str) -> ServerConnection:
        conn = self.connections.get(name)
        if conn is None:
            cfg = self.journal.get_server(name)
            if cfg is None:
                raise KeyError(f"no server named {name!r}")
            conn = self._supervise(cfg)
        return conn

    def servers(self) -> list[api.ServerView]:
        views = []
        for cfg in self.journal.list_servers():
            conn = self.connections.get(cfg.name)
            views.append(conn.view if conn else api.ServerView(cfg.name, cfg.transport, cfg.url or cfg.command or "",
                                                               state=api.DISABLED))
        return views

    async def _store_server_secrets(self, cfg: ServerConfig, secrets: dict[str, dict[str, str]]) -> None:
        """Put new secret header and environment values in the keyring; the config keeps references.
        (Sign-in credentials are kept by server name, once the server is written.)"""
        accounts.check_sign_in_settings(cfg, secrets)
        if secrets.get("headers") or secrets.get("env"):
            keyring = self._handles
            await keyring.call(self.secrets.check)
            for name, value in (secrets.get("headers") or {}).items():
                cfg.secret_headers[name] = await keyring.call(self.secrets.put, "header", value)
            for name, value in (secrets.get("env") or {}).items():
                cfg.secret_env[name] = await keyring.call(self.secrets.put, "env", value)

    async def add_server(self, cfg: ServerConfig, secrets: dict[str, dict[str, str]] | None = None) -> None:
        """Add a server; ``secrets`` = {"headers": {...}, "env": {...}, "credentials": {...}} of
        values for the keyring (credentials: ``hostapp.auth.settings.CREDENTIAL_NAMES``)."""
        await self._store_server_secrets(cfg, secrets or {})
        self.journal.add_server(cfg)
        await accounts.store_credentials(self, cfg.name, dict((secrets or {}).get("credentials") or {}))
        if self._connect and cfg.enabled:
            self._supervise(cfg)

    async def update_server(self, cfg: ServerConfig, secrets: dict[str, dict[str, str]] | None = None) -> None:
        """Change a server's configuration in place; its history stays attached.

        ``cfg.secret_headers``/``secret_env`` hold the references kept unchanged; ``secrets``
        the new values for the keyring. References no longer used are deleted afterwards.
        A change of roots or log level alone keeps the connection
        (:mod:`hostapp.engine.server_settings`).
        """
        old = self.journal.get_server(cfg.name)
        if old is None:
            raise KeyError(f"no server named {cfg.name!r}")
        if not any((secrets or {}).values()) and server_settings.only_live_changes(old, cfg):
            # Its roots or log level alone: the live connection takes them and tells the server.
            live = self.journal.update_server(cfg.name, roots=cfg.roots, log_level=cfg.log_level)
            conn = self.connections.get(cfg.name)
            if conn is not None:
                await server_settings.apply_live(conn, live, old)
            return
        await self._store_server_secrets(cfg, secrets or {})
        self.journal.update_server(
            cfg.name, transport=cfg.transport, url=cfg.url, headers=cfg.headers, secret_headers=cfg.secret_headers,
            command=cfg.command, args=cfg.args, env=cfg.env, secret_env=cfg.secret_env, enabled=cfg.enabled,
            protocol_version=cfg.protocol_version, auth=cfg.auth, roots=cfg.roots, log_level=cfg.log_level)
        credentials = dict((secrets or {}).get("credentials") or {})
        await accounts.store_credentials(self, cfg.name, credentials)
        if old.transport == "http" and (credentials or old.auth != cfg.auth):
            await accounts.drop_tokens(self, cfg.name)  # got with what changed: the next connection signs in anew
        in_use = {*cfg.secret_headers.values(), *cfg.secret_env.values()}
        for ref in [*old.secret_headers.values(), *old.secret_env.values()]:
            if ref not in in_use:
                await self._handles.delete_secret(ref)
        conn = self.connections.pop(cfg.name, None)
        if conn is not None:
            await conn.stop(keep_session=bool(self._routing.in_flight_of(cfg.name)))
        if self._connect and cfg.enabled:
            updated = self.journal.get_server(cfg.name)
            assert updated is not None  # just written
            self._supervise(updated)

    async def remove_server(self, name: str) -> None:
        """Remove a server and its secret values; its operations in flight end first
        (:func:`hostapp.engine.accounts.retire_operations` says how)."""
        await accounts.retire_operations(self, name)
        if self._sign_ins is not None:
            await self._sign_ins.release(name)
        conn = self.connections.pop(name, None)
        if conn is not None:
            await conn.stop()
        self.resource_watches.forget(name)
        self._context.server_logs.forget(name)
        cfg = self.journal.get_server(name)
        if cfg is None:
            return
        self.drop_server_config(name)
        for ref in [*(cfg.secret_headers or {}).values(), *(cfg.secret_env or {}).values()]:
            try:
                await self._handles.call(self.secrets.delete, ref)
            except Exception as exc:  # noqa: BLE001 - a keyring backend may raise anything; only logged
                log.info("could not delete a secret of %s: %s", name, type(exc).__name__)

    def drop_server_config(self, name: str) -> None:
        """The server leaves the journal's configuration, and every client's list."""
        self.journal.remove_server(name)
        self.listener.server_removed(name)

    async def connected(self, name: str, timeout: float = 60.0) -> ServerConnection:
        """The connection of a server once its first attempt succeeded; raise its failure otherwise."""
        conn = self._connection(name)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await asyncio.wait_for(conn.attempted.wait(), timeout)
        if conn.view.state in (api.CONNECTING, api.RECONNECTING) and conn.view.error is None:
            # A connection being made again with nothing wrong (a session the server forgot,
            # renewed now): wait for it rather than refuse what comes meanwhile.
            try:
                await conn.wait_ready(max(0.0, deadline - loop.time()))
            except TimeoutError:
                pass
        if conn.view.state != api.CONNECTED:
            raise TransportError(f"cannot connect to {name}: {conn.view.error or conn.view.state}")
        return conn

    async def reconnect(self, name: str) -> None:
        """Connect now; a server whose retries were stopped (disabled) is enabled again."""
        cfg = self.journal.get_server(name)
        if cfg is not None and not cfg.enabled:
            self.journal.update_server(name, enabled=True)
        self._connection(name).reconnect_now()

    async def stop_retrying(self, name: str) -> None:
        """Stop connecting to a server: it stays configured, disabled, until :meth:`reconnect`.
        Its operations in flight wait, as for a server that is offline."""
        if self.journal.get_server(name) is None:
            raise KeyError(f"no server named {name!r}")
        self.journal.update_server(name, enabled=False)
        conn = self.connections.pop(name, None)
        if conn is not None:
            error = conn.view.error
            await conn.stop(keep_session=bool(self._routing.in_flight_of(name)))
            self.listener.server_changed(dataclasses.replace(conn.view, error=error, retry_in=None, retry_at=None))

    async def list_tools(self, server: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        conn, _session = await self.live_session(server, timeout)
        return list(conn.tools)

    @property
    def holds_connections(self) -> bool:
        """Does this engine keep its servers connected (the agent's does; a
        one-off command's engine does not)?"""
        return self._connect

    async def live_session(self, server: str, timeout: float | None = 30.0
                           ) -> tuple[ServerConnection, ClientSession]:
        """The connection this engine keeps to ``server`` and its ready session, waiting
        at most ``timeout`` seconds for it (TimeoutError says what the server is doing)."""
        conn = self._connection(server)
        try:
            session = await conn.wait_ready(timeout)
        except TimeoutError:
            view = conn.view
            why = f"; last error: {view.error}" if view.error else ""
            raise TimeoutError(f"{server} did not connect within {timeout:g} s "
                               f"(it is {view.state.replace('_', ' ')}{why})") from None
        return conn, session

    async def _on_ready(self, conn: ServerConnection, session: ClientSession) -> None:
        if self.resource_watches.uris(conn.name):  # a subscription holds for its session only
            self._context.spawn(self.resource_watches.resubscribe(conn.name, session))
        self._context.spawn(server_settings.on_new_session(conn, session))
        # A session kept across a break of the network may still carry requests that never
        # broke (a stream resumed by the transport itself): their operations go on as they are.
        still_waiting = self._routing.still_answering(conn.name, session)
        for runner in self._routing.in_flight_of(conn.name):
            if runner.waits_to_start:
                continue  # its start is waiting for this very connection
            if runner in still_waiting or runner.awaiting_new_session or runner.original_in_flight:
                # (The latter two send their call in this session themselves, or hear how
                # it ended from its own request.)
                continue
            runner.spawn(runner.attach(session, restored=True))

    # -- operations ----------------------------------------------------------------

    async def after_first_contacts(self, server: str) -> None:
        """Hold a repeat request while operations restored at start-up still wait for their
        first word from the same server (see :mod:`hostapp.engine.first_contact`)."""
        await self._contacts.after_first_contacts(server)

    async def start_call(self, server: str, tool: str, arguments: dict[str, Any] | None = None, *,
                         deadline_s: float = DEFAULT_DEADLINE_SECONDS, view_of: str | None = None) -> api.OperationView:
        """Journal a new tools/call operation and start it in the background; it is given
        up as expired if no outcome came within ``deadline_s`` seconds. ``view_of``: the
        operation whose app view asked for it (journaled with it)."""
        from hostapp.store.journal import OperationRecord

        conn = self._connection(server)
        now = self.clock()
        record = OperationRecord(
            id=uuid.uuid4().hex[:12], server=server, method="tools/call",
            params={"name": tool, "arguments": arguments or {}}, tool=tool, jsonrpc_id=None,
            mechanism=None, status=OperationStatus.PENDING, progress=None, total=None, message="starting",
            created_at=now, updated_at=now, deadline=now + deadline_s, result=None, error=None,
            handle_ref=None, handle={}, resumable=self.keyring_problem is None, view_of=view_of)
        await self.journal.create_operation(record)
        if view_of is not None:
            await self._view_made_a_call(view_of)
        # Chosen from what is known now, chosen again once connected (send_original): the
        # operation is shown, and can be cancelled, before the server ever answered.
        runner = OperationRunner(self._context, record, mechanism_for(conn, tool))
        self._routing.add(runner)
        self._context.changed(runner)
        self.listener.operation_event(record.id, "status", {"to": OperationStatus.PENDING,
                                                            "message": f"calling {tool} on {server}"})
        runner.spawn(runner.send_original())
        return runner.view

    async def _view_made_a_call(self, op_id: str) -> None:
        """The view of ``op_id`` made one more call (the journal counted it): its row says so."""
        runner = self.runners.get(op_id)
        if runner is not None and not runner.done:
            runner.progress.change(view_calls=runner.view.view_calls + 1)
            self._context.changed(runner)
            return
        record = await self._read(self.journal.get_operation, op_id)
        if record is not None:
            self.listener.operation_changed(operation_view(record))

    def _restore(self, record: OperationRecord, stored: str | None) -> OperationRunner:
        """A runner for an unfinished journaled operation, resumed once its server is ready.
        ``stored``: the keyring value of its handle, if any."""
        secret, http_session = unwrap_secret(stored)
        state = dict(record.handle or {})
        if not state.get("mechanism"):
            # Journaled before any mechanism state was committed: nothing can resume it.
            state = {"mechanism": "direct", "method": record.method, "params": record.params,
                     "phase": "new" if record.jsonrpc_id is None else "sent"}
        try:
            mech = mechanisms.restore_mechanism(state, secret)
        except (ValueError, KeyError) as exc:
            log.warning("operation %s cannot be restored: %s", record.id, exc)
            mech = mechanisms.restore_mechanism({"mechanism": "direct", "method": record.method, "phase": "sent"}, None)
        mech.use_timing(self.timing)
        # committed_secret: what the keyring holds under its handle_ref (unknown when a
        # position replaced it: the next quit or commit writes it anew).
        runner = OperationRunner(self._context, record, mech, http_session=http_session,
                                 committed_secret=None if self._handles.from_position(record.id) else stored)
        self._routing.add(runner)
        self._context.changed(runner)
        if secret is None and not record.resumable and state.get("mechanism") != "direct" \
                and state.get("phase") not in ("new", "done"):
            # Its handle never reached the keyring: asking the server with nothing would
            # draw a misleading "unknown handle" answer.
            runner.restore_refused = True
            runner.spawn(runner.finish(OperationStatus.UNKNOWN, error={"code": None, "message": HANDLE_NOT_KEPT}))
            return runner
        if record.server not in self.connections:
            cfg = self.journal.get_server(record.server)
            if cfg is None:
                runner.restore_refused = True
                runner.spawn(runner.finish(OperationStatus.UNKNOWN, error={
                    "code": None, "message": f"its server {record.server!r} was removed"}))
                return runner
            if self._connect and cfg.enabled:  # a paused server waits for Reconnect
                self._supervise(cfg)
        conn = self.connections.get(record.server)
        if conn is not None and conn.session is not None and conn.is_ready:
            runner.spawn(runner.attach(conn.session, restored=True))
        return runner

    async def cancel(self, op_id: str) -> None:
        runner = self.runners.get(op_id)
        if runner is None:
            record = self.journal.get_operation(op_id)
            if record is None:
                raise KeyError(f"no operation {op_id!r}")
            if record.status in TERMINAL:
                return
            handles = await self._handles.load_handles([record])
            runner = self._restore(record, handles.get(record.id))
        await runner.cancel()

    async def rerun(self, op_id: str) -> api.OperationView:
        record = await self._read(self.journal.get_operation, op_id)
        if record is None:
            raise KeyError(f"no operation {op_id!r}")
        if record.tool is None:
            raise ValueError(f"operation {op_id!r} is not a tool call")
        if self.journal.get_server(record.server) is None:
            raise api.NoSuchServer(f"its server {record.server!r} was removed; add it again to re-run the call")
        return await self.start_call(record.server, record.tool, (record.params or {}).get("arguments", {}))

    async def _read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        # Journal reads may take a while on a large history: never on the GUI/event loop thread.
        return await asyncio.get_running_loop().run_in_executor(self._reads, functools.partial(fn, *args, **kwargs))

    async def operations(self, statuses: set[str] | None = None, limit: int = 200,
                         offset: int = 0, before: tuple[float, str] | None = None,
                         after: tuple[float, str] | None = None, top_level: bool = False,
                         view_of: str | None = None) -> list[api.OperationView]:
        at_start = self._at_start
        if (at_start is not None and statuses and set(statuses) <= api.IN_FLIGHT and not offset
                and before is None and after is None and view_of is None):
            answered = asyncio.get_running_loop().create_future()
            self._lists_at_start.add(answered)
            try:
                try:
                    snapshot = await asyncio.shield(at_start)
                except RuntimeError:
                    snapshot = None  # the start failed: the journal says what is in flight
                if snapshot is not None and self._at_start is at_start:  # still restoring
                    return self._in_flight_at_start(snapshot, set(statuses), limit, top_level)
            finally:
                self._lists_at_start.discard(answered)
                answered.set_result(None)
        records = await self._read(self.journal.list_operations, statuses=statuses, limit=limit, offset=offset,
                                   before=before, after=after, top_level=top_level, view_of=view_of)
        views = []
        for r in records:
            live = self.runners.get(r.id)
            views.append(live.view if live else operation_view(r))
        return views

    def _in_flight_at_start(self, records: list[OperationRecord], statuses: set[str], limit: int,
                            top_level: bool) -> list[api.OperationView]:
        """A list of what is in flight while the engine starts: the start's own read of the
        journal, each operation as its runner shows it once restored (it may have ended
        since; then it is left out), with any call started since (an agent's clients wait
        for its start; a window carrying its own engine may not), in the journal's order
        (newest first)."""
        restored = self._restored_at_start
        views = []
        for r in records:
            live = self.runners.get(r.id)
            if live is None and r.id in restored:
                continue  # restored, and ended since: no longer in flight
            views.append(live.view if live else operation_view(r))
        known = {r.id for r in records}
        views += [runner.view for op_id, runner in self.runners.items() if op_id not in known]
        chosen = [v for v in views if v.status in statuses and not (top_level and v.view_of is not None)]
        chosen.sort(key=lambda v: (v.created_at, v.id), reverse=True)
        return chosen[:limit]

    async def count_operations(self, statuses: set[str] | None = None, top_level: bool = False,
                               view_of: str | None = None) -> int:
        return await self._read(self.journal.count_operations, statuses=statuses, top_level=top_level,
                                view_of=view_of)

    async def events(self, op_id: str) -> list[dict[str, Any]]:
        await self.journal.flush()
        events = await self._read(self.journal.events, op_id)
        return [{"at": e.at, "kind": e.kind, "data": e.data} for e in events]

    async def wait_finished(self, op_id: str, poll: float = 0.05) -> api.OperationView:
        """Until the operation has a terminal status (used by the CLI's --wait): at once
        when this process ends it (a client told the outcome just before a stop still
        hears it), else read from the journal every ``poll`` seconds."""
        while True:
            runner = self.runners.get(op_id)
            if runner is not None:
                # (bounded: a runner replaced without ending is looked up again)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(runner.finished.wait(), 1.0)
                continue
            record = self.journal.get_operation(op_id)
            if record is not None and record.status in TERMINAL:
                return operation_view(record)
            await asyncio.sleep(poll)

    # -- questions to the person -------------------------------------------------------

    def answer_input(self, request_id: str, answer: dict[str, Any]) -> None:
        self._questions.answer(request_id, answer)

    def open_questions(self) -> list[api.InputRequest]:
        return self._questions.open_questions()

    async def draft_reply(self, request_id: str) -> dict[str, str]:
        return await self._questions.draft_reply(request_id)

    # -- the model that answers sampling requests (hostapp.engine.sampling) --------------

    async def model_settings(self) -> api.JsonObject:
        return await self.sampling.view()

    async def set_model(self, base_url: str, models: list[str], api_key: str | None = None) -> api.JsonObject:
        return await self.sampling.configure(base_url, models, api_key)

    async def clear_model(self) -> None:
        await self.sampling.clear()

    def set_sampling_policy(self, server: str, policy: str) -> None:
        if self.journal.get_server(server) is None:
            raise KeyError(f"no server named {server!r}")
        self.sampling.set_policy(server, policy)

    # -- facade additions --
    # Thin entry points for hostapp.engine.api.EngineApi; the substance is in
    # hostapp.engine.accounts and hostapp.engine.diagnostics.

    @property
    def sign_ins(self) -> accounts.SignIns:
        """The sign-ins under way (made on first use)."""
        if self._sign_ins is None:
            self._sign_ins = accounts.SignIns(self)
        return self._sign_ins

    def server_configs(self) -> list[ServerConfig]:
        return self.journal.list_servers()

    def server_config(self, name: str) -> ServerConfig | None:
        return self.journal.get_server(name)

    async def replace_server(self, old_name: str, cfg: ServerConfig,
                             secrets: dict[str, dict[str, str]] | None = None) -> None:
        await accounts.replace_server(self, old_name, cfg, secrets)

    async def forget_server(self, name: str) -> list[str]:
        return await accounts.forget_server(self, name)

    async def begin_sign_in(self, name: str, timeout: float | None = None) -> str:
        return await self.sign_ins.begin(name, timeout)

    async def finish_sign_in(self, name: str) -> None:
        await self.sign_ins.finish(name)

    async def sign_out(self, name: str) -> None:
        await self.sign_ins.sign_out(name)
        # The live connection still holds the tokens it signed in with: it starts again, and
        # finds none (the server says "needs sign-in"). Operations in flight keep their HTTP
        # session, as when retries are stopped, to be resumed once the person signs in again.
        conn = self.connections.pop(name, None)
        if conn is not None:
            await conn.stop(keep_session=bool(self._routing.in_flight_of(name)))
            cfg = self.journal.get_server(name)
            if cfg is not None and cfg.enabled and self._connect:
                self._supervise(cfg)

    async def probe_tools(self, name: str, timeout: float | None = None) -> list[dict[str, Any]]:
        return await diagnostics.probe_tools(self, name, timeout)

    async def check_server(self, cfg: ServerConfig, secrets: dict[str, dict[str, str]] | None = None,
                           timeout: float | None = None) -> dict[str, Any]:
        return await diagnostics.check_server(self, cfg, secrets, timeout)

    async def operation_rows(self, limit: int = 200) -> list[dict[str, Any]]:
        return await diagnostics.operation_rows(self, limit)

    async def operation(self, op_id: str) -> api.OperationView | None:
        runner = self.runners.get(op_id)
        if runner is not None:
            return runner.view
        record = await self._read(self.journal.get_operation, op_id)
        return None if record is None else operation_view(record)

    async def unfinished_operations(self) -> list[api.OperationView]:
        return [operation_view(r) for r in await self._read(self.journal.unfinished_operations)]

    # skills (SEP-2640): listed and loaded on request only
    async def list_skills(self, name: str) -> list[dict[str, Any]]:
        return await skills.server_skills(self, name)

    async def load_skill(self, name: str, skill: str) -> dict[str, Any]:
        return await skills.load_server_skill(self, name, skill)

    # resources: browsed, read and watched on request (hostapp/engine/resources.py)
    async def list_resources(self, name: str) -> dict[str, Any]:
        return await resources.list_resources(self, name)

    async def read_resource(self, name: str, uri: str) -> dict[str, Any]:
        return await resources.read_resource(self, name, uri)

    async def watch_resource(self, name: str, uri: str) -> None:
        await self.resource_watches.watch(self, name, uri)

    async def unwatch_resource(self, name: str, uri: str) -> None:
        await self.resource_watches.unwatch(self, name, uri)

    # what servers logged (hostapp/engine/server_logs.py)
    async def server_log(self, name: str, limit: int = 200) -> list[dict[str, Any]]:
        if self.journal.get_server(name) is None:
            raise KeyError(f"no server named {name!r}")
        return self._context.server_logs.entries(name, limit)

    # MCP Apps (hostapp/engine/apps.py)
    async def read_app_view(self, server: str, uri: str) -> dict[str, Any]:
        from hostapp.engine import apps

        return await apps.read_app_view(self, server, uri)

    async def start_app_call(self, server: str, tool: str, arguments: dict[str, Any] | None,
                             view_of: str) -> api.OperationView:
        from hostapp.engine import apps

        return await apps.start_app_call(self, server, tool, arguments, view_of)
