"""Where hostapp keeps its files.

Everything the host persists lives under one *home* directory: the operation journal,
the logs, and (by reference only) the scope of its keyring entries. ``HOSTAPP_HOME``
chooses the home, so tests, a second profile or a portable install never touch the
person's everyday data; without it the platform's per-user data directory is used.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

#: Environment variable that overrides the home directory.
HOME_ENV = "HOSTAPP_HOME"


def home_dir() -> Path:
    """The home directory: ``$HOSTAPP_HOME`` or the per-user data dir; created if missing."""
    configured = os.environ.get(HOME_ENV)
    home = Path(configured).expanduser() if configured else Path(platformdirs.user_data_dir("hostapp"))
    home.mkdir(parents=True, exist_ok=True)
    return home


def journal_path(home: Path) -> Path:
    """The SQLite operation journal inside ``home``."""
    return Path(home) / "journal.sqlite3"


def log_dir(home: Path) -> Path:
    """The directory for log files inside ``home``; created if missing."""
    logs = Path(home) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    return logs
