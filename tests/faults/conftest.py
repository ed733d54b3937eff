"""Fixtures of the fault tests: no keyring at all (a real one, ``keyring_env``, is the suite's)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def no_keyring_env(tmp_path: Path) -> dict[str, str]:
    """Environment for host processes without any usable keyring."""
    return {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", "DBUS_SESSION_BUS_ADDRESS": "",
            "HOME": str(tmp_path)}
