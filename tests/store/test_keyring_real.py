"""The secret store on a real Secret Service (gnome-keyring on a private D-Bus)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from keyring.backends import SecretService

from hostapp.store.journal import OperationJournal, OperationRecord, ServerConfig
from hostapp.store.secrets import (
    KeyringUnavailable,
    SecretMissing,
    SecretStore,
    keyring_key,
)
from tests.support.keyring_daemon import KeyringDaemon, home_entries

SECRET = "resume-7f3e9a1c-very-private-token"


def test_put_get_delete(real_keyring: KeyringDaemon, tmp_path: Path):
    store = SecretStore(tmp_path)  # the backend keyring selects: the private Secret Service
    store.check()
    ref = store.put("resume_token", SECRET)
    assert store.get(ref) == SECRET
    assert real_keyring.backend().get_password(*keyring_key(store.scope, ref)) == "1:" + SECRET
    store.delete(ref)
    with pytest.raises(SecretMissing):
        store.get(ref)
    assert "Secret Service" in store.describe()


def test_a_10_kb_value_is_one_entry_and_earlier_chunked_ones_still_read(real_keyring: KeyringDaemon, tmp_path: Path):
    store = SecretStore(tmp_path, SecretService.Keyring())
    value = "".join(chr(0x41 + i % 26) for i in range(10_000)) + "✓"
    ref = store.put("stream_id", value)
    assert store.get(ref) == value
    backend = real_keyring.backend()
    # The Secret Service has no size limit: one entry (chunks are for the Credential Manager).
    assert backend.get_password(*keyring_key(store.scope, ref, 0)) == "1:" + value
    assert backend.get_password(*keyring_key(store.scope, ref, 1)) is None
    store.delete(ref)
    assert backend.get_password(*keyring_key(store.scope, ref, 0)) is None
    # A value written in chunks (by keyring's own backend, as earlier versions did) reads
    # whole, in a batch too, and is deleted whole.
    chunked = "0123456789abcdef" * 200
    old_ref = "stream_id:" + "e" * 32
    parts = [chunked[i:i + 512] for i in range(0, len(chunked), 512)]
    for index in range(len(parts) - 1, 0, -1):
        backend.set_password(*keyring_key(store.scope, old_ref, index), parts[index])
    backend.set_password(*keyring_key(store.scope, old_ref, 0), f"{len(parts)}:{parts[0]}")
    assert store.get(old_ref) == chunked
    assert store.get_many([old_ref]) == {old_ref: chunked}
    store.delete(old_ref)
    assert all(backend.get_password(*keyring_key(store.scope, old_ref, i)) is None for i in range(len(parts)))


def test_a_fixed_reference_is_replaced_in_place(real_keyring: KeyringDaemon, tmp_path: Path):
    store = SecretStore(tmp_path, SecretService.Keyring())
    ref = store.fixed_ref("positions")
    assert ref == SecretStore(tmp_path).fixed_ref("positions") != SecretStore(tmp_path / "other").fixed_ref("positions")
    store.put_at(ref, "one")
    store.put_at(ref, "two")
    assert store.get(ref) == "two"
    assert len(list(real_keyring.backend().get_preferred_collection().search_items(
        {"service": keyring_key(store.scope, ref)[0], "username": ref}))) == 1


def test_two_homes_do_not_share_secrets(real_keyring: KeyringDaemon, tmp_path: Path):
    one, two = SecretStore(tmp_path / "one"), SecretStore(tmp_path / "two")
    ref = one.put("task_id", SECRET)
    with pytest.raises(SecretMissing):
        two.get(ref)
    two.delete(ref)
    assert one.get(ref) == SECRET


def test_a_subprocess_reaches_the_same_keyring(real_keyring: KeyringDaemon, tmp_path: Path):
    ref = SecretStore(tmp_path).put("session_id", SECRET)
    code = (
        "import sys; from pathlib import Path; from hostapp.store.secrets import SecretStore;"
        "print(SecretStore(Path(sys.argv[1])).get(sys.argv[2]) == sys.argv[3])"
    )
    env = {**os.environ, **real_keyring.env}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path), ref, SECRET], env=env, capture_output=True, text=True, timeout=60,
        check=False,
    )
    assert done.stdout.strip() == "True", done.stderr


def test_a_locked_collection_is_reported_clearly(locked_keyring: KeyringDaemon, tmp_path: Path):
    store = SecretStore(tmp_path)
    with pytest.raises(KeyringUnavailable, match="is locked") as caught:
        store.check()
    assert "Unlock it" in str(caught.value)
    with pytest.raises(KeyringUnavailable, match="is locked") as caught:
        store.put("task_id", SECRET)
    assert SECRET not in str(caught.value)
    assert "locked" in store.describe()


def test_an_unreachable_secret_service_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={tmp_path / 'no-bus'}")
    store = SecretStore(tmp_path, SecretService.Keyring())
    with pytest.raises(KeyringUnavailable, match="cannot be reached"):
        store.check()
    with pytest.raises(KeyringUnavailable):
        store.put("task_id", SECRET)


async def test_no_secret_reaches_the_journal_files(real_keyring: KeyringDaemon, tmp_path: Path):
    home = tmp_path / "home"
    store = SecretStore(home)
    journal = OperationJournal(home / "journal.sqlite3")
    try:
        header_ref = store.put("header", "Bearer " + SECRET)
        journal.add_server(ServerConfig("remote", "http", url="http://127.0.0.1:1/mcp",
                                        secret_headers={"Authorization": header_ref}))
        op = OperationRecord("op1", "remote", "tools/call", {"name": "slow"})
        await journal.create_operation(op)
        handle_ref = store.put("task_id", SECRET)
        await journal.update_operation("op1", status="running", handle_ref=handle_ref, handle={"poll_ms": 100})
        journal.update_server("remote", session_ref=store.put("session_id", SECRET + "-sid"))
        journal.record_progress("op1", 1.0)
        await journal.flush()

        files = [p for p in home.iterdir() if p.name.startswith("journal.sqlite3")]
        assert any(p.name.endswith("-wal") for p in files)  # checked while the WAL holds the writes
        assert _grep(files, handle_ref.encode())  # the reference is there, so the grep can find things
        assert not _grep(files, SECRET.encode())
        assert not _grep(files, SECRET.encode("utf-16-le"))
    finally:
        journal.close()
    files = [p for p in home.iterdir() if p.name.startswith("journal.sqlite3")]
    assert not _grep(files, SECRET.encode())
    assert store.get(handle_ref) == SECRET


def _grep(files: list[Path], needle: bytes) -> bool:
    return any(needle in path.read_bytes() for path in files)


def test_get_many_reads_every_value_over_one_connection(real_keyring, tmp_path):
    from hostapp.store.secrets import SecretStore

    store = SecretStore(tmp_path, backend=real_keyring.backend())
    refs = {store.put("handle", f"value-{i}" + "x" * (3000 if i == 3 else 0)): i for i in range(6)}
    gone = store.put("handle", "deleted")
    store.delete(gone)
    values = store.get_many([*refs, gone])
    assert set(values) == set(refs)
    for ref, i in refs.items():
        assert values[ref] == store.get(ref)
        assert values[ref].startswith(f"value-{i}")


def test_writes_share_a_connection_and_a_lock_after_opening_is_reported(tmp_path: Path):
    from tests.support.keyring_daemon import private_keyring

    with private_keyring(tmp_path / "keyring") as daemon:
        store = SecretStore(tmp_path / "home", SecretService.Keyring())
        refs = [store.put("task_id", f"{SECRET}-{i}") for i in range(3)]
        writer = store._writer
        assert writer is not None
        refs.append(store.put("task_id", SECRET))
        assert store._writer is writer  # one connection and one encryption session for all
        # Written as keyring's own backend writes: it finds them.
        assert daemon.backend().get_password(*keyring_key(store.scope, refs[0])) == f"1:{SECRET}-0"
        store.delete(refs[1])
        assert store.get_many(refs) == {refs[0]: f"{SECRET}-0", refs[2]: f"{SECRET}-2", refs[3]: SECRET}
        daemon.lock()
        with pytest.raises(KeyringUnavailable, match="is locked") as caught:
            store.put("task_id", SECRET)
        assert SECRET not in str(caught.value)
        assert store._writer is None  # dropped: the next write opens (and checks) anew
        with pytest.raises(KeyringUnavailable, match="is locked"):
            store.put("task_id", SECRET)
        store.close()


def _entries(store: SecretStore) -> dict[str, str]:
    return home_entries(store.scope)


def test_handles_are_kept_many_to_an_entry(real_keyring: KeyringDaemon, tmp_path: Path):
    from hostapp.store.secrets import SHARD_KIND, SHARD_MAX_SECRETS

    store = SecretStore(tmp_path, SecretService.Keyring())
    count = SHARD_MAX_SECRETS + 44
    refs = store.write_batch("handle", [f"{SECRET}-{i}" for i in range(count)])
    assert len(refs) == len(set(refs)) == count and all(r.startswith("handle:") for r in refs)
    entries = _entries(store)
    # Two entries hold them all, and no entry is named after a handle.
    assert len(entries) == 2 and all(name.startswith(SHARD_KIND + ":") for name in entries)
    # A fresh store (another process) reads them, in one batch and one by one.
    other = SecretStore(tmp_path, SecretService.Keyring())
    assert other.get_many(refs) == {ref: f"{SECRET}-{i}" for i, ref in enumerate(refs)}
    assert other.get(refs[7]) == f"{SECRET}-7"
    # Other kinds are entries of their own, as before.
    header = store.put("header", "Bearer " + SECRET)
    assert len(_entries(store)) == 3
    # Deleting and adding in one batch; a deleted handle is gone for every reader.
    new = store.write_batch("handle", ["fresh"], refs[:10])
    assert other.get_many([*refs[:11], *new]) == {refs[10]: f"{SECRET}-10", new[0]: "fresh"}
    with pytest.raises(SecretMissing):
        other.get(refs[0])
    # Emptied shards leave the keyring.
    store.write_batch("handle", [], [*refs[10:], *new])
    assert list(_entries(store)) == [header]
    store.delete(header)
    store.close()
    other.close()


def test_two_processes_writing_handles_lose_none_of_each_others(real_keyring: KeyringDaemon, tmp_path: Path):
    # Two stores of one home, each with the shards it read held in memory: each write of one
    # must see the other's (the lock file tells a store that its copy is out of date).
    one = SecretStore(tmp_path, SecretService.Keyring())
    two = SecretStore(tmp_path, SecretService.Keyring())
    a = one.put("handle", "from-one-a")
    b = two.put("handle", "from-two-b")
    c = one.put("handle", "from-one-c")
    two.delete(a)
    d = one.put("handle", "from-one-d")
    assert SecretStore(tmp_path).get_many([a, b, c, d]) == {b: "from-two-b", c: "from-one-c", d: "from-one-d"}
    # And from a real second process, while this one keeps its copy.
    code = ("import sys; from pathlib import Path; from hostapp.store.secrets import SecretStore; "
            f"s = SecretStore(Path(sys.argv[1])); s.delete({c!r}); print(s.put('handle', 'from-child'))")
    child = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env={**os.environ, **real_keyring.env},
                           capture_output=True, text=True, timeout=60, check=True)
    e = child.stdout.strip()
    f = one.put("handle", "from-one-f")
    assert SecretStore(tmp_path).get_many([b, c, d, e, f]) == {
        b: "from-two-b", d: "from-one-d", e: "from-child", f: "from-one-f"}
    one.write_batch("handle", [], [b, d, e, f])
    assert _entries(one) == {}


def test_handles_kept_one_per_entry_earlier_still_read_and_delete(real_keyring: KeyringDaemon, tmp_path: Path):
    store = SecretStore(tmp_path, SecretService.Keyring())
    backend = real_keyring.backend()
    old = "handle:" + "a" * 32
    backend.set_password(*keyring_key(store.scope, old), "1:" + SECRET)
    new = store.put("handle", "new")
    assert store.get_many([old, new]) == {old: SECRET, new: "new"}
    assert store.get(old) == SECRET
    store.write_batch("handle", [], [old, new])
    assert backend.get_password(*keyring_key(store.scope, old)) is None
    assert _entries(store) == {}
