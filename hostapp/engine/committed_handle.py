"""One operation's handle as committed: the keyring entry its journal row points at.

A mechanism's handle is journaled as its state beside a reference to its secret, which
lives in the OS keyring with the HTTP session it belongs to (a stream can only be resumed
in its own session; :func:`~hostapp.engine.handles.wrap_secret`). :class:`CommittedHandle`
writes a commit in an order that survives a crash at any point (the new secret is written,
then the journal points at it, and only then is the old one deleted), writes the keyring
only when the value changed, and says where an operation has got to beyond its commit
for the positions kept at a clean quit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from hostapp.engine.handles import wrap_secret


class HandleKeyring(Protocol):
    """The keyring as a handle's commit uses it (the engine's context offers it)."""

    async def keyring_usable(self) -> bool: ...

    async def put_handle(self, value: str) -> str:
        """Write ``value`` under a new reference, and return the reference."""
        ...

    def keyring_failed(self, exc: Exception) -> None: ...

    async def delete_secret(self, ref: str) -> None: ...


class CommittedHandle:
    """``ref``: the keyring reference the journal points at (None: no secret kept). It
    owns too the value written under ``ref`` (None: unknown, the next commit writes it).
    ``lives_in`` names the HTTP session a secret committed now belongs to."""

    def __init__(self, keyring: HandleKeyring, *, ref: str | None, committed_secret: str | None,
                 lives_in: Callable[[], tuple[str, str] | None]):
        self._keyring = keyring
        self._lives_in = lives_in
        self.ref = ref
        self._committed = committed_secret

    async def commit(self, secret: str | None, resumable: bool,
                     point_at: Callable[[str | None, bool], Awaitable[None]]) -> None:
        """Commit a handle whose secret is ``secret``: written to the keyring (unless it
        is there already), then ``point_at(ref, resumable)`` journals the state beside its
        reference, then the entry it replaces is deleted. ``resumable``: whether the
        handle was kept so far; a keyring that cannot take it now makes it False, one
        that takes it makes it True."""
        keyring = self._keyring
        old_ref = ref = self.ref
        if secret is None:
            ref = None
            self._committed = None
        elif not await keyring.keyring_usable():
            resumable, ref = False, None
        else:
            value = self.wrap(secret)
            if value != self._committed or ref is None:
                try:
                    ref = await keyring.put_handle(value)
                    self._committed = value
                    resumable = True  # also when it started while the keyring was failing
                except Exception as exc:  # noqa: BLE001 - the keyring failed now: carry on in memory, say it
                    keyring.keyring_failed(exc)
                    resumable, ref = False, None
        self.ref = ref
        await point_at(ref, resumable)
        if old_ref is not None and old_ref != ref:
            await keyring.delete_secret(old_ref)

    def wrap(self, secret: str) -> str:
        """The keyring value of a handle: the mechanism's secret, and the HTTP session it
        lives in."""
        return wrap_secret(secret, self._lives_in())

    def newer_position(self, secret: str | None) -> list[str] | None:
        """[the committed reference, ``secret``] when ``secret`` (the mechanism's now) is
        beyond what is committed; None when nothing is newer or nothing is committed."""
        if self.ref is None or secret is None or self.wrap(secret) == self._committed:
            return None
        return [self.ref, secret]

    async def delete(self) -> None:
        """The operation ended: its secret leaves the keyring."""
        if self.ref is not None:
            await self._keyring.delete_secret(self.ref)
