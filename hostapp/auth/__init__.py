"""Signing in to remote MCP servers (OAuth 2.1 as the MCP authorization specification asks).

No Qt here: the engine and the command line use it; the window shows its state.
"""

from hostapp.auth.discovery import AuthorizationError
from hostapp.auth.oauth import (
    McpOAuth,
    PreregisteredClient,
    SignInRequired,
    login,
    logout,
)
from hostapp.auth.redirect import LoopbackRedirectListener, RedirectHandler
from hostapp.auth.tokens import TokenStore

__all__ = [
    "AuthorizationError",
    "LoopbackRedirectListener",
    "McpOAuth",
    "PreregisteredClient",
    "RedirectHandler",
    "SignInRequired",
    "TokenStore",
    "login",
    "logout",
]
