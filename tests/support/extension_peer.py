"""A protected resource with its authorization server and an identity provider, on loopback.

For the authorization extension tests: one Starlette app, served by uvicorn in a thread
of the test process, that records every request it gets (headers and form) so a test
can check the wire. It plays:

* ``/mcp``: the protected resource. Without a token: ``401`` with a Bearer challenge
  naming its resource metadata. With ``rs_nonce`` set, a DPoP proof without that nonce
  is answered ``401 DPoP error="use_dpop_nonce"`` with ``DPoP-Nonce`` (with
  ``stale_nonces``, every proof is, each time with a new nonce).
* the authorization server (RFC 8414 metadata, ``/token``): issues ``at-<n>`` tokens,
  ``token_type`` DPoP when the request carried a proof. With ``as_nonce`` set, a proof
  without that nonce is answered ``400 use_dpop_nonce``; ``token_error`` makes every
  token request fail with that error.
* an identity provider (``/idp/token``): token exchange of an ID token for an ID-JAG it
  signs with its own key.

Verifying signatures, claims and client authentication is left to the tests: the peer
only records.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from joserfc import jwt
from joserfc.jwk import ECKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


@dataclass
class Seen:
    path: str
    method: str
    headers: dict[str, str]
    form: dict[str, str]


@dataclass
class ExtensionPeer:
    base: str = ""
    seen: list[Seen] = field(default_factory=list)
    as_nonce: str | None = None
    rs_nonce: str | None = None
    token_error: str | None = None
    #: Every DPoP proof is challenged with a new nonce, whatever nonce it carries.
    stale_nonces: bool = False
    expires_in: int = 3600
    idp_key: Any = field(default_factory=lambda: ECKey.generate_key("P-256"))
    issued: list[str] = field(default_factory=list)

    @property
    def mcp_url(self) -> str:
        return f"{self.base}/mcp"

    def requests_to(self, path: str) -> list[Seen]:
        return [s for s in self.seen if s.path == path]

    async def _record(self, request: Request) -> Seen:
        form = dict(await request.form()) if request.method == "POST" and \
            request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded") else {}
        seen = Seen(request.url.path, request.method, {k.lower(): v for k, v in request.headers.items()},
                    {k: str(v) for k, v in form.items()})
        self.seen.append(seen)
        return seen

    # -- the protected resource ------------------------------------------------------------

    async def mcp(self, request: Request) -> Response:
        seen = await self._record(request)
        authorization = seen.headers.get("authorization", "")
        if not authorization:
            return JSONResponse({"error": "unauthorized"}, status_code=401, headers={
                "WWW-Authenticate": f'Bearer resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp"'})
        if self.rs_nonce and seen.headers.get("dpop"):
            claims = jwt.decode(seen.headers["dpop"], _header_key(seen.headers["dpop"])).claims
            if claims.get("nonce") != self.rs_nonce or self.stale_nonces:
                if self.stale_nonces:
                    self.rs_nonce = f"nonce-{len(self.seen)}"
                return JSONResponse({"error": "use_dpop_nonce"}, status_code=401, headers={
                    "WWW-Authenticate": 'DPoP error="use_dpop_nonce"', "DPoP-Nonce": self.rs_nonce})
        if authorization.split(" ", 1)[-1] not in self.issued:
            return JSONResponse({"error": "invalid_token"}, status_code=401,
                                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return JSONResponse({"ok": True})

    async def resource_metadata(self, request: Request) -> Response:
        return JSONResponse({"resource": self.mcp_url, "authorization_servers": [self.base],
                             "scopes_supported": ["mcp:tools"]})

    # -- the authorization server ----------------------------------------------------------

    async def server_metadata(self, request: Request) -> Response:
        return JSONResponse({
            "issuer": self.base,
            "authorization_endpoint": f"{self.base}/authorize",
            "token_endpoint": f"{self.base}/token",
            "response_types_supported": ["code"],
            "grant_types_supported": ["client_credentials", "urn:ietf:params:oauth:grant-type:jwt-bearer"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "private_key_jwt", "none"],
            "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
            "dpop_signing_alg_values_supported": ["ES256"],
        })

    async def token(self, request: Request) -> Response:
        seen = await self._record(request)
        proof = seen.headers.get("dpop")
        if proof and self.as_nonce and jwt.decode(proof, _header_key(proof)).claims.get("nonce") != self.as_nonce:
            return JSONResponse({"error": "use_dpop_nonce"}, status_code=400, headers={"DPoP-Nonce": self.as_nonce})
        if self.token_error:
            return JSONResponse({"error": self.token_error}, status_code=400)
        token = f"at-{len(self.issued) + 1}-{time.monotonic_ns()}"
        self.issued.append(token)
        return JSONResponse({"access_token": token, "token_type": "DPoP" if proof else "Bearer",
                             "expires_in": self.expires_in})

    # -- the identity provider -------------------------------------------------------------

    async def idp_token(self, request: Request) -> Response:
        seen = await self._record(request)
        claims = {"iss": f"{self.base}/idp", "sub": "person@example.com", "aud": seen.form.get("audience"),
                  "resource": seen.form.get("resource"), "client_id": "mcp-client",
                  "iat": int(time.time()), "exp": int(time.time()) + 300, "jti": f"jag-{time.monotonic_ns()}"}
        id_jag = jwt.encode({"alg": "ES256", "typ": "oauth-id-jag+jwt"}, claims, self.idp_key)
        return JSONResponse({"access_token": id_jag, "token_type": "N_A",
                             "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag"})

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/mcp", self.mcp, methods=["GET", "POST", "DELETE"]),
            Route("/.well-known/oauth-protected-resource/mcp", self.resource_metadata),
            Route("/.well-known/oauth-authorization-server", self.server_metadata),
            Route("/token", self.token, methods=["POST"]),
            Route("/idp/token", self.idp_token, methods=["POST"]),
        ])


def _header_key(token: str) -> ECKey:
    from joserfc import jws

    header = jws.extract_compact(token.encode()).protected
    return ECKey.import_key(header["jwk"])


class ServedPeer:
    """``peer`` served on 127.0.0.1 by uvicorn in a thread until :meth:`stop`."""

    def __init__(self, peer: ExtensionPeer):
        self.peer = peer
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        peer.base = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._server = uvicorn.Server(uvicorn.Config(peer.app(), log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._sock.close()
