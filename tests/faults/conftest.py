"""Fixtures of the fault tests: the host's time scale, and no keyring at all (a real one,
``keyring_env``, is the suite's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostapp.protocol.timing import HOST_TIME_SCALE_ENV

#: The host processes of the fault tests wait by the product's timing at a tenth: every
#: back-off, cap and default poll ten times shorter, so a 3 s outage crosses the reconnect
#: cap as a 30 s one does in real time (the slow tier runs the long outages in real time).
TIME_SCALE = 0.1


def scaled_env(env: dict[str, str], scale: float = TIME_SCALE) -> dict[str, str]:
    """``env`` for host processes that wait by the product's timing times ``scale``."""
    return {**env, HOST_TIME_SCALE_ENV: str(scale)}


@pytest.fixture
def no_keyring_env(tmp_path: Path) -> dict[str, str]:
    """Environment for host processes without any usable keyring."""
    return scaled_env({"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", "DBUS_SESSION_BUS_ADDRESS": "",
                       "HOME": str(tmp_path)})
