"""Signing in with nobody at the screen: the client credentials and JWT bearer grants.

:class:`~hostapp.auth.oauth.McpOAuth` calls :func:`fetch_unattended_token` instead of the
browser sign-in when the server's :class:`~hostapp.auth.settings.AuthSettings` name an
unattended grant:

* ``client_credentials`` (RFC 6749 section 4.4): ``grant_type=client_credentials``, the
  client authenticated by its secret (``client_secret_basic`` / ``client_secret_post``)
  or its private key (``private_key_jwt``, :class:`~hostapp.auth.assertions.PrivateKeyJwt`);
* ``jwt_bearer`` (RFC 7523 section 2.1): the workload's JWT is the grant; the client
  authenticates as configured (usually ``none``: ``client_id`` in the form);
* ``identity_assertion``: token exchange at the identity provider for an ID-JAG
  (:mod:`hostapp.auth.token_exchange`), then that ID-JAG as the JWT bearer grant.

Each request carries ``resource`` (RFC 8707) and the scope; with DPoP on, the Authlib
client that ``session_for`` returns adds the proofs. A refusal is not retried: a grant
that failed once fails the same way again, and the server is shown as needing sign-in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hostapp.auth.assertions import JWT_BEARER_GRANT, read_assertion_file
from hostapp.auth.discovery import AuthorizationError, AuthorizationServer
from hostapp.auth.settings import (
    CLIENT_CREDENTIALS,
    IDENTITY_ASSERTION,
    JWT_BEARER,
    AuthSettings,
)
from hostapp.auth.token_exchange import request_id_jag
from hostapp.auth.tokens import OAuthClient

#: ``session_for(client, dpop)``: an Authlib async OAuth client for ``client``.
SessionFactory = Callable[[OAuthClient, bool], Any]


@dataclass(frozen=True)
class Credentials:
    """A server's sign-in secrets, as read from the keyring (never shown in a repr)."""

    client_secret: str | None = field(default=None, repr=False)
    private_key: str | None = field(default=None, repr=False)
    assertion: str | None = field(default=None, repr=False)
    idp_client_secret: str | None = field(default=None, repr=False)


def _client_auth(method: str | None, secret: str | None, private_key: str | None,
                 server: AuthorizationServer | None) -> str:
    if method:
        return method
    if private_key:
        return "private_key_jwt"
    if secret:
        offered = server.auth_methods if server is not None else ("client_secret_basic",)
        return "client_secret_post" if "client_secret_basic" not in offered and \
            "client_secret_post" in offered else "client_secret_basic"
    return "none"


def unattended_client(settings: AuthSettings, credentials: Credentials, server: AuthorizationServer) -> OAuthClient:
    """The client identity at the authorization server, with the secret (or PEM key) it authenticates with."""
    assert settings.client_id
    method = _client_auth(settings.client_auth, credentials.client_secret, credentials.private_key, server)
    if method == "private_key_jwt":
        secret = credentials.private_key
        if not secret:
            raise AuthorizationError("private_key_jwt is configured but no private key is stored for this server")
    elif method in ("client_secret_basic", "client_secret_post"):
        secret = credentials.client_secret
        if not secret:
            raise AuthorizationError(f"{method} is configured but no client secret is stored for this server")
    else:
        secret = None
    return OAuthClient(server.issuer, settings.client_id, "configured", method, None, secret)


async def _assertion(settings: AuthSettings, credentials: Credentials) -> str:
    if settings.assertion_file:
        return await read_assertion_file(settings.assertion_file)
    if not credentials.assertion:
        raise AuthorizationError("no identity assertion is stored for this server")
    return credentials.assertion


async def fetch_unattended_token(
    settings: AuthSettings,
    credentials: Credentials,
    server: AuthorizationServer,
    *,
    resource: str,
    scope: str | None,
    session_for: SessionFactory,
) -> tuple[OAuthClient, dict[str, Any]]:
    """One token request by the grant ``settings`` name; the client used and the token response.

    Raises Authlib's ``OAuthError`` when a server refuses, :class:`AuthorizationError`
    when something configured is missing; the caller words both for a person.
    """
    client = unattended_client(settings, credentials, server)
    token_endpoint = settings.token_endpoint or server.token_endpoint
    extra: dict[str, Any] = {"resource": resource}
    if scope:
        extra["scope"] = scope
    if settings.grant == CLIENT_CREDENTIALS:
        grant: dict[str, Any] = {"grant_type": "client_credentials"}
    elif settings.grant == JWT_BEARER:
        grant = {"grant_type": JWT_BEARER_GRANT, "assertion": await _assertion(settings, credentials)}
    elif settings.grant == IDENTITY_ASSERTION:
        assert settings.idp_token_endpoint
        idp_client = OAuthClient(
            settings.idp_token_endpoint, settings.idp_client_id or client.client_id, "configured",
            _client_auth(None, credentials.idp_client_secret, None, None), None, credentials.idp_client_secret,
        )
        async with session_for(idp_client, False) as idp:
            id_jag = await request_id_jag(
                idp, settings.idp_token_endpoint, await _assertion(settings, credentials),
                audience=server.issuer, resource=resource, scope=scope,
            )
        grant = {"grant_type": JWT_BEARER_GRANT, "assertion": id_jag}
    else:
        raise ValueError(f"{settings.grant} is not an unattended grant")
    async with session_for(client, settings.dpop) as session:
        token = await session.fetch_token(token_endpoint, **grant, **extra)
    return client, dict(token)
