"""Sampling requests as data: what a server asks a model to write, shown to a person.

A server asks the client's language model for a message with ``sampling/createMessage``
(MCP 2025-11-25 ``client/sampling``; in 2026-07-28 also as an input request of a multi
round-trip call). The client has full discretion: a person sees the request, writes the
reply or lets the configured model write it and reviews what comes back, and may refuse.

This module reads the params into a :class:`SamplingRequest` (refusing what cannot be shown
or bounded), renders it as plain text, builds the ``CreateMessageResult`` from a person's
answer, and turns a request into an OpenAI-compatible chat-completions body and that
endpoint's answer back into text. No I/O and no Qt here.

What hostapp does not offer is not declared: no ``sampling.context`` (``includeContext``
other than ``"none"`` is declined, as the specification allows a client to), no
``sampling.tools`` (a request that carries ``tools`` is refused).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hostapp.protocol.jsonrpc import INVALID_PARAMS, RpcError

#: The error a client answers when the person refuses a sampling request (the
#: specification's example: ``{"code": -1, "message": "User rejected sampling request"}``).
USER_REJECTED = -1

#: The answer a person gives (``EngineApi.answer_input``) to a sampling request:
#: ``{"action": "accept", "reply": TEXT, "model"?: NAME}`` or ``{"action": "decline"}``.
ACCEPT = "accept"

#: Model named in a reply the person wrote themselves.
WRITTEN_BY_PERSON = "written-by-person"


class SamplingRequestError(ValueError):
    """A ``sampling/createMessage`` hostapp cannot show or answer; the message says why."""


@dataclass(frozen=True, slots=True)
class Limits:
    """How much a server may ask of the person's model.

    ``max_tokens``: the most tokens one reply may take (a request asking for more is
    answered with at most this many, as the specification lets a client sample fewer);
    ``max_chars``: the most characters of text one request may carry (messages and system
    prompt; more is refused); ``per_minute``: how many sampling requests one server may
    make in a minute (more are refused, not queued).
    """

    max_tokens: int = 4096
    max_chars: int = 200_000
    per_minute: int = 10


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the conversation: ``role`` (user or assistant) and its parts as text
    (a non-text part is described, never rendered: ``[image, image/png, 1234 bytes]``)."""

    role: str
    text: str
    only_text: bool


@dataclass(frozen=True, slots=True)
class SamplingRequest:
    messages: tuple[Message, ...]
    max_tokens: int
    system_prompt: str | None = None
    temperature: float | None = None
    stop_sequences: tuple[str, ...] = ()
    model_hints: tuple[str, ...] = ()
    priorities: tuple[tuple[str, float], ...] = ()  # (costPriority...), as given
    include_context: str | None = None

    @property
    def chars(self) -> int:
        return sum(len(m.text) for m in self.messages) + len(self.system_prompt or "")

    @property
    def only_text(self) -> bool:
        return all(m.only_text for m in self.messages)

    @property
    def summary(self) -> str:
        """The last message's first line, cut: what the request is about, in one line."""
        last = self.messages[-1].text.strip().splitlines() if self.messages else []
        line = last[0] if last else ""
        return line if len(line) <= 120 else line[:119] + "…"


def describe_request(params: Mapping[str, Any]) -> SamplingRequest:
    """Read the params of ``sampling/createMessage``; :class:`SamplingRequestError` for
    anything malformed, or asking for what hostapp does not offer (tools)."""
    raw = params.get("messages")
    if not isinstance(raw, list) or not raw:
        raise SamplingRequestError('"messages" must be a non-empty list')
    messages = tuple(_message(i, m) for i, m in enumerate(raw))
    max_tokens = params.get("maxTokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise SamplingRequestError('"maxTokens" must be a positive integer')
    system = params.get("systemPrompt")
    if system is not None and not isinstance(system, str):
        raise SamplingRequestError('"systemPrompt" must be text')
    temperature = params.get("temperature")
    if temperature is not None and (not isinstance(temperature, (int, float)) or isinstance(temperature, bool)
                                    or not math.isfinite(temperature)):
        raise SamplingRequestError('"temperature" must be a number')
    stops = params.get("stopSequences") or []
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise SamplingRequestError('"stopSequences" must be a list of strings')
    if params.get("tools"):
        raise SamplingRequestError("the request offers the model tools, which hostapp does not run in sampling")
    include = params.get("includeContext")
    if include is not None and include not in ("none", "thisServer", "allServers"):
        raise SamplingRequestError('"includeContext" must be none, thisServer or allServers')
    hints, priorities = _preferences(params.get("modelPreferences"))
    return SamplingRequest(messages, max_tokens, system, float(temperature) if temperature is not None else None,
                           tuple(stops), hints, priorities, include)


def _message(index: int, raw: Any) -> Message:
    if not isinstance(raw, Mapping) or raw.get("role") not in ("user", "assistant"):
        raise SamplingRequestError(f"message {index + 1} needs a role of user or assistant")
    content = raw.get("content")
    parts = content if isinstance(content, list) else [content]
    texts: list[str] = []
    only_text = True
    for part in parts:
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise SamplingRequestError(f"message {index + 1} has content that is not a content block")
        kind = part["type"]
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise SamplingRequestError(f"message {index + 1} has a text block without text")
            texts.append(part["text"])
            continue
        only_text = False
        if kind in ("image", "audio"):
            data = part.get("data")
            size = len(data) * 3 // 4 if isinstance(data, str) else 0
            texts.append(f"[{kind}, {part.get('mimeType') or 'unknown type'}, about {size} bytes]")
        else:
            texts.append(f"[{kind} block]")
    return Message(str(raw["role"]), "\n".join(texts), only_text)


def _preferences(raw: Any) -> tuple[tuple[str, ...], tuple[tuple[str, float], ...]]:
    if raw is None:
        return (), ()
    if not isinstance(raw, Mapping):
        raise SamplingRequestError('"modelPreferences" must be an object')
    hints = tuple(h["name"] for h in raw.get("hints") or []
                  if isinstance(h, Mapping) and isinstance(h.get("name"), str))
    priorities = tuple((key, float(raw[key])) for key in ("costPriority", "speedPriority", "intelligencePriority")
                       if isinstance(raw.get(key), (int, float)) and not isinstance(raw.get(key), bool))
    return hints, priorities


def check_request(params: Mapping[str, Any], limits: Limits) -> SamplingRequest:
    """The request, if it can be shown and is within ``limits``; else RpcError
    (INVALID_PARAMS) with a message for the server and the timeline."""
    try:
        request = describe_request(params)
    except SamplingRequestError as exc:
        raise RpcError(INVALID_PARAMS, f"hostapp cannot show this sampling request: {exc}") from None
    if request.chars > limits.max_chars:
        raise RpcError(INVALID_PARAMS, f"the sampling request carries {request.chars} characters of text; "
                                       f"hostapp takes at most {limits.max_chars}")
    return request


# --------------------------------------------------------------------------- shown text


def plain_text(request: SamplingRequest, server: str, limits: Limits) -> str:
    """The request as a person reads it: who asks, the limits, the preferences, the system
    prompt and every message. Server text stays as it came (the caller shows it as plain
    text, never as markup)."""
    lines = [f"{server} asks for a message from a language model."]
    tokens = f"at most {request.max_tokens} tokens"
    if request.max_tokens > limits.max_tokens:
        tokens += f" (hostapp allows {limits.max_tokens})"
    lines.append(f"Limits: {tokens}" + (f", temperature {request.temperature:g}" if request.temperature is not None
                                         else "")
                 + (f", stops at {', '.join(repr(s) for s in request.stop_sequences)}" if request.stop_sequences
                    else ""))
    if request.model_hints or request.priorities:
        prefs = []
        if request.model_hints:
            prefs.append("models like " + ", ".join(request.model_hints))
        prefs += [f"{key.removesuffix('Priority')} {value:g}" for key, value in request.priorities]
        lines.append("Model preferences: " + "; ".join(prefs))
    if request.include_context not in (None, "none"):
        lines.append(f"It asks to include context ({request.include_context}); hostapp does not include any.")
    if request.system_prompt:
        lines += ["", "System prompt:", request.system_prompt]
    for message in request.messages:
        lines += ["", f"{message.role.capitalize()}:", message.text]
    return "\n".join(lines)


# --------------------------------------------------------------------------- answers


def result_of(answer: Mapping[str, Any]) -> dict[str, Any]:
    """The ``CreateMessageResult`` for a person's answer; RpcError (-1) when they refused,
    INVALID_PARAMS when the answer is not one (an accept without reply text)."""
    if answer.get("action") != ACCEPT:
        raise RpcError(USER_REJECTED, "the person declined the sampling request")
    reply = answer.get("reply")
    if not isinstance(reply, str):
        raise RpcError(INVALID_PARAMS, "an accepted sampling answer needs the reply text")
    model = answer.get("model")
    result: dict[str, Any] = {"role": "assistant", "content": {"type": "text", "text": reply},
                              "model": model if isinstance(model, str) and model else WRITTEN_BY_PERSON}
    stop = answer.get("stopReason")
    result["stopReason"] = stop if isinstance(stop, str) and stop else "endTurn"
    return result


def check_answer(answer: Mapping[str, Any]) -> None:
    """ValueError unless ``answer`` is an answer to a sampling request."""
    if answer.get("action") == ACCEPT and not isinstance(answer.get("reply"), str):
        raise ValueError('an accepted sampling answer needs "reply" text')
    if answer.get("action") not in (ACCEPT, "decline", "cancel"):
        raise ValueError('a sampling answer is {"action": "accept", "reply": TEXT} or {"action": "decline"}')


# --------------------------------------------------------------------------- the model


def choose_model(hints: Sequence[str], configured: Sequence[str]) -> str:
    """The configured model to use: the first hint that names one of ``configured`` (a hint
    is a substring of a model's name, as the specification defines), else the first
    configured model."""
    if not configured:
        raise ValueError("no model is configured")
    for hint in hints:
        for name in configured:
            if hint and hint.lower() in name.lower():
                return name
    return configured[0]


def chat_completion_body(request: SamplingRequest, model: str, limits: Limits) -> dict[str, Any]:
    """The OpenAI-compatible ``/chat/completions`` body for ``request``; ValueError when a
    message holds something other than text (the endpoint gets text only)."""
    if not request.only_text:
        raise ValueError("the request holds images or audio; hostapp sends the model text only")
    messages: list[dict[str, str]] = []
    if request.system_prompt:
        messages.append({"role": "system", "content": request.system_prompt})
    messages += [{"role": m.role, "content": m.text} for m in request.messages]
    body: dict[str, Any] = {"model": model, "messages": messages,
                            "max_tokens": min(request.max_tokens, limits.max_tokens)}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.stop_sequences:
        body["stop"] = list(request.stop_sequences)
    return body


_STOP_REASONS = {"stop": "endTurn", "length": "maxTokens"}


def read_chat_completion(answer: Any, asked_model: str) -> dict[str, str]:
    """``{"text", "model", "stopReason"}`` from a chat-completions answer; ValueError when
    it holds no message text."""
    choices = answer.get("choices") if isinstance(answer, Mapping) else None
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) else {}
    message = first.get("message")
    text = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(text, str):
        raise ValueError("the model's answer holds no message text")
    model = answer.get("model")
    finish = first.get("finish_reason")
    return {"text": text, "model": model if isinstance(model, str) and model else asked_model,
            "stopReason": _STOP_REASONS.get(finish, finish) if isinstance(finish, str) else "endTurn"}
