"""The lab's tool catalogue: names, descriptions, input schemas and the shape of results.

Kept apart from the protocol machinery (:mod:`hostapp.lab.core`) so the list a client sees
and the elicitation form the lab asks for can be read in one place.
"""

from __future__ import annotations

import json
from typing import Any

from hostapp.lab.showcase import SHOW_CARD
from hostapp.protocol.eras import HANDSHAKE_VERSIONS, STATELESS_VERSION

_DURATION = {
    "seconds": {"type": "number", "minimum": 0, "default": 30,
                "description": "How long the work takes in total, in seconds."},
    "steps": {"type": "integer", "minimum": 1, "default": 30,
              "description": "How many progress steps the work is split into."},
    "fault": {"type": "object", "description": "Fault injection for this call only.",
              "properties": {"exit_after_step": {
                  "type": "integer", "minimum": 1,
                  "description": "The lab process exits right after this step (once; a restarted lab "
                                 "continues the work)."}}},
}


_ASK = {"type": "boolean", "default": False, "description": "Ask the person a question half-way."}
_SAMPLE = {"type": "boolean", "default": False,
           "description": "Ask the client's language model for a message half-way (sampling) instead."}


def _schema(properties: dict[str, Any] | None = None, required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = required
    return schema


def _long(description: str, **extra_props: Any) -> dict[str, Any]:
    return {"description": description, "inputSchema": _schema({**_DURATION, **extra_props})}


#: Tool name -> definition without the name. Keys ``execution`` and ``invocationMode``
#: follow 2025-11-25 tasks and SEP-1391.
TOOLS: dict[str, dict[str, Any]] = {
    # First, so that a probe calling the first listed tool without arguments returns at once.
    "lab_stats": {
        "description": "How many times each tool's work really started (execution accounting).",
        "inputSchema": _schema(),
    },
    "sleep_with_progress": {
        "description": "Wait for a while and report progress after each step. A plain call: "
                       "the answer comes on the same request.",
        "inputSchema": _schema({**_DURATION, "message": {
            "type": "string", "description": "Text shown with every progress notification."}}),
    },
    "ask_form": {
        "description": "Ask the person to fill in a form mid-run (every form field kind) and return "
                       "what was answered. Uses elicitation/create, or input_required in the stateless era.",
        "inputSchema": _schema({"message": {"type": "string", "description": "The question shown above the form."}}),
    },
    "ask_url": {
        "description": "Ask the person to visit a URL mid-run (URL-mode elicitation). With required_error "
                       "the first call fails with -32042 and succeeds once the URL was visited.",
        "inputSchema": _schema({
            "required_error": {"type": "boolean", "default": False,
                               "description": "Answer -32042 (URL elicitation required) first."},
            "wait_seconds": {"type": "number", "default": 60, "minimum": 0,
                             "description": "How long to wait for the URL to be visited after consent."}}),
    },
    "ask_model": {
        "description": "Ask the client's language model for a message mid-run and return what it wrote. "
                       "Uses sampling/createMessage, or an input request of a multi round-trip call in the "
                       "stateless era.",
        "inputSchema": _schema({
            "prompt": {"type": "string", "description": "What the model is asked."},
            "max_tokens": {"type": "integer", "minimum": 1, "default": 200,
                           "description": "The most tokens the reply may take."}}),
    },
    "show_card": SHOW_CARD,
    "fail": {
        "description": "Fail on purpose: tool_error returns isError, rpc_error answers a JSON-RPC error, "
                       "crash ends the lab process.",
        "inputSchema": _schema({"mode": {"type": "string", "enum": ["tool_error", "rpc_error", "crash"],
                                         "default": "tool_error"}}, ["mode"]),
    },
    "long_sse": _long("Long work on a Streamable HTTP SSE stream; survives a dropped connection by "
                      "Last-Event-ID replay (handshake era)."),
    "long_task": {**_long("Long work run as a 2025-11-25 task (task-augmented tools/call required). "
                          "With ask, the task turns input_required half-way and asks through tasks/result.",
                          ask=_ASK, sample=_SAMPLE),
                  "execution": {"taskSupport": "required"}},
    "long_task_ext": _long("Long work run as a task of the io.modelcontextprotocol/tasks extension "
                           "(answers resultType task; the client must opt in). With ask, the task shows "
                           "inputRequests half-way, answered by tasks/update.", ask=_ASK, sample=_SAMPLE),
    "long_mrtr": _long("Long work that asks a question half-way by a multi round-trip request "
                       "(input_required + requestState); the answer may come after a lab restart."),
    "long_resume_token": _long("Long work answered in slices: each partial result carries "
                               "_meta.nextResumeToken until the work is done."),
    "long_stream": _long("Long work on a resumable stream (notifications/stream/create, stream/resume, "
                         "stream/poll, stream/poll/all)."),
    "long_resumable": _long("Long work as a resumable request (notifications/requests/resumePolicy, "
                            "requests/getStatus, same-id requests/resume); needs the resumableRequests "
                            "client capability."),
    "long_async": {**_long("Long work as an asynchronous tool call (SEP-1391): send operation.token, then "
                           "poll tools/async/status and fetch tools/async/result."),
                   "invocationMode": "async"},
}

#: Tools whose work is time-based and reported by progress.
LONG_TOOLS = {name for name, d in TOOLS.items() if "seconds" in d["inputSchema"]["properties"]}
#: Long tools that can ask a question half-way (``ask``): those whose mechanism carries one
#: (a task's input_required). The others refuse ``ask``: a question they could not send
#: would leave the call waiting for ever for input nobody was asked for.
ASKING_TOOLS = sorted(name for name, d in TOOLS.items() if "ask" in d["inputSchema"]["properties"])


_HANDSHAKE = frozenset(HANDSHAKE_VERSIONS)
_STATELESS = frozenset({STATELESS_VERSION})
_ANY_TRANSPORT = frozenset({"http", "stdio"})
#: Long tools whose mechanism exists only in some protocol revisions, or needs a transport
#: that ties a message to its request: tool -> (revisions, transports) it is listed for.
#: Elsewhere it is not offered, because it would run as a plain request that nothing can
#: resume (or not at all); called anyway, it is still served, or says why it cannot run.
#: Every tool not named here is offered everywhere.
ONLY_WHERE: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # SSE resumption (Last-Event-ID) is of the handshake era and of Streamable HTTP.
    "long_sse": (_HANDSHAKE, frozenset({"http"})),
    # Task-augmented tools/call exists in 2025-11-25 only.
    "long_task": (frozenset({"2025-11-25"}), _ANY_TRANSPORT),
    # The tasks extension and multi round-trip requests are of 2026-07-28.
    "long_task_ext": (_STATELESS, _ANY_TRANSPORT),
    "long_mrtr": (_STATELESS, _ANY_TRANSPORT),
    # A draft stream is announced by a notification that names no request: only a
    # request's own SSE stream ties it to the call. In the stateless era closing that
    # stream cancels the request, so the stream could not outlive it.
    "long_stream": (_HANDSHAKE, frozenset({"http"})),
    # SEP-975 resumes a request under its id in its session: the handshake era (where
    # clients, hostapp among them, declare resumableRequests).
    "long_resumable": (_HANDSHAKE, _ANY_TRANSPORT),
}


def offered(name: str, protocol_version: str, transport: str) -> bool:
    """Whether ``tools/list`` offers tool ``name`` on this revision and transport."""
    where = ONLY_WHERE.get(name)
    return where is None or (protocol_version in where[0] and transport in where[1])


def tool_list(protocol_version: str, transport: str = "http") -> list[dict[str, Any]]:
    """The tools as ``tools/list`` shows them for one protocol revision and transport
    (``"http"`` or ``"stdio"``): only those that can run, and survive, there."""
    tools = []
    for name, definition in TOOLS.items():
        if not offered(name, protocol_version, transport):
            continue
        tool = {"name": name, **definition}
        if protocol_version != "2025-11-25":
            tool.pop("execution", None)  # execution.taskSupport exists since 2025-11-25
        tools.append(tool)
    return tools


def duration(args: dict[str, Any]) -> tuple[float, int]:
    """The (seconds, steps) of a long tool's arguments, validated."""
    seconds = args.get("seconds", 30)
    steps = args.get("steps", 30)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        raise ValueError("seconds must be a non-negative number")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError("steps must be a positive integer")
    return float(seconds), steps


def sampling_request(prompt: str, max_tokens: int = 200) -> dict[str, Any]:
    """The lab's ``sampling/createMessage`` params: one user message, a system prompt, the
    limits and model hints, so that a client shows every part of a request."""
    return {"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "systemPrompt": "You are a helpful assistant. Answer in one short paragraph.",
            "maxTokens": max_tokens, "temperature": 0.2,
            "modelPreferences": {"hints": [{"name": "small"}], "speedPriority": 0.8, "costPriority": 0.5}}


def sampled_text(answer: Any) -> str | None:
    """The text of a ``CreateMessageResult`` (None when it holds none)."""
    content = answer.get("content") if isinstance(answer, dict) else None
    parts = content if isinstance(content, list) else [content]
    texts = [p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text"
             and isinstance(p.get("text"), str)]
    return "\n".join(texts) if texts else None


def form_schema() -> dict[str, Any]:
    """A flat elicitation schema with one field of every kind a form can hold."""
    return {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "minLength": 1, "maxLength": 64, "default": "Ada"},
            "email": {"type": "string", "title": "E-mail", "format": "email"},
            "homepage": {"type": "string", "title": "Homepage", "format": "uri"},
            "birthday": {"type": "string", "title": "Birthday", "format": "date"},
            "meeting": {"type": "string", "title": "Meeting time", "format": "date-time"},
            "height": {"type": "number", "title": "Height (m)", "minimum": 0.5, "maximum": 2.5, "default": 1.7},
            "age": {"type": "integer", "title": "Age", "minimum": 0, "maximum": 150},
            "subscribe": {"type": "boolean", "title": "Subscribe", "default": True},
            "color": {"type": "string", "title": "Colour", "enum": ["red", "green", "blue"], "default": "green"},
            "size": {"type": "string", "title": "Size", "oneOf": [
                {"const": "s", "title": "Small"}, {"const": "m", "title": "Medium"}, {"const": "l", "title": "Large"}]},
            "toppings": {"type": "array", "title": "Toppings", "minItems": 0, "maxItems": 3,
                         "items": {"type": "string", "enum": ["cheese", "ham", "olives", "basil"]}},
            "extras": {"type": "array", "title": "Extras", "items": {"anyOf": [
                {"const": "napkins", "title": "Napkins"}, {"const": "cutlery", "title": "Cutlery"}]},
                "default": ["napkins"]},
        },
        "required": ["name", "email"],
    }


def text_result(text: str, structured: dict[str, Any] | None = None, is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if structured is not None:
        result["structuredContent"] = structured
    if is_error:
        result["isError"] = True
    return result


def work_result(tool: str, args: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a long tool returns when its work is done."""
    seconds, steps = duration(args)
    structured = {"tool": tool, "seconds": seconds, "steps": steps, **(extra or {})}
    return text_result(f"{tool} finished {steps} steps in {seconds:g} s" +
                       (f"; answer: {json.dumps(extra['answer'])}" if extra and "answer" in extra else ""),
                       structured)
