"""What the engine shows the layers above it (the window and the CLI).

Plain data and one listener protocol: the window's Qt adapter implements
:class:`EngineListener` and re-emits each call as a signal; the CLI prints them. Nothing
here names a mechanism's internals: an operation is an operation, whatever carries it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

# Operation statuses (the journal checks the transitions).
PENDING = "pending"            # written, request not yet sent
RUNNING = "running"
INPUT_REQUIRED = "input_required"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
EXPIRED = "expired"
UNKNOWN = "unknown"            # the host cannot know whether the call ran; never re-run silently

IN_FLIGHT = frozenset({PENDING, RUNNING, INPUT_REQUIRED})
TERMINAL = frozenset({COMPLETED, FAILED, CANCELLED, EXPIRED, UNKNOWN})

# Server connection states.
CONNECTING = "connecting"
CONNECTED = "connected"
RECONNECTING = "reconnecting"
OFFLINE = "offline"
NEEDS_SIGN_IN = "needs_sign_in"
DISABLED = "disabled"


@dataclass(slots=True)
class OperationView:
    """A snapshot of one operation, as a person sees it."""

    id: str
    server: str
    tool: str | None
    method: str
    arguments: dict[str, Any]
    status: str
    progress: float | None = None
    total: float | None = None
    message: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    ended_at: float | None = None
    needs_input: bool = False
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    resumable: bool = True

    @property
    def in_flight(self) -> bool:
        return self.status in IN_FLIGHT

    @property
    def fraction(self) -> float | None:
        """0..1 when the server gave a total, else None (an indeterminate bar)."""
        if self.total and self.progress is not None and self.total > 0:
            return max(0.0, min(1.0, self.progress / self.total))
        return None


@dataclass(slots=True)
class ServerView:
    """A configured server and its live connection state."""

    name: str
    transport: str
    target: str
    state: str = OFFLINE
    protocol_version: str | None = None
    tools_count: int | None = None
    retry_in: float | None = None      # seconds until the next reconnect attempt
    error: str | None = None           # the last failure, in plain words
    tools: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class InputRequest:
    """A question a server asks on behalf of an operation (form or URL elicitation)."""

    id: str                    # unique per question
    operation_id: str | None   # None when the question belongs to no known operation
    server: str
    mode: str                  # "form" | "url"
    message: str
    params: dict[str, Any]     # the elicitation params as the server sent them


class EngineListener(Protocol):
    """Called on the event loop thread; implementations must return quickly."""

    def operation_changed(self, op: OperationView) -> None: ...

    def operation_event(self, op_id: str, kind: str, data: dict[str, Any]) -> None: ...

    def server_changed(self, server: ServerView) -> None: ...

    def input_requested(self, request: InputRequest) -> None: ...

    def input_withdrawn(self, request_id: str) -> None: ...

    def problem(self, kind: str, message: str) -> None:
        """A banner-worthy condition: kind is "keyring", "server", "journal"."""
