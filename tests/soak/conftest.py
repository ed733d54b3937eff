"""Fixtures of the soak and reboot tests: a real private keyring (handles live in it), and
owner processes that are always stopped at the end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agents import Agents, agents_fixture
from tests.support.keyring_daemon import KeyringDaemon, missing_programs, start_keyring_daemon
from tests.ui.conftest import qloop  # the window's event loop, for the reboot test's window

__all__ = ["qloop"]


@pytest.fixture(scope="session")
def real_keyring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyringDaemon]:
    missing = missing_programs()
    if missing:
        pytest.skip(f"the private keyring needs {', '.join(missing)} (Debian: dbus, gnome-keyring)")
    daemon = start_keyring_daemon(tmp_path_factory.mktemp("soak-keyring"))
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture
def agents(isolated_home: Path, real_keyring: KeyringDaemon) -> Iterator[Agents]:
    yield from agents_fixture(isolated_home, real_keyring)
