"""MCP authorization for Streamable HTTP servers: an :class:`httpx.Auth` that signs in.

:class:`McpOAuth` is handed to the HTTP transport's client. It adds the bearer token to
every request and, when the server answers 401, walks the MCP authorization flow
(2025-11-25 and 2026-07-28, with the 2025-03-26 fallbacks):

1. protected resource metadata (RFC 9728) and authorization server metadata (RFC 8414,
   OpenID discovery), see :mod:`hostapp.auth.discovery`;
2. a client identity, in the specification's order of preference: a pre-registered
   client, a client ID metadata document (the client id is a URL), dynamic client
   registration (RFC 7591);
3. the authorization code grant with PKCE S256, ``state``, the ``resource`` parameter
   (RFC 8707), and the ``iss`` check of RFC 9207;
4. the tokens, kept in the OS keyring by :class:`~hostapp.auth.tokens.TokenStore`.

Servers a machine signs in to (client credentials, JWT bearer, enterprise identity
assertions) and sender-constrained tokens (DPoP) are chosen by the server's
:class:`~hostapp.auth.settings.AuthSettings`: the unattended grants are
:mod:`hostapp.auth.grants`, the proofs :mod:`hostapp.auth.dpop`.

Tokens are refreshed shortly before they expire and once more on a 401; a 403 with
``insufficient_scope`` asks for the union of the granted and the challenged scopes
(step-up), at most :data:`MAX_STEP_UPS` times per request. The OAuth messages
themselves (authorization URL, PKCE, token requests, client authentication at the token
endpoint) are Authlib's.

When a person has to sign in and nobody can (no :class:`RedirectHandler`, e.g. the
supervisor reconnecting in the background), :class:`SignInRequired` is raised; the host
shows the server as "needs sign-in". A refresh token the server no longer accepts ends
there too, never in a retry loop. Tokens, client secrets and codes never appear in
exception texts or logs.
"""

from __future__ import annotations

import asyncio
import hmac
import importlib
import logging
import secrets as random_secrets
from collections.abc import AsyncGenerator, Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from hostapp.auth.discovery import (
    METADATA_TIMEOUT,
    AuthorizationError,
    AuthorizationServer,
    BearerChallenge,
    ProtectedResource,
    canonical_resource,
    discover,
    display_url,
)
from hostapp.auth.dpop import (
    DPoPKey,
    DPoPSigner,
    dpop_client_auth_class,
    is_resource_nonce_challenge,
)
from hostapp.auth.errors import SignInRequired
from hostapp.auth.grants import Credentials, fetch_unattended_token, unattended_client
from hostapp.auth.redirect import RedirectHandler
from hostapp.auth.settings import CREDENTIAL_NAMES, AuthSettings
from hostapp.auth.tokens import OAuthClient, Tokens, TokenStore

if TYPE_CHECKING:
    from authlib.integrations.httpx_client import AsyncOAuth2Client
# authlib (and the JOSE library under it) is imported where a token is fetched or
# refreshed: a tenth of a second that every HTTP server's connection paid at start-up,
# signed in or not.

log = logging.getLogger(__name__)

#: How many times one request may ask for more scopes after a 403 ``insufficient_scope``.
MAX_STEP_UPS = 2
OFFLINE_ACCESS = "offline_access"
CLIENT_NAME = "hostapp"


@dataclass(frozen=True)
class PreregisteredClient:
    """Client credentials a person configured for a server's authorization server.

    ``issuer`` limits them to one authorization server (None: whichever the server names).
    """

    client_id: str
    client_secret: str | None = None
    issuer: str | None = None
    token_endpoint_auth_method: str | None = None

    def __repr__(self) -> str:  # the secret stays out of logs and tracebacks
        return f"PreregisteredClient(client_id={self.client_id!r}, issuer={self.issuer!r})"


def select_scopes(
    challenge: BearerChallenge,
    resource: ProtectedResource | None,
    server: AuthorizationServer | None,
    previous: str | None = None,
) -> str | None:
    """The scope to ask for: the challenge's, else the resource's ``scopes_supported``.

    On re-authorization the scopes asked for before are kept (SEP-2350), and
    ``offline_access`` is added when the authorization server offers it (SEP-2207) so
    that a refresh token lets work continue after a restart. None: omit ``scope``.
    """
    if challenge.scope:
        wanted = challenge.scope.split()
    elif resource is not None and resource.scopes_supported:
        wanted = list(resource.scopes_supported)
    else:
        wanted = []
    for scope in (previous or "").split():
        if scope not in wanted:
            wanted.append(scope)
    offered = server is not None and OFFLINE_ACCESS in (server.scopes_supported or ())
    if offered and wanted and OFFLINE_ACCESS not in wanted:
        wanted.append(OFFLINE_ACCESS)
    return " ".join(wanted) or None


def _token_request_errors() -> tuple[type[BaseException], ...]:
    """What a failed token request raises besides Authlib's ``OAuthError``.

    Authlib's httpx client runs on ``httpx2`` when that is installed, whose errors are
    not ``httpx``'s.
    """
    compat = importlib.import_module("authlib.integrations.httpx_client._compat")
    return (httpx.HTTPError, compat.httpx2.HTTPError, ValueError, KeyError)


def _secret_method(server: AuthorizationServer) -> str:
    return "client_secret_post" if "client_secret_basic" not in server.auth_methods and \
        "client_secret_post" in server.auth_methods else "client_secret_basic"


class McpOAuth(httpx.Auth):
    """Bearer tokens for one MCP server, signing in and refreshing as the server asks.

    States per server: signed out -> signed in (tokens in the keyring) -> refreshing ->
    signed in | needs sign-in. ``redirect_handler`` completes an interactive sign-in
    (None: raise :class:`SignInRequired` instead). ``client_metadata_url`` is the URL of
    this host's client ID metadata document, if it publishes one. ``settings`` say how
    the server signs in (default: a person, in the browser; no DPoP); an unattended
    grant signs in without ``redirect_handler``, with the credentials kept in
    ``token_store``.
    """

    requires_response_body = False

    def __init__(
        self,
        server_name: str,
        server_url: str,
        token_store: TokenStore,
        *,
        redirect_handler: RedirectHandler | None = None,
        client_metadata_url: str | None = None,
        preregistered: PreregisteredClient | None = None,
        client_name: str = CLIENT_NAME,
        protocol_version: str | None = None,
        max_step_ups: int = MAX_STEP_UPS,
        settings: AuthSettings | None = None,
    ):
        self.server_name = server_name
        self.settings = settings or AuthSettings()
        self.server_url = server_url
        self.token_store = token_store
        self.redirect_handler = redirect_handler
        self.client_metadata_url = client_metadata_url
        self.preregistered = preregistered
        self.client_name = client_name
        self.protocol_version = protocol_version
        self.max_step_ups = max_step_ups
        self._loaded = False
        self._lock: asyncio.Lock | None = None
        self._client: OAuthClient | None = None
        self._tokens: Tokens | None = None
        self._issuer: str | None = None  # the authorization server the tokens belong to
        self._resource: ProtectedResource | None = None
        self._server: AuthorizationServer | None = None
        self._requested_scope: str | None = None
        self._dpop: DPoPSigner | None = None

    # -- httpx.Auth ---------------------------------------------------------------------

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        raise RuntimeError("McpOAuth works with httpx.AsyncClient only")

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        async with self._locked():
            await self._load()
            if self._tokens is not None and self._tokens.expires_soon():
                if self._tokens.refresh_token:
                    await self._refresh()
                elif self.settings.unattended:
                    await self._renew_unattended()
        sent = self._authorize_request(request)
        response = yield request
        if self._wants_dpop_nonce(request, response):  # RFC 9449 section 9: once, with the nonce
            sent = self._authorize_request(request)
            response = yield request

        # A nonce asked for again right after it was given is the server's problem, not the
        # token's: the 401 goes to the caller rather than into a new sign-in.
        if response.status_code == 401 and not (self._dpop is not None and is_resource_nonce_challenge(response)):
            challenge = BearerChallenge.from_response(response)
            async with self._locked():
                if self._current_access_token() == sent:  # nobody renewed it meanwhile
                    await self._recover(challenge, tried=sent)
            sent = self._authorize_request(request)
            response = yield request
            if self._wants_dpop_nonce(request, response):
                sent = self._authorize_request(request)
                response = yield request

        step_ups = 0
        while response.status_code == 403:
            challenge = BearerChallenge.from_response(response)
            if challenge.error != "insufficient_scope" or step_ups >= self.max_step_ups:
                break
            step_ups += 1
            async with self._locked():
                if self._current_access_token() == sent:
                    await self._sign_in(challenge, reason="the server asks for more permissions")
            sent = self._authorize_request(request)
            response = yield request
            if self._wants_dpop_nonce(request, response):
                sent = self._authorize_request(request)
                response = yield request

    # -- public -------------------------------------------------------------------------

    async def sign_in(self) -> None:
        """Sign in now (``hostapp servers login``): probe the server for its challenge, then authorize."""
        async with httpx.AsyncClient(timeout=METADATA_TIMEOUT) as client:
            try:
                probe = await client.get(self.server_url, headers={"Accept": "application/json, text/event-stream"})
                challenge = BearerChallenge.from_response(probe) if probe.status_code == 401 else BearerChallenge()
            except httpx.HTTPError as exc:
                raise AuthorizationError(f"cannot reach {display_url(self.server_url)}: {type(exc).__name__}") from None
        async with self._locked():
            await self._load()
            await self._discover(challenge)
            await self._sign_in(challenge, reason="sign-in requested")

    @property
    def signed_in(self) -> bool:
        return self._tokens is not None and bool(self._tokens.access_token or self._tokens.refresh_token)

    # -- flow steps ---------------------------------------------------------------------

    def _locked(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def _current_access_token(self) -> str | None:
        return self._tokens.access_token if self._tokens and self._tokens.access_token else None

    def _authorize_request(self, request: httpx.Request) -> str | None:
        token = self._current_access_token()
        if token and self._dpop is not None and self._tokens is not None \
                and self._tokens.token_type.lower() == "dpop":
            # A sender-constrained token: its own scheme and a fresh proof (RFC 9449 section 7).
            request.headers["Authorization"] = f"DPoP {token}"
            self._dpop.sign(request, token)
        elif token:
            request.headers["Authorization"] = f"Bearer {token}"
            request.headers.pop("DPoP", None)
        elif request.headers.get("Authorization", "").startswith(("Bearer ", "DPoP ")):
            del request.headers["Authorization"]  # our own token that was just dropped
            request.headers.pop("DPoP", None)
        return token

    def _wants_dpop_nonce(self, request: httpx.Request, response: httpx.Response) -> bool:
        """Keep the server's DPoP nonce; True when the request was refused for lack of it."""
        if self._dpop is None:
            return False
        self._dpop.remember(request.url, response)
        return "DPoP" in request.headers and is_resource_nonce_challenge(response)

    async def _ensure_dpop(self) -> None:
        """The server's DPoP key, made and kept in the keyring the first time it is needed."""
        if not self.settings.dpop or self._dpop is not None:
            return
        key = DPoPKey.generate()
        await asyncio.to_thread(self.token_store.save_dpop_key, self.server_name, key.to_json())
        self._dpop = DPoPSigner(key)

    def _read_credentials(self) -> Credentials:
        names = dict.fromkeys(CREDENTIAL_NAMES)
        for name in self.token_store.credential_names(self.server_name):
            if name in names:
                names[name] = self.token_store.load_credential(self.server_name, name)
        return Credentials(**names)

    async def _load(self) -> None:
        if self._loaded:
            return
        client = await asyncio.to_thread(self.token_store.load_client, self.server_name)
        stored = await asyncio.to_thread(self.token_store.load_tokens, self.server_name)
        self._client = client
        if stored is not None:
            self._issuer, self._tokens = stored
            self._requested_scope = self._tokens.scope
        if self.settings.dpop:
            key = await asyncio.to_thread(self.token_store.load_dpop_key, self.server_name)
            if key is not None:
                try:
                    self._dpop = DPoPSigner(DPoPKey.from_json(key))
                except (ValueError, TypeError, KeyError):
                    log.info("%s: the stored DPoP key is unusable; a new one will be made", self.server_name)
        self._loaded = True

    async def _discover(self, challenge: BearerChallenge) -> None:
        async with httpx.AsyncClient(timeout=METADATA_TIMEOUT) as client:
            resource, server = await discover(client, self.server_url, challenge, self.protocol_version)
        if self._issuer is not None and server.issuer != self._issuer:
            # The server moved to another authorization server (SEP-2352): what the old one
            # issued (tokens, client registration) is not offered to the new one.
            log.info("%s: authorization server changed; signing in again", self.server_name)
            await self._forget_sign_in(drop_client=True)
        if self._client is not None and self._client.issuer != server.issuer:
            self._client = None
        self._resource, self._server = resource, server

    async def _forget_sign_in(self, *, drop_client: bool) -> None:
        self._tokens, self._issuer = None, None
        if drop_client:
            self._client = None
            self._dpop = None  # its key went with the tokens bound to it
            await asyncio.to_thread(lambda: self.token_store.forget(self.server_name, keep_credentials=True))
        else:
            await asyncio.to_thread(self.token_store.drop_tokens, self.server_name)

    async def _recover(self, challenge: BearerChallenge, *, tried: str | None) -> None:
        """After a 401: find out where to sign in, refresh if possible, else sign in."""
        await self._discover(challenge)
        refreshed = self._tokens is not None and bool(self._tokens.refresh_token) and await self._refresh()
        if refreshed and self._current_access_token() != tried:
            return
        await self._sign_in(challenge, reason="the server asks to sign in")

    def _resource_indicator(self) -> str:
        if self._resource is not None and self._resource.resource:
            return self._resource.resource
        return canonical_resource(self.server_url)

    def _oauth_session(self, client: OAuthClient, dpop: bool | None = None, **kwargs: Any) -> AsyncOAuth2Client:
        """Authlib's client for token requests as ``client``; with DPoP proofs unless ``dpop`` is False."""
        from authlib.integrations.httpx_client import AsyncOAuth2Client

        from hostapp.auth.assertions import PrivateKeyJwt

        session = AsyncOAuth2Client(
            client_id=client.client_id,
            client_secret=client.client_secret,
            token_endpoint_auth_method=client.token_endpoint_auth_method,
            **kwargs,
        )
        if client.token_endpoint_auth_method == "private_key_jwt":
            # RFC 7523bis: the assertion's audience is the authorization server's issuer.
            session.register_client_auth_method(PrivateKeyJwt(client.issuer, self.settings.signing_alg))
        if (self.settings.dpop if dpop is None else dpop) and self._dpop is not None:
            session.client_auth_class = dpop_client_auth_class(self._dpop)
        return session

    async def _refresh(self) -> bool:
        from authlib.integrations.httpx_client import OAuthError

        """Exchange the refresh token; False (tokens dropped) when the server refuses it."""
        assert self._tokens is not None and self._tokens.refresh_token
        if self._server is None or self._server.issuer != self._issuer:
            await self._discover(BearerChallenge())
            if self._tokens is None:  # the authorization server changed
                return False
        client = self._client
        if client is None and self.settings.unattended and self._server is not None:
            try:
                credentials = await asyncio.to_thread(self._read_credentials)
                client = unattended_client(self.settings, credentials, self._server)
            except AuthorizationError:
                client = None
        if client is None or self._server is None:
            await self._forget_sign_in(drop_client=False)
            return False
        await self._ensure_dpop()
        previous = self._tokens
        try:
            async with self._oauth_session(client) as session:
                token = await session.refresh_token(
                    self._server.token_endpoint,
                    refresh_token=previous.refresh_token,
                    resource=self._resource_indicator(),
                )
        except OAuthError as exc:
            # invalid_grant and friends: the refresh token is revoked or expired.
            log.info("%s: refresh refused (%s); sign-in needed", self.server_name, exc.error)
            await self._forget_sign_in(drop_client=False)
            return False
        except _token_request_errors() as exc:
            # The server is unreachable or answered nonsense: keep the refresh token for later.
            log.info("%s: refresh failed (%s)", self.server_name, type(exc).__name__)
            self._tokens = previous.without_access_token()
            return False
        await self._store_tokens(Tokens.from_response(dict(token), previous))
        return True

    async def _store_tokens(self, tokens: Tokens) -> None:
        assert self._server is not None
        self._tokens, self._issuer = tokens, self._server.issuer
        await asyncio.to_thread(self.token_store.save_tokens, self.server_name, self._server.issuer, tokens)

    async def _sign_in(self, challenge: BearerChallenge, *, reason: str) -> None:
        from authlib.common.security import generate_token
        from authlib.integrations.httpx_client import OAuthError

        """The authorization code flow with PKCE, through the redirect handler."""
        if self.settings.unattended:
            await self._sign_in_unattended(challenge)
            return
        if self.redirect_handler is None:
            raise SignInRequired(self.server_name, reason)
        if self._server is None:
            await self._discover(challenge)
        server = self._server
        assert server is not None
        server.check_pkce()
        scope = self.settings.scope or select_scopes(challenge, self._resource, server, self._requested_scope)
        await self._ensure_dpop()
        handler = self.redirect_handler
        preferred = self._client.redirect_uri if self._client is not None else None
        try:
            redirect_uri = await handler.prepare(preferred)
            client = await self._choose_client(server, redirect_uri)
            verifier = generate_token(64)
            state = random_secrets.token_urlsafe(32)
            async with self._oauth_session(client, redirect_uri=redirect_uri, scope=scope,
                                           code_challenge_method="S256") as session:
                url, _ = session.create_authorization_url(
                    server.authorization_endpoint, state=state, code_verifier=verifier,
                    resource=self._resource_indicator(),
                )
                self._requested_scope = scope
                answer = await handler.authorize(url, state)
                code = self._check_answer(answer, state, server)
                try:
                    token = await session.fetch_token(
                        server.token_endpoint, grant_type="authorization_code", code=code,
                        code_verifier=verifier, resource=self._resource_indicator(),
                    )
                except OAuthError as exc:
                    raise AuthorizationError(
                        f"the authorization server {display_url(server.issuer)} refused the sign-in ({exc.error})"
                    ) from None
                except _token_request_errors() as exc:
                    raise AuthorizationError(
                        f"the token request to {display_url(server.token_endpoint)} failed ({type(exc).__name__})"
                    ) from None
        finally:
            await handler.close()
        if client != self._client:
            # Kept with the tokens: a refresh after a restart authenticates as the same client.
            await asyncio.to_thread(self.token_store.save_client, self.server_name, client)
            self._client = client
        await self._store_tokens(Tokens.from_response(dict(token)))
        log.info("%s: signed in at %s", self.server_name, display_url(server.issuer))

    async def _sign_in_unattended(self, challenge: BearerChallenge) -> None:
        """Client credentials or JWT bearer (:mod:`hostapp.auth.grants`): no browser, no retry."""
        from authlib.integrations.httpx_client import OAuthError

        if self._server is None:
            await self._discover(challenge)
        server = self._server
        assert server is not None
        # No offline_access: these grants sign in again by themselves.
        scope = self.settings.scope or select_scopes(challenge, self._resource, None, self._requested_scope)
        await self._ensure_dpop()
        credentials = await asyncio.to_thread(self._read_credentials)
        try:
            client, token = await fetch_unattended_token(
                self.settings, credentials, server, resource=self._resource_indicator(), scope=scope,
                session_for=lambda client, dpop: self._oauth_session(client, dpop=dpop),
            )
        except OAuthError as exc:
            raise AuthorizationError(
                f"the {self.settings.grant} sign-in for {self.server_name} was refused ({exc.error})"
            ) from None
        except _token_request_errors() as exc:
            raise AuthorizationError(
                f"the {self.settings.grant} sign-in for {self.server_name} failed ({type(exc).__name__})"
            ) from None
        self._client = client  # the configured identity: its secret stays a configured credential
        self._requested_scope = scope
        await self._store_tokens(Tokens.from_response(token))
        log.info("%s: signed in at %s (%s)", self.server_name, display_url(server.issuer), self.settings.grant)

    async def _renew_unattended(self) -> None:
        """A token that expires soon and has no refresh token: ask for a new one now."""
        try:
            if self._server is None or self._server.issuer != self._issuer:
                await self._discover(BearerChallenge())
            await self._sign_in_unattended(BearerChallenge())
        except AuthorizationError as exc:
            log.info("%s: renewing the token failed: %s", self.server_name, exc)

    @staticmethod
    def _check_answer(answer: Mapping[str, str], state: str, server: AuthorizationServer) -> str:
        """The code from the authorization response, after the ``state`` and ``iss`` checks."""
        if not hmac.compare_digest(str(answer.get("state", "")), state):
            raise AuthorizationError("the sign-in response does not belong to this sign-in (state mismatch)")
        if "error" in answer:
            raise AuthorizationError(f"the sign-in was not completed ({answer['error']})")
        iss = answer.get("iss")
        # RFC 9207: an iss, when present, must be the issuer exactly (no normalisation);
        # when the server promised one, it must be present.
        if iss is not None and iss != server.issuer:
            raise AuthorizationError("the sign-in response comes from another authorization server (iss mismatch)")
        if iss is None and server.sends_iss:
            raise AuthorizationError("the sign-in response lacks the iss its authorization server promised")
        code = answer.get("code")
        if not code:
            raise AuthorizationError("the sign-in response has no authorization code")
        return code

    async def _choose_client(self, server: AuthorizationServer, redirect_uri: str) -> OAuthClient:
        """Pre-registered, then client ID metadata document, then a stored or new registration."""
        pre = self.preregistered
        if pre is not None and pre.issuer in (None, server.issuer):
            method = pre.token_endpoint_auth_method or (_secret_method(server) if pre.client_secret else "none")
            return OAuthClient(server.issuer, pre.client_id, "preregistered", method, redirect_uri, pre.client_secret)
        if self.client_metadata_url and server.supports_client_metadata_documents:
            return OAuthClient(server.issuer, self.client_metadata_url, "metadata_document", "none", redirect_uri)
        stored = self._client
        if stored is not None and stored.issuer == server.issuer and stored.kind == "dynamic" \
                and stored.redirect_uri == redirect_uri:
            return stored
        client = await self._register(server, redirect_uri)
        # Saved at once: a registration is worth keeping even when this sign-in fails.
        await asyncio.to_thread(self.token_store.save_client, self.server_name, client)
        self._client = client
        return client

    async def _register(self, server: AuthorizationServer, redirect_uri: str) -> OAuthClient:
        """Dynamic client registration (RFC 7591)."""
        endpoint = server.registration_endpoint
        if not endpoint:
            raise AuthorizationError(
                f"the authorization server {display_url(server.issuer)} does not register clients by itself; "
                "configure a client id for this server"
            )
        methods = server.auth_methods
        wanted = "none" if "none" in methods else _secret_method(server)
        metadata = {
            "client_name": self.client_name,
            # A desktop app with a loopback redirect is a native application (SEP-837).
            "application_type": "native",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": wanted,
        }
        async with httpx.AsyncClient(timeout=METADATA_TIMEOUT) as client:
            try:
                response = await client.post(endpoint, json=metadata)
            except httpx.HTTPError as exc:
                raise AuthorizationError(f"cannot register at {display_url(endpoint)}: {type(exc).__name__}") from None
        if response.status_code not in (200, 201):
            raise AuthorizationError(
                f"client registration at {display_url(endpoint)} failed: HTTP {response.status_code}")
        try:
            info = response.json()
            client_id = str(info["client_id"])
        except (ValueError, KeyError, TypeError):
            raise AuthorizationError(f"client registration at {display_url(endpoint)} gave no client id") from None
        secret = info.get("client_secret") or None
        method = info.get("token_endpoint_auth_method") or (wanted if wanted != "none" or not secret
                                                            else _secret_method(server))
        if method != "none" and not secret:
            method = "none"
        return OAuthClient(server.issuer, client_id, "dynamic", method, redirect_uri, secret)


async def login(
    server_name: str,
    server_url: str,
    token_store: TokenStore,
    redirect_handler: RedirectHandler,
    **options: Any,
) -> None:
    """Sign in to a server interactively and keep the tokens (``hostapp servers login``)."""
    auth = McpOAuth(server_name, server_url, token_store, redirect_handler=redirect_handler, **options)
    await auth.sign_in()


async def logout(server_name: str, token_store: TokenStore) -> None:
    """Sign out: the server's tokens, client secret and DPoP key leave the keyring.

    The credentials configured for it (client secret, private key, assertion) stay: they
    are the server's configuration, removed with the server.
    """
    await asyncio.to_thread(lambda: token_store.forget(server_name, keep_credentials=True))
