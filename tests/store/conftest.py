"""Fixtures for the store tests: a journal on a real file, and a real private keyring."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hostapp.store.journal import OperationJournal
from hostapp.store.secrets import InMemoryKeyring
from tests.support.keyring_daemon import KeyringDaemon, private_keyring


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[OperationJournal]:
    journal = OperationJournal(tmp_path / "journal.sqlite3")
    yield journal
    journal.close()


@pytest.fixture
def memory_keyring() -> InMemoryKeyring:
    return InMemoryKeyring()


@pytest.fixture
def locked_keyring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyringDaemon]:
    """A keyring of its own whose collection is locked (it cannot be unlocked headless)."""
    with private_keyring(tmp_path_factory.mktemp("locked-keyring")) as daemon:
        daemon.lock()
        assert daemon.is_locked()
        yield daemon
