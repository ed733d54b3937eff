"""An MCP server behind OAuth, with its own authorization server, for the auth tests.

Run as ``python tests/support/oauth_test_server.py``: it listens on 127.0.0.1 on a free
port and prints ``PORT <n>`` once it accepts connections. One Starlette app plays both
parts: the protected MCP endpoint ``/mcp`` (plain JSON answers to ``initialize``,
``tools/list`` and ``tools/call``; the tool ``slow`` answers on an SSE stream that
the server drops after its priming event, expiring every access token at that moment,
so the answer has to be fetched by a resumption GET with a refreshed token) and an
authorization server with protected resource
metadata, RFC 8414 metadata, dynamic registration (confidential clients, so that a
client secret exists), an authorization endpoint that approves at once, and a token
endpoint with PKCE, refresh and refresh-token rotation.

Test hooks under ``/admin``: ``expire`` makes every access token invalid, ``revoke``
every refresh token, ``issued`` lists every secret handed out (so a test can look for
them where they must not be), ``stats`` counts token requests by grant type (and ``refused`` MCP requests),
``lifetime?seconds=N`` sets the ``expires_in`` of the tokens issued from then on,
``metadata`` (a JSON object posted) replaces fields of the authorization server's
metadata, as a hostile or misconfigured server would name other endpoints.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import socket
import sys
from urllib.parse import urlencode

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

STATE: dict = {"clients": {}, "codes": {}, "access": {}, "refresh": {}, "issued": [], "stats": {},
         "replay": {}, "lifetime": 3600, "refused": 0, "metadata": {}}
SESSION_ID = "oauth-test-session"
BASE = ""
SCOPES = ["mcp:tools", "offline_access"]


def _issue(prefix: str) -> str:
    value = f"{prefix}-{secrets.token_urlsafe(24)}"
    STATE["issued"].append(value)
    return value


async def protected_resource(request: Request) -> Response:
    return JSONResponse({"resource": f"{BASE}/mcp", "authorization_servers": [BASE], "scopes_supported": ["mcp:tools"]})


async def server_metadata(request: Request) -> Response:
    return JSONResponse({
        "issuer": BASE,
        "authorization_endpoint": f"{BASE}/authorize",
        "token_endpoint": f"{BASE}/token",
        "registration_endpoint": f"{BASE}/register",
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        "scopes_supported": SCOPES,
        "authorization_response_iss_parameter_supported": True,
        **STATE["metadata"],
    })


async def register(request: Request) -> Response:
    body = await request.json()
    client_id = f"client-{secrets.token_hex(6)}"
    secret = _issue("client-secret")
    STATE["clients"][client_id] = {"secret": secret, "redirect_uris": body.get("redirect_uris", [])}
    return JSONResponse({"client_id": client_id, "client_secret": secret,
                         "token_endpoint_auth_method": "client_secret_basic",
                         "redirect_uris": body.get("redirect_uris", [])}, status_code=201)


async def authorize(request: Request) -> Response:
    q = request.query_params
    client = STATE["clients"].get(q.get("client_id"))
    if client is None or q.get("redirect_uri") not in client["redirect_uris"]:
        return JSONResponse({"error": "invalid_client"}, status_code=400)
    if q.get("code_challenge_method") != "S256" or not q.get("code_challenge") or not q.get("resource"):
        return JSONResponse({"error": "invalid_request"}, status_code=400)
    code = _issue("code")
    STATE["codes"][code] = {"client_id": q["client_id"], "challenge": q["code_challenge"],
                            "redirect_uri": q["redirect_uri"], "scope": q.get("scope", "")}
    params = {"code": code, "state": q.get("state", ""), "iss": BASE}
    return RedirectResponse(f"{q['redirect_uri']}?{urlencode(params)}", status_code=302)


def _client_from_basic(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if not header.startswith("Basic "):
        return None
    client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
    client = STATE["clients"].get(client_id)
    return client_id if client and secrets.compare_digest(client["secret"], secret) else None


def _tokens(client_id: str, scope: str) -> dict:
    access = _issue("access")
    STATE["access"][access] = {"scope": scope, "valid": True}
    answer = {"access_token": access, "token_type": "Bearer", "expires_in": STATE["lifetime"], "scope": scope}
    if "offline_access" in scope.split():
        refresh = _issue("refresh")
        STATE["refresh"][refresh] = {"client_id": client_id, "scope": scope, "revoked": False}
        answer["refresh_token"] = refresh
    return answer


async def token(request: Request) -> Response:
    form = await request.form()
    grant = form.get("grant_type")
    STATE["stats"][grant] = STATE["stats"].get(grant, 0) + 1
    client_id = _client_from_basic(request)
    if client_id is None:
        return JSONResponse({"error": "invalid_client"}, status_code=401)
    if not form.get("resource"):
        return JSONResponse({"error": "invalid_target"}, status_code=400)
    if grant == "authorization_code":
        entry = STATE["codes"].pop(form.get("code"), None)
        verifier = form.get("code_verifier") or ""
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if entry is None or entry["client_id"] != client_id or entry["challenge"] != challenge \
                or entry["redirect_uri"] != form.get("redirect_uri"):
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        return JSONResponse(_tokens(client_id, entry["scope"]))
    if grant == "refresh_token":
        entry = STATE["refresh"].get(form.get("refresh_token"))
        if entry is None or entry["revoked"] or entry["client_id"] != client_id:
            return JSONResponse({"error": "invalid_grant", "error_description": "refresh token revoked"},
                                status_code=400)
        entry["revoked"] = True  # rotation: each refresh token works once
        return JSONResponse(_tokens(client_id, entry["scope"]))
    return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)


async def mcp(request: Request) -> Response:
    header = request.headers.get("authorization", "")
    entry = STATE["access"].get(header[7:]) if header.startswith("Bearer ") else None
    if entry is None or not entry["valid"]:
        STATE["refused"] += 1
        challenge = (f'Bearer resource_metadata="{BASE}/.well-known/oauth-protected-resource/mcp", '
                     f'scope="mcp:tools"' + (', error="invalid_token"' if header else ""))
        return JSONResponse({"error": "invalid_token"}, status_code=401, headers={"WWW-Authenticate": challenge})
    if request.method == "GET":
        return _resume(request)
    if request.method == "DELETE":
        return Response(status_code=200)
    message = await request.json()
    if "id" not in message:
        return Response(status_code=202)
    method = message.get("method")
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "oauth-test-server", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "whoami", "inputSchema": {"type": "object"}},
                            {"name": "slow", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call" and message["params"]["name"] == "slow":
        return _dropped_stream(message)
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "signed in"}]}
    elif method == "ping":
        result = {}
    else:
        return JSONResponse({"jsonrpc": "2.0", "id": message["id"],
                             "error": {"code": -32601, "message": "Method not found"}})
    return JSONResponse({"jsonrpc": "2.0", "id": message["id"], "result": result},
                        headers={"Mcp-Session-Id": SESSION_ID} if method == "initialize" else None)


def _dropped_stream(message: dict) -> Response:
    """Prime the stream, keep the answer for a replay, expire every token, drop the stream."""
    event_id = f"ev-{len(STATE['replay']) + 1}"
    answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": "slow done"}]}}
    STATE["replay"][event_id] = answer
    for entry in STATE["access"].values():
        entry["valid"] = False
    return Response(f"id: {event_id}\nretry: 50\ndata: \n\n", media_type="text/event-stream")


def _resume(request: Request) -> Response:
    answer = STATE["replay"].pop(request.headers.get("last-event-id", ""), None)
    if answer is None:
        return Response(status_code=405)
    body = f"id: done-{answer['id']}\ndata: {json.dumps(answer)}\n\n"
    return Response(body, media_type="text/event-stream")


async def admin_expire(request: Request) -> Response:
    for entry in STATE["access"].values():
        entry["valid"] = False
    return JSONResponse({})


async def admin_revoke(request: Request) -> Response:
    for entry in STATE["refresh"].values():
        entry["revoked"] = True
    return JSONResponse({})


async def admin_lifetime(request: Request) -> Response:
    STATE["lifetime"] = int(request.query_params["seconds"])
    return JSONResponse({})


async def admin_metadata(request: Request) -> Response:
    STATE["metadata"] = await request.json()
    return JSONResponse({})


async def admin_issued(request: Request) -> Response:
    return JSONResponse(STATE["issued"])


async def admin_stats(request: Request) -> Response:
    return JSONResponse({**STATE["stats"], "refused": STATE["refused"]})


app = Starlette(routes=[
    Route("/.well-known/oauth-protected-resource/mcp", protected_resource),
    Route("/.well-known/oauth-authorization-server", server_metadata),
    Route("/register", register, methods=["POST"]),
    Route("/authorize", authorize),
    Route("/token", token, methods=["POST"]),
    Route("/mcp", mcp, methods=["POST", "GET", "DELETE"]),
    Route("/admin/expire", admin_expire, methods=["POST"]),
    Route("/admin/revoke", admin_revoke, methods=["POST"]),
    Route("/admin/lifetime", admin_lifetime, methods=["POST"]),
    Route("/admin/issued", admin_issued),
    Route("/admin/metadata", admin_metadata, methods=["POST"]),
    Route("/admin/stats", admin_stats),
])


def main() -> None:
    global BASE
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY from asyncio
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    BASE = f"http://127.0.0.1:{port}"
    # Connections queue on the listening socket until uvicorn serves it.
    print(f"PORT {port}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off")).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
