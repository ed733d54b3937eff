"""Where a server's sign-in is kept: secrets in the OS keyring, references beside them.

Access tokens, refresh tokens, client secrets, the sign-in credentials a person configured
for a server (a client secret, a private key, an identity assertion: see
:mod:`hostapp.auth.settings`) and the server's DPoP key pair go to the keyring through
:class:`~hostapp.store.secrets.SecretStore` and nowhere else. What is not secret (the
issuer the sign-in belongs to, the client id, the token endpoint's authentication
method, the redirect URI, the granted scope) and the keyring references are kept in a
small JSON sidecar, ``auth.json`` in the home folder, one entry per server name. The
journal's SQLite file never sees any of it.

A sign-in is bound to the authorization server (issuer) that issued it: when a server
moves to another authorization server, the old client registration and tokens are not
offered to the new one (SEP-2352); :meth:`TokenStore.forget` drops them.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from hostapp.store.secrets import SecretMissing, SecretStore

#: Keyring kinds of the secrets this module stores.
TOKEN_KIND = "oauth_tokens"
CLIENT_SECRET_KIND = "oauth_client_secret"
DPOP_KEY_KIND = "dpop_key"
#: A configured credential ``name`` is kept as kind ``oauth_<name>``.
CREDENTIAL_KIND_PREFIX = "oauth_"

#: Refresh this long before the access token expires, in seconds; for short-lived
#: tokens at most a fifth of their lifetime, so that they are not refreshed on every use.
REFRESH_MARGIN_SECONDS = 60.0
SHORT_LIFETIME_MARGIN = 0.2

SIDECAR_NAME = "auth.json"


@dataclass(frozen=True)
class OAuthClient:
    """A client identity at one authorization server.

    ``kind``: ``"preregistered"``, ``"metadata_document"`` (the client id is a URL) or
    ``"dynamic"`` (RFC 7591).
    """

    issuer: str
    client_id: str
    kind: str
    token_endpoint_auth_method: str = "none"
    redirect_uri: str | None = None
    client_secret: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Tokens:
    """An access token and what came with it; ``expires_at`` is a Unix time or None."""

    access_token: str = field(repr=False)
    token_type: str = "Bearer"
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None
    scope: str | None = None
    #: When to refresh (Unix time); None: shortly before ``expires_at``.
    refresh_at: float | None = None

    @classmethod
    def from_response(cls, token: dict[str, Any], previous: Tokens | None = None) -> Tokens:
        """From a token endpoint's answer; a refresh answer without a new refresh token keeps the old one."""
        now = time.time()
        expires_at = token.get("expires_at")
        lifetime = float(token["expires_in"]) if token.get("expires_in") is not None else None
        if lifetime is None and expires_at is not None:
            lifetime = float(expires_at) - now
        if expires_at is None and lifetime is not None:
            expires_at = now + lifetime
        refresh_at = None
        if expires_at is not None and lifetime is not None:
            refresh_at = float(expires_at) - min(REFRESH_MARGIN_SECONDS, max(lifetime, 0.0) * SHORT_LIFETIME_MARGIN)
        refresh = token.get("refresh_token") or (previous.refresh_token if previous else None)
        scope = token.get("scope") or (previous.scope if previous else None)
        if isinstance(scope, list):
            scope = " ".join(scope)
        return cls(
            access_token=str(token["access_token"]),
            token_type=str(token.get("token_type") or "Bearer"),
            refresh_token=refresh,
            expires_at=float(expires_at) if expires_at is not None else None,
            scope=scope,
            refresh_at=refresh_at,
        )

    def expires_soon(self, now: float | None = None) -> bool:
        now = now if now is not None else time.time()
        if self.refresh_at is not None:
            return now >= self.refresh_at
        return self.expires_at is not None and now >= self.expires_at - REFRESH_MARGIN_SECONDS

    def without_access_token(self) -> Tokens:
        return replace(self, access_token="", expires_at=0.0, refresh_at=0.0)


class TokenStore:
    """Per-server sign-in state: client identity and tokens (secrets in the keyring).

    Thread-safe; keyring calls may block, so async callers run these methods in a thread.
    """

    def __init__(self, secrets: SecretStore, sidecar: Path | None = None):
        self.secrets = secrets
        self.path = Path(sidecar) if sidecar is not None else Path(secrets.home) / SIDECAR_NAME
        self._lock = threading.Lock()

    # -- sidecar ------------------------------------------------------------------------

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return {}
        return data.get("servers", {}) if isinstance(data, dict) else {}

    def _write(self, servers: dict[str, dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"servers": servers}, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path)

    def _entry(self, server: str) -> dict[str, Any]:
        return dict(self._read().get(server) or {})

    def _update(self, server: str, **changes: Any) -> None:
        servers = self._read()
        entry = dict(servers.get(server) or {})
        entry.update(changes)
        servers[server] = {k: v for k, v in entry.items() if v is not None}
        self._write(servers)

    def holds_sign_in(self, server: str) -> bool:
        """Whether a sign-in of ``server`` is kept (tokens, a registered client, a DPoP key):
        what signing out forgets. Read from the sidecar alone, without the keyring; the
        credentials a person configured are not a sign-in (they stay at a sign-out)."""
        with self._lock:
            entry = self._entry(server)
        return any(key != "credentials" for key in entry)

    # -- client -------------------------------------------------------------------------

    def load_client(self, server: str) -> OAuthClient | None:
        with self._lock:
            entry = self._entry(server).get("client")
        if not entry:
            return None
        secret = None
        if entry.get("client_secret_ref"):
            try:
                secret = self.secrets.get(entry["client_secret_ref"])
            except SecretMissing:
                return None  # half a client is no client: register again
        return OAuthClient(
            issuer=entry["issuer"],
            client_id=entry["client_id"],
            kind=entry.get("kind", "dynamic"),
            token_endpoint_auth_method=entry.get("token_endpoint_auth_method", "none"),
            redirect_uri=entry.get("redirect_uri"),
            client_secret=secret,
        )

    def save_client(self, server: str, client: OAuthClient) -> None:
        with self._lock:
            old = (self._entry(server).get("client") or {}).get("client_secret_ref")
            ref = self.secrets.put(CLIENT_SECRET_KIND, client.client_secret) if client.client_secret else None
            record = {k: v for k, v in asdict(client).items() if k != "client_secret" and v is not None}
            if ref:
                record["client_secret_ref"] = ref
            self._update(server, client=record)
            if old:
                self.secrets.delete(old)

    # -- tokens -------------------------------------------------------------------------

    def load_tokens(self, server: str) -> tuple[str, Tokens] | None:
        """``(issuer, tokens)`` of the server's sign-in, or None."""
        with self._lock:
            entry = self._entry(server)
        ref, issuer = entry.get("tokens_ref"), entry.get("tokens_issuer")
        if not ref or not issuer:
            return None
        try:
            stored = json.loads(self.secrets.get(ref))
        except (SecretMissing, ValueError):
            return None
        return issuer, Tokens(**stored)

    def save_tokens(self, server: str, issuer: str, tokens: Tokens) -> None:
        with self._lock:
            old = self._entry(server).get("tokens_ref")
            ref = self.secrets.put(TOKEN_KIND, json.dumps(asdict(tokens)))
            self._update(server, tokens_ref=ref, tokens_issuer=issuer, scope=tokens.scope)
            if old:
                self.secrets.delete(old)

    def drop_tokens(self, server: str) -> None:
        with self._lock:
            entry = self._entry(server)
            ref = entry.pop("tokens_ref", None)
            entry.pop("tokens_issuer", None)
            servers = self._read()
            servers[server] = entry
            self._write(servers)
            if ref:
                self.secrets.delete(ref)

    def signed_in(self, server: str) -> bool:
        with self._lock:
            return bool(self._entry(server).get("tokens_ref"))

    # -- configured credentials and the DPoP key ---------------------------------------

    def save_credential(self, server: str, name: str, value: str) -> None:
        """Keep a configured sign-in secret (``client_secret``, ``private_key``, ``assertion``...)."""
        with self._lock:
            credentials = dict(self._entry(server).get("credentials") or {})
            old = credentials.get(name)
            credentials[name] = self.secrets.put(f"{CREDENTIAL_KIND_PREFIX}{name}", value)
            self._update(server, credentials=credentials)
            if old:
                self.secrets.delete(old)

    def load_credential(self, server: str, name: str) -> str | None:
        with self._lock:
            ref = (self._entry(server).get("credentials") or {}).get(name)
        return self._secret_or_none(ref)

    def _secret_or_none(self, ref: str | None) -> str | None:
        """The keyring value behind ``ref``; None without a reference or when the keyring lost it."""
        if not ref:
            return None
        try:
            return self.secrets.get(ref)
        except SecretMissing:
            return None

    def drop_credential(self, server: str, name: str) -> None:
        with self._lock:
            credentials = dict(self._entry(server).get("credentials") or {})
            ref = credentials.pop(name, None)
            self._update(server, credentials=credentials or None)
            if ref:
                self.secrets.delete(ref)

    def credential_names(self, server: str) -> list[str]:
        """Which configured credentials the server has (names only, for display)."""
        with self._lock:
            return sorted((self._entry(server).get("credentials") or {}).keys())

    def load_dpop_key(self, server: str) -> str | None:
        """The server's DPoP private key (a JWK as JSON), or None."""
        with self._lock:
            ref = self._entry(server).get("dpop_key_ref")
        return self._secret_or_none(ref)

    def save_dpop_key(self, server: str, private_jwk: str) -> None:
        with self._lock:
            old = self._entry(server).get("dpop_key_ref")
            self._update(server, dpop_key_ref=self.secrets.put(DPOP_KEY_KIND, private_jwk))
            if old:
                self.secrets.delete(old)

    def forget(self, server: str, *, keep_credentials: bool = False) -> None:
        """Sign out: delete the server's tokens, client secret and DPoP key from the keyring, and its entry.

        ``keep_credentials``: the credentials a person configured (:meth:`save_credential`)
        stay, for the next sign-in; otherwise (the server is removed) they go too.
        """
        with self._lock:
            servers = self._read()
            entry = servers.pop(server, None) or {}
            refs = [entry.get("tokens_ref"), (entry.get("client") or {}).get("client_secret_ref"),
                    entry.get("dpop_key_ref")]
            credentials = entry.get("credentials") or {}
            if keep_credentials and credentials:
                servers[server] = {"credentials": credentials}
            else:
                refs += list(credentials.values())
            for ref in refs:
                if ref:
                    self.secrets.delete(ref)
            self._write(servers)
