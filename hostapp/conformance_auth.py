"""The ``auth/`` scenarios of the MCP conformance suite, played by the host's client.

The suite's scripted authorization servers approve every authorization request at once:
their authorization endpoint answers with a redirect to the client's redirect URI. So a
headless run needs no browser: :class:`FollowRedirectOnce` requests the authorization URL,
does not follow the redirect, and reads the code (and ``state``, ``iss``) from its
``Location``. Everything else is the code the application runs: :class:`McpOAuth` on the
HTTP transport's client, a :class:`TokenStore` (over a keyring held in memory, since a
scenario run is thrown away), and the engine's :class:`ClientSession`.

The host's conformance client (:mod:`hostapp.conformance`, ``hostapp conformance-client``)
hands ``auth/`` scenarios to :func:`run_auth_scenario`; ``python -m hostapp.conformance_auth
URL`` runs them alone. Like that client, this module is a command on top of the engine (it
drives a ``ClientSession``), which is why it sits beside it at the top of the package and
not in :mod:`hostapp.auth`, which the engine itself imports.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx

from hostapp.auth.discovery import METADATA_TIMEOUT
from hostapp.auth.extension_scenarios import extension_sign_in
from hostapp.auth.oauth import McpOAuth, PreregisteredClient
from hostapp.auth.tokens import TokenStore
from hostapp.store.secrets import InMemoryKeyring, SecretStore

SCENARIO_ENV = "MCP_CONFORMANCE_SCENARIO"
CONTEXT_ENV = "MCP_CONFORMANCE_CONTEXT"
PROTOCOL_VERSION_ENV = "MCP_CONFORMANCE_PROTOCOL_VERSION"

#: The client ID metadata document URL the suite expects a client to present (SEP-991).
CONFORMANCE_CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
#: Never listened on: the redirect is read from the authorization endpoint's answer.
HEADLESS_REDIRECT_URI = "http://127.0.0.1:3000/callback"

#: How long the first request (``server/discover``) may take here: the server answers it
#: with 401, and the whole sign-in (metadata, registration, authorization, token) runs inside
#: it before it is sent again, so the engine's 10 s for a server's answer is too short for
#: it on a loaded machine.
SIGNED_IN_DISCOVER_TIMEOUT = 120.0

EXIT_OK = 0
EXIT_FAILED = 1


class FollowRedirectOnce:
    """A :class:`~hostapp.auth.redirect.RedirectHandler` for authorization servers that approve at once."""

    def __init__(self, redirect_uri: str = HEADLESS_REDIRECT_URI):
        self.redirect_uri = redirect_uri

    async def prepare(self, preferred_redirect_uri: str | None = None) -> str:
        return self.redirect_uri

    async def authorize(self, authorization_url: str, state: str) -> Mapping[str, str]:
        async with httpx.AsyncClient(timeout=METADATA_TIMEOUT, follow_redirects=False) as client:
            response = await client.get(authorization_url)
        location = response.headers.get("location")
        if not response.is_redirect or not location:
            raise RuntimeError(f"the authorization endpoint answered HTTP {response.status_code} without a redirect")
        return dict(parse_qsl(urlsplit(location).query, keep_blank_values=True))

    async def close(self) -> None:
        return None


def _preregistered(context: Mapping[str, object]) -> PreregisteredClient | None:
    client_id = context.get("client_id")
    if not isinstance(client_id, str):
        return None
    secret = context.get("client_secret")
    return PreregisteredClient(client_id, secret if isinstance(secret, str) else None)


async def run_auth_scenario(url: str, scenario: str, context: dict, protocol_version: str | None = None) -> int:
    """Play one ``auth/`` scenario against the suite's server at ``url``; the exit code."""
    from hostapp.engine.session import ClientHandlers, ClientSession
    from hostapp.transport.http import StreamableHttpTransport

    with tempfile.TemporaryDirectory(prefix="hostapp-auth-") as home:
        store = TokenStore(SecretStore(Path(home), InMemoryKeyring()))
        extension = extension_sign_in(scenario, context)  # the [extension] auth scenarios
        if extension is not None:
            extension.keep_credentials(store, "conformance")
        auth = McpOAuth(
            "conformance", url, store,
            redirect_handler=FollowRedirectOnce(),
            client_metadata_url=CONFORMANCE_CLIENT_METADATA_URL,
            preregistered=_preregistered(context) if extension is None else None,
            protocol_version=protocol_version,
            settings=extension.settings if extension is not None else None,
        )
        transport = StreamableHttpTransport(url, auth=auth, standalone_stream=False)
        session = ClientSession(transport, ClientHandlers(), discover_timeout=SIGNED_IN_DISCOVER_TIMEOUT)
        try:
            info = await session.connect(protocol_version)
            print(f"connected: {info.protocol_version} ({info.era})", file=sys.stderr)
            tools = await session.list_tools()
            for tool in tools:
                await session.call_tool(tool["name"], {})
        except Exception as exc:  # noqa: BLE001 - the command reports what went wrong
            print(f"scenario {scenario} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return EXIT_FAILED
        finally:
            try:
                await session.close()
            except Exception as exc:  # noqa: BLE001 - the outcome is decided
                print(f"closing the session failed: {type(exc).__name__}", file=sys.stderr)
    print(f"scenario {scenario} done", file=sys.stderr)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hostapp.conformance_auth",
                                     description="Client for the conformance suite's auth/ scenarios.")
    parser.add_argument("url")
    args = parser.parse_args(argv)
    scenario = os.environ.get(SCENARIO_ENV)
    if not scenario:
        parser.error(f"{SCENARIO_ENV} is not set; run this command from the conformance suite")
    context = json.loads(os.environ.get(CONTEXT_ENV) or "{}")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return asyncio.run(run_auth_scenario(args.url, scenario, context, os.environ.get(PROTOCOL_VERSION_ENV)))


if __name__ == "__main__":
    sys.exit(main())
