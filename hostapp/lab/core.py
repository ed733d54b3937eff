"""The lab server's protocol core: requests in, messages out, work that outlives connections.

Transport-free. The HTTP and stdio front ends (:mod:`hostapp.lab.http`,
:mod:`hostapp.lab.stdio`) turn bytes into :class:`Call` objects and deliver what the core
writes into stored streams (:class:`hostapp.lab.state.LabState`).

Every message the lab sends about a request goes into that request's stored stream
first and is delivered from there. So a dropped SSE connection is replayed by
``Last-Event-ID``, ``stream/resume`` and ``requests/resume`` copy what was not yet
delivered, and a restarted lab still has all of it. Time-based work runs as *jobs*
(rows in ``jobs``) driven by :meth:`LabCore.run_job`, independent of any connection; on
start-up :meth:`LabCore.resume_jobs` continues every unfinished one.

Job states: ``working`` → ``completed`` | ``failed`` | ``cancelled`` (``abandoned`` for
stateless-era calls whose connection died with the process).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import hmac
import itertools
import json
import logging
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from mcp_types import CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY, PROTOCOL_VERSION_META_KEY

from hostapp.lab import tools as catalogue
from hostapp.lab.state import JobRow, LabState, handle_key, new_handle
from hostapp.protocol.eras import (
    ALL_VERSIONS,
    HANDSHAKE,
    HANDSHAKE_OFFER,
    HANDSHAKE_VERSIONS,
    RELATED_TASK_META_KEY,
    STATELESS,
    STATELESS_VERSION,
    TASKS_EXTENSION,
)
from hostapp.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CAPABILITY,
    URL_ELICITATION_REQUIRED,
    RequestId,
    RpcError,
)

log = logging.getLogger("hostapp.lab")

SUPPORTED_VERSIONS = ALL_VERSIONS
RELATED_TASK = RELATED_TASK_META_KEY
UNSUPPORTED_PROTOCOL_VERSION = -32022
HEADER_MISMATCH = -32020
SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo"

SERVER_INFO = {"name": "hostapp-lab", "title": "hostapp lab server", "version": "0.1.0"}
INSTRUCTIONS = ("The hostapp lab: every way a long MCP request can outlive its connection, with tools "
                "that run for a while and report progress.")

#: Methods whose answer is delivered through a stored stream (SSE on HTTP), because they
#: may send notifications or server-to-client requests before the response.
STREAMED_METHODS = frozenset({"tools/call", "tasks/result", "requests/resume", "stream/resume"})

#: Handshake-era methods that 2026-07-28 removed; a stateless request for them is "not found".
REMOVED_IN_STATELESS = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe",
                                  "resources/unsubscribe"})

#: tasks/* methods of the tasks extension; a stateless client must opt in to use them.
TASKS_EXTENSION_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})

#: Default resume interval for draft streams and maxWait for resumable requests (seconds).
STREAM_RESUME_INTERVAL = {"min": 1, "max": 3600}
RESUMABLE_MAX_WAIT = 3600
TASK_TTL_MS = 3_600_000
DEFAULT_KEEP_ALIVE = 3600
LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


class Deferred:
    """Returned by a handler whose response a job (or a copy loop) will write later."""


DEFERRED = Deferred()


class InputRequired(Exception):
    """Raised in the stateless era when a handler needs an answer it does not have yet."""

    def __init__(self, input_requests: dict[str, Any], state: dict[str, Any] | None):
        super().__init__("input required")
        self.input_requests = input_requests
        self.state = state


def server_capabilities(era: str = HANDSHAKE) -> dict[str, Any]:
    """Everything the lab speaks, in one place (initialize and server/discover)."""
    capabilities: dict[str, Any] = {
        "tools": {"listChanged": False},
        "logging": {},
        "resources": {},
        "prompts": {},
        # 2026-07-28 tasks extension (SEP-2663)
        "extensions": {TASKS_EXTENSION: {}},
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


def now_iso(ts: float | None = None) -> str:
    moment = dt.datetime.fromtimestamp(time.time() if ts is None else ts, dt.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Call:
    """One request as the core sees it, whatever carried it."""

    request_id: RequestId
    method: str
    params: dict[str, Any]
    era: str
    protocol_version: str
    session_key: str | None
    session_stream: str | None
    capabilities: dict[str, Any]
    log_level: str | None
    stream: str | None = None  # stored stream the answer goes to (streamed methods)
    transport: str = "http"

    @property
    def meta(self) -> dict[str, Any]:
        return self.params.get("_meta") or {}

    @property
    def progress_token(self) -> Any:
        return self.meta.get("progressToken")


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
    """Dispatches requests and runs jobs. One per lab process."""

    def __init__(self, state: LabState, faults: Faults | None = None, base_url: str | None = None):
        self.state = state
        self.faults = faults or Faults()
        self.base_url = base_url
        self._signing_key = state.signing_key()
        self._wakeups: dict[str, asyncio.Event] = {}
        self._job_events: dict[str, asyncio.Event] = {}
        self._runners: dict[str, asyncio.Task[None]] = {}
        self._request_tasks: dict[tuple[str | None, str], asyncio.Task[None]] = {}
        self._request_streams: dict[tuple[str | None, str], str] = {}
        self._stream_requests: dict[str, tuple[str | None, str]] = {}
        self._async_by_request: dict[tuple[str | None, str], str] = {}
        self._pending_client: dict[str, asyncio.Future[Any]] = {}
        self._client_ids = itertools.count(1)
        self._events_sent = 0
        self._url_visits: dict[str, asyncio.Event] = {}
        self._url_owner: dict[str, str | None] = {}
        self._required_url_done: dict[str | None, list[str]] = {}
        # Task ids handed out by this process, by job key: the database keeps only digests,
        # so tasks/list and notifications/tasks/status can name only these.
        self._task_ids: dict[str, str] = {}
        self._tools: dict[str, Callable[[Call, dict[str, Any]], Awaitable[Any]]] = {
            "sleep_with_progress": self._tool_plain_job,
            "long_sse": self._tool_plain_job,
            "ask_form": self._tool_ask_form,
            "ask_url": self._tool_ask_url,
            "fail": self._tool_fail,
            "long_task": self._tool_long_task,
            "long_task_ext": self._tool_long_task_ext,
            "long_mrtr": self._tool_long_mrtr,
            "long_resume_token": self._tool_long_resume_token,
            "long_stream": self._tool_long_stream,
            "long_resumable": self._tool_long_resumable,
            "long_async": self._tool_long_async,
            "lab_stats": self._tool_lab_stats,
        }
        self._methods: dict[str, Callable[[Call], Awaitable[Any]]] = {
            "ping": self._ping,
            "server/discover": self._discover,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "resources/list": self._empty("resources"),
            "resources/templates/list": self._empty("resourceTemplates"),
            "prompts/list": self._empty("prompts"),
            "logging/setLevel": self._set_level,
            "tasks/get": self._tasks_get,
            "tasks/result": self._tasks_result,
            "tasks/list": self._tasks_list,
            "tasks/cancel": self._tasks_cancel,
            "tasks/update": self._tasks_update,
            "tools/async/status": self._async_status,
            "tools/async/result": self._async_result,
            "stream/resume": self._stream_resume,
            "stream/poll": self._stream_poll,
            "stream/poll/all": self._stream_poll_all,
            "requests/getStatus": self._requests_get_status,
            "requests/resume": self._requests_resume,
        }

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

    async def wait_stream(self, stream_id: str, timeout: float | None = None) -> None:
        """Wait until something new is appended to (or closes) a stream."""
        event = self._wakeups.setdefault(stream_id, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    async def tail(self, stream_id: str, after_seq: int):
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
        request_key = (call.session_key, json.dumps(call.request_id))
        self._request_tasks[request_key] = task
        self._request_streams[request_key] = call.stream
        task.add_done_callback(lambda _t: self._request_tasks.pop(request_key, None))
        self._stream_requests[call.stream] = request_key
        return call.stream

    async def _run_streamed(self, call: Call) -> None:
        try:
            response = await self.answer(call)
        except asyncio.CancelledError:
            self.close_stream(call.stream)  # cancelled: no response, per the cancellation rules
            raise
        if response is not None:
            self.emit(call.stream, response, close=True)

    def precheck(self, call: Call) -> RpcError | None:
        """An error known before any work starts (so HTTP can answer it with a status code)."""
        if call.era == STATELESS and call.method == "tools/call" \
                and call.params.get("name") == "long_task_ext" and not self._opted_in_tasks_extension(call):
            return self._missing_tasks_extension("long_task_ext")
        return None

    async def answer(self, call: Call) -> dict[str, Any] | None:
        """Handle a request; return its JSON-RPC response, or None when a job answers later."""
        handler = self._methods.get(call.method)
        try:
            if handler is None or (call.era == STATELESS and call.method in REMOVED_IN_STATELESS):
                raise RpcError(METHOD_NOT_FOUND, f"method not found: {call.method}")
            if call.era == STATELESS and call.method in TASKS_EXTENSION_METHODS \
                    and not self._opted_in_tasks_extension(call):
                raise self._missing_tasks_extension(call.method)
            result = await handler(call)
        except InputRequired as need:
            result = {"resultType": "input_required", "inputRequests": need.input_requests}
            if need.state is not None:
                result["requestState"] = self._sign_state(need.state)
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
        request_key = (session_key, json.dumps(request_id))
        task = self._request_tasks.get(request_key)
        if task is not None:
            task.cancel()
        async_key = self._async_by_request.pop(request_key, None)
        if async_key is not None:
            job = self.state.job(async_key)
            if job is not None and job.status in ("working", "input_required"):
                self._stop_job(async_key, "cancelled", "cancelled by the client")
        stream = self._request_streams.get(request_key)
        if stream is not None:
            # Work started by this request (plain calls, async operations, resumable requests,
            # streams) stops; tasks are cancelled only by tasks/cancel, as SEP-1686 says.
            for job in self.state.jobs(active_only=True):
                if job.out_stream == stream and job.mechanism != "task":
                    self._stop_job(job.key, "cancelled", "cancelled by the client")
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
                self._stop_job(job.key, "cancelled", "response stream closed")
        self.close_stream(stream_id)

    # ------------------------------------------------------------------ client interaction
    async def elicit(self, call: Call, key: str, params: dict[str, Any],
                     state: dict[str, Any] | None = None) -> dict[str, Any]:
        """Ask the client: elicitation/create (handshake era) or input_required (stateless era)."""
        if call.era == STATELESS:
            responses = call.params.get("inputResponses") or {}
            if key in responses:
                return responses[key]
            raise InputRequired({key: {"method": "elicitation/create", "params": params}}, state)
        return await self.ask_client(call, "elicitation/create", params)

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

    def _progress(self, stream: str | None, token: Any, done: int, total: int, message: str) -> None:
        if token is None or stream is None:
            return
        self.emit(stream, {"jsonrpc": "2.0", "method": "notifications/progress",
                           "params": {"progressToken": token, "progress": done, "total": total,
                                      "message": message}})

    # ------------------------------------------------------------------ request state (MRTR)
    def _sign_state(self, state: dict[str, Any]) -> str:
        body = base64.urlsafe_b64encode(json.dumps(state, separators=(",", ":")).encode()).decode().rstrip("=")
        mac = hmac.new(self._signing_key, body.encode(), hashlib.sha256).hexdigest()
        return f"{body}.{mac}"

    def _open_state(self, token: Any) -> dict[str, Any]:
        if not isinstance(token, str) or "." not in token:
            raise RpcError(INVALID_PARAMS, "invalid requestState")
        body, mac = token.rsplit(".", 1)
        expected = hmac.new(self._signing_key, body.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(mac, expected):
            raise RpcError(INVALID_PARAMS, "invalid requestState")
        return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))

    # ------------------------------------------------------------------ simple methods
    async def _ping(self, call: Call) -> dict[str, Any]:
        return {}

    async def _discover(self, call: Call) -> dict[str, Any]:
        return {"resultType": "complete", "supportedVersions": list(SUPPORTED_VERSIONS),
                "capabilities": server_capabilities(STATELESS), "serverInfo": SERVER_INFO,
                "instructions": INSTRUCTIONS, "cacheScope": "public", "ttlMs": 0}

    async def _tools_list(self, call: Call) -> dict[str, Any]:
        result: dict[str, Any] = {"tools": catalogue.tool_list(call.protocol_version)}
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
        self._log(call, "info", f"{name} called")
        return await handler(call, args)

    def _new_job(self, call: Call, tool: str, args: dict[str, Any], mechanism: str, key: str, *,
                 out_stream: str | None, notify_stream: str | None, extra: dict[str, Any] | None = None,
                 ttl_ms: int | None = None, poll_ms: int | None = None) -> JobRow:
        seconds, steps = catalogue.duration(args)
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

    async def _tool_plain_job(self, call: Call, args: dict[str, Any]) -> Any:
        name = call.params["name"]
        self._new_job(call, name, args, "call", uuid.uuid4().hex, out_stream=call.stream,
                      notify_stream=call.stream,
                      extra={"ephemeral": call.era == STATELESS, "stateless": call.era == STATELESS})
        return DEFERRED

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

    async def _tool_ask_form(self, call: Call, args: dict[str, Any]) -> Any:
        self.state.count_execution("ask_form", uuid.uuid4().hex)
        params: dict[str, Any] = {"message": args.get("message") or "Tell the lab a little about yourself.",
                                  "requestedSchema": catalogue.form_schema()}
        if call.protocol_version in ("2025-11-25", STATELESS_VERSION):
            params["mode"] = "form"
        answer = await self.elicit(call, "form", params)
        return catalogue.text_result(f"ask_form answer: {json.dumps(answer, sort_keys=True)}",
                                     {"action": answer.get("action"), "content": answer.get("content")})

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

    def _url_request(self, call: Call) -> dict[str, Any]:
        elicitation_id = uuid.uuid4().hex
        self._url_visits[elicitation_id] = asyncio.Event()
        self._url_owner[elicitation_id] = call.session_key
        base = self.base_url or "http://127.0.0.1"
        return {"mode": "url", "message": "Open this page of the lab to confirm.",
                "url": f"{base}/lab/consent/{elicitation_id}", "elicitationId": elicitation_id}

    async def _tool_ask_url(self, call: Call, args: dict[str, Any]) -> Any:
        if args.get("required_error"):
            done = self._required_url_done.get(call.session_key) or []
            if done:
                elicitation_id = done.pop(0)
                self.state.count_execution("ask_url", uuid.uuid4().hex)
                return catalogue.text_result("ask_url: the required URL was visited",
                                             {"elicitationId": elicitation_id, "visited": True})
            raise RpcError(URL_ELICITATION_REQUIRED, "this call needs a URL visited first",
                           {"elicitations": [self._url_request(call)]})
        self.state.count_execution("ask_url", uuid.uuid4().hex)
        if call.era == STATELESS and "url" in (call.params.get("inputResponses") or {}):
            answer = call.params["inputResponses"]["url"]
            return catalogue.text_result(f"ask_url answer: {answer.get('action')}", {"action": answer.get("action")})
        request = self._url_request(call)
        answer = await self.elicit(call, "url", request)
        visited = False
        if answer.get("action") == "accept" and self.base_url is not None:
            try:
                await asyncio.wait_for(self._url_visits[request["elicitationId"]].wait(),
                                       float(args.get("wait_seconds", 60)))
                visited = True
            except asyncio.TimeoutError:
                pass
        if answer.get("action") == "accept":
            self.emit(call.stream, {"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                                    "params": {"elicitationId": request["elicitationId"]}})
        return catalogue.text_result(f"ask_url answer: {answer.get('action')}",
                                     {"action": answer.get("action"), "visited": visited})

    async def _inline_steps(self, call: Call, tool: str, seconds: float, steps: int, first: int, last: int) -> None:
        for i in range(first, last + 1):
            await asyncio.sleep(seconds / steps)
            self._progress(call.stream, call.progress_token, i, steps, f"{tool}: step {i}/{steps}")

    async def _tool_long_mrtr(self, call: Call, args: dict[str, Any]) -> Any:
        seconds, steps = catalogue.duration(args)
        half = steps // 2
        raw_state = call.params.get("requestState")
        if raw_state is not None:
            state = self._open_state(raw_state)
            if state.get("tool") != "long_mrtr" or state.get("args") != args:
                raise RpcError(INVALID_PARAMS, "requestState does not belong to this call")
        else:
            state = {"tool": "long_mrtr", "args": args, "operation": uuid.uuid4().hex}
            self.state.count_execution("long_mrtr", state["operation"])
            await self._inline_steps(call, "long_mrtr", seconds, steps, 1, half)
            state["half_done"] = half
        question = {"message": "The first half is done. Continue with the second half?",
                    "requestedSchema": {"type": "object", "properties": {
                        "proceed": {"type": "boolean", "title": "Continue", "default": True},
                        "note": {"type": "string", "title": "Note"}}, "required": ["proceed"]}}
        if call.protocol_version in ("2025-11-25", STATELESS_VERSION):
            question["mode"] = "form"
        answer = await self.elicit(call, "continue", question, state)
        if answer.get("action") != "accept" or not (answer.get("content") or {}).get("proceed", True):
            return catalogue.text_result("long_mrtr stopped after the first half", {"answer": answer})
        await self._inline_steps(call, "long_mrtr", seconds, steps, half + 1, steps)
        return catalogue.work_result("long_mrtr", args, {"answer": answer})

    # ------------------------------------------------------------------ 2025-11-25 tasks
    def _task_object(self, job: JobRow, task_id: str) -> dict[str, Any]:
        task = {"taskId": task_id, "status": job.status, "createdAt": now_iso(job.created_at),
                "lastUpdatedAt": now_iso(job.updated_at), "ttl": job.ttl_ms, "pollInterval": job.poll_ms}
        if job.status_message:
            task["statusMessage"] = job.status_message
        return task

    async def _tool_long_task(self, call: Call, args: dict[str, Any]) -> Any:
        task_params = call.params.get("task")
        if not isinstance(task_params, dict):
            raise RpcError(METHOD_NOT_FOUND, "long_task requires a task-augmented tools/call "
                           "(execution.taskSupport is \"required\")")
        ttl = task_params.get("ttl")
        ttl = int(ttl) if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) else TASK_TTL_MS
        task_id = new_handle()
        poll_ms = max(100, min(1000, int(catalogue.duration(args)[0] * 1000 / 10) or 100))
        job = self._new_job(call, "long_task", args, "task", handle_key(task_id), out_stream=None,
                            notify_stream=call.session_stream, ttl_ms=ttl, poll_ms=poll_ms)
        self._task_ids[job.key] = task_id
        return {"task": self._task_object(job, task_id)}

    def _task_job(self, params: dict[str, Any], *mechanisms: str) -> tuple[JobRow, str]:
        task_id = params.get("taskId")
        job = self.state.job(handle_key(task_id)) if isinstance(task_id, str) else None
        if job is None or job.mechanism not in mechanisms:
            raise RpcError(INVALID_PARAMS, "unknown or expired taskId")
        terminal = job.status not in ("working", "input_required", "submitted")
        if terminal and job.ttl_ms is not None and time.time() > job.updated_at + job.ttl_ms / 1000:
            raise RpcError(INVALID_PARAMS, "unknown or expired taskId")  # ttl counts from completion
        return job, task_id  # type: ignore[return-value]

    async def _tasks_get(self, call: Call) -> dict[str, Any]:
        job, task_id = self._task_job(call.params, "task", "task_ext")
        if job.mechanism == "task":
            return self._task_object(job, task_id)
        return self._ext_task(job, task_id, detailed=True)

    async def _tasks_result(self, call: Call) -> dict[str, Any]:
        job, task_id = self._task_job(call.params, "task")
        related = {RELATED_TASK: {"taskId": task_id}}
        while True:
            job = self.state.job(job.key)  # type: ignore[assignment]
            if job.status == "input_required" and "answer" not in job.extra:
                # The task waits for the person: ask on this tasks/result stream, tagged with the task.
                question = {**job.extra["question"], "_meta": related}
                self.provide_answer(job.key, await self.ask_client(call, "elicitation/create", question))
                continue
            if job.status not in ("working", "input_required", "submitted"):
                break
            await self._job_changed_event(job.key).wait()
        if job.status == "completed":
            result = dict(job.result)
            result["_meta"] = {**(result.get("_meta") or {}), **related}
            return result
        error = job.error or {"code": INTERNAL_ERROR, "message": f"task {job.status}"}
        raise RpcError(error["code"], error["message"], {**(error.get("data") or {}), "_meta": related})

    async def _tasks_list(self, call: Call) -> dict[str, Any]:
        # Only tasks created since this process started can be listed (ids are stored as
        # digests); clients keep the ids they were given and reach older tasks by tasks/get.
        tasks = []
        for key, task_id in self._task_ids.items():
            job = self.state.job(key)
            if job is not None:
                tasks.append(self._task_object(job, task_id))
        return {"tasks": tasks}

    async def _tasks_cancel(self, call: Call) -> dict[str, Any]:
        job, task_id = self._task_job(call.params, "task", "task_ext")
        if job.status not in ("working", "input_required"):
            raise RpcError(INVALID_PARAMS, f"task is already {job.status}")
        self._stop_job(job.key, "cancelled", "cancelled by the client")
        job = self.state.job(job.key)
        if job.mechanism == "task":  # type: ignore[union-attr]
            return self._task_object(job, task_id)  # type: ignore[arg-type]
        return {"resultType": "complete"}

    # ------------------------------------------------------------------ tasks extension
    def _ext_task(self, job: JobRow, task_id: str, detailed: bool) -> dict[str, Any]:
        task: dict[str, Any] = {"resultType": "complete" if detailed else "task", "taskId": task_id,
                                "status": job.status, "createdAt": now_iso(job.created_at),
                                "lastUpdatedAt": now_iso(job.updated_at), "ttlMs": job.ttl_ms,
                                "pollIntervalMs": job.poll_ms}
        if job.status_message:
            task["statusMessage"] = job.status_message
        if detailed and job.status == "input_required" and "question" in job.extra:
            task["inputRequests"] = {job.extra["input_key"]: {"method": "elicitation/create",
                                                              "params": job.extra["question"]}}
        elif detailed and job.status == "completed":
            task["result"] = {**job.result, "resultType": "complete"}
        elif detailed and job.status == "failed":
            task["error"] = job.error
        return task

    @staticmethod
    def _missing_tasks_extension(what: str) -> RpcError:
        return RpcError(MISSING_REQUIRED_CAPABILITY, f"{what} needs the {TASKS_EXTENSION} extension: "
                        "declare it in clientCapabilities.extensions",
                        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})

    def _opted_in_tasks_extension(self, call: Call) -> bool:
        return TASKS_EXTENSION in (call.capabilities.get("extensions") or {})

    async def _tool_long_task_ext(self, call: Call, args: dict[str, Any]) -> Any:
        if not self._opted_in_tasks_extension(call):
            raise self._missing_tasks_extension("long_task_ext")
        task_id = new_handle()
        poll_ms = max(100, min(1000, int(catalogue.duration(args)[0] * 1000 / 10) or 100))
        job = self._new_job(call, "long_task_ext", args, "task_ext", handle_key(task_id), out_stream=None,
                            notify_stream=None, ttl_ms=TASK_TTL_MS, poll_ms=poll_ms)
        return self._ext_task(job, task_id, detailed=False)

    async def _tasks_update(self, call: Call) -> dict[str, Any]:
        job, _task_id = self._task_job(call.params, "task_ext")
        responses = call.params.get("inputResponses")
        if not isinstance(responses, dict):
            raise RpcError(INVALID_PARAMS, "inputResponses must be an object")
        key = job.extra.get("input_key")
        if job.status == "input_required" and key in responses:
            self.provide_answer(job.key, responses[key])
        return {"resultType": "complete"}  # answers nobody waits for are ignored, as the extension allows

    # ------------------------------------------------------------------ SEP-1391 async tools
    async def _tool_long_async(self, call: Call, args: dict[str, Any]) -> Any:
        operation = call.params.get("operation")
        token = operation.get("token") if isinstance(operation, dict) else None
        if not isinstance(token, str) or not token:
            raise RpcError(INVALID_REQUEST, "long_async is an async tool: send operation.token")
        key = handle_key(token)
        if self.state.has_job(key):
            raise RpcError(INVALID_PARAMS, "operation token already used")
        keep_alive = operation.get("keepAlive", DEFAULT_KEEP_ALIVE)  # type: ignore[union-attr]
        if keep_alive is not None and (not isinstance(keep_alive, (int, float)) or keep_alive < 0):
            raise RpcError(INVALID_PARAMS, "operation.keepAlive must be a non-negative number or null")
        poll = max(0.1, min(1.0, catalogue.duration(args)[0] / 10))
        # SEP-1391: notifications/cancelled for the original request id cancels the operation,
        # even after the call was answered.
        self._async_by_request[(call.session_key, json.dumps(call.request_id))] = key
        self._new_job(call, "long_async", args, "async", key, out_stream=None, notify_stream=call.session_stream,
                      extra={"keepAlive": keep_alive, "pollFrequency": poll})
        return {"content": [{"type": "text", "text": "long_async started; poll tools/async/status"}],
                "operation": {"keepAlive": keep_alive, "pollFrequency": poll, "status": "working"}}

    def _async_job(self, params: dict[str, Any]) -> JobRow:
        token = params.get("token")
        job = self.state.job(handle_key(token)) if isinstance(token, str) else None
        if job is None or job.mechanism != "async":
            raise RpcError(INVALID_PARAMS, "Failed to retrieve operation: Operation not found")
        keep_alive = job.extra.get("keepAlive")
        if job.status in ("completed", "failed") and keep_alive is not None \
                and time.time() > job.updated_at + keep_alive:
            raise RpcError(INVALID_PARAMS, "Failed to retrieve operation: Operation has expired")
        return job

    async def _async_status(self, call: Call) -> dict[str, Any]:
        job = self._async_job(call.params)
        status = {"cancelled": "canceled"}.get(job.status, job.status)
        result: dict[str, Any] = {"status": status}
        if job.status == "failed" and job.error:
            result["error"] = job.error.get("message", "failed")
        return result

    async def _async_result(self, call: Call) -> dict[str, Any]:
        job = self._async_job(call.params)
        if job.status != "completed":
            raise RpcError(INVALID_PARAMS, f"operation is {job.status}, not completed")
        return {"result": job.result}

    # ------------------------------------------------------------------ resume tokens
    async def _tool_long_resume_token(self, call: Call, args: dict[str, Any]) -> Any:
        digest = hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()
        token = call.meta.get("resumeToken")
        if token is None:
            token = new_handle()
            job = self._new_job(call, "long_resume_token", args, "resume_token", handle_key(token),
                                out_stream=None, notify_stream=call.stream, extra={"params": digest})
        else:
            job = self.state.job(handle_key(token)) if isinstance(token, str) else None
            if job is None or job.mechanism != "resume_token" or job.extra.get("delivered"):
                raise RpcError(INVALID_PARAMS, "invalid or expired resume token")
            if job.extra.get("params") != digest:
                raise RpcError(INVALID_PARAMS, "resumed request does not match the original parameters")
            # progress of this slice goes to the request that is listening now
            self.state.update_job(job.key, notify_stream=call.stream, progress_token=call.progress_token)
        slice_seconds = min(10.0, max(0.5, job.seconds / 4))
        try:
            job = await asyncio.wait_for(self.wait_job(job.key), slice_seconds)
        except asyncio.TimeoutError:
            job = self.state.job(job.key)  # type: ignore[assignment]
        if job.status == "working":
            # This request's stream ends with the partial answer; progress waits for the next resume.
            self.state.update_job(job.key, notify_stream=None)
            return {"content": [{"type": "text", "text": f"{job.step_done}/{job.steps} steps done"}],
                    "structuredContent": {"progress": job.step_done, "total": job.steps},
                    "_meta": {"nextResumeToken": token}}
        self.state.update_job(job.key, extra={**job.extra, "delivered": True})
        if job.status == "completed":
            return job.result
        error = job.error or {"code": INTERNAL_ERROR, "message": job.status}
        raise RpcError(error["code"], error["message"])

    # ------------------------------------------------------------------ draft streams
    def _adopt_stream(self, call: Call, kind: str, handle: str, max_idle: float | None) -> None:
        self.state.db.execute("UPDATE streams SET kind = ?, handle_key = ?, max_idle = ? WHERE id = ?",
                              (kind, handle_key(handle), max_idle, call.stream))

    async def _tool_long_stream(self, call: Call, args: dict[str, Any]) -> Any:
        stream_id = new_handle()
        self._adopt_stream(call, "draft", stream_id, STREAM_RESUME_INTERVAL["max"])
        self.emit(call.stream, {"jsonrpc": "2.0", "method": "notifications/stream/create", "params": {
            "stream": {"streamId": stream_id, "resumeInterval": dict(STREAM_RESUME_INTERVAL)}}})
        self._new_job(call, "long_stream", args, "stream", uuid.uuid4().hex, out_stream=call.stream,
                      notify_stream=call.stream, extra={"stateless": call.era == STATELESS})
        return DEFERRED

    def _draft_stream(self, params: dict[str, Any]) -> Any:
        stream_id = params.get("streamId")
        row = self.state.stream_by_handle(stream_id) if isinstance(stream_id, str) else None
        if row is None or row["kind"] != "draft":
            raise RpcError(INVALID_PARAMS, "unknown or abandoned stream")
        if row["max_idle"] is not None and not row["closed"] and time.time() > row["touched_at"] + row["max_idle"]:
            raise RpcError(INVALID_PARAMS, "stream abandoned")
        self.state.touch_stream(row["id"])
        return row

    def _poll_row(self, row: Any, stream_id: str) -> dict[str, Any]:
        row = self.state.stream(row["id"])
        return {"streamId": stream_id, "status": "completed" if row["closed"] else "live",
                **self.state.pending_summary(row["id"], row["delivered_seq"])}

    async def _stream_poll(self, call: Call) -> dict[str, Any]:
        row = self._draft_stream(call.params)
        return self._poll_row(row, call.params["streamId"])

    async def _stream_poll_all(self, call: Call) -> dict[str, Any]:
        streams = []
        for row in self.state.streams_with_handles(call.session_key):
            if row["kind"] != "draft":
                continue
            # The stream's own first message names it; the lab keeps no other copy of the id.
            for _seq, message in self.state.messages_after(row["id"], 0)[:1]:
                stream_id = message.get("params", {}).get("stream", {}).get("streamId")
                if stream_id:
                    streams.append(self._poll_row(row, stream_id))
        return {"streams": streams}

    async def _copy_pending(self, call: Call, source: str, stop_at_response_for: Any = None) -> bool:
        """Copy undelivered messages of ``source`` onto this call's stream; True if a response closed it."""
        row = self.state.stream(source)
        async for seq, message in self.tail(source, row["delivered_seq"]):
            is_response = "method" not in message and stop_at_response_for is not None \
                and message.get("id") == stop_at_response_for
            self.emit(call.stream, message, close=is_response)
            self.state.mark_delivered(source, seq)
            if is_response:
                return True
        return False

    async def _stream_resume(self, call: Call) -> dict[str, Any]:
        row = self._draft_stream(call.params)
        await self._copy_pending(call, row["id"])
        return {}

    # ------------------------------------------------------------------ SEP-975 resumable requests
    def _wants_resumable(self, call: Call) -> bool:
        caps = call.capabilities
        return "resumableRequests" in caps or "resumableRequests" in (caps.get("experimental") or {})

    async def _tool_long_resumable(self, call: Call, args: dict[str, Any]) -> Any:
        if self._wants_resumable(call):
            token = new_handle()
            self._adopt_stream(call, "resumable", token, RESUMABLE_MAX_WAIT)
            self.emit(call.stream, {"jsonrpc": "2.0", "method": "notifications/requests/resumePolicy",
                                    "params": {"requestId": call.request_id, "resumeToken": token,
                                               "maxWait": RESUMABLE_MAX_WAIT}})
            mechanism = "resumable"
        else:
            mechanism = "call"
        self._new_job(call, "long_resumable", args, mechanism, uuid.uuid4().hex, out_stream=call.stream,
                      notify_stream=call.stream,
                      extra={"ephemeral": call.era == STATELESS and mechanism == "call",
                             "stateless": call.era == STATELESS})
        return DEFERRED

    def _resumable_stream(self, params: dict[str, Any]) -> tuple[Any, JobRow]:
        token = params.get("resumeToken")
        row = self.state.stream_by_handle(token) if isinstance(token, str) else None
        if row is None or row["kind"] != "resumable":
            raise RpcError(INVALID_PARAMS, "invalid or expired resumeToken")
        if not row["closed"] and row["max_idle"] is not None and time.time() > row["touched_at"] + row["max_idle"]:
            raise RpcError(INVALID_PARAMS, "resumeToken expired")
        jobs = [j for j in self.state.jobs(mechanism="resumable") if j.out_stream == row["id"]]
        if not jobs:
            raise RpcError(INVALID_PARAMS, "invalid or expired resumeToken")
        self.state.touch_stream(row["id"])
        return row, jobs[0]

    async def _requests_get_status(self, call: Call) -> dict[str, Any]:
        row, job = self._resumable_stream(call.params)
        if call.params.get("requestId") != job.request_id:
            raise RpcError(INVALID_PARAMS, "requestId does not match the resumeToken")
        row = self.state.stream(row["id"])
        summary = self.state.pending_summary(row["id"], row["delivered_seq"])
        status = "processing" if job.status == "working" else ("completed" if job.status == "completed" else "failed")
        return {"status": status, "hasPendingMessages": summary["pendingMessages"],
                "hasInputRequest": summary["hasRequest"]}

    async def _requests_resume(self, call: Call) -> Any:
        row, job = self._resumable_stream(call.params)
        if call.request_id != job.request_id:
            raise RpcError(INVALID_PARAMS, "requests/resume must reuse the original request's id")
        if await self._copy_pending(call, row["id"], stop_at_response_for=job.request_id):
            return DEFERRED
        raise RpcError(INVALID_PARAMS, "the request's response was already delivered")

    # ------------------------------------------------------------------ jobs
    def _start_runner(self, key: str) -> None:
        task = asyncio.create_task(self.run_job(key))
        self._runners[key] = task
        task.add_done_callback(lambda _t: self._runners.pop(key, None))

    async def wait_job(self, key: str) -> JobRow:
        """Wait until a job is terminal; return its row."""
        while True:
            event = self._job_changed_event(key)
            job = self.state.job(key)
            if job is None:
                raise RpcError(INVALID_PARAMS, "unknown operation")
            if job.status not in ("working", "input_required", "submitted"):
                return job
            await event.wait()

    def _job_changed_event(self, key: str) -> asyncio.Event:
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
            question = {"message": f"{job.tool} is half done. Continue?", "mode": "form",
                        "requestedSchema": {"type": "object", "properties": {
                            "proceed": {"type": "boolean", "title": "Continue", "default": True}},
                            "required": ["proceed"]}}
            self.state.update_job(job.key, status="input_required", status_message="waiting for an answer",
                                  extra={**job.extra, "question": question, "input_key": "continue"})
            self._job_finished(job.key)
            self._task_status_notification(job.key)
        while True:
            event = self._job_changed_event(job.key)
            job = self.state.job(job.key)  # type: ignore[assignment]
            if "answer" in job.extra:
                break
            await event.wait()
        # The clock stood still while waiting: shift the schedule so the rest takes its share.
        self.state.update_job(job.key, started_at=time.time() - job.seconds * step / job.steps)
        return self.state.job(job.key)  # type: ignore[return-value]

    def _stop_job(self, key: str, status: str, message: str) -> None:
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
            self._progress(job.notify_stream, job.progress_token, i, job.steps,
                           job.args.get("message") or f"{job.tool}: step {i}/{job.steps}")
            if job.args.get("ask") and i == max(1, job.steps // 2) and "answer" not in job.extra:
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
        stateless = job.extra.get("stateless")
        if job.mechanism in ("call", "resumable", "stream") and job.out_stream:
            wire = stateless_result(result) if stateless else result
            response = {"jsonrpc": "2.0", "id": job.request_id, "result": wire}
            if job.mechanism == "stream":
                self.emit(job.out_stream, response)
                stream_id = self._stream_handle_from_log(job.out_stream)
                self.emit(job.out_stream, {"jsonrpc": "2.0", "method": "notifications/stream/end",
                                           "params": {"streamId": stream_id}}, close=True)
            else:
                self.emit(job.out_stream, response, close=True)
        self._task_status_notification(job.key)
        self._job_finished(job.key)

    def _task_status_notification(self, key: str) -> None:
        job = self.state.job(key)
        if job is not None and job.mechanism == "task" and job.notify_stream and key in self._task_ids:
            task = self._task_object(job, self._task_ids[key])
            self.emit(job.notify_stream, {"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task})

    def _stream_handle_from_log(self, stream: str) -> str | None:
        for _seq, message in self.state.messages_after(stream, 0):
            if message.get("method") == "notifications/stream/create":
                return message["params"]["stream"]["streamId"]
        return None

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
        for stream_id in self.state.open_streams("request"):
            if stream_id not in answered_by_jobs:
                self.close_stream(stream_id)
        return resumed

    async def shutdown(self) -> None:
        tasks = [*self._runners.values(), *self._request_tasks.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def stateless_result(result: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 result: says its type and names the server in ``_meta``."""
    meta = {**(result.get("_meta") or {}), SERVER_INFO_META_KEY: SERVER_INFO}
    return {"resultType": "complete", **result, "_meta": meta}


class HttpRpcError(RpcError):
    """An RpcError that the HTTP front end answers with a particular status code."""

    def __init__(self, status: int, code: int, message: str, data: Any = None):
        super().__init__(code, message, data)
        self.status = status

