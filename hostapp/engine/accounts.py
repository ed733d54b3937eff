"""A server's sign-in and secret values, as the engine's facade offers them.

Signing in (OAuth, :mod:`hostapp.auth`) runs in the engine, not in its clients: the tokens
land in the keyring the engine reads, and a client that only speaks to the engine over a
socket can still sign in. So a sign-in is two awaitable steps of plain data:
:meth:`SignIns.begin` returns the authorization URL for the person's browser (the loopback
redirect listener is already waiting), :meth:`SignIns.finish` waits for the browser to come
back. Also here: replacing a server under a new name with its kept secret values, and
removing a server with everything the keyring holds for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import TYPE_CHECKING, Any

from hostapp.engine.api import ServerSecrets
from hostapp.engine.handles import off_loop

if TYPE_CHECKING:
    from hostapp.engine.port import EnginePort
    from hostapp.store.journal import ServerConfig


def configured(engine: EnginePort, name: str) -> ServerConfig:
    cfg = engine.journal.get_server(name)
    if cfg is None:
        raise KeyError(f"no server named {name!r}")
    return cfg


class NotSignable(ValueError):
    """The server is not one a person signs in to (a stdio server, an HTTP one without URL)."""


class SignIns:
    """The sign-ins under way, one per server: the login task and the URL it showed."""

    def __init__(self, engine: EnginePort) -> None:
        self._engine = engine
        self._pending: dict[str, asyncio.Task[None]] = {}

    async def begin(self, name: str, timeout: float | None = None) -> str:
        """Start signing in; the authorization URL to open ("" when none was needed)."""
        from hostapp.auth import LoopbackRedirectListener, TokenStore, login

        cfg = configured(self._engine, name)
        if cfg.transport != "http" or not cfg.url:
            raise NotSignable(f"{name} is not an HTTP server")
        # Asked again: the person gave up on the page shown before (closed the tab, said
        # no to the address); that sign-in ends, its redirect listener with it.
        await self.release(name)
        await off_loop(self._engine.secrets.check)
        loop = asyncio.get_running_loop()
        shown: asyncio.Future[str] = loop.create_future()

        def show(url: str) -> None:
            if not shown.done():
                shown.set_result(url)

        options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        listener = LoopbackRedirectListener(open_url=show, **options)
        task = loop.create_task(login(name, cfg.url, TokenStore(self._engine.secrets), listener))
        self._pending[name] = task
        await asyncio.wait({task, shown}, return_when=asyncio.FIRST_COMPLETED)
        if shown.done():
            return shown.result()
        shown.cancel()
        if task.exception() is not None:  # failed before a browser was needed
            del self._pending[name]
            task.result()
        return ""

    async def finish(self, name: str) -> None:
        """Until the browser came back and the tokens are in the keyring."""
        task = self._pending.get(name)
        if task is None:
            raise NotSignable(f"no sign-in to {name} is under way")
        try:
            await asyncio.shield(task)  # a client that stops waiting does not end the sign-in
        except asyncio.CancelledError:
            if not task.cancelled():
                raise  # this waiter was cancelled, not the sign-in
            raise NotSignable(f"the sign-in to {name} was given up (a new one began, or the server "
                              "was removed)") from None
        finally:
            if task.done() and self._pending.get(name) is task:
                del self._pending[name]

    async def release(self, name: str) -> None:
        """End the sign-in under way for ``name``, if any (its page is then worth nothing)."""
        task = self._pending.pop(name, None)
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def sign_out(self, name: str) -> None:
        """Forget the server's tokens and client secret (they leave the keyring)."""
        from hostapp.auth import TokenStore, logout

        await logout(name, TokenStore(self._engine.secrets))


def check_sign_in_settings(cfg: ServerConfig, secrets: ServerSecrets | None) -> None:
    """ValueError unless ``cfg.auth`` is valid sign-in settings and the credentials in
    ``secrets["credentials"]`` are ones a server signs in with."""
    from hostapp.auth.settings import CREDENTIAL_NAMES, AuthSettings

    if cfg.auth is not None:
        if cfg.transport != "http":
            raise ValueError(f"server {cfg.name!r}: only HTTP servers sign in; a stdio server has no sign-in settings")
        AuthSettings.from_dict(cfg.auth)
    unknown = set((secrets or {}).get("credentials") or {}) - set(CREDENTIAL_NAMES)
    if unknown:
        raise ValueError(f"unknown sign-in credential(s) {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(CREDENTIAL_NAMES)}")


async def store_credentials(engine: EnginePort, server: str, credentials: dict[str, str]) -> None:
    """Keep a server's sign-in secrets (client secret, private key PEM, assertion) in the keyring only."""
    if not credentials:
        return
    from hostapp.auth import TokenStore

    await off_loop(engine.secrets.check)
    tokens = TokenStore(engine.secrets)
    for name, value in credentials.items():
        await off_loop(tokens.save_credential, server, name, value)


async def drop_tokens(engine: EnginePort, server: str) -> None:
    """Forget the server's tokens (not its credentials): its sign-in settings or secrets
    changed, and tokens got the old way must not outlive them."""
    from hostapp.auth import TokenStore

    await off_loop(TokenStore(engine.secrets).drop_tokens, server)


async def replace_server(engine: EnginePort, old_name: str, cfg: ServerConfig,
                         secrets: ServerSecrets | None = None) -> None:
    """Put ``cfg`` (a new name) in place of ``old_name``.

    Removing a server deletes its keyring entries, so the values of the references
    ``cfg`` kept unchanged are read first and stored anew under the new server; so are
    its sign-in credentials (client secret, private key, assertion) that ``secrets`` does
    not replace. Its sign-in itself (tokens, DPoP key) is not carried over: the renamed
    server signs in anew.
    """
    from hostapp.auth import TokenStore

    configured(engine, old_name)
    values: ServerSecrets = {"env": dict((secrets or {}).get("env") or {}),
                             "headers": dict((secrets or {}).get("headers") or {}),
                             "credentials": dict((secrets or {}).get("credentials") or {})}
    for kind, refs in (("env", cfg.secret_env), ("headers", cfg.secret_headers)):
        for name, ref in (refs or {}).items():
            values[kind][name] = await off_loop(engine.secrets.get, ref)
    tokens = TokenStore(engine.secrets)
    if cfg.transport == "http":
        for name in await off_loop(tokens.credential_names, old_name):
            if name not in values["credentials"]:
                value = await off_loop(tokens.load_credential, old_name, name)
                if value is not None:
                    values["credentials"][name] = value
    fresh = dataclasses.replace(cfg, secret_env={}, secret_headers={})
    check_sign_in_settings(fresh, values)  # before anything is removed
    await retire_operations(engine, old_name, f"its server {old_name!r} was renamed to {cfg.name!r}")
    await engine.remove_server(old_name)
    await engine.add_server(fresh, values)
    await off_loop(tokens.forget, old_name)  # the old name's copies leave the keyring


#: How an operation that never left ends when its server is removed.
NEVER_SENT = "never sent: its server {server!r} was removed before the call left, so it did not run"
#: How an operation in flight ends when its server is removed.
ABANDONED = ("{why} while the call ran: hostapp stopped following it and cannot learn its outcome "
             "(the server may still have finished it)")


async def retire_operations(engine: EnginePort, name: str, why: str | None = None) -> int:
    """End the operations of server ``name`` this engine carries, before the server goes:
    one not sent yet fails (it did not run), one in flight ends as unknown (nobody can ask
    the server any more), each with a reason that says so. Returns how many ended."""
    from hostapp.store.status import OperationStatus

    why = why or f"its server {name!r} was removed"
    runners = engine.context.routing.in_flight_of(name)
    for runner in runners:
        runner.shutdown()  # nothing it was doing goes on
        if runner.record.jsonrpc_id is None and runner.view.status == OperationStatus.PENDING:
            await runner.finish(OperationStatus.FAILED, error={"code": None, "message": NEVER_SENT.format(server=name)})
        else:
            await runner.finish(OperationStatus.UNKNOWN, error={"code": None, "message": ABANDONED.format(why=why)})
    return len(runners)


async def forget_server(engine: EnginePort, name: str) -> list[str]:
    """Remove a server, its secret values and its sign-in; its history stays.

    Returns what the keyring could not delete, in plain words: the server is gone either
    way, and the person is told what was left behind.
    """
    from hostapp.auth import TokenStore

    cfg = configured(engine, name)
    await retire_operations(engine, name)
    await engine.sign_ins.release(name)  # its page would sign in to a server no longer there
    conn = engine.connections.pop(name, None)
    if conn is not None:
        await conn.stop()
    engine.drop_server_config(name)
    left: list[str] = []
    if cfg.transport == "http":
        try:  # a removed server keeps no sign-in behind
            await off_loop(TokenStore(engine.secrets).forget, name)
        except Exception as exc:  # noqa: BLE001 - reported, the removal stands
            left.append(f"could not remove the sign-in of {name} from the keyring: {type(exc).__name__}")
    for ref in [*(cfg.secret_headers or {}).values(), *(cfg.secret_env or {}).values()]:
        try:
            await off_loop(engine.secrets.delete, ref)
        except Exception as exc:  # noqa: BLE001 - reported, the removal stands
            left.append(f"could not remove a secret of {name} from the keyring: {type(exc).__name__}")
    return left
