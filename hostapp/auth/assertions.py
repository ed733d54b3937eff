"""JWT assertions (RFC 7523): client authentication with a private key, and JWTs as grants.

* ``private_key_jwt`` (RFC 7523 section 2.2, OpenID Connect Core section 9): the client
  proves who it is with a short-lived JWT signed by its private key: ``iss`` and ``sub``
  its client id, ``aud`` the authorization server's issuer identifier (as RFC 7523bis
  asks: the token endpoint URL is ambiguous as an audience), ``exp``, ``iat`` and a
  unique ``jti``. :class:`PrivateKeyJwt` is the method Authlib's client calls to add it
  to a token request.
* The JWT bearer grant (RFC 7523 section 2.1): an assertion someone else signed (a
  workload identity token, an ID-JAG) is exchanged for an access token:
  ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=...``.

Signing is Authlib's (over joserfc); the private key comes from the keyring as PEM.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hostapp.auth.discovery import AuthorizationError

CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
#: A client assertion is used once, at once: it lives a minute.
CLIENT_ASSERTION_LIFETIME = 60

_KEY_TYPES = {"ES": "ECKey", "RS": "RSAKey", "PS": "RSAKey", "Ed": "OKPKey"}


def load_private_key(pem: str, alg: str) -> Any:
    """The joserfc key of a PEM private key, of the type ``alg`` signs with."""
    from joserfc import jwk

    key_type = _KEY_TYPES.get(alg[:2])
    if key_type is None:
        raise AuthorizationError(f"unsupported signing algorithm {alg!r}")
    try:
        return getattr(jwk, key_type).import_key(pem)
    except Exception:  # noqa: BLE001 - the message must not quote the key
        raise AuthorizationError(f"the configured private key is no {alg} signing key in PEM") from None


def client_assertion(private_key_pem: str, client_id: str, audience: str, alg: str = "ES256",
                     lifetime: int = CLIENT_ASSERTION_LIFETIME) -> str:
    """A signed ``private_key_jwt`` client assertion (fresh ``jti``, ``exp`` ``lifetime`` seconds on)."""
    from authlib.common.security import generate_token
    from authlib.oauth2.rfc7523.assertion import sign_jwt_bearer_assertion

    return sign_jwt_bearer_assertion(
        load_private_key(private_key_pem, alg),
        issuer=client_id,
        audience=audience,
        subject=client_id,
        claims={"jti": generate_token(32)},
        alg=alg,
        expires_in=lifetime,
    )


class PrivateKeyJwt:
    """Authlib client authentication method ``private_key_jwt`` with ``aud`` = the issuer.

    Registered on an Authlib OAuth client (``register_client_auth_method``); the
    client's ``client_secret`` is the PEM private key.
    """

    name = "private_key_jwt"

    def __init__(self, audience: str, alg: str = "ES256"):
        self.audience = audience
        self.alg = alg

    def __call__(self, auth: Any, method: str, uri: str, headers: Any, body: str) -> tuple[str, Any, str]:
        from authlib.common.urls import add_params_to_qs

        assertion = client_assertion(auth.client_secret, auth.client_id, self.audience, self.alg)
        body = add_params_to_qs(body or "", [("client_assertion_type", CLIENT_ASSERTION_TYPE),
                                             ("client_assertion", assertion)])
        return uri, headers, body


async def read_assertion_file(path: str) -> str:
    """The JWT a workload's platform keeps in ``path`` (re-read at each use: it rotates)."""
    try:
        text = await asyncio.to_thread(Path(path).read_text, encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise AuthorizationError(f"cannot read the identity assertion file {path} ({type(exc).__name__})") from None
    assertion = text.strip()
    if assertion.count(".") != 2:
        raise AuthorizationError(f"the identity assertion file {path} holds no JWT")
    return assertion
