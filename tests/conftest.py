"""Suite-wide settings: no test touches the real home folder or needs a screen."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Each test gets its own HOSTAPP_HOME (state, journal, logs and keyring scope)."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOSTAPP_HOME", str(home))
    return home
