"""What an operation is to the rest of the engine, and what its runner needs from it.

:mod:`hostapp.engine.runner` carries one operation (its mechanism fed, its actions carried
out). This module holds what surrounds a runner rather than what it does:

- :class:`RunnerContext`, the one view a runner has of the engine around it (implemented
  by :mod:`hostapp.engine.context`);
- the policy constants a runner follows (which mechanisms are bound to a session, which
  requests are optional, how long a cancel waits);
- how an operation is shown (:func:`operation_view`, :func:`outcome_message`,
  :func:`progress_in_message`) and which mechanism a new call gets (:func:`mechanism_for`),
  used by the engine's facade as well as by the runner.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from hostapp import mechanisms
from hostapp.engine import api
from hostapp.engine.budget import PollBudget
from hostapp.engine.session import ClientSession
from hostapp.engine.supervisor import ServerConnection
from hostapp.mechanisms.base import Mechanism
from hostapp.protocol.jsonrpc import RequestId
from hostapp.protocol.timing import Timing
from hostapp.store.status import TERMINAL, OperationStatus
from hostapp.transport.base import BUSY_STATUSES, HttpStatusError

if TYPE_CHECKING:
    from hostapp.store.journal import OperationJournal, OperationRecord

#: Mechanisms whose handle only works in the HTTP session that issued it: a stream, and
#: a 2025-11-25 task (receivers bind tasks to the session that made them, as
#: server-everything does). After a restart they go on in that session, adopted.
SESSION_BOUND_MECHANISMS = frozenset({"http_resumption", "tasks_2025"})

#: Mechanisms of a plain request, whose server asks its questions only on the request's
#: stream: a question left open when the host quit cannot be fetched again, and the
#: server may have given up on it meanwhile.
PLAIN_REQUEST_MECHANISMS = frozenset({"direct", "http_resumption"})

#: Mechanisms whose server's questions come on a stream nobody resumes (a 2025-11-25
#: task's ``tasks/result``): the server sends a question once and waits for its answer,
#: so the host keeps it in the journal until the answer is sent, to ask the person again
#: after a restart and answer under the question's id in the session it came in.
QUESTION_KEEPING_MECHANISMS = frozenset({"tasks_2025"})

#: What an operation says when it ended in error after the host left its question open.
QUESTION_EXPIRED = "the server's question expired while hostapp was closed"

#: Requests a mechanism sends for something extra (pushed task notifications) and goes on
#: without: once a server answers "method not found", they are not sent to it again.
OPTIONAL_METHODS = frozenset({"subscriptions/listen"})

#: Longest a cancel waits for the server's answer to its cancel request (seconds); the
#: cancel goes on after that, its answer shown when it comes.
CANCEL_ANSWER_SECONDS = 15.0


def server_busy(exc: Exception) -> bool:
    """The server refused a request for now (HTTP 408 or 429): ask again after ``timing.busy_retry``."""
    return isinstance(exc, HttpStatusError) and exc.status in BUSY_STATUSES


#: The operation a context is given back (an :class:`~hostapp.engine.runner.OperationRunner`;
#: a type parameter, so that this module need not import the runner that imports it).
RunnerT = TypeVar("RunnerT", contravariant=True)


class RunnerContext(Protocol[RunnerT]):
    """What an operation needs from the engine around it, and nothing more."""

    #: True while the host quits: nothing an operation would do then is acted on.
    stopping: bool
    #: How long the engine's waits last.
    timing: Timing

    @property
    def journal(self) -> OperationJournal: ...

    def clock(self) -> float:
        """Wall-clock seconds (deadlines and mechanisms' timers survive a restart)."""
        ...

    # -- telling the listener
    def changed(self, runner: RunnerT) -> None: ...
    def publish_progress(self, runner: RunnerT) -> None:
        """The progress taken and not yet told is journaled and told now (before an end)."""
        ...
    def journal_progress(self, runner: RunnerT) -> None:
        """The progress taken and not yet journaled goes to the journal's queue now, not told
        (before a change that is committed and then told with it)."""
        ...
    def progressed(self, runner: RunnerT) -> None:
        """Only the progress moved: told (and journaled) coalesced, a little later."""
        ...
    def operation_event(self, op_id: str, kind: str, data: dict[str, Any]) -> None: ...
    def problem(self, kind: str, message: str) -> None: ...

    # -- handles in the keyring
    async def keyring_usable(self) -> bool: ...
    async def put_handle(self, value: str) -> str: ...
    def keyring_failed(self, exc: Exception) -> None: ...
    async def delete_secret(self, ref: str) -> None: ...

    # -- request routing
    def own_request(self, runner: RunnerT, session: ClientSession, rid: RequestId) -> None: ...
    def disown_request(self, runner: RunnerT, session: ClientSession, rid: RequestId) -> None: ...
    def bind_http_session(self, runner: RunnerT, old: tuple[str, str] | None,
                          new: tuple[str, str] | None) -> None: ...
    def shares_http_session(self, runner: RunnerT, session_id: str) -> bool: ...
    def forget(self, runner: RunnerT) -> None:
        """The operation ended: it leaves the engine's indexes."""
        ...

    # -- first contact after a restart, and the poll budget
    def heard_from(self, runner: RunnerT) -> None: ...
    async def after_first_contacts(self, server: str) -> None: ...
    def poll_budget(self, server: str) -> PollBudget: ...
    async def listed_task(self, server: str, session: ClientSession, task_id: str) -> dict[str, Any] | None:
        """A restored task's first word from its server's listing (hostapp.engine.task_listing)."""
        ...

    # -- the person
    async def ask_person(self, runner: RunnerT, params: dict[str, Any], *,
                         qid: str | None = None, method: str = "elicitation/create") -> dict[str, Any]: ...
    def withdraw_question(self, qid: str) -> None: ...
    def withdraw_questions(self, op_id: str) -> None: ...

    # -- servers
    def connection(self, server: str) -> ServerConnection: ...
    def roots_of(self, server: str) -> dict[str, Any]: ...


#: How far a status message says a task got: "crunch 5/12", "3 of 8", "40%".
_STEP_OF = re.compile(r"(?<![\d./])(\d+(?:\.\d+)?)\s*(?:/|of)\s*(\d+(?:\.\d+)?)(?![\d./])")
_PERCENT = re.compile(r"(?<![\d./])(\d+(?:\.\d+)?)\s*%")


def progress_in_message(message: str | None) -> tuple[float, float] | None:
    """The (progress, total) a status message states, as "N/M", "N of M" or "NN%"; None
    when it states none (or something that is not a step of a whole)."""
    if not message:
        return None
    step = _STEP_OF.search(message)
    if step is not None:
        done, total = float(step.group(1)), float(step.group(2))
        if 0 < total and 0 <= done <= total:
            return done, total
    percent = _PERCENT.search(message)
    if percent is not None and 0 <= float(percent.group(1)) <= 100:
        return float(percent.group(1)), 100.0
    return None


def status_of_mark(mark: str) -> OperationStatus:
    """The journal status for a status a mechanism reports: waiting for input, or running."""
    return OperationStatus.INPUT_REQUIRED if mark == OperationStatus.INPUT_REQUIRED else OperationStatus.RUNNING


def outcome_message(status: str, result: dict[str, Any] | None, error: dict[str, Any] | None) -> str | None:
    """The line a person reads for an ended operation: the error, or the result's first line."""
    if error and error.get("message"):
        return str(error["message"])
    if result:
        for block in result.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "text" and block.get("text"):
                return str(block["text"]).splitlines()[0][:300]
    return None


#: Why a stop would end an operation instead of resuming it (:func:`lost_at_stop`).
LOST_UNSENT = "not sent yet: it would end without running"
LOST_PLAIN_REQUEST = "a plain request: nothing can resume it"
LOST_HANDLE_NOT_KEPT = "its handle could not be kept in the keyring"


def lost_at_stop(status: str, sent: bool, handle_mechanism: str | None, handle_kept: bool) -> str | None:
    """Why an operation would not survive a stop of its host now, in plain words; None
    when it would (or it has ended). A restart resumes an operation from its mechanism's
    last committed state (``handle_mechanism``: the mechanism that state names, None
    before any commit) with its handle in the keyring (``handle_kept``, the journal's
    ``resumable``). Nothing resumes a call never sent (the next start ends it "never
    sent": it did not run), nor a plain request, nor a call whose server has not yet
    answered with the handle that would resume it: its outcome would be unknown."""
    if status in TERMINAL:
        return None
    if handle_mechanism in (None, "direct"):
        return LOST_PLAIN_REQUEST if sent else LOST_UNSENT
    if not handle_kept:
        return LOST_HANDLE_NOT_KEPT
    return None


def operation_view(record: OperationRecord) -> api.OperationView:
    """What a person is shown of a journaled operation."""
    message = record.message
    if record.status in TERMINAL:
        message = outcome_message(record.status, record.result, record.error) or message
    return api.OperationView(
        id=record.id, server=record.server, tool=record.tool, method=record.method,
        arguments=(record.params or {}).get("arguments", {}), status=record.status,
        progress=record.progress, total=record.total, message=message,
        created_at=record.created_at, updated_at=record.updated_at,
        ended_at=record.updated_at if record.status in TERMINAL else None,
        needs_input=record.status == OperationStatus.INPUT_REQUIRED, result=record.result, error=record.error,
        mechanism=record.mechanism, view_of=record.view_of, view_calls=record.view_calls,
        stalled=record.stalled if record.status not in TERMINAL else None,
        lost_at_stop=lost_at_stop(record.status, record.jsonrpc_id is not None, (record.handle or {}).get("mechanism"),
                                  bool(record.resumable)))


def mechanism_for(conn: ServerConnection, tool: str | None) -> Mechanism:
    """The mechanism for a call of ``tool``, from what the server said it offers."""
    tool_def: dict[str, Any] = next((t for t in conn.tools if t.get("name") == tool), {})
    info = conn.info
    era = info.era if info else "handshake"
    caps = info.capabilities if info else {}
    return mechanisms.start_mechanism(era, caps, tool_def, conn.cfg.transport).use_timing(conn.timing)
