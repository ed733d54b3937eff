"""The conformance suite's authorization extension scenarios, as a server's sign-in settings.

Each ``[extension]`` ``auth/`` scenario of ``@modelcontextprotocol/conformance`` stands
for a server configured one way; the suite hands its credentials to the client in
``MCP_CONFORMANCE_CONTEXT``. :func:`extension_sign_in` turns the scenario name and that
context into what a person would configure: :class:`AuthSettings` and the credentials
for the keyring. The scenario driver (``hostapp conformance-client``) keeps the
credentials in its throw-away keyring and hands the settings to ``McpOAuth``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hostapp.auth.settings import (
    ASSERTION,
    CLIENT_CREDENTIALS,
    CLIENT_SECRET,
    IDENTITY_ASSERTION,
    JWT_BEARER,
    PRIVATE_KEY,
    AuthSettings,
)
from hostapp.auth.tokens import TokenStore


@dataclass(frozen=True)
class ScenarioSignIn:
    settings: AuthSettings
    credentials: Mapping[str, str] = field(default_factory=dict, repr=False)

    def keep_credentials(self, store: TokenStore, server_name: str) -> None:
        for name, value in self.credentials.items():
            store.save_credential(server_name, name, value)


def _text(context: Mapping[str, object], key: str) -> str:
    value = context.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"the scenario's context has no {key}")
    return value


def extension_sign_in(scenario: str, context: Mapping[str, object]) -> ScenarioSignIn | None:
    """The sign-in an extension scenario configures; None for every other scenario."""
    if scenario == "auth/client-credentials-basic":
        return ScenarioSignIn(
            AuthSettings(grant=CLIENT_CREDENTIALS, client_id=_text(context, "client_id")),
            {CLIENT_SECRET: _text(context, "client_secret")},
        )
    if scenario == "auth/client-credentials-jwt":
        alg = context.get("signing_algorithm")
        return ScenarioSignIn(
            AuthSettings(grant=CLIENT_CREDENTIALS, client_id=_text(context, "client_id"),
                         signing_alg=alg if isinstance(alg, str) and alg else "ES256"),
            {PRIVATE_KEY: _text(context, "private_key_pem")},
        )
    if scenario == "auth/wif-jwt-bearer":
        return ScenarioSignIn(
            AuthSettings(grant=JWT_BEARER, client_id=_text(context, "client_id")),
            {ASSERTION: _text(context, "valid_jwt")},
        )
    if scenario == "auth/enterprise-managed-authorization":
        return ScenarioSignIn(
            AuthSettings(grant=IDENTITY_ASSERTION, client_id=_text(context, "client_id"),
                         idp_token_endpoint=_text(context, "idp_token_endpoint"),
                         idp_client_id=_text(context, "idp_client_id")),
            {CLIENT_SECRET: _text(context, "client_secret"), ASSERTION: _text(context, "idp_id_token")},
        )
    if scenario in ("auth/dpop", "auth/dpop-nonce"):
        return ScenarioSignIn(AuthSettings(dpop=True))
    return None
