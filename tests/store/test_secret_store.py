"""The secret store's own rules, on the in-memory keyring (the real one: test_keyring_real.py)."""

from __future__ import annotations

from pathlib import Path

import keyring.errors
import pytest
from keyring.backends import fail, null

from hostapp.store.secrets import (
    CHUNK_BYTES,
    InMemoryKeyring,
    KeyringUnavailable,
    SecretMissing,
    SecretStore,
    home_scope,
    is_secret_ref,
    keyring_key,
    split_chunks,
)

WINDOWS_LIMIT = 2560


def entry_sizes(value: str) -> int:
    """The larger of the UTF-8 and UTF-16 sizes of one keyring entry."""
    return max(len(value.encode("utf-8")), len(value.encode("utf-16-le")))


def test_put_get_delete(tmp_path: Path, memory_keyring: InMemoryKeyring):
    store = SecretStore(tmp_path, memory_keyring)
    ref = store.put("resume_token", "tok-123")
    assert is_secret_ref(ref) and ref.startswith("resume_token:")
    assert "tok-123" not in ref
    assert store.get(ref) == "tok-123"
    store.delete(ref)
    with pytest.raises(SecretMissing, match="no secret stored"):
        store.get(ref)
    store.delete(ref)  # deleting twice is fine
    assert memory_keyring.entries == {}


def test_every_put_gets_a_new_reference(tmp_path: Path, memory_keyring: InMemoryKeyring):
    store = SecretStore(tmp_path, memory_keyring)
    assert store.put("task_id", "same") != store.put("task_id", "same")


def test_replace_swaps_the_reference(tmp_path: Path, memory_keyring: InMemoryKeyring):
    store = SecretStore(tmp_path, memory_keyring)
    old = store.put("handle", "v1")
    new = store.replace(old, "handle", "v2")
    assert store.get(new) == "v2"
    with pytest.raises(SecretMissing):
        store.get(old)
    assert store.get(store.replace(None, "handle", "v3")) == "v3"


@pytest.mark.parametrize("value", ["", "x", "a" * 10_000, "é" * 3000, "🔑" * 1500, "mixed ✓ " * 900])
def test_long_values_are_split_under_the_windows_limit(tmp_path: Path, memory_keyring: InMemoryKeyring, value: str):
    store = SecretStore(tmp_path, memory_keyring)
    ref = store.put("stream_id", value)
    assert store.get(ref) == value
    stored = memory_keyring.entries.values()
    assert all(entry_sizes(entry) < WINDOWS_LIMIT for entry in stored)
    if entry_sizes(value) > CHUNK_BYTES:
        assert len(stored) > 1
    store.delete(ref)
    assert memory_keyring.entries == {}


def test_split_chunks_respects_the_budget():
    for value in ("a" * 2049, "ü" * 700, "𝄞" * 600):
        chunks = split_chunks(value, 100)
        assert "".join(chunks) == value
        assert all(entry_sizes(chunk) <= 100 for chunk in chunks)


def test_a_missing_chunk_is_reported(tmp_path: Path, memory_keyring: InMemoryKeyring):
    store = SecretStore(tmp_path, memory_keyring)
    ref = store.put("task_id", "z" * 5000)
    del memory_keyring.entries[keyring_key(store.scope, ref, 2)]
    with pytest.raises(SecretMissing, match="incomplete"):
        store.get(ref)


def test_keys_are_scoped_by_home(tmp_path: Path, memory_keyring: InMemoryKeyring):
    one = SecretStore(tmp_path / "one", memory_keyring)
    two = SecretStore(tmp_path / "two", memory_keyring)
    assert one.scope != two.scope
    assert home_scope(tmp_path / "one") == home_scope(tmp_path / "x" / ".." / "one")
    ref = one.put("session_id", "sid-1")
    with pytest.raises(SecretMissing):
        two.get(ref)
    two.delete(ref)  # cannot touch the other home's secret
    assert one.get(ref) == "sid-1"
    services = {service for service, _ in memory_keyring.entries}
    assert services == {keyring_key(one.scope, ref)[0]}


def test_bad_kinds_and_references(tmp_path: Path, memory_keyring: InMemoryKeyring):
    store = SecretStore(tmp_path, memory_keyring)
    for kind in ("", "Token", "a b", "x" * 40, "a:b"):
        with pytest.raises(ValueError):
            store.put(kind, "v")
    with pytest.raises(ValueError) as caught:
        store.get("the-secret-itself")
    assert "the-secret-itself" not in str(caught.value)


@pytest.mark.parametrize("backend", [fail.Keyring(), null.Keyring()], ids=["fail", "null"])
def test_no_keyring_is_reported(tmp_path: Path, backend):
    store = SecretStore(tmp_path, backend)
    with pytest.raises(KeyringUnavailable, match="No OS keyring"):
        store.check()
    with pytest.raises(KeyringUnavailable):
        store.put("task_id", "value-that-must-not-leak")
    assert not store.available()
    assert store.describe().startswith("Secrets cannot be stored")


class PlaintextKeyring(InMemoryKeyring):
    """Stands in for keyrings.alt's file backends (not installed here)."""


def test_a_plaintext_backend_counts_as_no_keyring(tmp_path: Path):
    store = SecretStore(tmp_path, PlaintextKeyring())
    with pytest.raises(KeyringUnavailable, match="in a file"):
        store.check()


def test_a_locked_keyring_is_reported_without_the_secret(tmp_path: Path, memory_keyring: InMemoryKeyring):
    store = SecretStore(tmp_path, memory_keyring)
    ref = store.put("task_id", "value-that-must-not-leak")
    memory_keyring.locked = True
    for call in (store.check, lambda: store.put("task_id", "value-that-must-not-leak"), lambda: store.get(ref)):
        with pytest.raises(KeyringUnavailable, match="is locked") as caught:
            call()
        assert "value-that-must-not-leak" not in str(caught.value)


def test_keyring_errors_become_keyring_unavailable(tmp_path: Path, memory_keyring: InMemoryKeyring):
    class Failing(InMemoryKeyring):
        def set_password(self, service, username, password):
            raise keyring.errors.PasswordSetError("the daemon went away")

    store = SecretStore(tmp_path, Failing())
    with pytest.raises(KeyringUnavailable, match="the daemon went away"):
        store.put("task_id", "v")


def test_describe_names_the_place(tmp_path: Path, memory_keyring: InMemoryKeyring):
    assert SecretStore(tmp_path, memory_keyring).describe() == "Secrets are kept in in-memory test keyring."
