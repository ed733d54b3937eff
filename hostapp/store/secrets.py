"""Secrets in the OS keyring; the journal keeps only references to them.

Resume tokens, stream ids, task ids, operation tokens, session ids and header or
environment values marked secret grant access to a person's work on a server. They go to
the operating system's keyring through :mod:`keyring` (Secret Service on Linux, the
Keychain on macOS, the Credential Manager on Windows) and nowhere else: SQLite stores an
opaque reference such as ``"task_id:6f1c…"``, logs and exception texts mention at most
that reference.

There is no plaintext fallback. When no usable keyring exists, or it is locked,
:class:`KeyringUnavailable` says so in words a person can act on; the caller marks the
operations that needed a secret as not resumable and shows the message (CLI line, GUI
banner).

Two homes (``HOSTAPP_HOME``) never share secrets: every keyring entry is named from a
scope derived from the home's absolute path, in :func:`keyring_key` and nowhere else.

Values longer than the smallest platform limit (the Windows Credential Manager takes at
most 2,560 bytes per entry, stored as UTF-16) are split into chunks of at most
:data:`CHUNK_BYTES` and joined back on reading.

Operation handles, one or more per operation in flight, are kept many to one entry on the
Secret Service: :mod:`hostapp.store.secret_shards`. References, entry names and the entry
format are in :mod:`hostapp.store.secret_refs`; the names other modules use from both are
importable from here.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Protocol, TypeAlias

import keyring
import keyring.errors
from keyring.backend import KeyringBackend
from keyring.backends import SecretService, chainer, fail, null

from hostapp.store.secret_refs import (
    CHUNK_BYTES,
    KNOWN_KINDS,
    SecretMissing,
    first_entry,
    home_scope,
    is_secret_ref,
    keyring_key,
    keyring_service,
    kind_of,
    new_ref,
    parse_first_entry,
    split_chunks,
    validate_kind,
    validate_ref,
)
from hostapp.store.secret_shards import (
    SHARD_KIND,
    SHARD_LOCK_FILE,
    SHARD_MAX_BYTES,
    SHARD_MAX_SECRETS,
    SHARDED_KINDS,
    HandleShards,
    ShardedHandles,
)

__all__ = [
    "CHUNK_BYTES",
    "KNOWN_KINDS",
    "SHARDED_KINDS",
    "SHARD_KIND",
    "SHARD_LOCK_FILE",
    "SHARD_MAX_BYTES",
    "SHARD_MAX_SECRETS",
    "InMemoryKeyring",
    "KeyringUnavailable",
    "SecretBackend",
    "SecretMissing",
    "SecretStore",
    "home_scope",
    "is_secret_ref",
    "keyring_key",
    "keyring_service",
    "split_chunks",
]

class KeyringUnavailable(Exception):
    """No usable OS keyring (missing, locked, or only a plaintext/null backend).

    The message is meant for a person and says what to do; it never contains a secret.
    """


class SecretBackend(Protocol):
    """The three calls :class:`SecretStore` needs; every ``keyring`` backend has them."""

    def get_password(self, service: str, username: str) -> str | None: ...

    def set_password(self, service: str, username: str, password: str) -> None: ...

    def delete_password(self, service: str, username: str) -> None: ...


class InMemoryKeyring:
    """A keyring held in a dict: a test aid for unit tests that need no real keyring.

    Not a ``keyring`` backend subclass on purpose, so ``keyring`` can never pick it as
    the system keyring. ``locked = True`` makes every call fail like a locked keyring.
    ``entries`` is the raw ``(service, username) -> value`` map, for inspection.
    """

    name = "in-memory test keyring"

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], str] = {}
        self.locked = False
        self._lock = threading.Lock()

    def _require_unlocked(self) -> None:
        if self.locked:
            raise keyring.errors.KeyringLocked("Failed to unlock the collection!")

    def get_password(self, service: str, username: str) -> str | None:
        self._require_unlocked()
        with self._lock:
            return self.entries.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self._require_unlocked()
        with self._lock:
            self.entries[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self._require_unlocked()
        with self._lock:
            if self.entries.pop((service, username), None) is None:
                raise keyring.errors.PasswordDeleteError("No such password!")


# Display names for the keyring backends a desktop has, by keyring's backend name.
_FRIENDLY_NAMES = {
    "SecretService Keyring": "the Secret Service (GNOME Keyring, KWallet)",
    "kwallet DBusKeyring": "KWallet",
    "macOS Keyring": "the macOS Keychain",
    "Windows WinVaultKeyring": "the Windows Credential Manager",
}

_NO_KEYRING_HINT = (
    "Install and start a keyring service (GNOME Keyring, KWallet, or any Secret Service "
    "provider on Linux; the Keychain on macOS and the Credential Manager on Windows are built in), "
    "then restart hostapp. Until then, operations that need a server-issued token cannot be "
    "resumed after a restart."
)


def _writing_backend(backend: object) -> object:
    """The backend that actually receives writes (a chainer writes to its first one)."""
    if isinstance(backend, chainer.ChainerBackend):
        chained = backend.backends
        return chained[0] if chained else fail.Keyring()  # type: ignore[no-untyped-call]  # keyring is untyped
    return backend


def _unusable_reason(backend: object) -> str | None:
    """Why ``backend`` must not hold secrets, or None when it may."""
    if isinstance(backend, (fail.Keyring, null.Keyring)):
        return "No OS keyring is available to store secrets."
    module = type(backend).__module__
    if module.startswith("keyrings.alt") or "plaintext" in type(backend).__name__.lower():
        # keyrings.alt backends write files next to the data; that is the plaintext
        # fallback this project refuses.
        return f"The configured keyring ({module}) keeps secrets in a file, not in the OS keyring."
    if isinstance(backend, KeyringBackend):
        try:
            priority = type(backend).priority
        except Exception as exc:  # noqa: BLE001 - keyring signals "not viable here" by raising
            return f"The OS keyring cannot be reached ({exc})."
        if priority <= 0:
            return "No OS keyring is available to store secrets."
    return None


def _secret_service_locked(backend: SecretService.Keyring) -> bool:
    """Whether the collection the backend writes to is locked, asked without prompting."""
    import secretstorage

    with closing(secretstorage.dbus_init()) as connection:
        path = getattr(backend, "preferred_collection", secretstorage.collection.DEFAULT_COLLECTION)
        try:
            # Not get_default_collection(): it would create one behind a prompt.
            collection = secretstorage.Collection(connection, path)
        except secretstorage.exceptions.ItemNotFoundException:
            raise KeyringUnavailable(
                "The Secret Service has no default keyring collection. Create one (for example "
                "a 'Login' keyring in your desktop's password manager) and make it the default. "
                + _NO_KEYRING_HINT
            ) from None
        return collection.is_locked()


class SecretStore:
    """Puts secrets into the OS keyring and hands back references for the journal.

    ``backend`` is any ``keyring`` backend (or :class:`InMemoryKeyring` in unit tests);
    None means whatever ``keyring`` selects at the time of each call. Calls may block
    (a desktop keyring can show an unlock prompt), so async code runs them in a thread.
    """

    def __init__(self, home: Path, backend: SecretBackend | None = None):
        self.home = Path(home)
        self.scope = home_scope(self.home)
        self._backend = backend
        # Writes through the Secret Service share one D-Bus connection and encryption
        # session (see _SharedSecretService); opened at the first write, dropped on failure.
        self._writer: _SharedSecretService | None = None
        self._writer_lock = threading.Lock()
        # The sharded handles, as last read or written by this process.
        self._sharded = ShardedHandles(self.home, self.scope)

    @property
    def backend(self) -> SecretBackend:
        if self._backend is not None:
            return self._backend
        try:
            return keyring.get_keyring()
        except Exception as exc:  # noqa: BLE001 - whatever it is, the person is told in words
            # The library picks its backend at the first call and may raise anything there:
            # a Secret Service named by PYTHON_KEYRING_BACKEND whose daemon is gone raises a
            # bare RuntimeError ("neither running nor activatable through D-Bus").
            raise KeyringUnavailable(f"The keyring could not be opened ({type(exc).__name__}: {exc}). "
                                     f"{_NO_KEYRING_HINT}") from None

    # -- availability -----------------------------------------------------------------

    def check(self) -> None:
        """Raise :class:`KeyringUnavailable` unless secrets can be stored right now."""
        backend = _writing_backend(self.backend)
        reason = _unusable_reason(backend)
        if reason is not None:
            raise KeyringUnavailable(f"{reason} {_NO_KEYRING_HINT}")
        if isinstance(backend, SecretService.Keyring):
            try:
                locked = _secret_service_locked(backend)
            except KeyringUnavailable:
                raise
            except Exception as exc:
                raise KeyringUnavailable(
                    f"The Secret Service cannot be reached over D-Bus ({type(exc).__name__}: {exc}). "
                    f"{_NO_KEYRING_HINT}"
                ) from exc
        else:
            locked = bool(getattr(backend, "locked", False))
        if locked:
            raise KeyringUnavailable(_locked_message(self.describe_backend(backend)))

    def available(self) -> bool:
        """True when :meth:`check` passes."""
        try:
            self.check()
        except KeyringUnavailable:
            return False
        return True

    def describe(self) -> str:
        """Where secrets live, in one sentence for the UI (never raises)."""
        backend = _writing_backend(self.backend)
        where = self.describe_backend(backend)
        try:
            self.check()
        except KeyringUnavailable as exc:
            return f"Secrets cannot be stored: {exc}"
        return f"Secrets are kept in {where}."

    @staticmethod
    def describe_backend(backend: object) -> str:
        name = getattr(type(backend), "name", None) or getattr(backend, "name", None) or type(backend).__name__
        return _FRIENDLY_NAMES.get(str(name), str(name))

    # -- secrets ----------------------------------------------------------------------

    def put(self, kind: str, value: str) -> str:
        """Store ``value`` and return a new reference ``"<kind>:<32 hex>"`` for the journal."""
        return self.write_batch(kind, [value])[0]

    def write_batch(self, kind: str, values: list[str], deletes: list[str] = ()) -> list[str]:  # type: ignore[assignment]
        """Store each of ``values`` under a new reference of ``kind`` (returned in order) and
        delete the secrets under ``deletes``: for the kinds in :data:`SHARDED_KINDS`, on the
        Secret Service, in as few keyring writes as the shards touched. Raises when a write
        failed (the new references are then not to be used)."""
        validate_kind(kind)
        if not all(isinstance(value, str) for value in values):
            raise TypeError("secret values are strings")
        for ref in deletes:
            validate_ref(ref)
        backend = self.backend
        if kind in SHARDED_KINDS and isinstance(backend, SecretService.Keyring):
            return self._write_shards(backend, kind, list(values), list(deletes))
        refs = []
        for value in values:
            ref = new_ref(kind)
            self._write(ref, value)
            refs.append(ref)
        for ref in deletes:
            self.delete(ref)
        return refs

    def fixed_ref(self, kind: str) -> str:
        """A reference of ``kind`` that is the same at every start of this home (for a
        secret the journal does not point at, such as the engine's stream positions)."""
        validate_kind(kind)
        return f"{kind}:{hashlib.sha256(f'{self.scope}/{kind}'.encode()).hexdigest()[:32]}"

    def put_at(self, ref: str, value: str) -> None:
        """Store ``value`` under ``ref``, replacing what was there."""
        validate_ref(ref)
        if not isinstance(value, str):
            raise TypeError("secret values are strings")
        backend = self.backend
        if isinstance(backend, SecretService.Keyring) and kind_of(ref) not in SHARDED_KINDS:
            # The daemon replaces the entry's secret in one step: no moment without one.
            with self._shared_writer(backend) as writer:
                writer.create(*keyring_key(self.scope, ref, 0), first_entry(1, value), replace=True)
            return
        self.delete(ref)
        self._write(ref, value)

    def _write(self, ref: str, value: str) -> None:
        backend = self.backend
        if isinstance(backend, SecretService.Keyring):
            # The Secret Service has no size limit to chunk for (the Credential Manager's is
            # what CHUNK_BYTES is about): one entry, one write, in the same format.
            with self._shared_writer(backend) as writer:
                writer.create(*keyring_key(self.scope, ref, 0), first_entry(1, value))
            return
        chunks = split_chunks(value)
        self.check()
        with _keyring_errors(backend):
            # Later chunks first, entry 0 last: entry 0 announces the count, so a put that
            # fails half-way never leaves a reference that reads as complete.
            for index in range(len(chunks) - 1, 0, -1):
                backend.set_password(*keyring_key(self.scope, ref, index), chunks[index])
            backend.set_password(
                *keyring_key(self.scope, ref, 0), first_entry(len(chunks), chunks[0])
            )

    def get(self, ref: str) -> str:
        """The value stored under ``ref``; :class:`SecretMissing` if there is none."""
        validate_ref(ref)
        backend = self.backend
        if kind_of(ref) in SHARDED_KINDS and isinstance(backend, SecretService.Keyring):
            value = self.get_many([ref]).get(ref)
            if value is None:
                raise SecretMissing(f"no secret stored under {ref}")
            return value
        with _keyring_errors(backend):
            return self._read(backend, ref)

    def get_many(self, refs: list[str]) -> dict[str, str]:
        """The values of several references (missing or incomplete ones left out).

        At start-up the engine reads every unfinished operation's handle at once. Through
        keyring's Secret Service backend each chunk would cost a new D-Bus connection and
        an encryption session; here the whole batch shares one connection and one session,
        the lookups go out pipelined and the secrets come back in one ``GetSecrets`` call.
        """
        for ref in refs:
            validate_ref(ref)
        backend = self.backend
        if not isinstance(backend, SecretService.Keyring):
            values: dict[str, str] = {}
            with _keyring_errors(backend):
                for ref in refs:
                    try:
                        values[ref] = self._read(backend, ref)
                    except SecretMissing:
                        pass
            return values
        with _keyring_errors(backend):
            reader = _SharedSecretService(backend)
            try:
                return self._read_batch(reader, refs)
            finally:
                reader.close()

    def _read_batch(self, reader: _SharedSecretService, refs: list[str]) -> dict[str, str]:
        entries = reader.read_service(keyring_service(self.scope)) if refs else {}
        sharded = HandleShards.parse(entries)  # the shard entries' handles, by reference
        values: dict[str, str] = {}
        for ref in refs:
            if ref in sharded:
                values[ref] = sharded[ref]
                continue
            first = entries.get(keyring_key(self.scope, ref, 0)[1])
            if first is None:
                continue
            try:
                count, head = parse_first_entry(first, ref)
            except SecretMissing:
                continue
            chunks = [head, *(entries.get(keyring_key(self.scope, ref, index)[1]) for index in range(1, count))]
            if all(chunk is not None for chunk in chunks):
                values[ref] = "".join(chunks)  # type: ignore[arg-type]
        return values

    def _read(self, backend: SecretBackend, ref: str) -> str:
        first = backend.get_password(*keyring_key(self.scope, ref, 0))
        if first is None:
            raise SecretMissing(f"no secret stored under {ref}")
        count, head = parse_first_entry(first, ref)
        parts = [head]
        for index in range(1, count):
            part = backend.get_password(*keyring_key(self.scope, ref, index))
            if part is None:
                raise SecretMissing(f"the secret under {ref} is incomplete (chunk {index} of {count} missing)")
            parts.append(part)
        return "".join(parts)

    @contextmanager
    def _shared_writer(self, backend: SecretService.Keyring) -> Iterator[_SharedSecretService]:
        """The shared writer, held alone; a failure drops it (the next write opens another).
        Opening it checks the lock state first: a locked collection is refused with a
        clear error, never prompted for from a background write."""
        with self._writer_lock, _keyring_errors(backend):
            if self._writer is None:
                self.check()
                self._writer = _SharedSecretService(backend)
            try:
                yield self._writer
            except BaseException:
                self._close_writer()
                raise

    def _close_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the connection is already broken
                pass

    def close(self) -> None:
        """Let go of the keyring connection kept for writes (a later write opens another)."""
        with self._writer_lock:
            self._close_writer()

    def delete(self, ref: str) -> None:
        """Remove the secret under ``ref``; deleting a missing secret is not an error."""
        validate_ref(ref)
        backend = self.backend
        if isinstance(backend, SecretService.Keyring):
            if kind_of(ref) in SHARDED_KINDS:
                self._write_shards(backend, kind_of(ref), [], [ref])
                return
            with self._shared_writer(backend) as writer:
                self._delete_entries(writer, ref)
            return
        with _keyring_errors(backend):
            first = backend.get_password(*keyring_key(self.scope, ref, 0))
            if first is None:
                return
            count, _ = parse_first_entry(first, ref)
            # Entry 0 first: once it is gone the rest can no longer be read as a secret.
            for index in range(count):
                try:
                    backend.delete_password(*keyring_key(self.scope, ref, index))
                except keyring.errors.PasswordDeleteError:
                    pass

    def _delete_entries(self, writer: _SharedSecretService, ref: str) -> None:
        writer.delete_secret(lambda index: keyring_key(self.scope, ref, index),
                             lambda first: parse_first_entry(first, ref)[0])

    # -- shards (Secret Service) ------------------------------------------------------

    def _write_shards(self, backend: SecretService.Keyring, kind: str, values: list[str],
                      deletes: list[str]) -> list[str]:
        """:meth:`write_batch` for a sharded kind (see :class:`ShardedHandles`)."""
        with self._shared_writer(backend) as writer:
            return self._sharded.write(writer, kind, values, deletes,
                                       lambda ref: self._delete_entries(writer, ref))

    def replace(self, ref: str | None, kind: str, value: str) -> str:
        """Store ``value`` under a new reference and delete the old one (if any)."""
        new_ref = self.put(kind, value)
        if ref is not None:
            self.delete(ref)
        return new_ref


#: A Secret Service ``Secret`` struct: (session path, parameters, value, content type).
_SecretStruct: TypeAlias = tuple[str, bytes, bytes, str]


class _SharedSecretService:
    """Reads and writes entries of keyring's Secret Service backend over one D-Bus
    connection and one encryption session. The backend's own calls open both per call:
    a new bus connection, a collection lookup and a Diffie-Hellman key exchange for every
    ``set_password``. Entries are written as the backend writes them (same label and
    attributes), so ``keyring`` itself reads them back. (GNOME Keyring itself rewrites its
    whole keyring file on every change: 6 ms per write when empty, 23 ms at 1,000 items;
    the client's own share is under a millisecond.)

    One ``SearchItems`` finds every entry of a keyring service (one home's secrets), their
    usernames are read with pipelined property requests (one round trip per batch rather
    than per entry) and their secrets with ``GetSecrets``, a few hundred per call.
    """

    #: Requests in flight at once: enough to hide most of the round trip, and well under
    #: the bus's cap on pending replies per connection (128 on a system-like bus).
    BATCH = 32
    #: Secrets fetched per ``GetSecrets`` call (bounds the size of one D-Bus message).
    SECRETS_PER_CALL = 500

    def __init__(self, backend: SecretService.Keyring):
        from secretstorage.util import open_session

        self._backend = backend
        # get_preferred_collection unlocks the collection (or raises): its items are readable.
        self._collection = backend.get_preferred_collection()  # type: ignore[no-untyped-call]  # keyring is untyped
        self._connection = self._collection.connection
        self._session = open_session(self._connection)
        self._collection.session = self._session  # create_item encrypts with it

    def create(self, service: str, username: str, value: str, *, replace: bool = False) -> None:
        """``set_password(service, username, value)`` over the shared connection. A new
        reference's entries exist nowhere yet, so unless ``replace`` the daemon is not asked
        to look for one to replace (its search grows with the keyring)."""
        attributes = self._backend._query(service, username, application=self._backend.appid)
        self._collection.create_item(f"Password for '{username}' on '{service}'", attributes,
                                     value.encode("utf-8"), replace=replace)

    def delete_entry(self, service: str, username: str) -> None:
        """Delete the entries named ``(service, username)``, if any."""
        for item in self._collection.search_items(self._backend._query(service, username)):
            item.delete()

    def delete_secret(self, key_of: Callable[[int], tuple[str, str]], count_of: Callable[[str], int]) -> None:
        """Delete the entries of one secret (``key_of(i)``: entry i's service and username;
        ``count_of``: the number of entries, from entry 0's value). Entry 0 goes first: once
        it is gone the rest no longer read as a secret. Missing entries are not an error."""
        first = list(self._collection.search_items(self._backend._query(*key_of(0))))
        if not first:
            return
        try:
            count = count_of(first[0].get_secret().decode("utf-8"))
        except SecretMissing:
            count = 1
        for item in first:
            item.delete()
        for index in range(1, count):
            for item in self._collection.search_items(self._backend._query(*key_of(index))):
                item.delete()

    def read_service(self, service: str) -> dict[str, str]:
        """Every entry stored under keyring service ``service``: username -> value."""
        (paths,) = self._collection._collection.call("SearchItems", "a{ss}", {"service": service})
        usernames: dict[str, str] = {}
        for start in range(0, len(paths), self.BATCH):
            usernames.update(self._usernames(paths[start : start + self.BATCH]))
        values: dict[str, str] = {}
        found = [path for path in paths if path in usernames]
        for start in range(0, len(found), self.SECRETS_PER_CALL):
            for path, secret in self._get_secrets(found[start : start + self.SECRETS_PER_CALL]).items():
                values[usernames[path]] = self._decrypt(secret)
        return values

    def _usernames(self, paths: list[str]) -> dict[str, str]:
        """The ``username`` attribute of each item, the requests pipelined."""
        from jeepney import MessageType, Properties
        from jeepney.low_level import HeaderFields
        from secretstorage.defines import SS_PREFIX
        from secretstorage.util import DBusAddressWrapper

        pending: dict[int, str] = {}  # request serial -> item path
        for path in paths:
            serial = next(self._connection.outgoing_serial)
            pending[serial] = path
            item = DBusAddressWrapper(path, SS_PREFIX + "Item", self._connection)
            self._connection.send(Properties(item).get("Attributes"), serial=serial)
        usernames: dict[str, str] = {}
        while pending:
            reply = self._connection.receive(timeout=30)
            reply_to: int = reply.header.fields.get(HeaderFields.reply_serial, -1)
            answered = pending.pop(reply_to, None)
            if answered is None or reply.header.message_type == MessageType.error:
                continue  # a signal; or an item deleted meanwhile
            (_signature, attributes) = reply.body[0]
            if "username" in attributes:
                usernames[answered] = attributes["username"]
        return usernames

    def _get_secrets(self, paths: list[str]) -> dict[str, _SecretStruct]:
        from secretstorage.defines import SS_PATH
        from secretstorage.util import SERVICE_IFACE, DBusAddressWrapper

        service = DBusAddressWrapper(SS_PATH, SERVICE_IFACE, self._connection)
        secrets: dict[str, _SecretStruct]
        (secrets,) = service.call("GetSecrets", "aoo", paths, self._session.object_path)
        return secrets

    def _decrypt(self, secret: _SecretStruct) -> str:
        """A Secret Service ``Secret`` struct (session, parameters, value, content type)
        as text: AES-128-CBC with PKCS#7 padding under the session's key, or plain."""
        _session, parameters, value, _content_type = secret
        if not self._session.encrypted:
            return bytes(value).decode("utf-8")
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        key = self._session.aes_key
        assert key is not None  # an encrypted session has its key
        decryptor = Cipher(algorithms.AES(key), modes.CBC(bytes(parameters))).decryptor()
        unpadder = padding.PKCS7(128).unpadder()
        padded = decryptor.update(bytes(value)) + decryptor.finalize()
        return (unpadder.update(padded) + unpadder.finalize()).decode("utf-8")

    def close(self) -> None:
        self._connection.close()


def _locked_message(where: str) -> str:
    return (
        f"The keyring in {where} is locked. Unlock it (for example by logging in to the "
        "desktop session, or with your keyring's unlock dialog) and try again. Until then, "
        "operations that need a server-issued token cannot be resumed after a restart."
    )


@contextmanager
def _keyring_errors(backend: object) -> Iterator[None]:
    """Turns keyring failures into :class:`KeyringUnavailable` with a readable message."""
    try:
        yield
    except (SecretMissing, KeyringUnavailable):
        raise
    except keyring.errors.KeyringLocked as exc:
        where = SecretStore.describe_backend(_writing_backend(backend))
        raise KeyringUnavailable(_locked_message(where)) from exc
    except Exception as exc:
        if type(exc).__name__ == "LockedException" and _is_dbus_error(exc):
            # secretstorage's: the collection was locked after the shared writer opened it.
            where = SecretStore.describe_backend(_writing_backend(backend))
            raise KeyringUnavailable(_locked_message(where)) from exc
        if not (isinstance(exc, (keyring.errors.KeyringError, OSError, RuntimeError)) or _is_dbus_error(exc)):
            raise
        where = SecretStore.describe_backend(_writing_backend(backend))
        raise KeyringUnavailable(
            f"The keyring in {where} failed: {type(exc).__name__}: {exc}. {_NO_KEYRING_HINT}"
        ) from exc


def _is_dbus_error(exc: BaseException) -> bool:
    module = type(exc).__module__
    return module.startswith(("secretstorage", "jeepney"))
