"""From a configured server to a live transport and session.

The one place where a :class:`~hostapp.store.journal.ServerConfig` (with its secret
header and environment values still in the keyring) becomes a transport: secrets are
read here, handed to the transport, and never logged or put in an exception.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from hostapp.engine.session import ClientHandlers, ClientSession
from hostapp.protocol.eras import ServerInfo
from hostapp.protocol.timing import DEFAULT_TIMING, Timing
from hostapp.transport.base import StreamHabits, Transport, TransportError

if TYPE_CHECKING:
    from collections.abc import Callable

    import httpx

    from hostapp.store.journal import ServerConfig
    from hostapp.store.secrets import SecretStore

log = logging.getLogger(__name__)


def resolve_secrets(refs: dict[str, str], secret_store: SecretStore | None) -> dict[str, str]:
    """Read each referenced secret from the keyring; a missing one is a clear error."""
    values: dict[str, str] = {}
    for name, ref in refs.items():
        if secret_store is None:
            raise TransportError(f"the value of {name!r} is kept in the OS keyring, which is not available")
        try:
            values[name] = secret_store.get(ref)
        except KeyError:
            raise TransportError(f"the secret value of {name!r} is missing from the OS keyring; "
                                 f"edit the server and enter it again") from None
    return values


def make_transport(cfg: ServerConfig, secret_store: SecretStore | None = None, *, session_id: str | None = None,
                   protocol_version: str | None = None, standalone_stream: bool = True,
                   habits: StreamHabits | None = None, timing: Timing = DEFAULT_TIMING) -> Transport:
    """Build the transport a server configuration describes (not yet connected).

    ``habits``: what is known of the server's streams (``hostapp.transport.base.StreamHabits``),
    shared by the transports of one server; ``timing``: how long its waits last."""
    if cfg.transport == "stdio":
        from hostapp.transport.stdio import StdioTransport

        if cfg.command is None:
            raise TransportError(f"server {cfg.name!r} has no command")
        env = dict(cfg.env or {})
        env.update(resolve_secrets(dict(cfg.secret_env or {}), secret_store))
        return StdioTransport(cfg.command, list(cfg.args or []), env=env or None)
    if cfg.transport == "http":
        from hostapp.transport.http import StreamableHttpTransport

        if cfg.url is None:
            raise TransportError(f"server {cfg.name!r} has no URL")
        headers = dict(cfg.headers or {})
        headers.update(resolve_secrets(dict(cfg.secret_headers or {}), secret_store))
        return StreamableHttpTransport(cfg.url, headers, session_id=session_id, protocol_version=protocol_version,
                                       standalone_stream=standalone_stream, habits=habits, timing=timing,
                                       auth=server_auth(cfg, headers, secret_store))
    raise TransportError(f"unknown transport {cfg.transport!r} for server {cfg.name!r}")


def server_auth(cfg: ServerConfig, headers: dict[str, str],
                secret_store: SecretStore | None = None) -> httpx.Auth | None:
    """The OAuth sign-in of an HTTP server (hostapp.auth), unless it has its own Authorization header.

    Not interactive: a server that needs a person to sign in raises
    :class:`hostapp.auth.SignInRequired` ("needs sign-in"); ``hostapp servers login NAME``
    or the window's Sign in button does the sign-in, and the tokens it leaves in the
    keyring are found here by server name.
    """
    if cfg.url is None or any(name.lower() == "authorization" for name in headers):
        return None
    from hostapp.auth.oauth import McpOAuth
    from hostapp.auth.settings import AuthSettings
    from hostapp.auth.tokens import TokenStore
    from hostapp.store.paths import home_dir
    from hostapp.store.secrets import SecretStore

    store = secret_store if secret_store is not None else SecretStore(home_dir())
    return McpOAuth(cfg.name, cfg.url, TokenStore(store), protocol_version=cfg.protocol_version,
                    settings=AuthSettings.from_dict(cfg.auth))


async def open_session(cfg: ServerConfig, handlers: ClientHandlers | None = None, *,
                       secret_store: SecretStore | None = None,
                       capabilities: dict[str, Any] | Callable[[str], dict[str, Any]] | None = None,
                       version: str | None = None) -> tuple[ClientSession, ServerInfo]:
    """Connect to a configured server and negotiate; the caller closes the session."""
    transport = make_transport(cfg, secret_store)
    session = ClientSession(transport, handlers, capabilities=capabilities)
    try:
        info = await session.connect(version)
    except BaseException:
        await session.close()
        raise
    return session, info
