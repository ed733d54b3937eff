"""Token exchange (RFC 8693) at an organisation's identity provider, for an ID-JAG.

Enterprise-managed authorization (MCP's extension, after
``draft-ietf-oauth-identity-assertion-authz-grant``): the person signed in to the
organisation's identity provider (IdP) once; the host hands the IdP that ID token and
asks, by token exchange, for an *identity assertion authorization grant* (ID-JAG) for
one MCP server:

    grant_type=urn:ietf:params:oauth:grant-type:token-exchange
    subject_token=<ID token>  subject_token_type=urn:ietf:params:oauth:token-type:id_token
    requested_token_type=urn:ietf:params:oauth:token-type:id-jag
    audience=<the MCP server's authorization server (issuer)>
    resource=<the MCP server (RFC 8707)>  [scope=...]

The IdP answers with the ID-JAG in ``access_token`` (``issued_token_type`` id-jag), a
JWT the host then presents to the MCP server's authorization server as a JWT bearer
grant (:mod:`hostapp.auth.assertions`). The request itself is Authlib's (client
authentication at the IdP included).
"""

from __future__ import annotations

from typing import Any

from hostapp.auth.discovery import AuthorizationError

TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id-jag"


def exchange_parameters(id_token: str, *, audience: str, resource: str, scope: str | None = None) -> dict[str, str]:
    """The form parameters of the token exchange request (besides client authentication)."""
    params = {
        "subject_token": id_token,
        "subject_token_type": ID_TOKEN_TYPE,
        "requested_token_type": ID_JAG_TOKEN_TYPE,
        "audience": audience,
        "resource": resource,
    }
    if scope:
        params["scope"] = scope
    return params


async def request_id_jag(session: Any, idp_token_endpoint: str, id_token: str, *, audience: str, resource: str,
                         scope: str | None = None) -> str:
    """The ID-JAG the IdP issues for ``id_token``; ``session`` is an Authlib async OAuth client.

    Raises Authlib's ``OAuthError`` when the IdP refuses, ``AuthorizationError`` when it answers
    with something other than an ID-JAG.
    """
    answer = await session.fetch_token(
        idp_token_endpoint, grant_type=TOKEN_EXCHANGE_GRANT,
        **exchange_parameters(id_token, audience=audience, resource=resource, scope=scope),
    )
    issued = answer.get("issued_token_type")
    grant = answer.get("access_token")
    if issued not in (None, ID_JAG_TOKEN_TYPE) or not isinstance(grant, str) or grant.count(".") != 2:
        raise AuthorizationError("the identity provider did not issue an identity assertion grant (ID-JAG)")
    return grant
