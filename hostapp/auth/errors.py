"""The sign-in failure the engine handles without loading the OAuth client (authlib)."""

from __future__ import annotations


class SignInRequired(Exception):
    """The server needs a person to sign in (again), and none can right now.

    ``server_name`` names the configured server; ``reason`` says why, in words for a
    person. Never carries a token.
    """

    def __init__(self, server_name: str, reason: str):
        super().__init__(f"{server_name} needs sign-in: {reason}")
        self.server_name = server_name
        self.reason = reason
