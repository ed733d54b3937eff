"""Fixtures of the command line tests: a real keyring in a private D-Bus session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.keyring_daemon import missing_programs, start_keyring_daemon


@pytest.fixture(scope="session")
def keyring_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Environment for host processes that use gnome-keyring on a private D-Bus session bus
    (what resumes an operation after a restart is kept there)."""
    missing = missing_programs()
    if missing:
        pytest.skip(f"the private keyring needs {', '.join(missing)} (Debian: dbus, gnome-keyring)")
    daemon = start_keyring_daemon(tmp_path_factory.mktemp("keyring"))
    try:
        yield dict(daemon.env)
    finally:
        daemon.stop()
