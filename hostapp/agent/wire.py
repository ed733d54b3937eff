"""The agent's wire: the engine facade as versioned JSON-RPC 2.0 over a local socket.

One JSON message per line (UTF-8, ``\\n``-terminated), both ways. A client first sends
``hello`` with the wire version it speaks; the owner answers with its own version, pid
and start time, or refuses a version it does not speak (the client then tells the person
to restart the agent). After that:

- a request's ``method`` is the name of an :class:`~hostapp.engine.api.EngineApi` method
  and its ``params`` that method's keyword arguments; its ``result`` is the method's return
  value encoded by :func:`encode`, decoded on the client by :data:`RESULTS`;
- a failure is a JSON-RPC error whose ``data.type`` names the facade exception to raise
  (:data:`ERRORS`), so a client catches exactly what it would catch in process;
- what the engine tells its listeners comes as ``event`` notifications:
  ``{"kind": "operation_changed", "op": {...}}``, ``operation_event``, ``server_changed``,
  ``server_removed`` (``"name"``), ``input_requested``, ``input_withdrawn``, ``problem``.
  A client ignores a kind it does not know.

Views cross as plain objects of their fields, so a field added to a view on one side is
ignored by an older other side (:func:`_from_fields` keeps only the fields it knows).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from hostapp.engine import api

#: The wire's version. Raise it when a message changes meaning; adding a method or a
#: view field does not (unknown fields are ignored, unknown methods refused).
VERSION = 1

#: A message larger than this is refused (a tool result can be big; a client is local).
MAX_MESSAGE = 64 * 1024 * 1024

#: JSON-RPC error codes the wire uses besides the standard ones.
ENGINE_ERROR = -32000  # a facade exception; ``data.type`` says which
VERSION_MISMATCH = -32001


class WireError(Exception):
    """The other end broke the wire's rules (bad JSON, unknown version, oversized message)."""


def dumps(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def loads(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"not a JSON message: {exc}") from None
    if not isinstance(message, dict):
        raise WireError("a message must be a JSON object")
    return message


# -- values ------------------------------------------------------------------------------


def encode(value: Any) -> Any:
    """A facade value as JSON: views and configs become objects of their fields."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(encode(v) for v in value)
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    return value


def _from_fields(cls: type[Any]) -> Callable[[Any], Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    tuples = {f.name for f in dataclasses.fields(cls) if str(f.type).startswith("tuple")}

    def decode(data: Any) -> Any:
        if not isinstance(data, dict):
            raise WireError(f"expected an object for {cls.__name__}")
        kept = {k: (tuple(v) if k in tuples and isinstance(v, list) else v) for k, v in data.items() if k in names}
        try:
            return cls(**kept)
        except TypeError as exc:
            raise WireError(f"bad {cls.__name__}: {exc}") from None

    return decode


def _optional(decode: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda data: None if data is None else decode(data)


def _list_of(decode: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def decode_list(data: Any) -> Any:
        if not isinstance(data, list):
            raise WireError("expected a list")
        return [decode(item) for item in data]

    return decode_list


def _same(data: Any) -> Any:
    return data


operation_view = _from_fields(api.OperationView)
server_view = _from_fields(api.ServerView)
input_request = _from_fields(api.InputRequest)
server_config = _from_fields(api.ServerConfig)

#: How a client decodes each method's result; a method not listed here is not served.
RESULTS: dict[str, Callable[[Any], Any]] = {
    "keyring_problem": _same,
    "servers": _list_of(server_view),
    "server_configs": _list_of(server_config),
    "server_config": _optional(server_config),
    "add_server": _same,
    "update_server": _same,
    "replace_server": _same,
    "remove_server": _same,
    "forget_server": _same,
    "reconnect": _same,
    "wait_connected": server_view,
    "list_tools": _same,
    "probe_tools": _same,
    "check_server": _same,
    "stop_retrying": _same,
    "begin_sign_in": _same,
    "finish_sign_in": _same,
    "sign_out": _same,
    "start_call": operation_view,
    "cancel": _same,
    "rerun": operation_view,
    "operation": _optional(operation_view),
    "operations": _list_of(operation_view),
    "count_operations": _same,
    "unfinished_operations": _list_of(operation_view),
    "operation_rows": _same,
    "events": _same,
    "wait_finished": operation_view,
    "answer_input": _same,
    "open_questions": _list_of(input_request),
    "list_skills": _same,
    "load_skill": _same,
    # MCP Apps
    "read_app_view": _same,
    "start_app_call": operation_view,
}

#: Arguments that travel as objects and are rebuilt on the owner's side.
ARGUMENTS: dict[str, dict[str, Callable[[Any], Any]]] = {
    "add_server": {"cfg": server_config},
    "update_server": {"cfg": server_config},
    "replace_server": {"cfg": server_config},
    "check_server": {"cfg": server_config},
    "operations": {"statuses": _optional(set)},
    "count_operations": {"statuses": _optional(set)},
}


def decode_arguments(method: str, params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise WireError("params must be an object of keyword arguments")
    rebuild = ARGUMENTS.get(method, {})
    return {str(k): rebuild[k](v) if k in rebuild else v for k, v in params.items()}


# -- errors -------------------------------------------------------------------------------

#: The facade exceptions that cross the wire by name.
ERRORS: dict[str, type[api.EngineError]] = {
    cls.__name__: cls
    for cls in (
        api.EngineError,
        api.NoSuchServer,
        api.NoSuchOperation,
        api.InvalidRequest,
        api.ServerUnavailable,
        api.ServerError,
        api.SignInRequired,
        api.SignInFailed,
        api.KeyringUnavailable,
        api.SkillRefused,
        api.EngineTimeout,
        api.AppViewRefused,
    )
}


def encode_error(exc: api.EngineError) -> dict[str, Any]:
    data: dict[str, Any] = {"type": type(exc).__name__ if type(exc).__name__ in ERRORS else "EngineError"}
    if isinstance(exc, api.ServerError):
        data["code"] = exc.code
    if isinstance(exc, api.SignInRequired):
        data["server_name"] = exc.server_name
    if isinstance(exc, api.SkillRefused):
        data["check"] = exc.check
    return {"code": ENGINE_ERROR, "message": str(exc), "data": data}


def decode_error(error: Any) -> Exception:
    """The facade exception a JSON-RPC error stands for (an EngineError when unnamed)."""
    if not isinstance(error, dict):
        return api.EngineError("the agent sent a malformed error")
    message = str(error.get("message") or "the agent reported an error")
    raw = error.get("data")
    data: dict[str, Any] = raw if isinstance(raw, dict) else {}
    cls = ERRORS.get(str(data.get("type")), api.EngineError)
    if cls is api.ServerError:
        code = data.get("code")
        return api.ServerError(message, code if isinstance(code, int) else None)
    if cls is api.SignInRequired:
        return api.SignInRequired(message, str(data.get("server_name") or ""))
    if cls is api.SkillRefused:
        check = data.get("check")
        return api.SkillRefused(message, check if isinstance(check, str) else None)
    return cls(message)
