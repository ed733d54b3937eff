"""The operating system's exclusive lock on an open file: at most one holder at a time.

``flock`` on Linux and macOS, a byte-range lock on Windows. The kernel releases it when
its holder dies, however it dies, so a lock is never stale. Used by the home's owner
lock (``hostapp.agent.lock``) and by the lab, which lets one process at a time serve a
state file; both keep what is written in the file as information only.
"""

from __future__ import annotations

import sys
from typing import IO

__all__ = ["try_lock", "unlock"]

if sys.platform == "win32":
    import msvcrt

    def try_lock(handle: IO[str]) -> bool:
        """Take the lock on ``handle``'s file without waiting; False if another holds it."""
        handle.seek(0)
        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def unlock(handle: IO[str]) -> None:
        handle.seek(0)
        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
        except OSError:
            pass

else:
    import fcntl

    def try_lock(handle: IO[str]) -> bool:
        """Take the lock on ``handle``'s file without waiting; False if another holds it."""
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def unlock(handle: IO[str]) -> None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
