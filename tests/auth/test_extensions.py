"""The authorization extensions on the wire: client credentials, JWT assertions, token exchange, DPoP.

The peer (tests/support/extension_peer.py) is a real HTTP server on loopback that records
what it gets; the checks are made here, on the recorded headers and forms, with the
signatures verified against the public keys.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from joserfc import jws, jwt
from joserfc.jwk import ECKey

from hostapp.auth.discovery import AuthorizationError
from hostapp.auth.grants import Credentials
from hostapp.auth.oauth import McpOAuth
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
from hostapp.store.secrets import InMemoryKeyring, SecretStore
from tests.support.extension_peer import ExtensionPeer, ServedPeer

JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"


@pytest.fixture
def peer() -> Iterator[ExtensionPeer]:
    served = ServedPeer(ExtensionPeer())
    try:
        yield served.peer
    finally:
        served.stop()


@pytest.fixture
def keyring() -> InMemoryKeyring:
    return InMemoryKeyring()


@pytest.fixture
def store(tmp_path: Path, keyring: InMemoryKeyring) -> TokenStore:
    return TokenStore(SecretStore(tmp_path, keyring))


async def post(auth: McpOAuth, url: str) -> httpx.Response:
    async with httpx.AsyncClient(auth=auth, timeout=10) as client:
        return await client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})


def verified_claims(token: str, key: ECKey) -> dict:
    return jwt.decode(token, key, algorithms=["ES256"]).claims


def header_of(token: str) -> dict:
    return jws.extract_compact(token.encode()).protected


def sha256_b64url(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


# -- client credentials -------------------------------------------------------------------


async def test_client_credentials_authenticate_by_http_basic_and_need_no_browser(peer, store, keyring):
    store.save_credential("svc", CLIENT_SECRET, "the-machine-secret")
    auth = McpOAuth("svc", peer.mcp_url, store, settings=AuthSettings(grant=CLIENT_CREDENTIALS, client_id="machine"))

    assert (await post(auth, peer.mcp_url)).status_code == 200

    [request] = peer.requests_to("/token")
    assert request.form["grant_type"] == "client_credentials"
    assert request.form["resource"] == peer.mcp_url
    assert request.form["scope"] == "mcp:tools"
    assert request.headers["authorization"] == "Basic " + base64.b64encode(b"machine:the-machine-secret").decode()
    assert "client_secret" not in request.form and "client_assertion" not in request.form
    assert "dpop" not in request.headers
    # The MCP request went with the token as a bearer token.
    assert peer.requests_to("/mcp")[-1].headers["authorization"] == f"Bearer {peer.issued[0]}"
    # The secret and the token are in the keyring, not in the sidecar.
    sidecar = store.path.read_text()
    for secret in ("the-machine-secret", peer.issued[0]):
        assert secret not in sidecar
        assert any(secret in value for value in keyring.entries.values())


async def test_private_key_jwt_client_assertion_is_signed_for_the_issuer_and_fresh_each_time(peer, store):
    key = ECKey.generate_key("P-256")
    store.save_credential("svc", PRIVATE_KEY, key.as_pem(private=True).decode())
    auth = McpOAuth("svc", peer.mcp_url, store, settings=AuthSettings(grant=CLIENT_CREDENTIALS, client_id="machine"))

    assert (await post(auth, peer.mcp_url)).status_code == 200
    peer.issued.clear()  # the server forgets the token: the next request signs in again
    assert (await post(auth, peer.mcp_url)).status_code == 200

    requests = peer.requests_to("/token")
    assert len(requests) == 2
    public = ECKey.import_key(key.as_dict(private=False))
    jtis = []
    for request in requests:
        assert "authorization" not in request.headers
        assert request.form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        assert header_of(request.form["client_assertion"])["alg"] == "ES256"
        claims = verified_claims(request.form["client_assertion"], public)
        assert claims["iss"] == claims["sub"] == "machine"
        assert claims["aud"] == peer.base  # the issuer identifier (RFC 7523bis), not the token endpoint
        now = time.time()
        assert claims["iat"] <= now + 5 and now < claims["exp"] <= claims["iat"] + 60
        jtis.append(claims["jti"])
    assert len(set(jtis)) == 2 and all(jtis)


async def test_a_missing_client_secret_is_said_without_any_secret(peer, store):
    auth = McpOAuth("svc", peer.mcp_url, store,
                    settings=AuthSettings(grant=CLIENT_CREDENTIALS, client_id="machine",
                                          client_auth="client_secret_basic"))
    with pytest.raises(AuthorizationError, match="no client secret is stored"):
        await post(auth, peer.mcp_url)
    assert peer.requests_to("/token") == []


# -- JWT bearer (workload identity) -------------------------------------------------------------


async def test_jwt_bearer_grant_presents_the_workload_assertion(peer, store):
    store.save_credential("wl", ASSERTION, "header.workload-claims.signature")
    auth = McpOAuth("wl", peer.mcp_url, store, settings=AuthSettings(grant=JWT_BEARER, client_id="workload"))

    assert (await post(auth, peer.mcp_url)).status_code == 200

    [request] = peer.requests_to("/token")
    assert request.form["grant_type"] == JWT_BEARER_GRANT
    assert request.form["assertion"] == "header.workload-claims.signature"
    assert request.form["client_id"] == "workload"  # no secret: client authentication "none"
    assert "authorization" not in request.headers


async def test_jwt_bearer_assertion_file_is_read_at_each_token_request(peer, store, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("a.first.jwt\n")
    auth = McpOAuth("wl", peer.mcp_url, store,
                    settings=AuthSettings(grant=JWT_BEARER, client_id="workload", assertion_file=str(token_file)))
    assert (await post(auth, peer.mcp_url)).status_code == 200
    token_file.write_text("a.rotated.jwt")
    peer.issued.clear()
    assert (await post(auth, peer.mcp_url)).status_code == 200
    assert [r.form["assertion"] for r in peer.requests_to("/token")] == ["a.first.jwt", "a.rotated.jwt"]


async def test_a_refused_jwt_bearer_grant_is_not_retried(peer, store):
    peer.token_error = "invalid_grant"
    store.save_credential("wl", ASSERTION, "an.expired.jwt")
    auth = McpOAuth("wl", peer.mcp_url, store, settings=AuthSettings(grant=JWT_BEARER, client_id="workload"))
    with pytest.raises(AuthorizationError, match=r"refused \(invalid_grant\)") as raised:
        await post(auth, peer.mcp_url)
    assert "an.expired.jwt" not in str(raised.value)
    assert len(peer.requests_to("/token")) == 1


# -- enterprise-managed authorization -------------------------------------------------------


async def test_identity_assertion_is_exchanged_at_the_idp_then_presented_as_jwt_bearer(peer, store):
    store.save_credential("ent", CLIENT_SECRET, "mcp-client-secret")
    store.save_credential("ent", ASSERTION, "the.person's.id-token")
    settings = AuthSettings(grant=IDENTITY_ASSERTION, client_id="mcp-client",
                            idp_token_endpoint=f"{peer.base}/idp/token", idp_client_id="idp-client")
    auth = McpOAuth("ent", peer.mcp_url, store, settings=settings)

    assert (await post(auth, peer.mcp_url)).status_code == 200

    [exchange] = peer.requests_to("/idp/token")
    assert exchange.form == {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "subject_token": "the.person's.id-token",
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
        "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
        "audience": peer.base,
        "resource": peer.mcp_url,
        "scope": "mcp:tools",
        "client_id": "idp-client",
    }
    [grant] = peer.requests_to("/token")
    assert grant.form["grant_type"] == JWT_BEARER_GRANT
    id_jag = grant.form["assertion"]
    assert header_of(id_jag)["typ"] == "oauth-id-jag+jwt"
    claims = verified_claims(id_jag, ECKey.import_key(peer.idp_key.as_dict(private=False)))
    assert claims["aud"] == peer.base and claims["resource"] == peer.mcp_url
    assert grant.headers["authorization"] == "Basic " + base64.b64encode(b"mcp-client:mcp-client-secret").decode()


# -- DPoP -----------------------------------------------------------------------------------


def check_proof(proof: str, *, htm: str, htu: str, access_token: str | None, nonce: str | None = None) -> dict:
    header = header_of(proof)
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    assert "d" not in header["jwk"]
    claims = verified_claims(proof, ECKey.import_key(header["jwk"]))
    assert claims["htm"] == htm and claims["htu"] == htu
    assert abs(claims["iat"] - time.time()) < 30
    assert claims["jti"]
    if access_token is None:
        assert "ath" not in claims
    else:
        assert claims["ath"] == sha256_b64url(access_token)
    assert claims.get("nonce") == nonce
    return {"jkt": ECKey.import_key(header["jwk"]).thumbprint(), **claims}


async def test_dpop_proofs_on_the_token_request_and_on_every_resource_request(peer, store, keyring):
    store.save_credential("bound", CLIENT_SECRET, "s")
    auth = McpOAuth("bound", peer.mcp_url, store,
                    settings=AuthSettings(grant=CLIENT_CREDENTIALS, client_id="machine", dpop=True))
    assert (await post(auth, peer.mcp_url + "?q=1")).status_code == 200
    assert (await post(auth, peer.mcp_url)).status_code == 200

    [token_request] = peer.requests_to("/token")
    at_token = check_proof(token_request.headers["dpop"], htm="POST", htu=f"{peer.base}/token", access_token=None)
    token = peer.issued[0]
    resource_requests = [r for r in peer.requests_to("/mcp") if r.headers.get("authorization")]
    assert len(resource_requests) == 2
    proofs = []
    for request in resource_requests:
        assert request.headers["authorization"] == f"DPoP {token}"
        proofs.append(check_proof(request.headers["dpop"], htm="POST", htu=peer.mcp_url, access_token=token))
    assert {p["jkt"] for p in proofs} == {at_token["jkt"]}  # one key per server
    assert len({p["jti"] for p in [*proofs, at_token]}) == 3  # a fresh proof every time
    # The key pair is kept in the keyring, the private half with it, nothing in the sidecar.
    stored = json.loads(store.load_dpop_key("bound"))
    assert ECKey.import_key(stored).thumbprint() == at_token["jkt"] and "d" in stored
    assert stored["d"] not in store.path.read_text()


async def test_dpop_nonces_of_the_authorization_server_and_the_resource_are_used_once_asked(peer, store):
    peer.as_nonce, peer.rs_nonce = "as-nonce-1", "rs-nonce-1"
    store.save_credential("bound", CLIENT_SECRET, "s")
    auth = McpOAuth("bound", peer.mcp_url, store,
                    settings=AuthSettings(grant=CLIENT_CREDENTIALS, client_id="machine", dpop=True))
    assert (await post(auth, peer.mcp_url)).status_code == 200

    first, second = peer.requests_to("/token")
    challenged_at_token = check_proof(first.headers["dpop"], htm="POST", htu=f"{peer.base}/token", access_token=None)
    retried = check_proof(second.headers["dpop"], htm="POST", htu=f"{peer.base}/token", access_token=None,
                          nonce="as-nonce-1")
    assert retried["jti"] != challenged_at_token["jti"]
    unauthenticated, challenged, accepted = peer.requests_to("/mcp")
    assert "authorization" not in unauthenticated.headers
    token = peer.issued[0]
    check_proof(challenged.headers["dpop"], htm="POST", htu=peer.mcp_url, access_token=token)
    check_proof(accepted.headers["dpop"], htm="POST", htu=peer.mcp_url, access_token=token, nonce="rs-nonce-1")

    # The nonce is kept: the next request carries it at once.
    assert (await post(auth, peer.mcp_url)).status_code == 200
    check_proof(peer.requests_to("/mcp")[-1].headers["dpop"], htm="POST", htu=peer.mcp_url,
                access_token=token, nonce="rs-nonce-1")
    assert len(peer.requests_to("/mcp")) == 4


async def test_a_nonce_challenge_is_answered_exactly_once(peer, store):
    store.save_credential("bound", CLIENT_SECRET, "s")
    auth = McpOAuth("bound", peer.mcp_url, store,
                    settings=AuthSettings(grant=CLIENT_CREDENTIALS, client_id="machine", dpop=True))
    assert (await post(auth, peer.mcp_url)).status_code == 200
    before, tokens_before = len(peer.requests_to("/mcp")), len(peer.requests_to("/token"))
    peer.rs_nonce, peer.stale_nonces = "n0", True  # whatever nonce the client sends is stale

    response = await post(auth, peer.mcp_url)

    assert response.status_code == 401
    first, retried = peer.requests_to("/mcp")[before:]  # one retry, no loop
    def nonce(request):
        key = ECKey.import_key(header_of(request.headers["dpop"])["jwk"])
        return verified_claims(request.headers["dpop"], key).get("nonce")
    assert nonce(first) is None and nonce(retried) == f"nonce-{peer.seen.index(first) + 1}"
    assert first.headers["dpop"] != retried.headers["dpop"]
    assert len(peer.requests_to("/token")) == tokens_before  # a nonce problem is not a token problem


# -- settings and storage ------------------------------------------------------------------


def test_settings_are_checked_and_credentials_never_shown():
    with pytest.raises(ValueError, match="client id"):
        AuthSettings(grant=CLIENT_CREDENTIALS)
    with pytest.raises(ValueError, match="identity provider"):
        AuthSettings(grant=IDENTITY_ASSERTION, client_id="c")
    with pytest.raises(ValueError, match="unknown grant"):
        AuthSettings(grant="password")
    assert not AuthSettings().unattended and AuthSettings(grant=JWT_BEARER, client_id="c").unattended
    stored = AuthSettings(grant=CLIENT_CREDENTIALS, client_id="c", dpop=True)
    assert stored.to_dict() == {"grant": "client_credentials", "client_id": "c", "dpop": True}
    assert AuthSettings.from_dict(stored.to_dict()) == stored and AuthSettings.from_dict(None) == AuthSettings()
    with pytest.raises(ValueError, match="unknown sign-in settings: secret"):
        AuthSettings.from_dict({"secret": "no secrets in settings"})
    shown = repr(Credentials(client_secret="sec-1", private_key="-----BEGIN", assertion="a.b.c"))
    assert "sec-1" not in shown and "BEGIN" not in shown and "a.b.c" not in shown


def test_configured_credentials_outlive_a_sign_out_but_not_the_server(store, keyring):
    store.save_credential("svc", CLIENT_SECRET, "configured-secret")
    store.save_credential("svc", CLIENT_SECRET, "replaced-secret")  # the old entry goes
    store.save_dpop_key("svc", '{"kty": "EC"}')
    assert store.load_credential("svc", CLIENT_SECRET) == "replaced-secret"
    assert not any("configured-secret" in v for v in keyring.entries.values())
    assert "replaced-secret" not in store.path.read_text()

    store.forget("svc", keep_credentials=True)  # sign out
    assert store.load_credential("svc", CLIENT_SECRET) == "replaced-secret"
    assert store.load_dpop_key("svc") is None
    store.forget("svc")  # the server is removed
    assert store.load_credential("svc", CLIENT_SECRET) is None
    assert keyring.entries == {}


async def test_a_bound_token_and_its_key_survive_a_restart(peer, store):
    store.save_credential("bound", CLIENT_SECRET, "s")
    settings = AuthSettings(grant=CLIENT_CREDENTIALS, client_id="machine", dpop=True)
    assert (await post(McpOAuth("bound", peer.mcp_url, store, settings=settings), peer.mcp_url)).status_code == 200
    first_jkt = check_proof(peer.requests_to("/token")[0].headers["dpop"], htm="POST", htu=f"{peer.base}/token",
                            access_token=None)["jkt"]

    restarted = McpOAuth("bound", peer.mcp_url, store, settings=settings)  # a new process: all from the keyring
    assert (await post(restarted, peer.mcp_url)).status_code == 200

    assert len(peer.requests_to("/token")) == 1
    last = peer.requests_to("/mcp")[-1]
    assert last.headers["authorization"] == f"DPoP {peer.issued[0]}"
    proof = check_proof(last.headers["dpop"], htm="POST", htu=peer.mcp_url, access_token=peer.issued[0])
    assert proof["jkt"] == first_jkt


async def test_an_expiring_unattended_token_is_replaced_before_it_is_refused(peer, store):
    peer.expires_in = 1
    store.save_credential("svc", CLIENT_SECRET, "s")
    auth = McpOAuth("svc", peer.mcp_url, store, settings=AuthSettings(grant=CLIENT_CREDENTIALS, client_id="machine"))
    assert (await post(auth, peer.mcp_url)).status_code == 200
    peer.expires_in = 3600
    await asyncio.sleep(1.0)
    mcp_before = len(peer.requests_to("/mcp"))

    assert (await post(auth, peer.mcp_url)).status_code == 200

    assert len(peer.requests_to("/token")) == 2
    [request] = peer.requests_to("/mcp")[mcp_before:]  # no 401 on the way: renewed beforehand
    assert request.headers["authorization"] == f"Bearer {peer.issued[1]}"


async def test_configured_credentials_in_the_secret_service(peer, real_keyring, isolated_home):
    store = TokenStore(SecretStore(isolated_home))
    key = ECKey.generate_key("P-256")
    for name, value in ((CLIENT_SECRET, "ss-secret"), (PRIVATE_KEY, key.as_pem(private=True).decode()),
                        (ASSERTION, "a.b.c"), ("idp_client_secret", "idp-secret")):
        store.save_credential("svc", name, value)
    auth = McpOAuth("svc", peer.mcp_url, store,
                    settings=AuthSettings(grant=CLIENT_CREDENTIALS, client_id="machine", dpop=True))
    assert (await post(auth, peer.mcp_url)).status_code == 200
    assert "client_assertion" in peer.requests_to("/token")[0].form  # the private key was read back

    reopened = TokenStore(SecretStore(isolated_home))
    assert reopened.load_credential("svc", "idp_client_secret") == "idp-secret"
    assert reopened.load_dpop_key("svc") is not None
    sidecar = reopened.path.read_text()
    for secret in ("ss-secret", "idp-secret", "BEGIN", peer.issued[0]):
        assert secret not in sidecar
    reopened.forget("svc")
    assert reopened.load_credential("svc", CLIENT_SECRET) is None and reopened.load_dpop_key("svc") is None
