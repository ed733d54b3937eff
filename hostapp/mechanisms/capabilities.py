"""Capability negotiation for the resume mechanisms, in one place.

``client_capabilities(era)`` is everything the client declares (in ``initialize`` for
the handshake era, in every request's ``_meta`` for the stateless era);
``choose_mechanism`` picks the strategy for one call from what the server and the
tool offer.

Durability ranking (``Mechanism.durability``, higher survives more):

====================  ====  ==========================================================
async_tool             100  client-generated token: survives even a crash before any
                            answer, and tells whether the call arrived at all
tasks_extension         80  server task id (2026-07-28): poll by id after any restart
tasks_2025              80  server task id (2025-11-25): same, plus ``tasks/result``
resumable_requests      60  SEP-975 token + same-id resume; bounded by ``maxWait``
streams                 55  stream id; bounded by ``resumeInterval.max``
resume_token            50  re-send with the token; only between chunks
mrtr                    40  only a pending question survives (its ``requestState``)
http_resumption         20  SSE ``Last-Event-ID``: bound to the session and the
                            server's event buffer, rarely survives a server restart
direct                   0  nothing: after a break the outcome is unknown
====================  ====  ==========================================================

The client chooses only among the mechanisms it can ask for up front (async tools,
tasks); the others are offered by the server in the middle of a call, and
:class:`DirectRequest` adopts them as they come (a more durable offer wins).
"""

from __future__ import annotations

from typing import Any

from hostapp.mechanisms.async_tools import AsyncTool
from hostapp.mechanisms.base import Mechanism
from hostapp.mechanisms.direct import DirectRequest
from hostapp.mechanisms.tasks_2025 import Tasks2025
from hostapp.mechanisms.tasks_extension import TasksExtension
from hostapp.protocol.eras import HANDSHAKE, STATELESS, TASKS_EXTENSION, era_of

#: SEP-975 client capability key (a top-level, non-standard capability: the
#: ClientCapabilities set is open).
RESUMABLE_REQUESTS_CAPABILITY = "resumableRequests"


def _era(era: str) -> str:
    """Accept an era name or a protocol version."""
    return era if era in (HANDSHAKE, STATELESS) else era_of(era)


def client_capabilities(era: str, *, task_augmented_requests: bool = True) -> dict[str, Any]:
    """Everything the client supports, for ``era`` (an era name or a protocol version).

    ``task_augmented_requests``: declare that the client runs ``elicitation/create`` and
    ``sampling/createMessage`` as tasks when asked (2025-11-25 ``tasks.requests``: it
    answers with a CreateTaskResult and serves ``tasks/get``, ``tasks/result``,
    ``tasks/list`` and ``tasks/cancel`` for them, :mod:`hostapp.engine.request_tasks`).
    Sampling is declared without ``context`` and ``tools`` (:mod:`hostapp.protocol.sampling`).
    Roots are (each server's folders, :mod:`hostapp.protocol.roots`), with ``listChanged``.
    Streams (draft "Streams") and async tools (SEP-1391) define no client capability.
    """
    capabilities: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": True}}
    capabilities["sampling"] = {}  # text only: no "context" (includeContext), no "tools"
    if _era(era) == STATELESS:
        capabilities["extensions"] = {TASKS_EXTENSION: {}}
        return capabilities
    tasks: dict[str, Any] = {"list": {}, "cancel": {}}
    if task_augmented_requests:
        tasks["requests"] = {"elicitation": {"create": {}}, "sampling": {"createMessage": {}}}
    capabilities["tasks"] = tasks
    capabilities[RESUMABLE_REQUESTS_CAPABILITY] = {}
    return capabilities


def server_offers_task_calls(server_capabilities: dict[str, Any]) -> bool:
    """2025-11-25: may ``tools/call`` be task-augmented on this server?"""
    tasks = server_capabilities.get("tasks")
    requests = tasks.get("requests") if isinstance(tasks, dict) else None
    tools = requests.get("tools") if isinstance(requests, dict) else None
    return isinstance(tools, dict) and "call" in tools


def tool_task_support(tool: dict[str, Any]) -> str:
    """A tool's ``execution.taskSupport``: forbidden (default), optional or required."""
    execution = tool.get("execution")
    support = execution.get("taskSupport") if isinstance(execution, dict) else None
    return support if support in ("optional", "required") else "forbidden"


def server_offers_tasks_extension(server_capabilities: dict[str, Any]) -> bool:
    extensions = server_capabilities.get("extensions")
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def candidate_mechanisms(era: str, server_capabilities: dict[str, Any], tool: dict[str, Any],
                         transport_kind: str) -> list[type[Mechanism]]:
    """Every mechanism the client may ask for on this call, most durable first.
    ``transport_kind`` ("stdio" or "http") does not change the choice today: the
    transport-bound mechanism (SSE resumption) is one the server offers mid-call."""
    server_capabilities = server_capabilities or {}
    tool = tool or {}
    candidates: list[type[Mechanism]] = [DirectRequest]
    if tool.get("invocationMode") == "async":
        candidates.append(AsyncTool)
    if _era(era) == STATELESS:
        # The server decides per call whether to answer with a task (the extension
        # is declared on every request); without the extension a plain request may
        # still turn into an MRTR exchange, which DirectRequest adopts.
        if server_offers_tasks_extension(server_capabilities):
            candidates.append(TasksExtension)
    elif tool_task_support(tool) == "required" or (
            tool_task_support(tool) == "optional" and server_offers_task_calls(server_capabilities)):
        candidates.append(Tasks2025)
    return sorted(candidates, key=lambda cls: cls.durability, reverse=True)


def choose_mechanism(era: str, server_capabilities: dict[str, Any], tool: dict[str, Any],
                     transport_kind: str = "stdio") -> type[Mechanism]:
    """The most durable mechanism the client can ask for on this call."""
    return candidate_mechanisms(era, server_capabilities, tool, transport_kind)[0]


def start_mechanism(era: str, server_capabilities: dict[str, Any], tool: dict[str, Any],
                    transport_kind: str = "stdio", *, method: str = "tools/call") -> Mechanism:
    """A new mechanism for one call, chosen by ``choose_mechanism`` and set up for the
    era (a plain request in the stateless era does not adopt SSE resumption)."""
    cls = choose_mechanism(era, server_capabilities, tool, transport_kind)
    if cls is DirectRequest or cls is TasksExtension:
        # With the tasks extension the server decides per call whether to answer with a
        # task; it may instead offer a resume token, an MRTR question or a plain result.
        # A plain request adopts whichever it offers (a task included).
        return DirectRequest(method, sse_resumable=_era(era) == HANDSHAKE)
    return cls(method)
