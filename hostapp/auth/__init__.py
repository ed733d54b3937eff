"""Signing in to remote MCP servers (OAuth 2.1 as the MCP authorization specification asks).

No Qt here: the engine and the command line use it; the window shows its state.

Its names load on first use: the OAuth client (authlib, JOSE) takes a tenth of a second to
import, and most starts of the app connect no server that needs it.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "AuthSettings": "hostapp.auth.settings",
    "AuthorizationError": "hostapp.auth.discovery",
    "LoopbackRedirectListener": "hostapp.auth.redirect",
    "McpOAuth": "hostapp.auth.oauth",
    "PreregisteredClient": "hostapp.auth.oauth",
    "RedirectHandler": "hostapp.auth.redirect",
    "SignInRequired": "hostapp.auth.errors",
    "TokenStore": "hostapp.auth.tokens",
    "login": "hostapp.auth.oauth",
    "logout": "hostapp.auth.oauth",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'hostapp.auth' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
