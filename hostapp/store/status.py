"""The one vocabulary of operation statuses, and the one place their lifecycle is decided.

The journal checks every change against :func:`check_transition`; the engine, the CLI and
the window read the same :class:`OperationStatus` (through ``hostapp.engine.api``, which
re-exports it for the layers above the engine).

Lifecycle: ``pending`` (journaled, never sent) -> ``running`` <-> ``input_required`` ->
one of the terminal statuses. ``unknown`` is an outcome too: the call may have run and its
outcome cannot be learnt; running it again is the person's choice and makes a new operation.
"""

from __future__ import annotations

from enum import StrEnum


class OperationStatus(StrEnum):
    """An operation's status; a ``str``, so it is stored and compared as its value."""

    PENDING = "pending"  # row written, request not yet sent
    RUNNING = "running"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    UNKNOWN = "unknown"  # the host cannot know whether the call ran; never re-run silently

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def in_flight(self) -> bool:
        return self in IN_FLIGHT


TERMINAL: frozenset[OperationStatus] = frozenset(
    {
        OperationStatus.COMPLETED,
        OperationStatus.FAILED,
        OperationStatus.CANCELLED,
        OperationStatus.EXPIRED,
        OperationStatus.UNKNOWN,
    }
)
IN_FLIGHT: frozenset[OperationStatus] = frozenset(OperationStatus) - TERMINAL

# Allowed changes between different statuses. Nothing leaves a terminal status, and
# nothing goes back to ``pending``, whose meaning is "never sent".
_TRANSITIONS: dict[str, frozenset[OperationStatus]] = {
    OperationStatus.PENDING: frozenset({OperationStatus.RUNNING, OperationStatus.INPUT_REQUIRED}) | TERMINAL,
    OperationStatus.RUNNING: frozenset({OperationStatus.INPUT_REQUIRED}) | TERMINAL,
    OperationStatus.INPUT_REQUIRED: frozenset({OperationStatus.RUNNING}) | TERMINAL,
}


class StatusTransitionError(Exception):
    """An operation was asked to change status in a way the lifecycle forbids."""


def check_transition(old: str, new: str) -> None:
    """Raise :class:`StatusTransitionError` unless an operation may go from ``old`` to ``new``.

    Staying in the same non-terminal status is allowed (nothing changes); a terminal
    status never changes again, which is what makes delivery of an outcome happen exactly
    once.
    """
    try:
        new_status = OperationStatus(new)
    except ValueError:
        raise StatusTransitionError(f"unknown operation status {new!r}") from None
    if old in TERMINAL:
        raise StatusTransitionError(f"operation is already {old}; it cannot become {new}")
    if old == new_status:
        return
    if new_status not in _TRANSITIONS.get(old, frozenset()):
        raise StatusTransitionError(f"an operation cannot go from {old} to {new}")
