"""Operation handles kept many to one keyring entry on the Secret Service.

GNOME Keyring rewrites its whole keyring file on every change and looks items up in time
that grows with their number, so one entry per handle made every write and the start-up
read slower with each operation kept (23 ms per write at 1,000 entries; tens of seconds to
read 10,000). So the handles of a home (the kinds in :data:`SHARDED_KINDS`) are kept in
*shard* entries named ``handles:<hex>``, each a JSON object of reference -> value, up to
:data:`SHARD_MAX_SECRETS` handles or about :data:`SHARD_MAX_BYTES` bytes. Every handle
keeps its own reference; which entry holds it is this module's business.

Several processes of one home write shards; they take turns under a lock file in the home
(:class:`ShardLock`) whose text changes with every rewrite, so a process knows whether the
shards it holds in memory are still current.

:class:`hostapp.store.secrets.SecretStore` decides when to shard (a sharded kind, on the
Secret Service) and hands :class:`ShardedHandles` its open Secret Service connection.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self

from hostapp.store.secret_refs import (
    SecretMissing,
    first_entry,
    is_secret_ref,
    keyring_key,
    keyring_service,
    kind_of,
    new_ref,
    parse_first_entry,
)

#: Kinds kept many to one keyring entry on the Secret Service.
SHARDED_KINDS = frozenset({"handle"})
#: The kind of the entries that hold them.
SHARD_KIND = "handles"
#: At most this many secrets, and about this many bytes, per shard entry: small enough that
#: rewriting one to add or drop a handle costs little next to the daemon's own file write.
SHARD_MAX_SECRETS = 256
SHARD_MAX_BYTES = 64 * 1024
#: In the home: held while a process rewrites shard entries; its text changes with every
#: rewrite, so a process knows whether the shards it holds in memory are still current.
SHARD_LOCK_FILE = "keyring-shards.lock"


class ShardWriter(Protocol):
    """The Secret Service calls the shards need, over a connection the caller holds open."""

    def read_service(self, service: str) -> dict[str, str]: ...

    def create(self, service: str, username: str, value: str, *, replace: bool = False) -> None: ...

    def delete_entry(self, service: str, username: str) -> None: ...


class HandleShards:
    """The shard entries of one home, in memory: shard name -> {reference: value}.

    A handle is added to the shard last added to while it has room (else to any with
    room, else to a new one) and removed from whichever holds it; an emptied shard is
    dropped (its entry is then deleted). ``token`` is the shard lock's text when these
    were current.
    """

    def __init__(self, secrets: dict[str, dict[str, str]]) -> None:
        self.secrets = secrets
        self.where = {ref: shard for shard, held in secrets.items() for ref in held}
        self.size = {shard: _shard_bytes(held) for shard, held in secrets.items()}
        self.token: str | None = None
        self._open: str | None = None

    @staticmethod
    def load(entries: dict[str, str]) -> dict[str, dict[str, str]]:
        """The shard entries among a keyring service's ``username -> value`` entries."""
        shards: dict[str, dict[str, str]] = {}
        for username, value in entries.items():
            if kind_of(username) != SHARD_KIND or not is_secret_ref(username):
                continue
            try:
                held = json.loads(parse_first_entry(value, username)[1])
            except (SecretMissing, ValueError):
                held = None
            if isinstance(held, dict):
                shards[username] = {k: v for k, v in held.items() if is_secret_ref(k) and isinstance(v, str)}
        return shards

    @classmethod
    def parse(cls, entries: dict[str, str]) -> dict[str, str]:
        """Every handle held in the shard entries among ``entries``, by reference."""
        return {ref: value for held in cls.load(entries).values() for ref, value in held.items()}

    def place(self, ref: str, value: str) -> str:
        """Add a handle; return the shard that now holds it."""
        cost = _entry_bytes(ref, value)
        shard = self._open
        if shard is None or not self._has_room(shard, cost):
            shard = next((s for s in self.secrets if self._has_room(s, cost)), None)
            if shard is None:
                shard = new_ref(SHARD_KIND)
                self.secrets[shard], self.size[shard] = {}, 2
            self._open = shard
        self.secrets[shard][ref] = value
        self.size[shard] += cost
        self.where[ref] = shard
        return shard

    def remove(self, ref: str) -> str | None:
        """Drop a handle; return the shard that held it, or None if none did."""
        shard = self.where.pop(ref, None)
        if shard is None:
            return None
        value = self.secrets[shard].pop(ref)
        self.size[shard] -= _entry_bytes(ref, value)
        if not self.secrets[shard]:
            del self.secrets[shard], self.size[shard]
            if self._open == shard:
                self._open = None
        return shard

    def _has_room(self, shard: str, cost: int) -> bool:
        held = self.secrets[shard]
        return not held or (len(held) < SHARD_MAX_SECRETS and self.size[shard] + cost <= SHARD_MAX_BYTES)


def _shard_bytes(held: dict[str, str]) -> int:
    return 2 + sum(_entry_bytes(ref, value) for ref, value in held.items())


def _entry_bytes(ref: str, value: str) -> int:
    """About what one handle adds to its shard's JSON (quotes, colon, comma, escapes)."""
    return len(ref) + len(value) + 8


class ShardLock:
    """The home's shard lock: an exclusive ``flock`` on a file whose text (a random token)
    changes with every shard rewrite. POSIX only, as the Secret Service is."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.token: str | None = None
        self._fd: int | None = None

    def __enter__(self) -> Self:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            self.token = os.pread(self._fd, 64, 0).decode("ascii", "replace").strip() or None
        except BaseException:
            os.close(self._fd)
            raise
        return self

    def renew(self) -> str:
        """Write a new token: whoever read the shards before must read them again."""
        token = uuid.uuid4().hex
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, token.encode("ascii"), 0)
        self.token = token
        return token

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the flock
            self._fd = None


class ShardedHandles:
    """One home's sharded handles: writes them in as few entry rewrites as shards touched.

    Keeps the shards as last read or written; they are read anew from the keyring unless
    the lock file says this process wrote last.
    """

    def __init__(self, home: Path, scope: str) -> None:
        self._lock_path = Path(home) / SHARD_LOCK_FILE
        self._scope = scope
        self._shards: HandleShards | None = None

    def write(
        self,
        writer: ShardWriter,
        kind: str,
        values: list[str],
        deletes: list[str],
        delete_separate: Callable[[str], None],
    ) -> list[str]:
        """Store ``values`` under new references of ``kind`` (returned in order) and delete
        ``deletes``; each shard touched is rewritten once.

        Under the home's shard lock (other processes of the same home write shards too).
        The daemon replaces an entry's secret in one step, so a crash leaves every shard
        either as it was or as it was to become. A reference not found in any shard is an
        entry of its own (written before shards existed): ``delete_separate`` deletes it.
        """
        service = keyring_service(self._scope)
        with ShardLock(self._lock_path) as lock:
            shards = self._shards
            if shards is None or shards.token is None or shards.token != lock.token:
                shards = self._shards = HandleShards(HandleShards.load(writer.read_service(service)))
            try:
                refs: list[str] = []
                touched: list[str] = []
                for value in values:
                    ref = new_ref(kind)
                    where = shards.place(ref, value)
                    if where not in touched:
                        touched.append(where)
                    refs.append(ref)
                separate: list[str] = []
                for ref in deletes:
                    removed_from = shards.remove(ref)
                    if removed_from is None:
                        separate.append(ref)
                    elif removed_from not in touched:
                        touched.append(removed_from)
                if touched:
                    # A new token before the first write: a process that read the shards
                    # before re-reads them even if this one stops half-way.
                    shards.token = None
                    token = lock.renew()
                    for where in touched:
                        self._write_shard(writer, where, shards.secrets.get(where))
                    shards.token = token
            except BaseException:
                self._shards = None  # the keyring may differ from the copy in memory
                raise
            for ref in separate:
                delete_separate(ref)
        return refs

    def _write_shard(self, writer: ShardWriter, where: str, secrets: dict[str, str] | None) -> None:
        key = keyring_key(self._scope, where, 0)
        if secrets:
            writer.create(*key, first_entry(1, json.dumps(secrets, separators=(",", ":"))), replace=True)
        else:
            writer.delete_entry(*key)
