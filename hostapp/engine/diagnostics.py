"""What the one-off commands ask of a server or the journal without running operations.

``hostapp tools``, Test connection of saved settings and the skills go through the
connection the agent keeps (:func:`server_session`); only where no agent keeps one, or
for settings not saved yet, is a connection made for the question alone. ``hostapp ops``
lists the journal's rows as they are stored, with the mechanism that carries each
operation, which the window never shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hostapp.engine.accounts import configured
from hostapp.engine.handles import off_loop

if TYPE_CHECKING:
    from hostapp.engine.port import EnginePort
    from hostapp.engine.session import ClientSession
    from hostapp.protocol.eras import ServerInfo
    from hostapp.store.secrets import SecretStore

log = logging.getLogger(__name__)


def silent_step(name: str, handshake_done: bool, timeout: float) -> str:
    """What a server that kept silent for ``timeout`` seconds did not answer, in plain words."""
    step = "the tool list (tools/list)" if handshake_done else "the initialize handshake"
    return f"{name} did not answer {step} within {timeout:g} s"


@contextlib.asynccontextmanager
async def server_session(engine: EnginePort, name: str, timeout: float | None = None
                         ) -> AsyncIterator[tuple[ClientSession, ServerInfo]]:
    """A session with server ``name``, for a question asked of it (its tools, its skills).

    An engine that keeps its servers connected (the agent's) answers from that
    live connection: a stdio server is never started a second time beside the one that
    runs the calls (a second copy may fight the first over its state), and the answer is
    what that connection negotiated (its pinned revision, the capabilities a call
    declares). An engine that keeps none (a one-off command while no agent runs)
    connects once as the configuration says, pinned revision included, and closes.
    ``timeout`` bounds the connection; a ``TimeoutError`` says what the server did not do.
    """
    if engine.holds_connections:
        conn, session = await engine.live_session(name, timeout)
        assert conn.info is not None  # a ready session has negotiated
        yield session, conn.info
        return
    from hostapp.engine.connections import open_session
    from hostapp.mechanisms import client_capabilities

    cfg = configured(engine, name)
    secret_store = None
    if cfg.secret_headers or cfg.secret_env:
        await off_loop(engine.secrets.check)
        secret_store = engine.secrets
    # The same capabilities as a call: some servers list task tools only to clients that declare tasks.
    try:
        session, info = await asyncio.wait_for(
            open_session(cfg, secret_store=secret_store, capabilities=client_capabilities,
                         version=cfg.protocol_version or None), timeout)
    except TimeoutError:
        raise TimeoutError(silent_step(name, False, timeout or 0)) from None
    try:
        yield session, info
    finally:
        await session.close()


async def probe_tools(engine: EnginePort, name: str, timeout: float | None = None) -> list[dict[str, Any]]:
    """The tools a server lists to the host's connection (:func:`server_session`), read
    afresh. ``timeout`` bounds the connection and the tool list, each; a
    ``TimeoutError`` says which of them the server did not answer."""
    async with server_session(engine, name, timeout) as (session, info):
        if "tools" not in info.capabilities:
            return []
        try:
            return await asyncio.wait_for(session.list_tools(), timeout)
        except TimeoutError:
            raise TimeoutError(silent_step(name, True, timeout or 0)) from None


async def operation_rows(engine: EnginePort, limit: int = 200) -> list[dict[str, Any]]:
    """The newest operations as the journal stores them, one JSON object each."""
    records = await off_loop(lambda: engine.journal.list_operations(limit=limit))
    return [{"id": r.id, "server": r.server, "tool": r.tool, "mechanism": r.mechanism, "status": r.status,
             "progress": r.progress, "total": r.total, "message": r.message, "created_at": r.created_at,
             "result": r.result, "error": r.error, "view_of": r.view_of} for r in records]


#: How long "Test connection" waits for the handshake, and then for the tool list, each.
CHECK_TIMEOUT_SECONDS = 20.0


async def check_server(engine: EnginePort, cfg: Any, secrets: dict[str, dict[str, str]] | None = None,
                       timeout: float | None = None) -> dict[str, Any]:
    """Connect once with settings that are not saved: the handshake, the tool list, closed.

    New secret values (``secrets``, sign-in credentials included) are handed to this one
    connection in memory and never stored; the references ``cfg`` keeps are read from the
    keyring. Sign-in settings are checked as on saving; a server that needs a person to
    sign in raises SignInRequired."""
    import dataclasses

    from hostapp.engine.accounts import check_sign_in_settings
    from hostapp.store.secrets import SecretStore

    timeout = CHECK_TIMEOUT_SECONDS if timeout is None else timeout
    check_sign_in_settings(cfg, secrets)
    if engine.holds_connections and not any((secrets or {}).values()) and engine.journal.get_server(cfg.name) == cfg:
        # The saved settings: the connection that runs the calls is the one to report on
        # (a second copy of a stdio server could disturb the first).
        async with server_session(engine, cfg.name, timeout) as (session, info):
            try:
                tools = await asyncio.wait_for(session.list_tools(), timeout) if "tools" in info.capabilities else []
            except TimeoutError:
                raise TimeoutError(silent_step(cfg.name, True, timeout)) from None
        return {"protocol_version": info.protocol_version, "server_name": info.name or None,
                "tools_count": len(tools)}
    new_env, new_headers = dict((secrets or {}).get("env") or {}), dict((secrets or {}).get("headers") or {})
    trial = dataclasses.replace(
        cfg, env={**(cfg.env or {}), **new_env}, headers={**(cfg.headers or {}), **new_headers},
        secret_env={k: v for k, v in (cfg.secret_env or {}).items() if k not in new_env},
        secret_headers={k: v for k, v in (cfg.secret_headers or {}).items() if k not in new_headers})
    if trial.secret_headers or trial.secret_env:
        from hostapp.engine.connections import resolve_secrets

        await off_loop(engine.secrets.check)
        # Read into this one connection's memory, like the values typed in.
        trial.env.update(await off_loop(resolve_secrets, dict(trial.secret_env), engine.secrets))
        trial.headers.update(await off_loop(resolve_secrets, dict(trial.secret_headers), engine.secrets))
        trial = dataclasses.replace(trial, secret_env={}, secret_headers={})
    with tempfile.TemporaryDirectory(prefix="hostapp-check-") as scratch_home:
        # The sign-in of the check happens in a scratch keyring held in memory: the
        # credentials typed in are used without being stored, and the tokens it gets are
        # forgotten with it.
        scratch = SecretStore(Path(scratch_home), ScratchKeyring())
        if trial.transport == "http":
            await off_loop(_sign_in_copy, engine, cfg, dict((secrets or {}).get("credentials") or {}), scratch)
        return await _handshake(trial, scratch, timeout)


class ScratchKeyring:
    """A keyring in a dict, for the sign-in of one connection check, gone after it."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.entries.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.entries[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.entries.pop((service, username), None)


def _sign_in_copy(engine: EnginePort, cfg: Any, typed: dict[str, str], scratch: SecretStore) -> None:
    """Put in ``scratch`` what the check signs in with: the server's kept credentials (those
    not typed anew) and, when its sign-in settings are unchanged, its sign-in itself."""
    from hostapp.auth import TokenStore

    target = TokenStore(scratch)
    saved = engine.journal.get_server(cfg.name)
    if saved is not None and saved.transport == "http":
        try:
            kept = TokenStore(engine.secrets)
            for name in kept.credential_names(cfg.name):
                value = kept.load_credential(cfg.name, name)
                if value is not None and name not in typed:
                    target.save_credential(cfg.name, name, value)
            if saved.auth == cfg.auth and saved.url == cfg.url and not typed:
                client, tokens, key = (kept.load_client(cfg.name), kept.load_tokens(cfg.name),
                                       kept.load_dpop_key(cfg.name))
                if client is not None:
                    target.save_client(cfg.name, client)
                if tokens is not None:
                    target.save_tokens(cfg.name, *tokens)
                if key is not None:
                    target.save_dpop_key(cfg.name, key)
        except Exception as exc:  # noqa: BLE001 - a keyring that cannot be read: the check signs in anew
            log.info("the check of %s goes without its kept sign-in: %s", cfg.name, type(exc).__name__)
    for name, value in typed.items():
        target.save_credential(cfg.name, name, value)


async def _handshake(cfg: Any, secret_store: SecretStore, timeout: float) -> dict[str, Any]:
    from hostapp.engine.connections import open_session
    from hostapp.mechanisms import client_capabilities

    try:
        session, info = await asyncio.wait_for(
            open_session(cfg, secret_store=secret_store, capabilities=client_capabilities,
                         version=cfg.protocol_version or None), timeout)
    except TimeoutError:
        raise TimeoutError(silent_step(cfg.name, False, timeout)) from None
    try:
        tools = await asyncio.wait_for(session.list_tools(), timeout) if "tools" in info.capabilities else []
    except TimeoutError:
        raise TimeoutError(silent_step(cfg.name, True, timeout)) from None
    finally:
        await session.close()
    return {"protocol_version": info.protocol_version, "server_name": info.name or None,
            "tools_count": len(tools)}
