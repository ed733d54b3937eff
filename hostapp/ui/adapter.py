"""The one bridge from the engine (plain asyncio) to Qt: listener calls become signals.

The engine calls its listener on the event loop thread, which under qasync is also the
GUI thread, so no queued connections are needed; what is needed is restraint. Progress
can change thousands of times a second, so :meth:`EngineSignals.operation_changed` only
remembers the latest snapshot of each operation and a single-shot timer hands the batch
to the window at most :data:`MAX_REFRESH_HZ` times a second. A batch that takes the
window long to fold in (10,000 calls stepping once a second are hundreds at every
refresh) is handed on in slices of :data:`FLUSH_SLICE` seconds, the window's input,
paints and timers running between them. Everything else is rare and re-emitted at once.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from hostapp.engine.api import InputRequest, OperationView, ServerView

#: Upper bound on how often the operations table is refreshed.
MAX_REFRESH_HZ = 30
#: How long the window folds changes in before its other events run (input, paints,
#: timers): the rest of the batch follows in the next turn of the event loop.
FLUSH_SLICE = 0.004
#: The fewest operations per emission within a slice (each emission has a cost of its own:
#: the counts, the actions, the rows on screen); the most is what fits the slice at the
#: pace the window folded the previous ones in.
FLUSH_CHUNK = 20


class EngineSignals(QObject):
    """Implements :class:`hostapp.engine.api.EngineListener` and re-emits it as Qt signals.

    Signals:
        operationsChanged(list[OperationView]): the latest snapshot of operations that
            changed since they were last emitted, each once; batches at most
            ``MAX_REFRESH_HZ`` per second, a large one in several emissions.
        operationEvent(str, str, dict): op id ("" for a server's log line), kind, data.
        serverChanged(ServerView)
        serverRemoved(str): the name of a server that left the configuration.
        inputRequested(InputRequest)
        inputWithdrawn(str): the id of a question that no longer needs an answer.
        problemReported(str, str): kind ("keyring", "server", "journal") and a message.
    """

    operationsChanged = Signal(list)
    operationEvent = Signal(str, str, object)
    serverChanged = Signal(object)
    serverRemoved = Signal(str)
    inputRequested = Signal(object)
    inputWithdrawn = Signal(str)
    problemReported = Signal(str, str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pending: dict[str, OperationView] = {}
        self._per_op = 20e-6  # seconds the window took per operation, as last measured
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.timeout.connect(self._flush_slice)

    # -- EngineListener -----------------------------------------------------------------

    def operation_changed(self, op: OperationView) -> None:
        self._pending[op.id] = op
        if not self._flush_timer.isActive():
            self._flush_timer.start(1000 // MAX_REFRESH_HZ)

    def operation_event(self, op_id: str, kind: str, data: dict[str, Any]) -> None:
        self.operationEvent.emit(op_id, kind, dict(data))

    def server_changed(self, server: ServerView) -> None:
        self.serverChanged.emit(server)

    def input_requested(self, request: InputRequest) -> None:
        # An operation's status change and its question may arrive in one loop turn:
        # deliver the status first so the badge and the prompt appear together.
        self.flush()
        self.inputRequested.emit(request)

    def input_withdrawn(self, request_id: str) -> None:
        self.inputWithdrawn.emit(request_id)

    def server_removed(self, name: str) -> None:
        self.serverRemoved.emit(name)

    def problem(self, kind: str, message: str) -> None:
        self.problemReported.emit(kind, message)

    # -- coalescing ---------------------------------------------------------------------

    def flush(self) -> None:
        """Emit everything pending now (before a question, and on shutdown so nothing is lost)."""
        self._flush_timer.stop()
        if self._pending:
            batch = list(self._pending.values())
            self._pending.clear()
            self.operationsChanged.emit(batch)

    def _flush_slice(self) -> None:
        """Emit what is pending, the changes that came first first, for at most
        :data:`FLUSH_SLICE` seconds; the rest in the next turn of the event loop."""
        pending = self._pending
        clock = time.perf_counter
        now = clock()
        deadline = now + FLUSH_SLICE
        while pending:
            # As many as fit what is left of the slice: a fixed number overran it by a
            # whole batch's time when the first ended just short of it.
            n = max(FLUSH_CHUNK, int((deadline - now) / self._per_op))
            batch = [pending.pop(op_id) for op_id in list(itertools.islice(pending, n))]
            self.operationsChanged.emit(batch)
            began, now = now, clock()
            self._per_op = (self._per_op + (now - began) / len(batch)) / 2
            if now + FLUSH_CHUNK * self._per_op > deadline:
                break
        if pending:
            self._flush_timer.start(0)
