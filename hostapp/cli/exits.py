"""The exit statuses of the ``hostapp`` command, and the mistake that ends one with 2."""

from __future__ import annotations

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
#: A followed operation stalled (hostapp.engine.liveness): the command let go of it, and it
#: goes on in the background.
EXIT_STALLED = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command ended by Ctrl+C


class UsageError(Exception):
    """A command line or configuration mistake the person can fix."""
