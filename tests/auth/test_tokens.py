"""TokenStore: what goes to the keyring, what to the sidecar, and when a token counts as expiring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hostapp.auth.tokens import REFRESH_MARGIN_SECONDS, OAuthClient, Tokens, TokenStore
from hostapp.store.secrets import InMemoryKeyring, SecretStore


def test_tokens_and_client_secret_live_in_the_keyring_and_the_sidecar_holds_references(tmp_path: Path):
    keyring = InMemoryKeyring()
    store = TokenStore(SecretStore(tmp_path, keyring))
    store.save_client("s", OAuthClient("https://as", "cid", "dynamic", "client_secret_basic",
                                       "http://127.0.0.1:1/callback", "the-client-secret"))
    store.save_tokens("s", "https://as", Tokens("the-access-token", refresh_token="the-refresh-token",
                                                expires_at=123.0, scope="a b"))
    sidecar = store.path.read_text()
    for secret in ("the-client-secret", "the-access-token", "the-refresh-token"):
        assert secret not in sidecar
        assert any(secret in value for value in keyring.entries.values())
    assert json.loads(sidecar)["servers"]["s"]["client"]["client_id"] == "cid"

    reopened = TokenStore(SecretStore(tmp_path, keyring))
    client = reopened.load_client("s")
    assert client is not None and client.client_secret == "the-client-secret"
    issuer, tokens = reopened.load_tokens("s")
    assert issuer == "https://as" and tokens.refresh_token == "the-refresh-token"

    # A new token replaces the old entry instead of piling up.
    reopened.save_tokens("s", "https://as", Tokens("second-access-token"))
    assert not any("the-access-token" in value for value in keyring.entries.values())

    reopened.forget("s")
    assert keyring.entries == {}
    assert reopened.load_tokens("s") is None and reopened.load_client("s") is None


def test_a_refresh_answer_without_a_new_refresh_token_keeps_the_old_one():
    first = Tokens.from_response({"access_token": "a1", "refresh_token": "r1", "expires_in": 3600, "scope": "x"})
    second = Tokens.from_response({"access_token": "a2", "expires_in": 3600}, first)
    assert second.refresh_token == "r1" and second.scope == "x" and second.access_token == "a2"


def test_a_token_is_refreshed_shortly_before_it_expires():
    long_lived = Tokens.from_response({"access_token": "a", "expires_in": 3600})
    assert long_lived.refresh_at == pytest.approx(long_lived.expires_at - REFRESH_MARGIN_SECONDS)
    short_lived = Tokens.from_response({"access_token": "a", "expires_in": 30})
    assert short_lived.refresh_at == pytest.approx(short_lived.expires_at - 6)  # a fifth of its life
    tokens = Tokens("a", expires_at=1000.0)
    assert not tokens.expires_soon(now=1000.0 - REFRESH_MARGIN_SECONDS - 1)
    assert tokens.expires_soon(now=1000.0 - REFRESH_MARGIN_SECONDS + 1)
    assert not Tokens("a").expires_soon(now=1e12)  # no expiry stated: used until refused
    shown = repr(Tokens("a-very-secret-token", refresh_token="r-secret"))
    assert "a-very-secret-token" not in shown and "r-secret" not in shown
