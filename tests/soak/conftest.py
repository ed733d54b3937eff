"""Fixtures of the soak and reboot tests: a real private keyring (handles live in it), and
owner processes that are always stopped at the end."""

from __future__ import annotations

from tests.ui.conftest import qloop  # the window's event loop, for the reboot test's window

__all__ = ["qloop"]
