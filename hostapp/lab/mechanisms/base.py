"""What every mechanism module of the lab provides to :class:`~hostapp.lab.core.LabCore`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from hostapp.lab.call import Call, RequestKey
from hostapp.lab.state import JobRow

if TYPE_CHECKING:
    from hostapp.lab.core import LabCore

#: Handles ``tools/call`` for one tool: (call, arguments) -> result or DEFERRED.
ToolHandler: TypeAlias = Callable[[Call, dict[str, Any]], Awaitable[Any]]
#: Handles one JSON-RPC method: call -> result or DEFERRED.
MethodHandler: TypeAlias = Callable[[Call], Awaitable[Any]]


class LabMechanism:
    """One way a long request outlives its connection, as the lab serves it.

    Responsibilities: the tools that start it (:meth:`tools`), the methods a client uses
    to come back for it (:meth:`methods`), and what its jobs do when they end or wait for
    the person (:meth:`job_completed`, :meth:`job_waiting`). The core keeps everything
    shared (stored streams, jobs and their runners, questions to the client) and
    dispatches to the mechanism that registered a tool, a method or a job kind.
    """

    #: The ``JobRow.mechanism`` values of the jobs this mechanism starts.
    job_kinds: tuple[str, ...] = ()

    def __init__(self, core: LabCore) -> None:
        self.core = core

    def tools(self) -> dict[str, ToolHandler]:
        """Tool name -> handler, for the tools that start this mechanism."""
        return {}

    def methods(self) -> dict[str, MethodHandler]:
        """JSON-RPC method -> handler, for the methods this mechanism adds."""
        return {}

    def job_completed(self, job: JobRow, result: dict[str, Any]) -> None:
        """One of its jobs finished its work with ``result`` (already stored)."""

    def job_waiting(self, job: JobRow) -> None:
        """One of its jobs now waits for the person's answer (status ``input_required``)."""

    def job_resumed(self, job: JobRow) -> str | None:
        """One of its jobs goes on after a lab restart. Returns the stored stream of a
        request that a coroutine of the previous process was answering and that this
        mechanism now answers itself (else that stream is closed: nobody would answer it)."""
        return None

    def request_cancelled(self, request_key: RequestKey) -> None:
        """``notifications/cancelled`` named a request (any request, of any mechanism)."""
