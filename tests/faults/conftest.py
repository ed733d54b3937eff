"""Fixtures of the fault tests: a real keyring in a private D-Bus session, or none at all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.keyring_daemon import missing_programs, start_keyring_daemon


@pytest.fixture(scope="session")
def keyring_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Environment for host processes that use gnome-keyring on a private D-Bus session bus
    (no person's keyring is touched)."""
    missing = missing_programs()
    if missing:
        pytest.skip(f"the private keyring needs {', '.join(missing)} (Debian: dbus, gnome-keyring)")
    daemon = start_keyring_daemon(tmp_path_factory.mktemp("keyring"))
    try:
        yield dict(daemon.env)
    finally:
        daemon.stop()


@pytest.fixture
def no_keyring_env(tmp_path: Path) -> dict[str, str]:
    """Environment for host processes without any usable keyring."""
    return {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", "DBUS_SESSION_BUS_ADDRESS": "",
            "HOME": str(tmp_path)}
