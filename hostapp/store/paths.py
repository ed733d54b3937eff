"""Where hostapp keeps its files.

Everything the host persists lives under one *home* directory: the operation journal,
the logs, and (by reference only) the scope of its keyring entries. ``HOSTAPP_HOME``
chooses the home, so tests, a second profile or a portable install never touch the
person's everyday data; without it the platform's per-user data directory is used.

The home and its logs folder are this user's alone (0700), and the journal and the log
files 0600, whatever the umask: the journal holds what servers answered and the logs
say what was done, which other local users have no business reading.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

import platformdirs

#: Environment variable that overrides the home directory.
HOME_ENV = "HOSTAPP_HOME"


def home_dir() -> Path:
    """The home directory: ``$HOSTAPP_HOME`` or the per-user data dir; created if missing."""
    configured = os.environ.get(HOME_ENV)
    home = Path(configured).expanduser() if configured else Path(platformdirs.user_data_dir("hostapp"))
    return private_folder(home)


def private_folder(path: Path) -> Path:
    """``path`` as a folder only this user may enter (0700), made if missing. A folder of
    another user is left as it is (its owner decides)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    _restrict(path, 0o700)
    return path


def private_file(path: Path) -> Path:
    """``path`` as a file only this user may read and write (0600), made empty if missing."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    _restrict(path, 0o600)
    return path


def _restrict(path: Path, mode: int) -> None:
    if not hasattr(os, "getuid"):
        return  # Windows: the profile's ACL keeps other users out of the home
    info = os.stat(path)
    if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & ~mode:
        os.chmod(path, stat.S_IMODE(info.st_mode) & mode)


def journal_path(home: Path) -> Path:
    """The SQLite operation journal inside ``home``."""
    return Path(home) / "journal.sqlite3"


def log_dir(home: Path) -> Path:
    """The directory for log files inside ``home``; created if missing."""
    return private_folder(Path(home) / "logs")
