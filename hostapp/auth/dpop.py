"""DPoP: sender-constrained access tokens (RFC 9449).

With DPoP a stolen access token is of no use alone: the authorization server binds it to
a key pair of the client (the key's thumbprint in the token's ``cnf.jkt``), and every
request that presents it carries a fresh proof signed with that key
(``Authorization: DPoP <token>`` and ``DPoP: <proof>``). A proof is a JWT of type
``dpop+jwt`` with the public key in its header and ``htm`` (method), ``htu`` (URL without
query or fragment), ``iat``, a unique ``jti`` and, with a token, ``ath`` (its SHA-256).

A server may demand a nonce of its own in the proofs: it answers ``use_dpop_nonce`` (a
400 from the token endpoint, a 401 challenge from the resource) with the nonce in a
``DPoP-Nonce`` header. The nonce is remembered for the URL it was asked for (an
authorization server and a resource may share an origin, and their nonces differ) and
the request is sent again, once, with a new proof. Later answers may bring a fresh nonce;
the newest is used.

The key pair is one per MCP server, kept in the keyring (its private JWK) beside the
tokens bound to it; JOSE is joserfc's (the library under Authlib).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Mapping
from typing import Any

import httpx

#: The proof algorithm: ECDSA P-256, the one every DPoP server supports.
DPOP_ALG = "ES256"
DPOP_TYP = "dpop+jwt"
NONCE_HEADER = "DPoP-Nonce"
USE_DPOP_NONCE = "use_dpop_nonce"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def access_token_hash(access_token: str) -> str:
    """``ath``: base64url of the SHA-256 of the token's ASCII octets."""
    return _b64url(hashlib.sha256(access_token.encode("ascii")).digest())


def target_uri(url: str | httpx.URL) -> str:
    """``htu``: the request's URL without query and fragment."""
    return str(httpx.URL(str(url)).copy_with(query=None, fragment=None))


class DPoPKey:
    """A DPoP key pair. ``to_json`` gives the private JWK, for the keyring only."""

    def __init__(self, key: Any):
        self._key = key

    @classmethod
    def generate(cls) -> DPoPKey:
        from joserfc.jwk import ECKey

        return cls(ECKey.generate_key("P-256"))

    @classmethod
    def from_json(cls, text: str) -> DPoPKey:
        from joserfc.jwk import ECKey

        return cls(ECKey.import_key(json.loads(text)))

    def to_json(self) -> str:
        return json.dumps(self._key.as_dict(private=True))

    @property
    def public_jwk(self) -> dict[str, Any]:
        return dict(self._key.as_dict(private=False))

    @property
    def thumbprint(self) -> str:
        """The RFC 7638 SHA-256 thumbprint: what a bound token names in ``cnf.jkt``."""
        return self._key.thumbprint()

    def proof(self, method: str, url: str | httpx.URL, *, access_token: str | None = None,
              nonce: str | None = None) -> str:
        """A fresh proof for one request (a new ``jti`` every time)."""
        from joserfc import jwt

        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(24),
            "htm": method.upper(),
            "htu": target_uri(url),
            "iat": int(time.time()),
        }
        if access_token is not None:
            claims["ath"] = access_token_hash(access_token)
        if nonce is not None:
            claims["nonce"] = nonce
        header = {"typ": DPOP_TYP, "alg": DPOP_ALG, "jwk": self.public_jwk}
        return jwt.encode(header, claims, self._key, algorithms=[DPOP_ALG])

    def __repr__(self) -> str:  # never the private key
        return f"DPoPKey(jkt={self.thumbprint!r})"


class DPoPSigner:
    """Proofs with one key, and the nonces the servers handed out (per target URI)."""

    def __init__(self, key: DPoPKey):
        self.key = key
        self._nonces: dict[str, str] = {}
        self._lock = threading.Lock()  # token requests may run in Authlib's flow and ours

    def nonce_for(self, url: str | httpx.URL) -> str | None:
        with self._lock:
            return self._nonces.get(target_uri(url))

    def remember(self, url: str | httpx.URL, response: httpx.Response | Any) -> str | None:
        """Keep the nonce ``response`` brings (if any) for ``url``; returns it."""
        nonce = response.headers.get(NONCE_HEADER)
        if nonce:
            with self._lock:
                self._nonces[target_uri(url)] = nonce
        return nonce or None

    def proof(self, method: str, url: str | httpx.URL, access_token: str | None = None) -> str:
        return self.key.proof(method, url, access_token=access_token, nonce=self.nonce_for(url))

    def sign(self, request: httpx.Request | Any, access_token: str | None = None) -> None:
        """Put a fresh proof on ``request`` (one ``DPoP`` header, replacing any earlier one)."""
        request.headers["DPoP"] = self.proof(request.method, request.url, access_token)


def challenge_error(response: httpx.Response | Any) -> str | None:
    """The ``error`` of a ``WWW-Authenticate: DPoP`` challenge, if any."""
    for value in response.headers.get_list("www-authenticate"):
        scheme, _, rest = value.strip().partition(" ")
        if scheme.lower() == "dpop":
            for part in rest.split(","):
                name, _, raw = part.strip().partition("=")
                if name.strip().lower() == "error":
                    return raw.strip().strip('"')
    return None


def is_resource_nonce_challenge(response: httpx.Response | Any) -> bool:
    """A resource server's ``401`` asking for a nonce it sent in ``DPoP-Nonce`` (RFC 9449 section 9)."""
    return response.status_code == 401 and bool(response.headers.get(NONCE_HEADER)) \
        and challenge_error(response) == USE_DPOP_NONCE


def is_token_endpoint_nonce_challenge(response: httpx.Response | Any) -> bool:
    """A token endpoint's ``400 use_dpop_nonce`` with the nonce in ``DPoP-Nonce`` (RFC 9449 section 8)."""
    if response.status_code != 400 or not response.headers.get(NONCE_HEADER):
        return False
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, Mapping) and body.get("error") == USE_DPOP_NONCE


def dpop_client_auth_class(signer: DPoPSigner) -> Any:
    """Authlib's client authentication at the token endpoint, with a DPoP proof on each request.

    Handed to an Authlib OAuth client as its ``client_auth_class``: every token request it
    makes (code exchange, refresh, the unattended grants) carries a proof, and a
    ``use_dpop_nonce`` answer is retried once with the nonce, with the client
    authentication done again (a client assertion's ``jti`` is single-use too).
    """
    from authlib.integrations.httpx_client.oauth2_client import OAuth2ClientAuth

    class DPoPClientAuth(OAuth2ClientAuth):
        requires_response_body = True  # the use_dpop_nonce error is in the JSON body

        def _signed(self, request):
            prepared = next(OAuth2ClientAuth.auth_flow(self, request))
            signer.sign(prepared)
            return prepared

        def auth_flow(self, request):
            response = yield self._signed(request)
            signer.remember(request.url, response)
            if is_token_endpoint_nonce_challenge(response):
                response = yield self._signed(request)
                signer.remember(request.url, response)

    return DPoPClientAuth
