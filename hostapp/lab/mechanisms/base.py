"""What every mechanism module of the lab provides to :class:`~hostapp.lab.core.LabCore`,
and what it is given of the core in return (:class:`LabHost`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeAlias

from hostapp.lab.call import Call, RequestKey
from hostapp.lab.state import JobRow, LabState

#: Handles ``tools/call`` for one tool: (call, arguments) -> result or DEFERRED.
ToolHandler: TypeAlias = Callable[[Call, dict[str, Any]], Awaitable[Any]]
#: Handles one JSON-RPC method: call -> result or DEFERRED.
MethodHandler: TypeAlias = Callable[[Call], Awaitable[Any]]


class LabHost(Protocol):
    """What a mechanism uses of the lab's core (:class:`~hostapp.lab.core.LabCore`
    implements it): the persisted state, jobs and their ends, the streams, questions to the
    client. The mechanisms import no core; the core imports them."""

    state: LabState

    def new_job(self, call: Call, tool: str, args: dict[str, Any], mechanism: str, key: str, *,
                out_stream: str | None, notify_stream: str | None, extra: dict[str, Any] | None = None,
                ttl_ms: int | None = None, poll_ms: int | None = None) -> JobRow: ...

    async def wait_job(self, key: str) -> JobRow: ...

    def job_duration(self, args: dict[str, Any]) -> tuple[float, int]: ...

    def scaled(self, seconds: float) -> float: ...

    def poll_ms(self, args: dict[str, Any]) -> int: ...

    def job_changed(self, key: str) -> asyncio.Event: ...

    def stop_job(self, key: str, status: str, message: str) -> None: ...

    def provide_answer(self, key: str, answer: Any) -> None: ...

    def respond(self, job: JobRow, result: dict[str, Any], *, close: bool = True) -> None: ...

    def emit(self, stream_id: str | None, payload: dict[str, Any], close: bool = False) -> None: ...

    def send_progress(self, stream: str | None, token: Any, done: int, total: int, message: str) -> None: ...

    async def copy_pending(self, call: Call, source: str, stop_at_response_for: Any = None) -> bool: ...

    async def elicit(self, call: Call, key: str, params: dict[str, Any],
                     state: dict[str, Any] | None = None) -> dict[str, Any]: ...

    async def ask_client(self, call: Call, method: str, params: dict[str, Any]) -> dict[str, Any]: ...


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

    def __init__(self, core: LabHost) -> None:
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
