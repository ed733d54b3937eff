"""The pure parts of sign-in: challenges, where metadata is looked for, resource and scope rules."""

from __future__ import annotations

import httpx
import pytest

from hostapp.auth.discovery import (
    AuthorizationError,
    AuthorizationServer,
    BearerChallenge,
    ProtectedResource,
    authorization_server_urls,
    canonical_resource,
    protected_resource_urls,
    resource_matches,
)
from hostapp.auth.oauth import McpOAuth, select_scopes


def challenge(value: str) -> BearerChallenge:
    return BearerChallenge.from_response(httpx.Response(401, headers={"WWW-Authenticate": value}))


def test_a_bearer_challenge_with_quoted_and_bare_parameters():
    parsed = challenge('Bearer error="insufficient_scope", scope="files:read files:write", '
                       'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", realm=x')
    assert parsed.error == "insufficient_scope"
    assert parsed.scope == "files:read files:write"
    assert parsed.resource_metadata == "https://mcp.example.com/.well-known/oauth-protected-resource"
    assert parsed.params["realm"] == "x"


def test_only_the_bearer_challenge_counts():
    response = httpx.Response(401, headers=[("WWW-Authenticate", 'Basic realm="a"'),
                                            ("WWW-Authenticate", 'Bearer scope="s"')])
    assert BearerChallenge.from_response(response).scope == "s"
    assert BearerChallenge.from_response(httpx.Response(401)).params == {}


def test_protected_resource_metadata_is_looked_for_in_the_specified_order():
    urls = protected_resource_urls("https://h.example/public/mcp", challenge('Bearer resource_metadata="https://m/x"'))
    assert urls == [
        "https://m/x",
        "https://h.example/.well-known/oauth-protected-resource/public/mcp",
        "https://h.example/.well-known/oauth-protected-resource",
    ]
    assert protected_resource_urls("https://h.example", BearerChallenge()) == [
        "https://h.example/.well-known/oauth-protected-resource"]


def test_authorization_server_metadata_urls_with_and_without_a_path():
    assert authorization_server_urls("https://auth.example/tenant1") == [
        "https://auth.example/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example/.well-known/openid-configuration/tenant1",
        "https://auth.example/tenant1/.well-known/openid-configuration",
    ]
    assert authorization_server_urls("https://auth.example") == [
        "https://auth.example/.well-known/oauth-authorization-server",
        "https://auth.example/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize(("resource", "allowed"), [
    ("https://h.example/mcp", True),
    ("https://h.example", True),
    ("https://h.example/", True),
    ("https://h.example/other", False),
    ("https://h.example/mc", False),
    ("https://evil.example/mcp", False),
    ("http://h.example/mcp", False),
    ("https://h.example:8443/mcp", False),
])
def test_metadata_speaks_only_for_its_own_server(resource: str, allowed: bool):
    assert resource_matches("https://h.example/mcp", resource) is allowed


def test_the_canonical_resource_drops_query_fragment_and_trailing_slash():
    assert canonical_resource("https://H.example/mcp/?a=1#f") == "https://h.example/mcp"
    assert canonical_resource("https://h.example/") == "https://h.example"


def _server(scopes=None, **metadata) -> AuthorizationServer:
    document = {"issuer": "https://a", "authorization_endpoint": "https://a/authorize",
                "token_endpoint": "https://a/token", **metadata}
    if scopes is not None:
        document["scopes_supported"] = scopes
    return AuthorizationServer("https://a", document)


def _resource(scopes=None) -> ProtectedResource:
    return ProtectedResource("https://h/mcp", ("https://a",), scopes, None)


def test_scope_comes_from_the_challenge_first_then_from_the_resource_metadata():
    assert select_scopes(challenge('Bearer scope="mcp:basic"'), _resource(("a", "b")), _server()) == "mcp:basic"
    assert select_scopes(BearerChallenge(), _resource(("a", "b")), _server()) == "a b"
    assert select_scopes(BearerChallenge(), _resource(None), _server()) is None


def test_step_up_keeps_the_scopes_asked_for_before_and_offline_access_is_asked_where_offered():
    stepped = select_scopes(challenge('Bearer scope="mcp:write"'), _resource(), _server(), previous="mcp:basic")
    assert stepped == "mcp:write mcp:basic"
    offered = _server(scopes=["mcp:basic", "offline_access"])
    assert select_scopes(challenge('Bearer scope="mcp:basic"'), _resource(), offered) == "mcp:basic offline_access"
    assert select_scopes(challenge('Bearer scope="mcp:basic"'), _resource(), _server(scopes=["mcp:basic"])) \
        == "mcp:basic"


def test_pkce_without_s256_is_refused():
    with pytest.raises(AuthorizationError):
        _server().check_pkce()
    _server(code_challenge_methods_supported=["plain", "S256"]).check_pkce()


@pytest.mark.parametrize(("answer", "promised", "accepted"), [
    ({"code": "c", "state": "s", "iss": "https://a"}, True, True),
    ({"code": "c", "state": "s"}, False, True),
    ({"code": "c", "state": "s"}, True, False),          # promised iss missing
    ({"code": "c", "state": "s", "iss": "https://a/"}, False, False),  # no normalisation
    ({"code": "c", "state": "other", "iss": "https://a"}, True, False),
    ({"error": "access_denied", "state": "s"}, False, False),
])
def test_the_authorization_response_checks(answer, promised, accepted):
    server = _server(authorization_response_iss_parameter_supported=promised)
    if accepted:
        assert McpOAuth._check_answer(answer, "s", server) == "c"
    else:
        with pytest.raises(AuthorizationError):
            McpOAuth._check_answer(answer, "s", server)
