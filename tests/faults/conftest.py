"""Fixtures of the fault tests: a real keyring in a private D-Bus session, or none at all."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def keyring_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Environment for host processes that use gnome-keyring in a private D-Bus session
    (its own HOME and runtime dir, so no person's keyring is touched)."""
    if not (shutil.which("dbus-daemon") and shutil.which("gnome-keyring-daemon")):
        pytest.skip("dbus-daemon and gnome-keyring-daemon are needed (Debian: dbus, gnome-keyring)")
    root = tmp_path_factory.mktemp("keyring")
    runtime = root / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "HOME": str(root), "XDG_RUNTIME_DIR": str(runtime), "XDG_DATA_HOME": str(root / "data")}
    env.pop("PYTHON_KEYRING_BACKEND", None)
    bus = subprocess.run(["dbus-daemon", "--session", "--fork", "--print-address=1", "--print-pid=1"],
                         capture_output=True, text=True, env=env, timeout=20, check=True)
    address, pid = bus.stdout.split()[:2]
    env["DBUS_SESSION_BUS_ADDRESS"] = address
    try:
        # --unlock reads the login keyring's password from stdin and creates it unlocked.
        subprocess.run(["gnome-keyring-daemon", "--replace", "--unlock", "--components=secrets"],
                       input="fault-tests", capture_output=True, text=True, env=env, timeout=20, check=True)
        yield {k: env[k] for k in ("HOME", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "DBUS_SESSION_BUS_ADDRESS")}
    finally:
        # gnome-keyring-daemon leaves with its bus.
        subprocess.run(["kill", pid], check=False)


@pytest.fixture
def no_keyring_env(tmp_path: Path) -> dict[str, str]:
    """Environment for host processes without any usable keyring."""
    return {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", "DBUS_SESSION_BUS_ADDRESS": "",
            "HOME": str(tmp_path)}
