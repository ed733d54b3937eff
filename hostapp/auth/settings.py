"""How one server signs in: the grant, the client identity, DPoP. Nothing secret here.

:class:`AuthSettings` is what a server's configuration says about its sign-in, beside
its URL. Its secrets (a client secret, a private key, an identity assertion) are not in
it: they live in the OS keyring, kept per server by
:meth:`~hostapp.auth.tokens.TokenStore.save_credential` under the names of
:data:`CREDENTIAL_NAMES`.

Grants:

* ``authorization_code`` (the default): a person signs in in the browser; client identity
  by pre-registration, client ID metadata document or dynamic registration.
* ``client_credentials`` (RFC 6749 section 4.4, MCP's OAuth client credentials
  extension): a machine signs in with its own credentials, a client secret (HTTP Basic
  or form) or a private key (``private_key_jwt``, RFC 7523 section 2.2).
* ``jwt_bearer`` (RFC 7523 section 2.1, workload identity federation): a JWT the
  workload's platform issued (credential ``assertion``, or read from ``assertion_file``
  at every token request) is the grant.
* ``identity_assertion`` (enterprise-managed authorization): the organisation's identity
  provider exchanges the person's ID token (credential ``assertion``) for an identity
  assertion authorization grant (ID-JAG) by token exchange (RFC 8693) at
  ``idp_token_endpoint``; the ID-JAG is then the JWT bearer grant at the authorization
  server.

``dpop`` asks for sender-constrained tokens (RFC 9449): a key pair per server, kept in
the keyring, signs a proof for every token request and every request to the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

AUTHORIZATION_CODE = "authorization_code"
CLIENT_CREDENTIALS = "client_credentials"
JWT_BEARER = "jwt_bearer"
IDENTITY_ASSERTION = "identity_assertion"
GRANTS = (AUTHORIZATION_CODE, CLIENT_CREDENTIALS, JWT_BEARER, IDENTITY_ASSERTION)
#: The grants that need nobody at the screen.
UNATTENDED_GRANTS = frozenset({CLIENT_CREDENTIALS, JWT_BEARER, IDENTITY_ASSERTION})

CLIENT_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "private_key_jwt", "none")

#: Names of a server's sign-in secrets in the keyring (``TokenStore.save_credential``).
CLIENT_SECRET = "client_secret"
PRIVATE_KEY = "private_key"  # PEM (PKCS#8), for private_key_jwt
ASSERTION = "assertion"  # a workload JWT (jwt_bearer) or the person's ID token (identity_assertion)
IDP_CLIENT_SECRET = "idp_client_secret"
CREDENTIAL_NAMES = (CLIENT_SECRET, PRIVATE_KEY, ASSERTION, IDP_CLIENT_SECRET)


@dataclass(frozen=True)
class AuthSettings:
    """How a server signs in; the defaults are the interactive sign-in without DPoP.

    ``client_auth`` None: chosen from the credentials present (a private key:
    ``private_key_jwt``; a secret: Basic, or form when the server offers only that;
    neither: ``none``). ``token_endpoint`` overrides the one the authorization server's
    metadata names. ``scope`` None: the scope the server's challenge or metadata asks
    for. ``signing_alg`` signs client assertions (``private_key_jwt``).
    """

    grant: str = AUTHORIZATION_CODE
    client_id: str | None = None
    client_auth: str | None = None
    signing_alg: str = "ES256"
    scope: str | None = None
    token_endpoint: str | None = None
    dpop: bool = False
    #: jwt_bearer: a file the workload's platform keeps its current JWT in (read at each use).
    assertion_file: str | None = None
    #: identity_assertion: the identity provider's token endpoint and this host's client id there.
    idp_token_endpoint: str | None = None
    idp_client_id: str | None = None

    def __post_init__(self) -> None:
        if self.grant not in GRANTS:
            raise ValueError(f"unknown grant {self.grant!r}; one of {', '.join(GRANTS)}")
        if self.client_auth is not None and self.client_auth not in CLIENT_AUTH_METHODS:
            raise ValueError(f"unknown client authentication {self.client_auth!r}")
        if self.grant in UNATTENDED_GRANTS and not self.client_id:
            raise ValueError(f"the {self.grant} grant needs a client id")
        if self.grant == IDENTITY_ASSERTION and not self.idp_token_endpoint:
            raise ValueError("the identity_assertion grant needs the identity provider's token endpoint")

    @property
    def unattended(self) -> bool:
        """Whether signing in needs nobody at the screen (no browser, no redirect)."""
        return self.grant in UNATTENDED_GRANTS

    def to_dict(self) -> dict[str, Any]:
        """The fields that differ from the defaults (for a server's stored configuration)."""
        default = AuthSettings()
        return {k: v for k, v in asdict(self).items() if v != getattr(default, k)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> AuthSettings:
        """Back from :meth:`to_dict`; an unknown field is an error, not silently dropped."""
        data = dict(data or {})
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown sign-in settings: {', '.join(sorted(unknown))}")
        return cls(**data)
