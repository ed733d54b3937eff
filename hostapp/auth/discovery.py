"""Where a server's authorization lives: challenges, protected resource and server metadata.

The MCP authorization flow (2025-11-25, 2026-07-28) starts from a 401 answer. Its
``WWW-Authenticate: Bearer ...`` challenge may name the protected resource metadata
(RFC 9728) and the scope the request needs. That metadata names the authorization
server, whose own metadata (RFC 8414, or OpenID Connect discovery) names its endpoints.
Every step has well-known fallbacks, tried in the order the specification lists, and a
server of the 2025-03-26 revision has no resource metadata at all: its origin is its
authorization server, with ``/authorize``, ``/token`` and ``/register`` as last resort.

The rules that keep a client from being sent elsewhere are checked here: the resource a
metadata document names must be the server the client talks to, an authorization
server's metadata must name the very issuer its URL was built from, and its endpoints
must be ``https`` (plain ``http`` only on loopback): the authorization endpoint goes to the
person's browser through the OS, which opens any scheme with whatever handles it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

#: How long one metadata request may take, in seconds.
METADATA_TIMEOUT = httpx.Timeout(15.0)

PRM_WELL_KNOWN = "/.well-known/oauth-protected-resource"
OAUTH_WELL_KNOWN = "/.well-known/oauth-authorization-server"
OIDC_WELL_KNOWN = "/.well-known/openid-configuration"

# auth-param = token "=" ( token / quoted-string ), RFC 9110 section 11.2
_AUTH_PARAM = re.compile(r'([A-Za-z0-9_.!#$%&\'*+^`|~-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]+)')


class AuthorizationError(Exception):
    """The server's authorization set-up cannot be used (wrong metadata, refused grant...).

    The text names URLs without their query and never holds a token or a secret.
    """


@dataclass(frozen=True)
class BearerChallenge:
    """The parameters of a ``WWW-Authenticate: Bearer`` challenge (RFC 6750, RFC 9728)."""

    params: Mapping[str, str] = field(default_factory=dict)

    @property
    def resource_metadata(self) -> str | None:
        return self.params.get("resource_metadata")

    @property
    def scope(self) -> str | None:
        return self.params.get("scope") or None

    @property
    def error(self) -> str | None:
        return self.params.get("error")

    @classmethod
    def from_response(cls, response: httpx.Response) -> BearerChallenge:
        """The Bearer (or DPoP, RFC 9449 section 7.1) challenge of ``response``'s ``WWW-Authenticate``
        headers (empty if none); both carry the same parameters."""
        for value in response.headers.get_list("www-authenticate"):
            scheme, _, rest = value.strip().partition(" ")
            if scheme.lower() not in ("bearer", "dpop"):
                continue
            params: dict[str, str] = {}
            for name, raw in _AUTH_PARAM.findall(rest):
                if raw.startswith('"'):
                    raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
                params.setdefault(name.lower(), raw)
            return cls(params)
        return cls()


@dataclass(frozen=True)
class ProtectedResource:
    """What RFC 9728 metadata says about the MCP server (None fields: not stated)."""

    resource: str | None
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None
    metadata_url: str | None


@dataclass(frozen=True)
class AuthorizationServer:
    """An authorization server's metadata, checked against the issuer it was found from."""

    issuer: str
    metadata: Mapping[str, Any]
    #: True for the 2025-03-26 last resort: no metadata, endpoints guessed from the origin.
    guessed: bool = False

    @property
    def authorization_endpoint(self) -> str:
        return self.metadata["authorization_endpoint"]

    @property
    def token_endpoint(self) -> str:
        return self.metadata["token_endpoint"]

    @property
    def registration_endpoint(self) -> str | None:
        return self.metadata.get("registration_endpoint")

    @property
    def scopes_supported(self) -> tuple[str, ...] | None:
        scopes = self.metadata.get("scopes_supported")
        return tuple(scopes) if isinstance(scopes, list) else None

    @property
    def auth_methods(self) -> tuple[str, ...]:
        # RFC 8414: when omitted, the default is client_secret_basic.
        methods = self.metadata.get("token_endpoint_auth_methods_supported")
        return tuple(methods) if isinstance(methods, list) and methods else ("client_secret_basic",)

    @property
    def supports_client_metadata_documents(self) -> bool:
        return self.metadata.get("client_id_metadata_document_supported") is True

    @property
    def sends_iss(self) -> bool:
        """Whether the server promised an ``iss`` in authorization responses (RFC 9207)."""
        return self.metadata.get("authorization_response_iss_parameter_supported") is True

    def check_pkce(self) -> None:
        """PKCE with S256 is mandatory; a server whose metadata does not offer it is refused."""
        if self.guessed:
            return  # no metadata to ask: the 2025-03-26 fallback assumes it
        methods = self.metadata.get("code_challenge_methods_supported")
        if not isinstance(methods, list) or "S256" not in methods:
            raise AuthorizationError(
                f"the authorization server {self.issuer} does not offer PKCE with S256, "
                "which MCP requires; sign-in is refused"
            )


#: The endpoints of an authorization server that hostapp sends a person or a secret to.
_ENDPOINTS = ("authorization_endpoint", "token_endpoint", "registration_endpoint")


def is_loopback_host(host: str | None) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if not host:
        return False
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_endpoint(url: object, what: str) -> None:
    """Raise :class:`AuthorizationError` unless ``url`` is one a sign-in may use: ``https``,
    or plain ``http`` on this machine (the specification wants every authorization server
    endpoint on HTTPS; the loopback exception is for local development). Any other scheme
    (``file:``, ``javascript:``, a custom handler) would reach the OS opener, which runs
    what the scheme says; a user name before the host disguises where the address leads."""
    if not isinstance(url, str) or re.search(r"[\s\x00-\x1f\x7f-\x9f]", url):
        raise AuthorizationError(f"the authorization server's {what} is not a single address; sign-in is refused")
    parts = urlsplit(url)
    try:
        host = parts.hostname
    except ValueError:
        host = None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http") or not host:
        raise AuthorizationError(
            f"the authorization server's {what} is a {scheme or 'schemeless'}: address, not https; "
            "sign-in is refused")
    if scheme == "http" and not is_loopback_host(host):
        raise AuthorizationError(
            f"the authorization server's {what} ({display_url(url)}) is plain http on another machine; "
            "sign-in needs https there")
    if parts.username is not None or parts.password is not None:
        raise AuthorizationError(f"the authorization server's {what} carries a user name before its host; "
                                 "sign-in is refused")


def check_endpoints(server: AuthorizationServer) -> AuthorizationServer:
    """``server``, once each endpoint it names has passed :func:`check_endpoint`."""
    for key in _ENDPOINTS:
        value = server.metadata.get(key)
        if value is not None or key != "registration_endpoint":
            check_endpoint(value, key.replace("_", " "))
    return server


def display_url(url: str | httpx.URL) -> str:
    """A URL as shown in messages: no user info, query or fragment."""
    parsed = httpx.URL(str(url))
    return str(parsed.copy_with(query=None, fragment=None, username=None, password=None))


def origin(url: str | httpx.URL) -> str:
    parsed = httpx.URL(str(url))
    return str(parsed.copy_with(path="/", query=None, fragment=None)).rstrip("/")


def canonical_resource(server_url: str) -> str:
    """The server's canonical URI (RFC 8707 / MCP): no fragment, no query, no trailing slash."""
    text = str(httpx.URL(server_url).copy_with(query=None, fragment=None))
    return text.rstrip("/")


def resource_matches(server_url: str, resource: str) -> bool:
    """Whether metadata naming ``resource`` may speak for the server at ``server_url``.

    Same origin, and the resource's path is the server's path or one of its parents (a
    metadata document at the origin may cover every endpoint below it).
    """
    server, named = httpx.URL(canonical_resource(server_url)), httpx.URL(canonical_resource(resource))
    if (server.scheme, server.host, server.port) != (named.scheme, named.host, named.port):
        return False
    server_path = server.path.rstrip("/") + "/"
    named_path = named.path.rstrip("/") + "/"
    return server_path.startswith(named_path)


def protected_resource_urls(server_url: str, challenge: BearerChallenge) -> list[str]:
    """Where to look for the server's resource metadata, in the specification's order."""
    urls = []
    if challenge.resource_metadata:
        urls.append(challenge.resource_metadata)
    parsed = httpx.URL(server_url)
    path = parsed.path.rstrip("/")
    if path:
        urls.append(f"{origin(server_url)}{PRM_WELL_KNOWN}{path}")
    urls.append(f"{origin(server_url)}{PRM_WELL_KNOWN}")
    return urls


def authorization_server_urls(issuer: str) -> list[str]:
    """RFC 8414 and OpenID discovery URLs for ``issuer``, in the specification's order."""
    parsed = httpx.URL(issuer)
    path = parsed.path.rstrip("/")
    base = origin(issuer)
    if path:
        return [
            f"{base}{OAUTH_WELL_KNOWN}{path}",
            f"{base}{OIDC_WELL_KNOWN}{path}",
            f"{base}{path}{OIDC_WELL_KNOWN}",
        ]
    return [f"{base}{OAUTH_WELL_KNOWN}", f"{base}{OIDC_WELL_KNOWN}"]


async def _get_json(client: httpx.AsyncClient, url: str, protocol_version: str | None) -> dict | None:
    """The JSON object at ``url``, or None when the server has none there (any 4xx/5xx)."""
    headers = {"Accept": "application/json"}
    if protocol_version:
        headers["MCP-Protocol-Version"] = protocol_version
    try:
        response = await client.get(url, headers=headers, timeout=METADATA_TIMEOUT)
    except httpx.HTTPError as exc:
        raise AuthorizationError(f"cannot fetch {display_url(url)}: {type(exc).__name__}") from None
    if response.status_code != 200:
        return None
    try:
        document = response.json()
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


async def discover_protected_resource(
    client: httpx.AsyncClient, server_url: str, challenge: BearerChallenge, protocol_version: str | None = None
) -> ProtectedResource | None:
    """The server's RFC 9728 metadata, or None when it has none (a 2025-03-26 server)."""
    for url in protected_resource_urls(server_url, challenge):
        document = await _get_json(client, url, protocol_version)
        if document is None:
            continue
        resource = document.get("resource")
        if resource is not None and (not isinstance(resource, str) or not resource_matches(server_url, resource)):
            raise AuthorizationError(
                f"the protected resource metadata at {display_url(url)} speaks for another resource "
                f"({display_url(str(resource))}), not for {display_url(server_url)}; sign-in is refused"
            )
        servers = document.get("authorization_servers") or []
        scopes = document.get("scopes_supported")
        return ProtectedResource(
            resource=resource,
            authorization_servers=tuple(s for s in servers if isinstance(s, str)),
            scopes_supported=tuple(scopes) if isinstance(scopes, list) else None,
            metadata_url=url,
        )
    return None


async def discover_authorization_server(
    client: httpx.AsyncClient, issuer: str, protocol_version: str | None = None
) -> AuthorizationServer | None:
    """The metadata of the authorization server ``issuer``, or None when none is published."""
    for url in authorization_server_urls(issuer):
        document = await _get_json(client, url, protocol_version)
        if document is None:
            continue
        if document.get("issuer") != issuer:
            # RFC 8414 section 3.3: metadata for another issuer must not be used at all.
            raise AuthorizationError(
                f"the authorization server metadata at {display_url(url)} names another issuer "
                f"than {display_url(issuer)}; sign-in is refused"
            )
        for key in ("authorization_endpoint", "token_endpoint"):
            if not isinstance(document.get(key), str):
                raise AuthorizationError(f"the authorization server metadata at {display_url(url)} has no {key}")
        return AuthorizationServer(issuer=issuer, metadata=document)
    return None


async def discover(
    client: httpx.AsyncClient, server_url: str, challenge: BearerChallenge, protocol_version: str | None = None
) -> tuple[ProtectedResource | None, AuthorizationServer]:
    """Resource metadata (if any) and the authorization server to sign in with."""
    resource = await discover_protected_resource(client, server_url, challenge, protocol_version)
    if resource is not None:
        if not resource.authorization_servers:
            raise AuthorizationError(
                f"the protected resource metadata of {display_url(server_url)} names no authorization server"
            )
        # More than one is allowed; the first is the server's own preference.
        issuer = resource.authorization_servers[0]
        server = await discover_authorization_server(client, issuer, protocol_version)
        if server is None:
            raise AuthorizationError(f"the authorization server {display_url(issuer)} publishes no metadata")
        return resource, check_endpoints(server)
    # The 2025-03-26 revision: the MCP server's origin is the authorization server.
    issuer = origin(server_url)
    server = await discover_authorization_server(client, issuer, protocol_version)
    if server is not None:
        return None, check_endpoints(server)
    return None, check_endpoints(AuthorizationServer(
        issuer=issuer,
        metadata={
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": f"{issuer}/token",
            "registration_endpoint": f"{issuer}/register",
        },
        guessed=True,
    ))
