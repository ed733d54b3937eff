"""The agent's wire: the engine facade as versioned JSON-RPC 2.0 over a local socket.

The contract is written down in ``docs/agent-wire.md`` (a test holds that document to this
module). In short: one JSON message per line (UTF-8, ``\\n``-terminated), both ways. A
client first sends ``hello`` with the range of wire versions it speaks; the agent answers
with its own range, the version this connection speaks (:func:`negotiate`), and the
methods it serves, or refuses a client outside its range (:data:`Code.VERSION_MISMATCH`).
After that:

- a request's ``method`` is the name of an :class:`~hostapp.engine.api.EngineApi` method
  (:data:`FACADE`), its ``params`` that method's keyword arguments and its ``result`` the
  method's return value encoded by :func:`encode`; both are decoded from the facade's
  annotations (:func:`decoder`), so a facade method is declared in one place. The
  agent's own methods (``agent.status``…) are
  :class:`~hostapp.engine.api.AgentControl`'s (:data:`CONTROL`);
- a failure is a JSON-RPC error whose ``code`` says which facade exception it stands for
  (:class:`Code`, stable across renames); ``data.type`` names it too, for clients of
  version 1;
- what the engine tells its listeners comes as ``event`` notifications, each with a
  sequence number ``seq`` that increases by one per event the agent emits, so a client
  that reconnects can ask for what it missed (``since`` in ``hello``): ``operation_changed``,
  ``operation_event``, ``server_changed``, ``server_removed`` (``"name"``),
  ``input_requested``, ``input_withdrawn``, ``problem``. A client ignores a kind it does
  not know.

Views cross as plain objects of their fields, so a field added to a view on one side is
ignored by an older other side (:func:`_from_fields` keeps only the fields it knows).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import operator
import types
import typing
from collections.abc import Callable
from enum import IntEnum
from typing import Any

import orjson

from hostapp.engine import api
from hostapp.protocol import jsonrpc

#: The wire's version. Raise it when a message changes meaning or a client may rely on
#: something new (and add a line to the history in docs/agent-wire.md); adding a view field
#: does not (unknown fields are ignored), adding a method does not either (``hello`` lists
#: the methods an agent serves, and a client checks before it calls).
VERSION = 2

#: The oldest version this side still speaks. A version-1 client (exact match, errors by
#: ``data.type``, no ``seq``) is served by this agent: nothing it relies on changed. A
#: client of this code needs an agent that lists its methods at ``hello`` (version 2).
MIN_VERSION = 1
CLIENT_MIN_VERSION = 2

#: A message larger than this is refused (a tool result can be big; a client is local).
MAX_MESSAGE = 64 * 1024 * 1024


class Code(IntEnum):
    """The wire's error codes: a number, once given, keeps its meaning for good (a renamed
    exception keeps its code; a retired one's number is not reused)."""

    # JSON-RPC's own
    PARSE_ERROR = jsonrpc.PARSE_ERROR
    INVALID_REQUEST = jsonrpc.INVALID_REQUEST
    METHOD_NOT_FOUND = jsonrpc.METHOD_NOT_FOUND
    INVALID_PARAMS = jsonrpc.INVALID_PARAMS
    # the agent's (JSON-RPC leaves -32000..-32099 to the implementation)
    ENGINE_ERROR = -32000  # a facade failure of no more precise kind
    VERSION_MISMATCH = -32001
    NO_SUCH_SERVER = -32010
    NO_SUCH_OPERATION = -32011
    INVALID_ARGUMENT = -32012
    SERVER_UNAVAILABLE = -32013
    SERVER_ERROR = -32014
    SIGN_IN_REQUIRED = -32015
    SIGN_IN_FAILED = -32016
    KEYRING_UNAVAILABLE = -32017
    SKILL_REFUSED = -32018
    ENGINE_TIMEOUT = -32019
    APP_VIEW_REFUSED = -32020


#: Kept for the callers that named them before :class:`Code`.
ENGINE_ERROR = Code.ENGINE_ERROR
VERSION_MISMATCH = Code.VERSION_MISMATCH


class WireError(Exception):
    """The other end broke the wire's rules (bad JSON, unknown version, oversized message)."""


# orjson on the wire's hot path (a page of 200 views, the list of 10,000 after a restart,
# every event): measured against json, the agent's dumps of a page 1.84 -> 0.25 ms and of the
# 10,000-view list 49 -> 6 ms, the client's loads of that list 39 -> 30 ms. What orjson refuses
# (an integer beyond 64 bits, a string that is not valid Unicode, NaN to read) goes through
# json as before, so the wire says and reads what it did.


def dumps(message: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # orjson.JSONEncodeError: what json says, or refuses, as it did
        return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def loads(line: bytes) -> dict[str, Any]:
    try:
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            message = json.loads(line)  # what orjson refuses and json reads (NaN, big integers)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"not a JSON message: {exc}") from None
    if not isinstance(message, dict):
        raise WireError("a message must be a JSON object")
    return message


def error(code: Code, message: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-RPC error object."""
    return {"code": int(code), "message": message, **({"data": data} if data is not None else {})}


# -- versions ------------------------------------------------------------------------------


def negotiate(client: tuple[int, int], agent: tuple[int, int]) -> int | None:
    """The version a connection speaks: the newest both ranges (``(minimum, version)``)
    hold, or None when they do not meet (as Docker's client negotiates down to its
    daemon's version)."""
    speak = min(client[1], agent[1])
    return speak if speak >= max(client[0], agent[0]) else None


def mismatch_advice(client: tuple[int, int], agent: tuple[int, int]) -> str:
    """What a person does about two ranges that do not meet, in plain words."""
    said = (f"this hostapp speaks version {_range(client)} of the agent's wire and the running agent "
            f"{_range(agent)}")
    if agent[1] < client[0]:
        return (f"{said}: the agent is older than this hostapp. Restart the agent (hostapp agent stop, "
                "or Quit > Stop everything in the window) so that the installed version starts.")
    return (f"{said}: this hostapp is older than the running agent. Start this hostapp's newer "
            "version (close this window or command, then open it again).")


def _range(versions: tuple[int, int]) -> str:
    return str(versions[1]) if versions[0] == versions[1] else f"{versions[0]} to {versions[1]}"


# -- values ------------------------------------------------------------------------------


#: A value nested deeper than this is cut where it crosses the wire (what servers send is
#: cut shallower at intake; this bounds what an older journal kept, and any other value).
MAX_DEPTH = jsonrpc.MAX_DEPTH + 16


_SCALARS = frozenset({str, int, float, bool})
_VIEW_FIELDS = tuple(f.name for f in dataclasses.fields(api.OperationView))
#: A view's fields in one C call (a page of history is 200 views, a list after a restart
#: 10,000: a getattr and an encode call per field were most of the agent's time per page).
_view_values = operator.attrgetter(*_VIEW_FIELDS)


def encode(value: Any, _depth: int = 0) -> Any:
    """A facade value as JSON: views and configs become objects of their fields; anything
    nested deeper than :data:`MAX_DEPTH` levels becomes :data:`~hostapp.protocol.jsonrpc.CUT_MARKER`."""
    if value is None or type(value) in _SCALARS:  # most values: answered before any other test
        return value
    if _depth >= MAX_DEPTH and isinstance(value, (dict, list, tuple, set, frozenset)):
        return jsonrpc.CUT_MARKER
    deeper = _depth + 1
    kind = type(value)
    if kind is dict:  # JSON from a server (arguments, results): tested before the dataclasses
        return {str(k): v if v is None or type(v) in _SCALARS else encode(v, deeper) for k, v in value.items()}
    if kind is list:
        return [v if v is None or type(v) in _SCALARS else encode(v, deeper) for v in value]
    if isinstance(value, api.OperationView):
        # ``resumable``: what clients before ``lost_at_stop`` read instead (docs/agent-wire.md).
        fields = {name: v if v is None or type(v) in _SCALARS else encode(v, deeper)
                  for name, v in zip(_VIEW_FIELDS, _view_values(value), strict=True)}
        fields["resumable"] = value.lost_at_stop is None
        return fields
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name), deeper) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [encode(v, deeper) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(encode(v, deeper) for v in value)
    if isinstance(value, dict):
        return {str(k): encode(v, deeper) for k, v in value.items()}
    return value


def _from_fields(cls: type[Any]) -> Callable[[Any], Any]:
    fields = dataclasses.fields(cls)
    names = {f.name for f in fields}
    tuples = {f.name for f in fields if str(f.type).startswith("tuple")}
    # The common case, an object with every field (the agent's own views): the fields set
    # straight into the slots, without the frozen class's __init__ (one object.__setattr__
    # per field). A list of 10,000 views after a restart decoded in the window: 66 -> 25 ms
    # (OperationView 7.7 -> 1.9 us each). Only for a slotted class with nothing to convert
    # and no __post_init__ to run; anything else takes the general way below.
    every_field = operator.itemgetter(*(f.name for f in fields))
    setters = (tuple(cls.__dict__[f.name].__set__ for f in fields)
               if "__slots__" in cls.__dict__ and not tuples and not hasattr(cls, "__post_init__") else None)
    new = object.__new__

    def decode(data: Any) -> Any:
        if not isinstance(data, dict):
            raise WireError(f"expected an object for {cls.__name__}")
        if setters is not None:
            try:
                values = every_field(data)
            except KeyError:
                pass  # a field left out (an older agent): its default, the general way
            else:
                obj = new(cls)
                for set_field, value in zip(setters, values, strict=True):
                    set_field(obj, value)
                return obj
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


def _set(data: Any) -> set[Any]:
    if not isinstance(data, list):
        raise WireError("expected a list")
    return set(data)


def _same(data: Any) -> Any:
    return data


_operation_view_fields = _from_fields(api.OperationView)

#: What an operation in flight says of a stop when its agent is older than ``lost_at_stop``
#: and said it could not be resumed (its ``resumable``).
OLDER_AGENT_LOST = "the agent says nothing can resume it"


def operation_view(data: Any) -> api.OperationView:
    """An ``OperationView``; from an agent before ``lost_at_stop``, that field from its
    ``resumable``."""
    view: api.OperationView = _operation_view_fields(data)
    if "lost_at_stop" not in data and data.get("resumable") is False and view.in_flight:
        return dataclasses.replace(view, lost_at_stop=OLDER_AGENT_LOST)
    return view


server_view = _from_fields(api.ServerView)
input_request = _from_fields(api.InputRequest)
server_config = _from_fields(api.ServerConfig)

#: The facade's value types that cross as objects of their fields.
_VIEWS: dict[Any, Callable[[Any], Any]] = {
    api.OperationView: operation_view,
    api.ServerView: server_view,
    api.InputRequest: input_request,
    api.ServerConfig: server_config,
}


def decoder(hint: Any) -> Callable[[Any], Any]:
    """How a value annotated ``hint`` in the facade is rebuilt from its JSON: views from
    their fields, lists and optionals of them likewise, sets from lists; anything else is
    plain JSON already."""
    if hint in _VIEWS:
        return _VIEWS[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        inner = decoder(rest[0]) if len(rest) == 1 else _same
        return _same if inner is _same else _optional(inner)
    if origin is list and args:
        inner = decoder(args[0])
        return _same if inner is _same else _list_of(inner)
    if origin in (set, frozenset):
        return _set
    return _same


@dataclasses.dataclass(frozen=True)
class Method:
    """A facade method as the wire carries it: how its arguments and its result are
    rebuilt on the other side."""

    name: str
    parameters: tuple[str, ...]
    arguments: dict[str, Callable[[Any], Any]]
    result: Callable[[Any], Any]


#: The facade's lifecycle is the owner's business: a client neither starts nor stops it.
_NOT_SERVED = frozenset({"start", "stop"})


def _facade() -> dict[str, Method]:
    methods = {}
    for name, member in vars(api.EngineApi).items():
        if name in _NOT_SERVED or not inspect.iscoroutinefunction(member):
            continue
        hints = typing.get_type_hints(member)
        parameters = tuple(p for p in inspect.signature(member).parameters if p != "self")
        arguments = {p: d for p in parameters if (d := decoder(hints[p])) is not _same}
        methods[name] = Method(name, parameters, arguments, decoder(hints["return"]))
    return methods


#: Every facade method the agent serves, by name: derived from ``EngineApi``.
FACADE: dict[str, Method] = _facade()

#: How a client decodes each facade method's result (kept by that name for its callers).
RESULTS: dict[str, Callable[[Any], Any]] = {name: method.result for name, method in FACADE.items()}


def decode_arguments(method: str, params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise WireError("params must be an object of keyword arguments")
    rebuild = FACADE[method].arguments if method in FACADE else {}
    return {str(k): rebuild[k](v) if k in rebuild else v for k, v in params.items()}


# -- the agent's own methods ---------------------------------------------------------------


#: The owner's own methods (:class:`~hostapp.engine.api.AgentControl`'s) by their wire
#: name: ``agent.status`` is ``AgentControl.status``, and so on.
CONTROL: dict[str, str] = {f"agent.{name}": name for name, member in vars(api.AgentControl).items()
                           if inspect.iscoroutinefunction(member)}


# -- events --------------------------------------------------------------------------------

#: The kinds of ``event`` notifications (``params.kind``); ``owner_stopping`` is the
#: agent's farewell, ``dropped`` its last word to a client it stops serving.
EVENT_KINDS = ("operation_changed", "operation_event", "server_changed", "server_removed", "input_requested",
               "input_withdrawn", "problem", "owner_stopping", "dropped")


# -- errors -------------------------------------------------------------------------------

#: The facade exceptions that cross the wire, with their codes.
ERRORS: dict[Code, type[api.EngineError]] = {
    Code.ENGINE_ERROR: api.EngineError,
    Code.NO_SUCH_SERVER: api.NoSuchServer,
    Code.NO_SUCH_OPERATION: api.NoSuchOperation,
    Code.INVALID_ARGUMENT: api.InvalidRequest,
    Code.SERVER_UNAVAILABLE: api.ServerUnavailable,
    Code.SERVER_ERROR: api.ServerError,
    Code.SIGN_IN_REQUIRED: api.SignInRequired,
    Code.SIGN_IN_FAILED: api.SignInFailed,
    Code.KEYRING_UNAVAILABLE: api.KeyringUnavailable,
    Code.SKILL_REFUSED: api.SkillRefused,
    Code.ENGINE_TIMEOUT: api.EngineTimeout,
    Code.APP_VIEW_REFUSED: api.AppViewRefused,
}
_CODES: dict[type[api.EngineError], Code] = {cls: code for code, cls in ERRORS.items()}


def code_of(exc: api.EngineError) -> Code:
    """The code of ``exc``: its class's, else its nearest listed base class's."""
    return next(_CODES[cls] for cls in type(exc).__mro__ if cls in _CODES)


def encode_error(exc: api.EngineError) -> dict[str, Any]:
    code = code_of(exc)
    data: dict[str, Any] = {"type": ERRORS[code].__name__}
    if isinstance(exc, api.ServerError):
        data["code"] = exc.code
    if isinstance(exc, api.SignInRequired):
        data["server_name"] = exc.server_name
    if isinstance(exc, api.SkillRefused):
        data["check"] = exc.check
    return error(code, str(exc), data)


def decode_error(raw_error: Any) -> Exception:
    """The facade exception a JSON-RPC error stands for, by its code (an EngineError for
    a code this side does not know: a newer agent's)."""
    if not isinstance(raw_error, dict):
        return api.EngineError("the agent sent a malformed error")
    message = str(raw_error.get("message") or "the agent reported an error")
    raw = raw_error.get("data")
    data: dict[str, Any] = raw if isinstance(raw, dict) else {}
    code = raw_error.get("code")
    cls = ERRORS.get(code, api.EngineError) if isinstance(code, int) else api.EngineError  # type: ignore[call-overload]
    if cls is api.ServerError:
        server_code = data.get("code")
        return api.ServerError(message, server_code if isinstance(server_code, int) else None)
    if cls is api.SignInRequired:
        return api.SignInRequired(message, str(data.get("server_name") or ""))
    if cls is api.SkillRefused:
        check = data.get("check")
        return api.SkillRefused(message, check if isinstance(check, str) else None)
    return cls(message)
