"""Resume mechanisms: how an operation's outcome is fetched after a break.

Each of the eight ways MCP can carry a long request across a dropped connection, a
server restart or a host restart (docs/protocol.md, "The eight mechanisms") is one pure state
machine behind one interface, :class:`~hostapp.mechanisms.base.Mechanism`. No I/O, no
asyncio, no clock: time comes in as ``now`` (seconds since the epoch, wall clock, so
deadlines survive a restart), messages come in as plain dicts, and every hook returns
a list of *actions* (``hostapp.mechanisms.actions``) for the engine to carry out.

The engine's loop
-----------------
1. ``m = start_mechanism(era, server_capabilities, tool, transport_kind)``, or
   ``cls = choose_mechanism(...)`` and ``m = cls(method)`` with options
   (``Tasks2025(ttl_ms=...)``, ``AsyncTool(keep_alive=...)``,
   ``DirectRequest(sse_resumable=False)`` in the stateless era).
2. Journal the operation row, then ``params, actions = m.prepare(params, now=...)``;
   execute ``actions``, THEN send the original request with ``params``.
3. Feed every event for the operation and execute what comes back, in order:
   - a response to the original request: ``m.on_result(result, now=...)`` /
     ``m.on_error(error_object, now=...)``;
   - a response to a request the mechanism asked for: the same, with
     ``method=<that SendRequest's method>``;
   - a notification routed to it (by progressToken, by request id, or because
     ``m.claims(method, params)``): ``m.on_notification(method, params, now=...)``;
   - an SSE event id / ``retry`` on the original request's stream:
     ``m.on_stream_event(event_id, retry_ms, now=...)``;
   - the connection dropped: ``m.on_disconnect(now=..., session_lost=<HTTP 404>)``;
   - the connection is back (or, after a host restart,
     ``m = restore_mechanism(state, secret)`` once connected): ``m.resume(now=...)``;
   - a ScheduleWake came due: ``m.wake(now=...)``;
   - the person answered an AskInput: ``m.answer_input(responses, now=...)``;
   - the person cancelled: ``m.cancel(now=...)``; the engine's own deadline passed:
     ``m.expire(now=...)``.
   Deleting the operation's secret once it is terminal is the engine's job.
4. Stop feeding once a terminal action (Deliver, Cancelled, Unknown) was executed;
   every hook returns ``[]`` after it anyway, so a result arriving twice is delivered
   once.

The action contract
-------------------
- Execute the actions of one list in order. **CommitHandle** journals ``state`` and
  puts ``secret`` in the keyring (``None`` removes it) durably BEFORE any later action
  runs: a handle is never acted on before it would survive a crash.
- **SendRequest**: new JSON-RPC id, unless ``reuse_jsonrpc_id`` (then the original
  request's id, which the engine journaled with the operation row). With
  ``brings_original`` the engine also waits for the original request's response under
  its id on the session the request goes to. Answer it through
  ``on_result``/``on_error`` with ``method=`` the request's method. A failure to send
  (connection down) is an ``on_disconnect``.
- **SendNotification**: fire and forget. **CancelRequest**: ``notifications/cancelled``
  naming the original request's JSON-RPC id.
- **ResumeSseStream**: HTTP GET on the endpoint with ``Last-Event-ID`` (and the
  connection's session id): what it replays goes through the same hooks. HTTP 404
  is ``on_disconnect(session_lost=True)``; another failure ``on_disconnect()``.
- **ScheduleWake**: at most one pending per operation, the latest replaces it; journal
  ``at`` so wakes survive restart; drop it on a terminal action.
- **ReportProgress** (already monotonic), **PartialResult**, **MarkStatus** (one of
  ``OPERATION_STATUSES``): show and journal; progress may be batched.
- **AskInput**: ask the person (``kind`` "mrtr" or "task"); answer via ``answer_input``.
  Server-to-client requests (``elicitation/create`` on a task's ``tasks/result``
  stream, or tagged with an async tool's ``_operation``) are the session's business,
  not the mechanism's.
- **Deliver** / **Cancelled** / **Unknown**: terminal. Unknown means the outcome cannot
  be known; never re-run the call without the person asking.

``state()`` never holds a secret (where a server echoed the handle into data, such as
input-request keys built from a task id, it is replaced by a placeholder and put back
by ``restore``); ``secret()`` is the only handle to protect.
"""

from hostapp.mechanisms.actions import (
    OPERATION_STATUSES,
    TERMINAL_ACTIONS,
    Action,
    AskInput,
    Cancelled,
    CancelRequest,
    CommitHandle,
    Deliver,
    MarkStatus,
    PartialResult,
    ReportProgress,
    ResumeSseStream,
    ScheduleWake,
    SendNotification,
    SendRequest,
    Unknown,
)
from hostapp.mechanisms.async_tools import AsyncTool
from hostapp.mechanisms.base import MECHANISMS, Mechanism, restore_mechanism
from hostapp.mechanisms.capabilities import (
    candidate_mechanisms,
    choose_mechanism,
    client_capabilities,
    start_mechanism,
)
from hostapp.mechanisms.direct import DirectRequest
from hostapp.mechanisms.http_resumption import HttpStreamResumption
from hostapp.mechanisms.mrtr import Mrtr
from hostapp.mechanisms.resumable_requests import ResumableRequest
from hostapp.mechanisms.resume_tokens import ResumeTokenRequest
from hostapp.mechanisms.streams import StreamRequest
from hostapp.mechanisms.tasks_2025 import Tasks2025
from hostapp.mechanisms.tasks_extension import TasksExtension

__all__ = [
    "MECHANISMS",
    "OPERATION_STATUSES",
    "TERMINAL_ACTIONS",
    "Action",
    "AskInput",
    "AsyncTool",
    "CancelRequest",
    "Cancelled",
    "CommitHandle",
    "Deliver",
    "DirectRequest",
    "HttpStreamResumption",
    "MarkStatus",
    "Mechanism",
    "Mrtr",
    "PartialResult",
    "ReportProgress",
    "ResumableRequest",
    "ResumeSseStream",
    "ResumeTokenRequest",
    "ScheduleWake",
    "SendNotification",
    "SendRequest",
    "StreamRequest",
    "Tasks2025",
    "TasksExtension",
    "Unknown",
    "candidate_mechanisms",
    "choose_mechanism",
    "client_capabilities",
    "restore_mechanism",
    "start_mechanism",
]
