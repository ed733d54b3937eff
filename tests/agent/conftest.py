"""Fixtures for the agent tests: a real private keyring, and owner processes that are
always stopped, whatever the test did to them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agents import Agents, agents_fixture
from tests.support.keyring_daemon import KeyringDaemon, private_keyring

__all__ = ["Agents"]


@pytest.fixture(scope="session")
def real_keyring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyringDaemon]:
    with private_keyring(tmp_path_factory.mktemp("agent-keyring")) as daemon:
        yield daemon


@pytest.fixture
def agents(isolated_home: Path, real_keyring: KeyringDaemon) -> Iterator[Agents]:
    yield from agents_fixture(isolated_home, real_keyring)
