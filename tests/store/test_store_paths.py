"""The home directory and the files in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostapp.store import paths


def test_home_dir_follows_hostapp_home_and_is_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    home = tmp_path / "a" / "b"
    monkeypatch.setenv("HOSTAPP_HOME", str(home))
    assert paths.home_dir() == home
    assert home.is_dir()


def test_home_dir_defaults_to_the_platform_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("HOSTAPP_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert paths.home_dir() == tmp_path / "data" / "hostapp"


def test_files_inside_the_home(tmp_path: Path):
    assert paths.journal_path(tmp_path) == tmp_path / "journal.sqlite3"
    logs = paths.log_dir(tmp_path)
    assert logs.parent == tmp_path and logs.is_dir()
