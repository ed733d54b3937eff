"""The home's owner lock: at most one process runs the engine on a home at a time.

The lock is an OS-level lock on ``<home>/agent.lock`` (:mod:`hostapp.oslock`: ``flock``
on Linux and macOS, a byte-range lock on Windows), held for the owner's whole life. The
kernel releases it when the owner dies, however it dies, so a lock left by a crashed or
killed owner is never stale: the next process simply takes it. The file's content (pid, start time) is only
information for ``hostapp agent status``; the lock, not the content, decides who owns.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from hostapp.oslock import try_lock, unlock

LOCK_NAME = "agent.lock"
#: Held by the one client that is starting an owner, so that clients starting together
#: start one owner between them, not one each (see hostapp.agent.client.connect_or_spawn).
SPAWN_LOCK_NAME = "agent.spawn.lock"


@dataclass(frozen=True, slots=True)
class OwnerInfo:
    """What the owner wrote about itself when it took the lock."""

    pid: int
    since: float  # Unix time the owner took the lock


class HomeLock:
    """The exclusive lock on one home. Not re-entrant; one instance per process."""

    def __init__(self, home: Path, name: str = LOCK_NAME) -> None:
        self.path = Path(home) / name
        self._file: IO[str] | None = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def acquire(self, wait: float = 0.0) -> bool:
        """Take the lock, waiting up to ``wait`` seconds; False when another process holds it."""
        if self._file is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # "a+" creates the file without truncating what the current owner wrote.
        handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the process's life
        deadline = time.monotonic() + wait
        while True:
            if try_lock(handle):
                break
            if time.monotonic() >= deadline:
                handle.close()
                return False
            time.sleep(0.05)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "since": time.time()}))
        handle.flush()
        self._file = handle
        return True

    def free(self) -> bool:
        """Whether no process holds the lock right now (taken and let go at once, nothing
        written): a client that finds it free starts an owner; one that finds it held
        waits for the owner that holds it (starting, or stopping) instead."""
        if self._file is not None:
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+", encoding="utf-8") as handle:
            if not try_lock(handle):
                return False
            unlock(handle)
            return True

    def release(self) -> None:
        if self._file is None:
            return
        handle, self._file = self._file, None
        try:
            handle.seek(0)
            handle.truncate()
            handle.flush()
        finally:
            unlock(handle)
            handle.close()

    def owner(self) -> OwnerInfo | None:
        """The owner's own account of itself, if the file holds one (it may be a dead one's:
        ask the endpoint, or try the lock, to know whether it still runs)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "null")
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        pid, since = data.get("pid"), data.get("since")
        if isinstance(pid, int) and isinstance(since, (int, float)):
            return OwnerInfo(pid=pid, since=float(since))
        return None
