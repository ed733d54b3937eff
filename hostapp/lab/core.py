"""The lab server's protocol core: requests in, messages out, work that outlives connections.

Transport-free. The HTTP and stdio front ends (:mod:`hostapp.lab.http`,
:mod:`hostapp.lab.stdio`) turn bytes into :class:`~hostapp.lab.call.Call` objects and
deliver what the core writes into stored streams (:class:`hostapp.lab.state.LabState`).

Every message the lab sends about a request goes into that request's stored stream
first and is delivered from there. So a dropped SSE connection is replayed by
``Last-Event-ID``, ``stream/resume`` and ``requests/resume`` copy what was not yet
delivered, and a restarted lab still has all of it. Time-based work runs as *jobs*
(rows in ``jobs``) driven by :meth:`LabCore.run_job`, independent of any connection; on
start-up :meth:`LabCore.resume_jobs` continues every unfinished one.

Each resume mechanism is one module of :mod:`hostapp.lab.mechanisms`: the tool that
starts it, the methods that continue it, what its jobs do when they end. The core keeps
what they share (stored streams, jobs and their runners, questions to the client, the
handshake and the simple methods) and dispatches to them by tool name, method name and
job kind.

Job states: ``working`` → ``completed`` | ``failed`` | ``cancelled`` (``abandoned`` for
stateless-era calls whose connection died with the process).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from hostapp.lab import showcase
from hostapp.lab import tools as catalogue
from hostapp.lab.call import (
    DEFERRED,
    SERVER_INFO,
    SERVER_INFO_META_KEY,
    Call,
    Deferred,
    HttpRpcError,
    InputRequired,
    RequestKey,
    now_iso,
    stateless_result,
)
from hostapp.lab.mechanisms.async_tools import AsyncTools
from hostapp.lab.mechanisms.base import LabMechanism, MethodHandler, ToolHandler
from hostapp.lab.mechanisms.mrtr import Mrtr
from hostapp.lab.mechanisms.resumable import ResumableRequests
from hostapp.lab.mechanisms.resume_token import ResumeTokens
from hostapp.lab.mechanisms.sse import SseCalls
from hostapp.lab.mechanisms.streams import Streams
from hostapp.lab.mechanisms.tasks_2025 import Tasks2025
from hostapp.lab.mechanisms.tasks_extension import (
    TASKS_EXTENSION_METHODS,
    TasksExtension,
    missing_extension,
    opted_in,
)
from hostapp.lab.state import JobRow, LabState, handle_key, new_handle
from hostapp.lab.status import ENTRY as STATUS_ENTRY
from hostapp.lab.status import STATUS_URI, StatusResource
from hostapp.protocol.eras import (
    ALL_VERSIONS,
    CLIENT_CAPABILITIES_META_KEY,
    HANDSHAKE,
    HANDSHAKE_OFFER,
    HANDSHAKE_VERSIONS,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    STATELESS,
    STATELESS_VERSION,
    TASKS_EXTENSION,
)
from hostapp.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    URL_ELICITATION_REQUIRED,
    RequestId,
    RpcError,
)

__all__ = [
    "DEFERRED",
    "HEADER_MISMATCH",
    "SERVER_INFO",
    "SERVER_INFO_META_KEY",
    "STATELESS",
    "STATELESS_VERSION",
    "STREAMED_METHODS",
    "Call",
    "Deferred",
    "Faults",
    "HttpRpcError",
    "InputRequired",
    "LabCore",
    "now_iso",
    "server_capabilities",
    "stateless_result",
]

log = logging.getLogger("hostapp.lab")

SUPPORTED_VERSIONS = ALL_VERSIONS
UNSUPPORTED_PROTOCOL_VERSION = -32022
HEADER_MISMATCH = -32020

INSTRUCTIONS = ("The hostapp lab: every way a long MCP request can outlive its connection, with tools "
                "that run for a while and report progress.")

#: Methods whose answer is delivered through a stored stream (SSE on HTTP), because they
#: may send notifications or server-to-client requests before the response.
STREAMED_METHODS = frozenset({"tools/call", "tasks/result", "requests/resume", "stream/resume"})

#: Handshake-era methods that 2026-07-28 removed; a stateless request for them is "not found".
REMOVED_IN_STATELESS = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe",
                                  "resources/unsubscribe"})

#: MCP's error code for ``resources/read`` of a URI the server does not have.
RESOURCE_NOT_FOUND = -32002

LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


def server_capabilities(era: str = HANDSHAKE) -> dict[str, Any]:
    """Everything the lab speaks, in one place (initialize and server/discover)."""
    capabilities: dict[str, Any] = {
        "tools": {"listChanged": False},
        "logging": {},
        # lab://status changes; only the handshake era has resources/subscribe.
        "resources": {"subscribe": True} if era == HANDSHAKE else {},
        "prompts": {},
        # 2026-07-28 tasks extension (SEP-2663)
        "extensions": {TASKS_EXTENSION: {}, showcase.SKILLS_EXTENSION: {}},
        # Drafts without a released home: announced both top-level (as the drafts name them)
        # and under experimental, where strict clients look for non-standard capabilities.
        "resumableRequests": {},
        "streams": {},
        "experimental": {"resumableRequests": {}, "streams": {}, "asyncTools": {}, "resumeTokens": {}},
    }
    if era == HANDSHAKE:
        # 2025-11-25 tasks (SEP-1686); the stateless era has them only as the extension.
        capabilities["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    return capabilities


@dataclass
class Faults:
    """Fault injection switches (``--drop-after``, ``--exit-after``, ``--refuse-for``)."""

    drop_after: int | None = None
    exit_after: int | None = None
    refuse_for: float = 0.0
    started_at: float = field(default_factory=time.monotonic)

    def refusing(self) -> bool:
        return time.monotonic() - self.started_at < self.refuse_for


class LabCore:
    """Dispatches requests and runs jobs. One per lab process.

    Responsibilities: the handshake and the era of each request (:meth:`make_call`,
    :meth:`initialize`); stored streams and who waits on them (:meth:`emit`,
    :meth:`tail`); dispatch of methods and tools, to itself or to the mechanism that
    registered them (:meth:`answer`); questions to the client (:meth:`elicit`,
    :meth:`ask_client`); jobs, their runners and their ends (:meth:`new_job`,
    :meth:`run_job`, :meth:`stop_job`), handed to the mechanism of the job's kind.
    """

    def __init__(self, state: LabState, faults: Faults | None = None, base_url: str | None = None,
                 time_scale: float = 1.0):
        self.state = state
        self.faults = faults or Faults()
        #: The lab's clock against real time (``--time-scale``): a job's ``seconds`` and the
        #: intervals the lab announces (``retry``, poll intervals, resume intervals) are
        #: multiplied by it. 1 is real time; the tests run the lab at 0.1, ten times faster.
        self.time_scale = time_scale
        #: Where the lab's HTTP listener is reached (its consent pages among it).
        self.base_url = base_url
        #: Opens an HTTP listener for the consent pages when a URL question needs one and
        #: there is none yet (a stdio lab started without ``--http``); sets ``base_url``.
        self.open_consent_listener: Callable[[], Awaitable[None]] | None = None
        self._wakeups: dict[str, asyncio.Event] = {}
        self._job_events: dict[str, asyncio.Event] = {}
        self._runners: dict[str, asyncio.Task[None]] = {}
        self._request_tasks: dict[RequestKey, asyncio.Task[None]] = {}
        self._request_streams: dict[RequestKey, str] = {}
        # A call's stream -> the stream whose messages it carries and the newest one copied
        # (stream/resume, requests/resume): marked delivered there once this one is.
        self._copied: dict[str, tuple[str, int]] = {}
        self._stream_requests: dict[str, RequestKey] = {}
        self._pending_client: dict[str, asyncio.Future[Any]] = {}
        self._client_ids = itertools.count(1)
        self._events_sent = 0
        self._stopping = False
        self._url_visits: dict[str, asyncio.Event] = {}
        self.status = StatusResource(scaled=self.scaled, job_counts=self._job_counts, notify=self._notify_session)
        self._url_owner: dict[str, str | None] = {}
        self._required_url_done: dict[str | None, list[str]] = {}
        self._tools: dict[str, ToolHandler] = {
            "ask_form": self._tool_ask_form,
            "ask_model": self._tool_ask_model,
            "ask_url": self._tool_ask_url,
            "fail": self._tool_fail,
            "lab_stats": self._tool_lab_stats,
            "show_card": self._tool_show_card,
        }
        self._methods: dict[str, MethodHandler] = {
            "ping": self._ping,
            "server/discover": self._discover,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "resources/list": self._resources_list,
            "resources/templates/list": self._empty("resourceTemplates"),
            "resources/read": self._resources_read,
            "resources/subscribe": self._resources_subscribe,
            "resources/unsubscribe": self._resources_unsubscribe,
            "skills/list": self._skills_list,
            "prompts/list": self._empty("prompts"),
            "logging/setLevel": self._set_level,
        }
        # The resume mechanisms, one module each (hostapp.lab.mechanisms).
        self._mrtr = Mrtr(self)
        tasks_extension = TasksExtension(self)
        self._mechanisms: list[LabMechanism] = [
            SseCalls(self), Tasks2025(self, tasks_extension), tasks_extension, self._mrtr, ResumeTokens(self),
            Streams(self), ResumableRequests(self), AsyncTools(self),
        ]
        self._by_job_kind: dict[str, LabMechanism] = {}
        for mechanism in self._mechanisms:
            self._tools.update(mechanism.tools())
            self._methods.update(mechanism.methods())
            self._by_job_kind.update(dict.fromkeys(mechanism.job_kinds, mechanism))

    # ------------------------------------------------------------------ streams
    def new_stream(self, kind: str, session_key: str | None) -> str:
        stream_id = uuid.uuid4().hex
        self.state.add_stream(stream_id, kind, session_key)
        return stream_id

    def emit(self, stream_id: str | None, payload: dict[str, Any], close: bool = False) -> None:
        """Store one outgoing message on a stream and wake whoever delivers it."""
        if stream_id is None:
            return
        self.state.append(stream_id, payload, close=close)
        if close:
            self._forget_request(stream_id)
        self._wake(stream_id)
        self._events_sent += 1
        if self.faults.exit_after is not None and self._events_sent >= self.faults.exit_after:
            # The event is committed; dying now is the "server crashed mid-call" fault.
            print(f"lab exiting after {self._events_sent} events (--exit-after)", file=sys.stderr, flush=True)
            os._exit(3)

    def close_stream(self, stream_id: str) -> None:
        self.state.close_stream(stream_id)
        self._forget_request(stream_id)
        self._wake(stream_id)

    def _forget_request(self, stream_id: str) -> None:
        request_key = self._stream_requests.pop(stream_id, None)
        if request_key is not None and self._request_streams.get(request_key) == stream_id:
            del self._request_streams[request_key]

    def _wake(self, stream_id: str) -> None:
        event = self._wakeups.pop(stream_id, None)
        if event is not None:
            event.set()

    async def tail(self, stream_id: str, after_seq: int) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        """Yield (seq, message) from a stream until it is closed and fully read."""
        while True:
            event = self._wakeups.setdefault(stream_id, asyncio.Event())
            batch = self.state.messages_after(stream_id, after_seq)
            for seq, message in batch:
                after_seq = seq
                yield seq, message
            if not batch:
                row = self.state.stream(stream_id)
                if row is None or row["closed"]:
                    # re-check after seeing "closed": a final append may have raced the flag
                    if not self.state.messages_after(stream_id, after_seq):
                        return
                    continue
                await event.wait()

    async def copy_pending(self, call: Call, source: str, stop_at_response_for: Any = None) -> bool:
        """Copy undelivered messages of ``source`` onto this call's stream; True if a response closed it."""
        row = self.state.stream(source)
        if row is None:
            raise KeyError(f"no stream {source!r}")
        async for seq, message in self.tail(source, row["delivered_seq"]):
            is_response = "method" not in message and stop_at_response_for is not None \
                and message.get("id") == stop_at_response_for
            self.emit(call.stream, message, close=is_response)
            # Delivered once this call's own stream is (see delivered): until then a
            # resume that died on the way copies it again.
            if call.stream is not None:
                self._copied[call.stream] = (source, seq)
            if is_response:
                return True
        return False

    def delivered(self, stream_id: str, seq: int) -> None:
        """The client has a stream's messages up to ``seq`` (the stream ended cleanly, or
        was written to a pipe): so it has what they copied from another stream."""
        self.state.mark_delivered(stream_id, seq)
        copied = self._copied.pop(stream_id, None)
        if copied is not None:
            self.state.mark_delivered(*copied)

    # ------------------------------------------------------------------ requests
    def make_call(self, request_id: RequestId, method: str, params: dict[str, Any] | None, *,
                  session_id: str | None, header_version: str | None, transport: str) -> Call:
        """Work out the era and the client's capabilities; raise RpcError (with an HTTP status hint)."""
        params = params or {}
        meta = params.get("_meta") or {}
        meta_version = meta.get(PROTOCOL_VERSION_META_KEY)
        if meta_version is not None or header_version == STATELESS_VERSION:
            if header_version is not None and meta_version is not None and header_version != meta_version:
                raise HttpRpcError(400, HEADER_MISMATCH, "MCP-Protocol-Version header does not match "
                                   "_meta io.modelcontextprotocol/protocolVersion")
            if meta_version is None:
                raise HttpRpcError(400, INVALID_PARAMS, "_meta io.modelcontextprotocol/protocolVersion is required")
            version = meta_version
            if version != STATELESS_VERSION:
                raise HttpRpcError(400, UNSUPPORTED_PROTOCOL_VERSION, f"unsupported protocol version {version!r}",
                                   {"requested": version, "supported": list(SUPPORTED_VERSIONS)})
            caps = meta.get(CLIENT_CAPABILITIES_META_KEY)
            if not isinstance(caps, dict):
                raise HttpRpcError(400, INVALID_PARAMS, "_meta io.modelcontextprotocol/clientCapabilities is required")
            return Call(request_id, method, params, STATELESS, STATELESS_VERSION, None, None, caps,
                        meta.get(LOG_LEVEL_META_KEY), transport=transport)
        if method in ("initialize", "server/discover"):
            return Call(request_id, method, params, HANDSHAKE, HANDSHAKE_OFFER, None, None, {}, None,
                        transport=transport)
        if session_id is None:
            raise HttpRpcError(400, INVALID_REQUEST, "missing Mcp-Session-Id: initialize first")
        session = self.state.session(session_id)
        if session is None:
            raise HttpRpcError(404, INVALID_REQUEST, "unknown or ended session; initialize again")
        if header_version is not None and header_version != session.protocol_version:
            raise HttpRpcError(400, INVALID_REQUEST, f"MCP-Protocol-Version {header_version!r} does not match "
                               f"the session's {session.protocol_version!r}")
        return Call(request_id, method, params, HANDSHAKE, session.protocol_version, session.key,
                    session.session_stream, session.client_capabilities, session.log_level, transport=transport)

    def initialize(self, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Start a handshake-era session; return (session id, initialize result)."""
        requested = params.get("protocolVersion")
        version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_OFFER
        session_id = new_handle()
        session_stream = uuid.uuid4().hex
        self.state.add_session(session_id, version, params.get("capabilities") or {}, session_stream)
        self.state.add_stream(session_stream, "session", handle_key(session_id))
        result = {"protocolVersion": version, "capabilities": server_capabilities(),
                  "serverInfo": SERVER_INFO, "instructions": INSTRUCTIONS}
        return session_id, result

    def end_session(self, session_id: str) -> bool:
        return self.state.delete_session(session_id)

    def start_streamed(self, call: Call) -> str:
        """Run a streamed method in the background; its answer lands on the returned stream."""
        kind = "ephemeral" if call.era == STATELESS else "request"
        call.stream = self.new_stream(kind, call.session_key)
        task = asyncio.create_task(self._run_streamed(call))
        request_key: RequestKey = (call.session_key, json.dumps(call.request_id))
        self._request_tasks[request_key] = task
        self._request_streams[request_key] = call.stream
        task.add_done_callback(lambda _t: self._request_tasks.pop(request_key, None))
        self._stream_requests[call.stream] = request_key
        return call.stream

    async def _run_streamed(self, call: Call) -> None:
        stream = call.stream
        assert stream is not None  # start_streamed gave the call its stream
        try:
            response = await self.answer(call)
        except asyncio.CancelledError:
            if not self._stopping:  # the lab going away cancels nobody's request
                self.close_stream(stream)  # cancelled: no response, per the cancellation rules
            raise
        if response is not None:
            self.emit(stream, response, close=True)

    def precheck(self, call: Call) -> RpcError | None:
        """An error known before any work starts (so HTTP can answer it with a status code)."""
        if call.era == STATELESS and call.method == "tools/call" \
                and call.params.get("name") == "long_task_ext" and not opted_in(call):
            return missing_extension("long_task_ext")
        return None

    async def answer(self, call: Call) -> dict[str, Any] | None:
        """Handle a request; return its JSON-RPC response, or None when a job answers later."""
        handler = self._methods.get(call.method)
        try:
            if handler is None or (call.era == STATELESS and call.method in REMOVED_IN_STATELESS):
                raise RpcError(METHOD_NOT_FOUND, f"method not found: {call.method}")
            if call.era == STATELESS and call.method in TASKS_EXTENSION_METHODS and not opted_in(call):
                raise missing_extension(call.method)
            result = await handler(call)
        except InputRequired as need:
            result = {"resultType": "input_required", "inputRequests": need.input_requests}
            if need.state is not None:
                result["requestState"] = self._mrtr.sign_state(need.state)
        except RpcError as err:
            return {"jsonrpc": "2.0", "id": call.request_id, "error": err.to_error().to_obj()}
        except (ValueError, TypeError, KeyError) as exc:
            return {"jsonrpc": "2.0", "id": call.request_id,
                    "error": {"code": INVALID_PARAMS, "message": f"invalid params: {exc}"}}
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a lab bug must still answer the request
            log.exception("internal error in %s", call.method)
            return {"jsonrpc": "2.0", "id": call.request_id,
                    "error": {"code": INTERNAL_ERROR, "message": f"internal error: {type(exc).__name__}"}}
        if isinstance(result, Deferred):
            return None
        return {"jsonrpc": "2.0", "id": call.request_id, "result": self._finish_result(call, result)}

    @staticmethod
    def _finish_result(call: Call, result: dict[str, Any]) -> dict[str, Any]:
        return stateless_result(result) if call.era == STATELESS else result

    def client_response(self, message: dict[str, Any]) -> bool:
        """Route a client's answer to a server-to-client request; False if nobody waits for it."""
        future = self._pending_client.pop(str(message.get("id")), None)
        if future is None or future.done():
            return False
        if "error" in message:
            err = message["error"] or {}
            future.set_exception(RpcError(err.get("code", INTERNAL_ERROR), err.get("message", "")))
        else:
            future.set_result(message.get("result") or {})
        return True

    def notification(self, method: str, params: dict[str, Any] | None, session_id: str | None) -> None:
        params = params or {}
        if method == "notifications/cancelled":
            session = self.state.session(session_id) if session_id else None
            self.cancel_request(session.key if session else None, params.get("requestId"))

    def cancel_request(self, session_key: str | None, request_id: Any) -> None:
        request_key: RequestKey = (session_key, json.dumps(request_id))
        task = self._request_tasks.get(request_key)
        if task is not None:
            task.cancel()
        for mechanism in self._mechanisms:
            mechanism.request_cancelled(request_key)
        stream = self._request_streams.get(request_key)
        if stream is not None:
            # Work started by this request (plain calls, async operations, resumable requests,
            # streams) stops; tasks are cancelled only by tasks/cancel, as SEP-1686 says.
            for job in self.state.jobs(active_only=True):
                if job.out_stream == stream and job.mechanism != "task":
                    self.stop_job(job.key, "cancelled", "cancelled by the client")
            self.close_stream(stream)

    def disconnected(self, stream_id: str) -> None:
        """A stateless-era response stream closed early: that cancels the request."""
        row = self.state.stream(stream_id)
        if row is None or row["kind"] != "ephemeral" or row["closed"]:
            return
        for key, sid in list(self._request_streams.items()):
            if sid == stream_id:
                task = self._request_tasks.get(key)
                if task is not None:
                    task.cancel()
        for job in self.state.jobs(mechanism="call", active_only=True):
            if job.out_stream == stream_id:
                self.stop_job(job.key, "cancelled", "response stream closed")
        self.close_stream(stream_id)

    # ------------------------------------------------------------------ client interaction
    async def elicit(self, call: Call, key: str, params: dict[str, Any],
                     state: dict[str, Any] | None = None, method: str = "elicitation/create") -> dict[str, Any]:
        """Ask the client: ``method`` (elicitation/create, sampling/createMessage) in the
        handshake era, or as an input request of input_required (stateless era)."""
        if call.era == STATELESS:
            responses = call.params.get("inputResponses") or {}
            if key in responses:
                return responses[key]
            raise InputRequired({key: {"method": method, "params": params}}, state)
        return await self.ask_client(call, method, params)

    async def ask_client(self, call: Call, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = f"lab-{next(self._client_ids)}-{uuid.uuid4().hex[:8]}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending_client[request_id] = future
        self.emit(call.stream or call.session_stream,
                  {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        try:
            return await future
        finally:
            self._pending_client.pop(request_id, None)

    def _log(self, call: Call, level: str, text: str) -> None:
        wanted = call.log_level
        if wanted is None or wanted not in LOG_LEVELS or LOG_LEVELS.index(level) < LOG_LEVELS.index(wanted):
            return
        self.emit(call.stream, {"jsonrpc": "2.0", "method": "notifications/message",
                                "params": {"level": level, "logger": "lab", "data": text}})

    def send_progress(self, stream: str | None, token: Any, done: int, total: int, message: str) -> None:
        """A progress notification on ``stream``, if the request asked for progress."""
        if token is None or stream is None:
            return
        self.emit(stream, {"jsonrpc": "2.0", "method": "notifications/progress",
                           "params": {"progressToken": token, "progress": done, "total": total,
                                      "message": message}})

    # ------------------------------------------------------------------ simple methods
    async def _ping(self, call: Call) -> dict[str, Any]:
        return {}

    async def _discover(self, call: Call) -> dict[str, Any]:
        return {"resultType": "complete", "supportedVersions": list(SUPPORTED_VERSIONS),
                "capabilities": server_capabilities(STATELESS), "serverInfo": SERVER_INFO,
                "instructions": INSTRUCTIONS, "cacheScope": "public", "ttlMs": 0}

    async def _tools_list(self, call: Call) -> dict[str, Any]:
        result: dict[str, Any] = {"tools": catalogue.tool_list(call.protocol_version, call.transport)}
        if call.era == STATELESS:
            result.update(cacheScope="public", ttlMs=0)
        return result

    @staticmethod
    def _empty(key: str) -> Callable[[Call], Awaitable[dict[str, Any]]]:
        async def handler(call: Call) -> dict[str, Any]:
            result: dict[str, Any] = {key: []}
            if call.era == STATELESS:
                result.update(cacheScope="public", ttlMs=0)
            return result
        return handler

    async def _resources_list(self, call: Call) -> dict[str, Any]:
        result: dict[str, Any] = {"resources": [dict(STATUS_ENTRY)]}
        if call.era == STATELESS:
            result.update(cacheScope="public", ttlMs=0)
        return result

    async def _resources_read(self, call: Call) -> dict[str, Any]:
        uri = call.params.get("uri")
        if uri == STATUS_URI:
            return self.status.read()
        result = showcase.read_resource(uri) if isinstance(uri, str) else None
        if result is None:
            raise RpcError(RESOURCE_NOT_FOUND, f"no resource {str(uri)[:200]!r}")
        return result

    def _subscribable(self, call: Call) -> str:
        uri = call.params.get("uri")
        if uri != STATUS_URI:
            raise RpcError(RESOURCE_NOT_FOUND, f"no resource to subscribe to at {str(uri)[:200]!r}")
        if call.session_key is None:
            raise RpcError(INVALID_REQUEST, "resources/subscribe needs a session")
        return call.session_key

    async def _resources_subscribe(self, call: Call) -> dict[str, Any]:
        self.status.subscribe(self._subscribable(call))
        return {}

    async def _resources_unsubscribe(self, call: Call) -> dict[str, Any]:
        self.status.unsubscribe(self._subscribable(call))
        return {}

    def _job_counts(self) -> tuple[int, int]:
        return len(self.state.jobs(active_only=True)), len(self.state.jobs())

    def _notify_session(self, session_key: str, message: dict[str, Any]) -> bool:
        stream = self.state.session_stream_of(session_key)
        if stream is None:
            return False
        self.emit(stream, message)
        return True

    async def _skills_list(self, call: Call) -> dict[str, Any]:
        return showcase.skills_list()

    async def _set_level(self, call: Call) -> dict[str, Any]:
        level = call.params.get("level")
        if level not in LOG_LEVELS:
            raise RpcError(INVALID_PARAMS, f"unknown log level {level!r}")
        if call.session_key:
            self.state.set_log_level(call.session_key, level)
        return {}

    # ------------------------------------------------------------------ tools/call
    async def _tools_call(self, call: Call) -> Any:
        name = call.params.get("name")
        args = call.params.get("arguments") or {}
        handler = self._tools.get(name)  # type: ignore[arg-type]
        if handler is None:
            raise RpcError(INVALID_PARAMS, f"unknown tool: {name!r}")
        if not isinstance(args, dict):
            raise RpcError(INVALID_PARAMS, "arguments must be an object")
        if name in catalogue.LONG_TOOLS:
            catalogue.duration(args)  # validate before any work starts
            if (args.get("ask") or args.get("sample")) and name not in catalogue.ASKING_TOOLS:
                raise RpcError(INVALID_PARAMS, f"{name} cannot ask a question: its mechanism has no way to carry "
                                               f"one (ask works with {', '.join(catalogue.ASKING_TOOLS)})")
        self._log(call, "info", f"{name} called")
        return await handler(call, args)

    def new_job(self, call: Call, tool: str, args: dict[str, Any], mechanism: str, key: str, *,
                out_stream: str | None, notify_stream: str | None, extra: dict[str, Any] | None = None,
                ttl_ms: int | None = None, poll_ms: int | None = None) -> JobRow:
        """Store a new job of kind ``mechanism`` under ``key`` and start running it."""
        seconds, steps = self.job_duration(args)
        now = time.time()
        job = JobRow(key=key, tool=tool, mechanism=mechanism, args=args, started_at=now, seconds=seconds,
                     steps=steps, step_done=0, status="working", status_message="started", result=None,
                     error=None, out_stream=out_stream, notify_stream=notify_stream,
                     progress_token=call.progress_token, request_id=call.request_id, ttl_ms=ttl_ms,
                     poll_ms=poll_ms, created_at=now, updated_at=now, extra=extra or {})
        self.state.add_job(job)
        self.state.count_execution(tool, key)
        self._start_runner(key)
        return job

    def job_duration(self, args: dict[str, Any]) -> tuple[float, int]:
        """The (seconds, steps) a long tool's work really takes: its ``seconds`` at the
        lab's time scale."""
        seconds, steps = catalogue.duration(args)
        return seconds * self.time_scale, steps

    def scaled(self, seconds: float) -> float:
        """An interval the lab announces or waits, at its time scale."""
        return seconds * self.time_scale

    def poll_ms(self, args: dict[str, Any]) -> int:
        """The poll interval announced for a task of a long tool: a tenth of its work,
        within 100 ms .. 1 s (at the lab's time scale)."""
        seconds = self.job_duration(args)[0]
        return int(max(self.scaled(0.1), min(self.scaled(1.0), seconds / 10)) * 1000) or 1

    # ------------------------------------------------------------------ tools of no mechanism
    async def _tool_fail(self, call: Call, args: dict[str, Any]) -> Any:
        mode = args.get("mode", "tool_error")
        self.state.count_execution("fail", uuid.uuid4().hex)
        if mode == "tool_error":
            return catalogue.text_result("the lab failed this call on purpose (tool error)", is_error=True)
        if mode == "rpc_error":
            raise RpcError(INTERNAL_ERROR, "the lab failed this call on purpose (JSON-RPC error)")
        if mode == "crash":
            print("lab crashing on purpose (fail mode=crash)", file=sys.stderr, flush=True)
            os._exit(70)
        raise RpcError(INVALID_PARAMS, f"unknown fail mode {mode!r}")

    async def _tool_lab_stats(self, call: Call, args: dict[str, Any]) -> Any:
        counts = self.state.execution_counts()
        duplicates = [{"tool": t, "count": n} for t, _k, n in self.state.duplicate_executions()]
        return catalogue.text_result(json.dumps(counts, sort_keys=True),
                                     {"executions": counts, "duplicates": duplicates})

    async def _tool_show_card(self, call: Call, args: dict[str, Any]) -> Any:
        self.state.count_execution("show_card", uuid.uuid4().hex)
        return showcase.show_card(args)

    async def _tool_ask_form(self, call: Call, args: dict[str, Any]) -> Any:
        self.state.count_execution("ask_form", uuid.uuid4().hex)
        params: dict[str, Any] = {"message": args.get("message") or "Tell the lab a little about yourself.",
                                  "requestedSchema": catalogue.form_schema()}
        if call.protocol_version in ("2025-11-25", STATELESS_VERSION):
            params["mode"] = "form"
        answer = await self.elicit(call, "form", params)
        return catalogue.text_result(f"ask_form answer: {json.dumps(answer, sort_keys=True)}",
                                     {"action": answer.get("action"), "content": answer.get("content")})

    async def _tool_ask_model(self, call: Call, args: dict[str, Any]) -> Any:
        self.state.count_execution("ask_model", uuid.uuid4().hex)
        max_tokens = args.get("max_tokens", 200)
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise RpcError(INVALID_PARAMS, "max_tokens must be a positive integer")
        params = catalogue.sampling_request(args.get("prompt") or "Say hello to the lab in a few words.", max_tokens)
        try:
            answer = await self.elicit(call, "model", params, method="sampling/createMessage")
        except RpcError as exc:  # refused by the person or the client: the tool says so
            return catalogue.text_result(f"ask_model: the client did not sample ({exc.message})",
                                         {"sampled": False, "error": exc.message}, is_error=True)
        text = catalogue.sampled_text(answer)
        if text is None:
            raise RpcError(INVALID_PARAMS, "the client's sampling answer holds no text")
        return catalogue.text_result(f"ask_model: {text}", {"sampled": True, "text": text,
                                                            "model": answer.get("model")})

    def url_visited(self, elicitation_id: str) -> bool:
        """The consent page was opened: finish that URL elicitation."""
        event = self._url_visits.get(elicitation_id)
        if event is None:
            return False
        if not event.is_set():
            event.set()
            owner = self._url_owner.get(elicitation_id)
            self._required_url_done.setdefault(owner, []).append(elicitation_id)
            session_stream = self.state.session_stream_of(owner) if owner else None
            self.emit(session_stream, {"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                                       "params": {"elicitationId": elicitation_id}})
        return True

    async def _url_request(self, call: Call) -> dict[str, Any]:
        elicitation_id = uuid.uuid4().hex
        self._url_visits[elicitation_id] = asyncio.Event()
        self._url_owner[elicitation_id] = call.session_key
        if self.base_url is None and self.open_consent_listener is not None:
            await self.open_consent_listener()  # a stdio lab opens its page on first use
        base = self.base_url or "http://127.0.0.1"
        return {"mode": "url", "message": "Open this page of the lab to confirm.",
                "url": f"{base}/lab/consent/{elicitation_id}", "elicitationId": elicitation_id}

    async def _visit(self, elicitation_id: Any, answer: dict[str, Any], wait_seconds: float) -> bool:
        """Whether the consent page of ``elicitation_id`` was opened: at once if it was
        (the person may open it before answering, and the client then withdraws the
        question), else within ``wait_seconds`` of an ``accept``."""
        event = self._url_visits.get(elicitation_id) if isinstance(elicitation_id, str) else None
        if event is None:
            return False
        if not event.is_set() and answer.get("action") == "accept":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), wait_seconds)
        return event.is_set()

    async def _tool_ask_url(self, call: Call, args: dict[str, Any]) -> Any:
        if args.get("required_error"):
            done = self._required_url_done.get(call.session_key) or []
            if done:
                self.state.count_execution("ask_url", uuid.uuid4().hex)
                return catalogue.text_result("ask_url: the required URL was visited",
                                             {"elicitationId": done.pop(0), "visited": True})
            raise RpcError(URL_ELICITATION_REQUIRED, "this call needs a URL visited first",
                           {"elicitations": [await self._url_request(call)]})
        self.state.count_execution("ask_url", uuid.uuid4().hex)
        wait_seconds = float(args.get("wait_seconds", 60))
        if call.era == STATELESS and "url" in (call.params.get("inputResponses") or {}):
            # The second round of a multi round-trip request: the question's id comes back
            # in the requestState the first round signed.
            answer = call.params["inputResponses"]["url"]
            raw_state = call.params.get("requestState")
            elicitation_id: Any = self._mrtr.open_state(raw_state).get("elicitationId") if raw_state else None
        else:
            request = await self._url_request(call)
            elicitation_id = request["elicitationId"]
            answer = await self.elicit(call, "url", request, {"tool": "ask_url", "elicitationId": elicitation_id})
        visited = await self._visit(elicitation_id, answer, wait_seconds)
        if visited and call.era != STATELESS:
            self.emit(call.stream, {"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                                    "params": {"elicitationId": elicitation_id}})
        return catalogue.text_result(f"ask_url answer: {answer.get('action')}"
                                     + ("; the page was opened" if visited else ""),
                                     {"action": answer.get("action"), "visited": visited})

    # ------------------------------------------------------------------ jobs
    def _start_runner(self, key: str) -> None:
        task = asyncio.create_task(self.run_job(key))
        self._runners[key] = task
        task.add_done_callback(lambda _t: self._runners.pop(key, None))

    async def wait_job(self, key: str) -> JobRow:
        """Wait until a job is terminal; return its row."""
        while True:
            event = self.job_changed(key)
            job = self.state.job(key)
            if job is None:
                raise RpcError(INVALID_PARAMS, "unknown operation")
            if job.status not in ("working", "input_required", "submitted"):
                return job
            await event.wait()

    def job_changed(self, key: str) -> asyncio.Event:
        """An event set at the job's next change (status, answer, end)."""
        return self._job_events.setdefault(key, asyncio.Event())

    def _job_finished(self, key: str) -> None:
        """Wake everyone waiting on this job (it ended, or its status changed)."""
        event = self._job_events.pop(key, None)
        if event is not None:
            event.set()

    def provide_answer(self, key: str, answer: Any) -> None:
        """The person answered a job's question: record it and let the job go on."""
        job = self.state.job(key)
        if job is None or job.status != "input_required" or "answer" in job.extra:
            return
        self.state.update_job(key, status="working", status_message="answer received",
                              extra={**job.extra, "answer": answer})
        self._job_finished(key)

    async def _ask_mid_job(self, job: JobRow, step: int) -> JobRow:
        """Pause a task until its question is answered (by tasks/result or tasks/update)."""
        if "question" not in job.extra:
            if job.args.get("sample"):
                method = "sampling/createMessage"
                question = catalogue.sampling_request(f"{job.tool} is half done. Write one line to log for it.")
            else:
                method = "elicitation/create"
                question = {"message": f"{job.tool} is half done. Continue?", "mode": "form",
                            "requestedSchema": {"type": "object", "properties": {
                                "proceed": {"type": "boolean", "title": "Continue", "default": True}},
                                "required": ["proceed"]}}
            self.state.update_job(job.key, status="input_required", status_message="waiting for an answer",
                                  extra={**job.extra, "question": question, "input_key": "continue",
                                         "input_method": method})
            self._job_finished(job.key)
            mechanism = self._by_job_kind.get(job.mechanism)
            if mechanism is not None:
                mechanism.job_waiting(job)
        while True:
            event = self.job_changed(job.key)
            job = self.state.job(job.key)  # type: ignore[assignment]
            if "answer" in job.extra:
                break
            await event.wait()
        # The clock stood still while waiting: shift the schedule so the rest takes its share.
        self.state.update_job(job.key, started_at=time.time() - job.seconds * step / job.steps)
        return self.state.job(job.key)  # type: ignore[return-value]

    def stop_job(self, key: str, status: str, message: str) -> None:
        """End a job before its work is done (``cancelled`` or ``failed``)."""
        runner = self._runners.pop(key, None)
        if runner is not None:
            runner.cancel()
        self.state.update_job(key, status=status, status_message=message,
                              error={"code": INTERNAL_ERROR, "message": message} if status == "failed" else None)
        self._job_finished(key)

    async def run_job(self, key: str) -> None:
        """Drive a job's time-based work from its persisted progress to its end."""
        job = self.state.job(key)
        if job is None:
            return
        if job.status == "input_required" and "answer" not in job.extra:
            job = await self._ask_mid_job(job, job.step_done)  # restarted while waiting for the person
        for i in range(job.step_done + 1, job.steps + 1):
            due = job.started_at + job.seconds * i / job.steps
            # sleep(0) when overdue: catching up after a restart must not starve other requests
            await asyncio.sleep(max(0.0, due - time.time()))
            self.state.update_job(key, step_done=i, status_message=f"step {i}/{job.steps}")
            self._injected_crash(job, i)
            job = self.state.job(key)  # the notify target may have moved (resume tokens)
            if job is None:
                return  # deleted meanwhile
            self.send_progress(job.notify_stream, job.progress_token, i, job.steps,
                           job.args.get("message") or f"{job.tool}: step {i}/{job.steps}")
            if (job.args.get("ask") or job.args.get("sample")) and i == max(1, job.steps // 2) \
                    and "answer" not in job.extra:
                job = await self._ask_mid_job(job, i)
        self._complete(job)

    def _injected_crash(self, job: JobRow, step: int) -> None:
        """Per-call fault ``{"fault": {"exit_after_step": N}}``: die once, mid-job, after step N."""
        fault = job.args.get("fault") or {}
        if fault.get("exit_after_step") == step and not job.extra.get("fault_fired"):
            # Recorded first, so the restarted lab continues the job instead of dying again.
            self.state.update_job(job.key, extra={**job.extra, "fault_fired": True})
            print(f"lab exiting after step {step} of {job.tool} (fault argument)", file=sys.stderr, flush=True)
            os._exit(3)

    def _complete(self, job: JobRow) -> None:
        result = catalogue.work_result(job.tool, job.args,
                                       {"answer": job.extra["answer"]} if "answer" in job.extra else None)
        self.state.update_job(job.key, status="completed", status_message="done", result=result)
        mechanism = self._by_job_kind.get(job.mechanism)
        if mechanism is not None:
            mechanism.job_completed(job, result)
        self._job_finished(job.key)

    def respond(self, job: JobRow, result: dict[str, Any], *, close: bool = True) -> None:
        """Write a job's response onto the stream of the request that started it."""
        wire = stateless_result(result) if job.extra.get("stateless") else result
        self.emit(job.out_stream, {"jsonrpc": "2.0", "id": job.request_id, "result": wire}, close=close)

    def resume_jobs(self) -> int:
        """After a restart: continue every unfinished job; abandon stateless calls."""
        resumed = 0
        for job in self.state.jobs(active_only=True):
            if job.extra.get("ephemeral"):
                # A stateless-era call lived only as long as its response stream.
                self.state.update_job(job.key, status="abandoned", status_message="lab restarted")
                if job.out_stream:
                    self.close_stream(job.out_stream)
                continue
            self._start_runner(job.key)
            resumed += 1
        # A request answered by a coroutine of the previous process (not by a job) died
        # with it: its stream ends, so a replay by Last-Event-ID does not wait forever.
        answered_by_jobs = {job.out_stream for job in self.state.jobs(active_only=True) if job.out_stream}
        for job in self.state.jobs(active_only=True):
            mechanism = self._by_job_kind.get(job.mechanism)
            answered = mechanism.job_resumed(job) if mechanism is not None else None
            if answered is not None:
                answered_by_jobs.add(answered)
        for stream_id in self.state.open_streams("request"):
            if stream_id not in answered_by_jobs:
                self.close_stream(stream_id)
        return resumed

    async def shutdown(self) -> None:
        # Requests still being answered stay open in the state: the next lab answers them,
        # or closes them at start-up (resume_jobs).
        self._stopping = True
        await self.status.stop()
        tasks = [*self._runners.values(), *self._request_tasks.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
