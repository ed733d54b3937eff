"""Secret references and keyring entry names: the vocabulary the keyring code shares.

A secret is stored under a reference ``"<kind>:<32 hex digits>"``; the journal keeps the
reference, the keyring the value. This module says what a reference looks like
(:func:`new_ref`, :func:`is_secret_ref`), how a reference becomes a keyring entry name
(:func:`keyring_key`, the only place entry names are formed) and how a value is laid out
in entries (:func:`split_chunks`, :func:`first_entry`, :func:`parse_first_entry`).

Used by :mod:`hostapp.store.secrets` (the keyring API) and
:mod:`hostapp.store.secret_shards` (handles kept many to one entry).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path

#: Budget for one keyring entry, in bytes, in both UTF-8 and UTF-16 (Windows stores
#: UTF-16): well under the 2,560-byte Credential Manager limit, header included.
CHUNK_BYTES = 1024

#: Kinds of secret the host stores. Any lower-case word is accepted as a kind; these
#: are the ones the protocol mechanisms use, named here so everyone spells them alike.
KNOWN_KINDS = (
    "resume_token",
    "stream_id",
    "task_id",
    "operation_token",
    "request_state",
    "session_id",
    "last_event_id",
    "header",
    "env",
    "handle",
    "positions",
)

_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")
_REF = re.compile(r"([a-z][a-z0-9_]{0,31}):([0-9a-f]{32})")
# Entry 0 of a secret starts with the number of chunks, then this separator.
_COUNT_SEPARATOR = ":"


class SecretMissing(KeyError):
    """A reference points to no (or an incomplete) keyring entry."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else "secret missing"


def home_scope(home: Path) -> str:
    """A short, stable name for one home directory, used to keep homes' secrets apart.

    Derived from the absolute path (not from a file inside the home) so that a copied
    home directory does not share, and then delete, the original's secrets.
    """
    resolved = str(Path(home).expanduser().resolve())
    return hashlib.sha256(resolved.encode("utf-8")).hexdigest()[:16]


def keyring_key(scope: str, ref: str, chunk: int = 0) -> tuple[str, str]:
    """The keyring ``(service, username)`` of chunk ``chunk`` of secret ``ref`` in ``scope``.

    The only place where keyring entry names are formed.
    """
    return keyring_service(scope), ref if chunk == 0 else f"{ref}#{chunk}"


def keyring_service(scope: str) -> str:
    """The keyring service every entry of one home (``scope``) is filed under."""
    return f"hostapp/{scope}"


def split_chunks(value: str, budget: int = CHUNK_BYTES) -> list[str]:
    """Split ``value`` into pieces of at most ``budget`` bytes in UTF-8 and in UTF-16."""
    if value.isascii():
        # UTF-16 doubles ASCII, so half the budget in characters fits both encodings.
        step = budget // 2
        return [value[i : i + step] for i in range(0, len(value), step)] or [""]
    chunks: list[str] = []
    start, used = 0, 0
    for index, char in enumerate(value):
        code = ord(char)
        cost = max(len(char.encode("utf-8", "surrogatepass")), 4 if code > 0xFFFF else 2)
        if used + cost > budget:
            chunks.append(value[start:index])
            start, used = index, 0
        used += cost
    chunks.append(value[start:])
    return chunks


def is_secret_ref(text: object) -> bool:
    """Whether ``text`` has the shape of a reference returned by :meth:`SecretStore.put`."""
    return isinstance(text, str) and _REF.fullmatch(text) is not None


def validate_kind(kind: str) -> None:
    """ValueError unless ``kind`` is a lower-case word (the part of a reference before ``:``)."""
    if not _KIND.fullmatch(kind):
        raise ValueError(f"secret kind must be a lower-case word, got {kind!r}")


def validate_ref(ref: str) -> None:
    """ValueError unless ``ref`` is a secret reference."""
    if not is_secret_ref(ref):
        # The text is not echoed: a caller that mixes up a value and its reference
        # would otherwise print the secret.
        raise ValueError("not a secret reference (expected '<kind>:<32 hex digits>')")


def new_ref(kind: str) -> str:
    """A fresh reference of ``kind`` (``kind`` already validated)."""
    return f"{kind}:{uuid.uuid4().hex}"


def kind_of(ref: str) -> str:
    """The kind of a reference: the word before its ``:``."""
    return ref.partition(":")[0]


def first_entry(count: int, head: str) -> str:
    """The value of entry 0 of a secret in ``count`` entries whose first chunk is ``head``."""
    return f"{count}{_COUNT_SEPARATOR}{head}"


def parse_first_entry(first: str, ref: str) -> tuple[int, str]:
    """``(count, head)`` from entry 0 of ``ref``; :class:`SecretMissing` if hostapp did not write it."""
    count_text, separator, head = first.partition(_COUNT_SEPARATOR)
    if not separator or not count_text.isdigit() or int(count_text) < 1:
        raise SecretMissing(f"the keyring entry for {ref} was not written by hostapp")
    return int(count_text), head
