"""The operations' handles in the OS keyring: written batched, deleted, and kept usable.

A server-issued handle (task id, resume token, stream position...) is what resumes an
operation after a restart, so it is written to the keyring before the host acts on it.
:class:`HandleKeeper` is the engine's one door to the keyring: it writes and deletes
handles (gathered into batches by :class:`BatchedHandleWrites`), notices when the keyring
fails and asks again later whether it is back, reads the handles of the operations
restored at start-up, and keeps the operations' stream positions at a clean quit.

A handle's keyring value is the mechanism's secret, wrapped (:func:`wrap_secret`) with the
HTTP session it lives in when it only works there.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from hostapp.store.journal import OperationRecord
    from hostapp.store.secrets import SecretStore

log = logging.getLogger(__name__)

T = TypeVar("T")

HANDLE_PREFIX = "hostapp-handle:"

#: The kind of the operations' handles in the keyring.
HANDLE_KIND = "handle"

#: The kind of the keyring entry holding the operations' positions at the last quit.
POSITIONS_KIND = "positions"

#: After a keyring failure, how long before the keyring is asked again whether it takes
#: secrets (seconds); and the pause before a failed handle write is tried once more.
KEYRING_RECHECK_SECONDS = 30.0
KEYRING_RETRY_SECONDS = 0.5

#: Why an operation whose handle could not be kept ends unknown after a restart.
HANDLE_NOT_KEPT = ("the keyring was unavailable, so what could resume this operation was not kept "
                   "across the restart; it may or may not have run")


def wrap_secret(secret: str, http_session: tuple[str, str] | None) -> str:
    """The keyring value of a handle: the mechanism's secret and, when it only works in one
    HTTP session, that session (session id, protocol version)."""
    if http_session is None:
        return secret
    return HANDLE_PREFIX + json.dumps({"h": secret, "s": http_session[0], "v": http_session[1]})


def unwrap_secret(value: str | None) -> tuple[str | None, tuple[str, str] | None]:
    """Split a keyring handle value into the mechanism's secret and its HTTP session."""
    if value is None or not value.startswith(HANDLE_PREFIX):
        return value, None
    try:
        data = json.loads(value[len(HANDLE_PREFIX):])
        session = (data["s"], data["v"]) if data.get("s") and data.get("v") else None
        return data["h"], session
    except (ValueError, KeyError, TypeError):
        return None, None


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """Run a blocking call (a keyring call over D-Bus, a journal read) on a worker thread:
    never on the event loop thread, which also serves the window."""
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


class BatchedHandleWrites:
    """Handle writes and deletes, gathered: those asked for while the keyring is busy with
    earlier ones go to it together in one :meth:`SecretStore.write_batch` (a group commit),
    which the Secret Service store turns into one rewrite per shard touched. Each caller
    still waits for its own write, so the order of a commit (new handle, then the journal,
    then the old handle's deletion) holds; only the number of keyring writes falls, from
    one per handle to one per batch, however many operations commit at once.

    States: idle (no drain task) or draining (one task writes batches until both queues
    are empty).
    """

    #: Longest a quit waits for writes already under way (seconds).
    SETTLE_SECONDS = 10.0

    def __init__(self, keeper: HandleKeeper):
        self._keeper = keeper
        self._puts: list[tuple[str, asyncio.Future[Any]]] = []
        self._deletes: list[tuple[str, asyncio.Future[Any]]] = []
        self._task: asyncio.Task[None] | None = None

    async def put(self, value: str) -> str:
        """Store ``value`` as a new handle; its reference."""
        return await self._queue(self._puts, value)

    async def delete(self, ref: str) -> None:
        await self._queue(self._deletes, ref)

    def _queue(self, queue: list[tuple[str, asyncio.Future[Any]]], item: str) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        queue.append((item, future))
        if self._task is None:
            self._task = loop.create_task(self._drain())
        return future

    async def _drain(self) -> None:
        try:
            while self._puts or self._deletes:
                puts, self._puts = self._puts, []
                deletes, self._deletes = self._deletes, []
                try:
                    refs = await self._keeper.write_batch([value for value, _ in puts], [ref for ref, _ in deletes])
                except Exception as exc:  # noqa: BLE001 - each waiter decides what it means
                    for _, future in (*puts, *deletes):
                        if not future.done():
                            future.set_exception(exc)
                else:
                    for (_, future), ref in zip(puts, refs, strict=True):
                        if not future.done():
                            future.set_result(ref)
                    for _, future in deletes:
                        if not future.done():
                            future.set_result(None)
        finally:
            self._task = None

    async def settle(self) -> None:
        """Wait (a bounded time) for the writes under way: the quit closes the keyring next."""
        task = self._task
        if task is not None:
            await asyncio.wait({task}, timeout=self.SETTLE_SECONDS)


class HandleKeeper:
    """The keyring as the engine uses it: handles, their health, and the kept positions.

    States of the keyring as seen here: usable (``keyring_problem`` is None) or failing
    (``keyring_problem`` says why, in plain words; nothing is written to it until it is
    asked again, every KEYRING_RECHECK_SECONDS, and says it is usable).

    ``report_problem(kind, message)`` tells the person (an empty message withdraws it).
    """

    def __init__(self, home: Path, secrets: SecretStore | None, report_problem: Callable[[str, str], None]):
        self._home = home
        self._secrets = secrets
        self._report_problem = report_problem
        self.keyring_problem: str | None = None
        self._failed_at = 0.0  # monotonic time keyring_problem was set
        # ids of the operations restored from a position kept at the last quit
        self._positioned: set[str] = set()
        self._writes = BatchedHandleWrites(self)

    @property
    def secrets(self) -> SecretStore:
        if self._secrets is None:
            from hostapp.store.secrets import SecretStore

            self._secrets = SecretStore(self._home)
        return self._secrets

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """A keyring call: Secret Service calls go over D-Bus and may block."""
        return await off_loop(fn, *args)

    async def write_batch(self, values: list[str], deletes: list[str]) -> list[str]:
        """Write new handles and delete old ones in one keyring write; the new references."""
        return await self.call(self.secrets.write_batch, HANDLE_KIND, values, deletes)

    # -- health ------------------------------------------------------------------

    async def check_keyring(self) -> None:
        """Ask whether the keyring takes secrets now (never prompts). A problem reported
        before is withdrawn when it does."""
        try:
            await self.call(self.secrets.check)
        except Exception as exc:  # noqa: BLE001 - a keyring backend may raise anything
            self.keyring_failed(exc)
            return
        if self.keyring_problem is not None:
            log.info("the keyring is usable again")
            self._report_problem("keyring", "")
        self.keyring_problem = None

    async def keyring_usable(self) -> bool:
        """Whether handles go to the keyring. After a failure it is asked again every
        KEYRING_RECHECK_SECONDS (a keyring unlocked or a daemon restarted meanwhile makes
        later operations resumable again); until then nothing is written to it."""
        if self.keyring_problem is None:
            return True
        if time.monotonic() - self._failed_at >= KEYRING_RECHECK_SECONDS:
            self._failed_at = time.monotonic()
            await self.check_keyring()
        return self.keyring_problem is None

    def keyring_failed(self, exc: Exception) -> None:
        from hostapp.store.secrets import KeyringUnavailable

        message = str(exc) if isinstance(exc, KeyringUnavailable) else (
            f"the OS keyring failed ({type(exc).__name__}); operations cannot be resumed after a restart")
        self.keyring_problem = message
        self._failed_at = time.monotonic()
        self._report_problem("keyring", message)

    # -- handles -----------------------------------------------------------------

    async def put_handle(self, value: str) -> str:
        """Write a handle to the keyring; one failure is tried again once, after a pause,
        if the keyring says it is usable (a busy Secret Service daemon may drop a call,
        and the operation would otherwise not survive a restart)."""
        try:
            return await self._writes.put(value)
        except Exception as exc:  # noqa: BLE001 - a keyring backend may raise anything; tried once more
            log.info("a keyring write failed (%s); trying again", type(exc).__name__)
            await asyncio.sleep(KEYRING_RETRY_SECONDS)
            await self.call(self.secrets.check)  # raises when it is locked or gone
            return await self._writes.put(value)

    async def delete_secret(self, ref: str) -> None:
        """Delete a handle or another secret; a failure is only logged."""
        try:
            if ref.startswith(HANDLE_KIND + ":"):
                await self._writes.delete(ref)
            else:
                await self.call(self.secrets.delete, ref)
        except Exception as exc:  # noqa: BLE001 - a stale secret is harmless: nothing refers to it any more
            log.info("could not delete a secret from the keyring: %s", type(exc).__name__)

    async def load_handles(self, records: list[OperationRecord]) -> dict[str, str]:
        """The keyring values of the records' handles (by operation id), each moved on to
        the position kept for it at the last quit, if any."""
        if not records:
            return {}
        return await self.call(self._load_handles_now, records)

    def _load_handles_now(self, records: list[OperationRecord]) -> dict[str, str]:
        refs = [r.handle_ref for r in records if r.handle_ref]
        if not refs or self.keyring_problem is not None:
            return {}
        positions_ref = self.secrets.fixed_ref(POSITIONS_KIND)
        try:
            values = self.secrets.get_many([*refs, positions_ref])
        except Exception as exc:  # noqa: BLE001 - the keyring failed: those operations cannot be resumed
            log.info("operation handles unavailable: %s", exc)
            return {}
        handles = {r.id: values[r.handle_ref] for r in records if r.handle_ref in values}
        self._apply_positions(records, handles, values.get(positions_ref))
        return handles

    def from_position(self, op_id: str) -> bool:
        """Was this operation's handle replaced by a position kept at the last quit (so the
        keyring does not hold what it resumes from)?"""
        return op_id in self._positioned

    # -- positions at a clean quit ---------------------------------------------------

    async def save_positions(self, positions: dict[str, list[str]], others: set[str]) -> None:
        """Keep where operations had got to beyond their committed handles (``positions``:
        operation id -> [the handle_ref it extends, the newer secret]) in one keyring
        entry for all of them; the kept positions of ``others`` (operations another
        process holds, still unfinished) stay."""
        try:
            await self.call(self._write_positions, positions, others)
        except Exception as exc:  # noqa: BLE001 - the next start replays a little more
            log.info("could not keep the operations' positions: %s", type(exc).__name__)

    def _write_positions(self, positions: dict[str, list[str]], others: set[str]) -> None:
        """Blocking (keyring): merge with the kept positions of ``others`` and write."""
        from hostapp.store.secrets import SecretMissing

        ref = self.secrets.fixed_ref(POSITIONS_KIND)
        kept: Any = {}
        if others:
            try:
                kept = json.loads(self.secrets.get(ref))
            except (SecretMissing, ValueError):
                kept = {}
        merged = {i: p for i, p in kept.items() if i in others} if isinstance(kept, dict) else {}
        merged.update(positions)
        self.secrets.put_at(ref, json.dumps(merged))

    def _apply_positions(self, records: list[OperationRecord], handles: dict[str, str], saved: str | None) -> None:
        """Use the positions kept at the last quit for the handles they extend."""
        try:
            positions = json.loads(saved) if saved else {}
        except ValueError:
            positions = {}
        for record in records:
            position = positions.get(record.id) if isinstance(positions, dict) else None
            if (not isinstance(position, list) or len(position) != 2 or record.id not in handles
                    or position[0] != record.handle_ref or not isinstance(position[1], str)):
                continue
            self._positioned.add(record.id)
            _, http_session = unwrap_secret(handles[record.id])
            handles[record.id] = wrap_secret(position[1], http_session)

    # -- quitting ----------------------------------------------------------------------

    async def close(self) -> None:
        """Wait for the writes under way, then close the keyring connection kept for writes
        (only if one was ever opened)."""
        await self._writes.settle()
        if self._secrets is not None:
            try:
                await self.call(self._secrets.close)
            except Exception as exc:  # noqa: BLE001 - quitting goes on regardless
                log.info("closing the keyring connection failed: %s", type(exc).__name__)
