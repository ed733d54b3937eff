"""The exit statuses of the ``hostapp`` command, and the mistake that ends one with 2."""

from __future__ import annotations

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command ended by Ctrl+C


class UsageError(Exception):
    """A command line or configuration mistake the person can fix."""
