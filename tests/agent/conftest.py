"""Fixtures for the agent tests: a real private keyring, and owner processes that are
always stopped, whatever the test did to them."""

from __future__ import annotations

from tests.support.agents import Agents

__all__ = ["Agents"]
