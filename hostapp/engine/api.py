"""The engine's facade: everything the window, the CLI and the conformance client may do.

:class:`EngineApi` is the contract. The in-process engine implements it
(:class:`hostapp.engine.facade.LocalEngine` around :class:`hostapp.engine.service.Engine`)
in the agent, the one process that runs a home's engine, and in the CLI's commands that
start nothing and work in process under the home's lock (:func:`hostapp.engine.open_engine`).
The agent's clients (the window, the CLI) hold a proxy that sends each call over the
agent's socket (:class:`ForwardingEngine`, the one place a proxy spells the methods out:
the agent client's ``RemoteEngine`` and the window's ``AgentLink`` derive from it; the
wire is ``docs/agent-wire.md``). So every method takes and
returns plain data (strings, numbers, JSON objects, the frozen views below) and is
awaitable, and what the engine tells its clients goes through one listener contract,
:class:`EngineListener`. What the agent answers itself, besides, is :class:`AgentControl`.

Nothing here names a mechanism's internals: an operation is an operation, whatever
carries it. The clients catch only the exceptions declared here; the engine translates
the transport's, the keyring's and the sign-in's failures into them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypedDict

# The definition of a server a client passes in: the journal keeps it, but its class is
# in a module of its own, so that a client (a CLI command, the window) does not import
# the journal's SQLite and keyring libraries to read one.
from hostapp.store.server_config import LOG_LEVELS, ServerConfig
from hostapp.store.status import IN_FLIGHT, TERMINAL, OperationStatus

__all__ = [
    "EVENT_RESUMED",
    "IN_FLIGHT",
    "LOG_LEVELS",
    "TERMINAL",
    "AgentControl",
    "AgentStatus",
    "AppViewRefused",
    "EngineApi",
    "EngineError",
    "EngineListener",
    "EngineTimeout",
    "ForwardingEngine",
    "InputRequest",
    "InvalidRequest",
    "JsonObject",
    "KeyringUnavailable",
    "LostOperation",
    "NoSuchOperation",
    "NoSuchServer",
    "OperationStatus",
    "OperationView",
    "ServerConfig",
    "ServerError",
    "ServerSecrets",
    "ServerState",
    "ServerUnavailable",
    "ServerView",
    "SignInFailed",
    "SignInRequired",
    "SkillRefused",
]

#: A JSON object as the server sent it (tool arguments and results, elicitation params,
#: event data): the only untyped values of the facade.
JsonObject = dict[str, Any]

#: Secret values of a server for the keyring, apart from its configuration:
#: ``{"headers": {name: value}, "env": {name: value}, "credentials": {name: value}}``;
#: ``credentials`` are its sign-in secrets (``client_secret``, ``private_key`` as PEM,
#: ``assertion``, ``idp_client_secret``), used as its ``ServerConfig.auth`` settings say.
ServerSecrets = dict[str, dict[str, str]]


class ServerState(StrEnum):
    """A configured server's connection state (a ``str``, compared and sent as its value)."""

    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    OFFLINE = "offline"
    NEEDS_SIGN_IN = "needs_sign_in"
    DISABLED = "disabled"


# Module-level names of the members, for the engine's own modules, which read them as
# ``api.RUNNING``; they are the enum members themselves, not a second vocabulary.
PENDING = OperationStatus.PENDING
RUNNING = OperationStatus.RUNNING
INPUT_REQUIRED = OperationStatus.INPUT_REQUIRED
COMPLETED = OperationStatus.COMPLETED
FAILED = OperationStatus.FAILED
CANCELLED = OperationStatus.CANCELLED
EXPIRED = OperationStatus.EXPIRED
UNKNOWN = OperationStatus.UNKNOWN
CONNECTING = ServerState.CONNECTING
CONNECTED = ServerState.CONNECTED
RECONNECTING = ServerState.RECONNECTING
OFFLINE = ServerState.OFFLINE
NEEDS_SIGN_IN = ServerState.NEEDS_SIGN_IN
DISABLED = ServerState.DISABLED


#: The timeline event (``EngineListener.operation_event`` and ``EngineApi.events``) of an
#: unfinished operation that a host taking over the home (after a quit or a crash) picks up
#: again; its data says how (``{"mechanism": ..., "message": ...}``).
EVENT_RESUMED = "resumed"
#: The timeline event of an operation whose call the server refused because it no longer
#: knew the session (HTTP 404: not processed), sent again once in a new session; its data
#: says so (``{"message": ...}``).
EVENT_SESSION_RENEWED = "session_renewed"
#: The timeline event of an operation the host found stalled (``OperationView.stalled``);
#: its data says why (``{"message": ...}``).
EVENT_STALLED = "stalled"
#: The timeline event of a stalled operation that showed a sign of life again.
EVENT_STALL_ENDED = "stall_ended"
#: The timeline event, on an operation whose view (MCP Apps) called a tool, of each such
#: call (``{"operation", "tool", "arguments", "message"}``): what a view shown again is
#: answered from.
EVENT_VIEW_CALL = "view_call"


# -- views: immutable; a change is a new copy (dataclasses.replace) ---------------------

@dataclass(frozen=True, slots=True)
class OperationView:
    """A snapshot of one operation, as a person sees it."""

    id: str
    server: str
    tool: str | None
    method: str
    arguments: JsonObject
    status: str  # an OperationStatus value
    progress: float | None = None
    total: float | None = None
    message: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    ended_at: float | None = None
    needs_input: bool = False
    result: JsonObject | None = None
    error: JsonObject | None = None
    #: How the call is carried (a mechanism's name, e.g. "tasks_extension", "direct"), once
    #: the engine chose it; None before. Lets a client name what would resume it.
    mechanism: str | None = None
    #: Why the host thinks the operation stalled, while it does (None: it does not): no
    #: sign of life for longer than its server's own hints allow, or input required with
    #: no question asked, each still so after the host checked. It goes on; a sign of life
    #: clears this (hostapp.engine.liveness).
    stalled: str | None = None
    #: How many calls its MCP App view made (each an operation whose ``view_of`` is this
    #: one; they are left out of the list, and counted here on the view's own row).
    view_calls: int = 0
    #: Whether it survives a stop of the host that carries it, read while it is in flight:
    #: None when a restart resumes it, else why it would not, in plain words ("a plain
    #: request: nothing can resume it"). Decided by the engine, which knows what its journal
    #: and keyring hold (:func:`hostapp.engine.operation.lost_at_stop`); every client reads
    #: it (:attr:`survives_stop`).
    lost_at_stop: str | None = None
    #: The operation whose MCP App view made this call (None: a call of its own). The
    #: window and ``hostapp ops`` list such calls under that operation, not at top level.
    view_of: str | None = None

    @property
    def in_flight(self) -> bool:
        return self.status in IN_FLIGHT

    @property
    def fraction(self) -> float | None:
        """0..1 when the server gave a total, else None (an indeterminate bar)."""
        if self.total and self.progress is not None and self.total > 0:
            return max(0.0, min(1.0, self.progress / self.total))
        return None

    @property
    def survives_stop(self) -> bool:
        """In flight, and a stop of its host now would leave it to be resumed."""
        return self.in_flight and self.lost_at_stop is None


@dataclass(frozen=True, slots=True)
class ServerView:
    """A configured server and its live connection state."""

    name: str
    transport: str
    target: str
    state: str = ServerState.OFFLINE  # a ServerState value
    protocol_version: str | None = None
    tools_count: int | None = None
    retry_in: float | None = None      # seconds until the next reconnect attempt
    error: str | None = None           # the last failure, in plain words
    tools: tuple[JsonObject, ...] = ()
    #: When the next reconnect attempt is due (``time.time()`` seconds; None: none is planned),
    #: so that a client counts down without being told every second.
    retry_at: float | None = None
    #: Answers the server sent to request ids hostapp never sent (or no longer waits for),
    #: across its sessions in this engine's lifetime: a call that hangs is often explained
    #: by a server that answers under the wrong id. ``last_stray`` quotes the latest one
    #: (cut, escaped, secrets redacted): server text, to be shown as plain text.
    stray_answers: int = 0
    last_stray: str | None = None
    #: The extensions (``capabilities.extensions`` ids) the server declared when it last
    #: connected: what a client may offer for it (skills, app views).
    extensions: tuple[str, ...] = ()

    #: Whether it signs in (OAuth): it is configured to, it asked for a sign-in, or a
    #: sign-in of it is kept. False: Sign out has nothing to forget.
    signs_in: bool = False

    #: What last happened to the connection that the person should know although it is
    #: connected now, in plain words with the time ("the server restarted or ended the
    #: session; new session at 14:02:11"); None: nothing to tell.
    note: str | None = None


@dataclass(frozen=True, slots=True)
class InputRequest:
    """A question a server asks on behalf of an operation (form or URL elicitation), or
    a sampling request (``mode`` "sampling": answered ``{"action": "accept", "reply": TEXT}``
    or ``{"action": "decline"}``; its ``message`` is the last message's first line)."""

    id: str                    # unique per question
    operation_id: str | None   # None when the question belongs to no known operation
    server: str
    mode: str                  # "form" | "url" | "sampling"
    message: str
    params: JsonObject         # the elicitation (or sampling) params as the server sent them


# -- errors the clients catch ---------------------------------------------------------

class EngineError(Exception):
    """A request to the engine failed; the message is for a person and holds no secret."""


class NoSuchServer(EngineError, KeyError):
    """No server is configured under that name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "no such server"


class NoSuchOperation(EngineError, KeyError):
    """No operation (or no open question) has that id."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "no such operation"


class ServerUnavailable(EngineError):
    """The server could not be reached, or its connection broke."""


class ServerError(EngineError):
    """The server answered with a JSON-RPC error (``code`` is its error code)."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class SignInRequired(ServerUnavailable):
    """The server needs a person to sign in (``hostapp servers login``, or Sign in)."""

    def __init__(self, message: str, server_name: str):
        super().__init__(message)
        self.server_name = server_name


class SignInFailed(EngineError):
    """Signing in did not complete (refused, timed out, or the server offers no sign-in)."""


class KeyringUnavailable(EngineError):
    """The OS keyring cannot take or give secrets; the message says what to do."""


class SkillRefused(EngineError):
    """A server's skill cannot be listed or loaded: a malformed listing, an unknown name, or a
    file that fails verification (``check`` is then ``"size"``, ``"digest"`` or ``"frontmatter"``)."""

    def __init__(self, message: str, check: str | None = None):
        super().__init__(message)
        self.check = check


class InvalidRequest(EngineError, ValueError):
    """The request cannot be done as given (settings that cannot work, an operation that is
    not a tool call); the message says why. Still a ``ValueError``."""


class AppViewRefused(EngineError):
    """A tool's app view (MCP Apps) cannot be shown, or a call it asked for is not allowed:
    a resource of the wrong type or size, an undeclarable origin, a tool apps may not call."""


class EngineTimeout(EngineError, TimeoutError):
    """What was awaited did not happen in time (still a ``TimeoutError``)."""


# -- the listener contract: what the engine tells its clients ---------------------------

class EngineListener(Protocol):
    """Called on the event loop thread; implementations must return quickly."""

    def operation_changed(self, op: OperationView) -> None: ...

    def operation_event(self, op_id: str, kind: str, data: JsonObject) -> None: ...

    def server_changed(self, server: ServerView) -> None: ...

    def input_requested(self, request: InputRequest) -> None: ...

    def input_withdrawn(self, request_id: str) -> None: ...

    def server_removed(self, name: str) -> None:
        """Server ``name`` left the configuration (by whichever client removed or renamed
        it); its history stays."""

    def problem(self, kind: str, message: str) -> None:
        """A banner-worthy condition: kind is "keyring", "server", "journal"."""


# -- the facade -------------------------------------------------------------------------

class EngineApi(Protocol):
    """What a client may ask of the engine. Every method is awaitable and takes and
    returns plain data; failures are the exceptions of this module."""

    # lifecycle (the agent, which runs the home's engine, starts and stops it)
    async def start(self, *, resume: bool = True, only: frozenset[str] | None = None) -> None:
        """Check the keyring, connect the servers (``only`` those), resume operations."""

    async def stop(self) -> None:
        """Quit: operations in flight stay in the journal, to be resumed by the next start."""

    async def keyring_problem(self) -> str | None:
        """Why the keyring takes no secrets right now, or None when it does."""

    # servers
    async def servers(self) -> list[ServerView]:
        """Every configured server with its connection state."""

    async def server_configs(self) -> list[ServerConfig]:
        """Every configured server's definition (secret values are keyring references)."""

    async def server_config(self, name: str) -> ServerConfig | None:
        """One server's definition, or None."""

    async def add_server(self, cfg: ServerConfig, secrets: ServerSecrets | None = None) -> None:
        """Configure a server; ``secrets`` go to the keyring, the journal keeps references."""

    async def update_server(self, cfg: ServerConfig, secrets: ServerSecrets | None = None) -> None:
        """Change a server in place (same name); its history stays attached."""

    async def replace_server(self, old_name: str, cfg: ServerConfig, secrets: ServerSecrets | None = None) -> None:
        """Replace ``old_name`` by ``cfg`` under another name; kept secret references move along."""

    async def remove_server(self, name: str) -> None:
        """Remove a server and its secret values; its history and sign-in stay."""

    async def forget_server(self, name: str) -> list[str]:
        """Remove a server with its secret values and its sign-in; what the keyring kept
        although asked to delete it, in plain words."""

    async def reconnect(self, name: str) -> None:
        """Connect the server now instead of waiting for the next retry."""

    async def stop_retrying(self, name: str) -> None:
        """Stop connecting to the server (after failures): it stays configured, disabled,
        its operations waiting, until :meth:`reconnect` enables it again."""

    async def wait_connected(self, name: str, timeout: float = 60.0) -> ServerView:
        """Until the server's first connection attempt ended; ServerUnavailable if it failed,
        EngineTimeout (saying what the server did not answer) if it did not end in time."""

    async def list_tools(self, server: str, timeout: float = 30.0) -> list[JsonObject]:
        """The tools of a connected server (waits for its connection)."""

    async def probe_tools(self, server: str, timeout: float | None = None) -> list[JsonObject]:
        """Connect once, list the tools, disconnect: a failure is raised, not retried.
        ``timeout`` bounds the handshake and the tool list (EngineTimeout says which)."""

    async def check_server(self, cfg: ServerConfig, secrets: ServerSecrets | None = None,
                          timeout: float | None = None) -> JsonObject:
        """Connect once with settings not saved (``cfg``, its secret values in ``secrets``;
        references ``cfg`` keeps are read from the keyring), list the tools, disconnect:
        ``{"protocol_version", "server_name", "tools_count"}``. Nothing is stored; a failure
        is raised (ServerUnavailable, SignInRequired, EngineTimeout saying which step)."""

    async def list_skills(self, server: str) -> list[JsonObject]:
        """The skills ``server`` offers (SEP-2640): ``uri``, ``name``, ``description``,
        ``frontmatter``, ``resources``. No skill file is read."""

    async def load_skill(self, server: str, name: str) -> JsonObject:
        """Read and verify every file of the skill ``name`` (its name or URI): the entry plus
        ``instructions`` (SKILL.md) and ``files`` (URI to text). :class:`SkillRefused` on any
        mismatch with the listing, naming the check that failed."""

    async def list_resources(self, server: str) -> JsonObject:
        """The resources and resource templates ``server`` lists (every page):
        ``{"resources", "templates", "subscribe"}`` (``subscribe``: whether it can be watched).
        :class:`InvalidRequest` when it offers none. Nothing is read."""

    async def read_resource(self, server: str, uri: str) -> JsonObject:
        """``resources/read`` of ``uri``: ``{"contents": [...]}``, each with its ``uri``,
        ``mimeType`` and ``text`` or ``blob`` (base64), as the server sent it (server text)."""

    async def watch_resource(self, server: str, uri: str) -> None:
        """Watch ``uri`` for changes: subscribed on the live connection (again in each new
        session) until its last watcher calls :meth:`unwatch_resource`; each change is the
        listener's ``operation_event("", "resource_updated", {"server", "uri"})``.
        :class:`InvalidRequest` when the server offers no subscriptions."""

    async def unwatch_resource(self, server: str, uri: str) -> None:
        """One watcher of ``uri`` fewer; after the last the server is told (unsubscribe)."""

    async def server_log(self, server: str, limit: int = 200) -> list[JsonObject]:
        """The last ``limit`` messages ``server`` logged to the host while the engine ran
        (``notifications/message``), oldest first: ``{"at", "level", "logger", "data"}``
        (server text). New ones come as the listener's ``operation_event("", "log", ...)``
        with ``server`` added. Its ``ServerConfig.log_level`` is what it is asked to send."""

    async def begin_sign_in(self, server: str, timeout: float | None = None) -> str:
        """Start signing in to an HTTP server; the authorization URL for the browser."""

    async def finish_sign_in(self, server: str) -> None:
        """Until the browser came back and the tokens are in the keyring."""

    async def sign_out(self, server: str) -> None:
        """Forget the server's tokens; its next connection asks for sign-in again."""

    # operations
    async def start_call(self, server: str, tool: str, arguments: JsonObject | None = None) -> OperationView:
        """Journal a tools/call operation and start it in the background."""

    async def cancel(self, op_id: str) -> None: ...

    async def rerun(self, op_id: str) -> OperationView:
        """Run an ended call again, as a new operation."""

    async def operation(self, op_id: str) -> OperationView | None: ...

    async def operations(self, statuses: set[str] | None = None, limit: int = 200,
                         offset: int = 0, before: tuple[float, str] | None = None,
                         after: tuple[float, str] | None = None, top_level: bool = False,
                         view_of: str | None = None) -> list[OperationView]:
        """Newest first; ``statuses`` filters. A page by key: ``before`` (or ``after``) an
        operation's ``(created_at, id)``, the next ``limit`` older (or newer) ones, newest
        first either way; only with ``statuses`` all finished or all in flight. Reading
        by key costs the same at any depth of the history, where ``offset`` grows with it.
        ``top_level``: only the operations no app view made; ``view_of``: only the calls
        the view of that operation made (not both)."""

    async def count_operations(self, statuses: set[str] | None = None, top_level: bool = False,
                               view_of: str | None = None) -> int: ...

    async def unfinished_operations(self) -> list[OperationView]:
        """The operations the journal holds in flight (those a start resumes)."""

    async def operation_rows(self, limit: int = 200) -> list[JsonObject]:
        """The newest operations as the journal stores them (``hostapp ops``): id, server,
        tool, mechanism, status, progress, total, message, created_at, result, error."""

    async def events(self, op_id: str) -> list[JsonObject]:
        """The operation's timeline: ``{"at", "kind", "data"}`` objects, oldest first."""

    async def wait_finished(self, op_id: str) -> OperationView:
        """Until the operation has a terminal status."""

    # questions to the person
    async def answer_input(self, request_id: str, answer: JsonObject) -> None: ...

    async def open_questions(self) -> list[InputRequest]: ...

    async def draft_reply(self, request_id: str) -> JsonObject:
        """The configured model's reply to the open sampling request ``request_id``, for the
        person to review before answering: ``{"text", "model", "stopReason"}``. Nothing goes
        to the server. :class:`InvalidRequest` for a question that is not a sampling request."""

    # the model that answers sampling requests
    async def model_settings(self) -> JsonObject:
        """The model endpoint: ``base_url``, ``models``, ``api_key`` (whether one is kept in
        the keyring, never the key), ``auto_approve`` (servers whose sampling requests the
        model answers without asking) and ``limits``."""

    async def set_model(self, base_url: str, models: list[str], api_key: str | None = None) -> JsonObject:
        """Set the OpenAI-compatible endpoint and its model names (the first is the default;
        a request's model hints choose among them); ``api_key`` goes to the keyring (None
        keeps the kept one, "" removes it). The settings as :meth:`model_settings` gives them."""

    async def clear_model(self) -> None:
        """Forget the model endpoint, its key and the per-server sampling policies."""

    async def set_sampling_policy(self, server: str, policy: str) -> None:
        """``"ask"`` (the default: the person sees each sampling request of ``server``) or
        ``"auto"`` (the configured model answers them without asking)."""

    # MCP Apps: a tool's view (see docs/mcp-apps.md)
    async def read_app_view(self, server: str, uri: str) -> JsonObject:
        """The checked ``ui://`` view resource ``uri`` of ``server``: ``uri``, ``html``, ``csp``
        (declared origins), ``prefersBorder``, ``permissions``. :class:`AppViewRefused` if
        it is not an app view hostapp renders."""

    async def start_app_call(self, server: str, tool: str, arguments: JsonObject | None,
                             view_of: str) -> OperationView:
        """A ``tools/call`` the view of operation ``view_of`` asked for, as an operation of its
        own; :class:`AppViewRefused` unless ``tool`` is a tool of the same server that apps
        may call."""


class ForwardingEngine(ABC):
    """An :class:`EngineApi` whose every call goes to :meth:`forward` by its name with its
    keyword arguments: the one place the facade's methods are spelled out for a proxy (the
    agent's client over the wire, the window's link over whichever connection is current).
    The lifecycle, :meth:`start` and :meth:`stop`, is each proxy's own."""

    @abstractmethod
    async def forward(self, method: str, arguments: JsonObject) -> Any:
        """Do ``method`` with ``arguments`` where the engine is; its result."""

    @abstractmethod
    async def start(self, *, resume: bool = True, only: frozenset[str] | None = None) -> None: ...

    @abstractmethod
    async def stop(self) -> None: ...

    async def keyring_problem(self) -> str | None:
        return await self.forward("keyring_problem", {})

    async def servers(self) -> list[ServerView]:
        return await self.forward("servers", {})

    async def server_configs(self) -> list[ServerConfig]:
        return await self.forward("server_configs", {})

    async def server_config(self, name: str) -> ServerConfig | None:
        return await self.forward("server_config", {"name": name})

    async def add_server(self, cfg: ServerConfig, secrets: ServerSecrets | None = None) -> None:
        await self.forward("add_server", {"cfg": cfg, "secrets": secrets})

    async def update_server(self, cfg: ServerConfig, secrets: ServerSecrets | None = None) -> None:
        await self.forward("update_server", {"cfg": cfg, "secrets": secrets})

    async def replace_server(self, old_name: str, cfg: ServerConfig, secrets: ServerSecrets | None = None) -> None:
        await self.forward("replace_server", {"old_name": old_name, "cfg": cfg, "secrets": secrets})

    async def remove_server(self, name: str) -> None:
        await self.forward("remove_server", {"name": name})

    async def forget_server(self, name: str) -> list[str]:
        return await self.forward("forget_server", {"name": name})

    async def reconnect(self, name: str) -> None:
        await self.forward("reconnect", {"name": name})

    async def stop_retrying(self, name: str) -> None:
        await self.forward("stop_retrying", {"name": name})

    async def wait_connected(self, name: str, timeout: float = 60.0) -> ServerView:
        return await self.forward("wait_connected", {"name": name, "timeout": timeout})

    async def list_tools(self, server: str, timeout: float = 30.0) -> list[JsonObject]:
        return await self.forward("list_tools", {"server": server, "timeout": timeout})

    async def probe_tools(self, server: str, timeout: float | None = None) -> list[JsonObject]:
        return await self.forward("probe_tools", {"server": server, "timeout": timeout})

    async def check_server(self, cfg: ServerConfig, secrets: ServerSecrets | None = None,
                           timeout: float | None = None) -> JsonObject:
        return await self.forward("check_server", {"cfg": cfg, "secrets": secrets, "timeout": timeout})

    async def list_skills(self, server: str) -> list[JsonObject]:
        return await self.forward("list_skills", {"server": server})

    async def load_skill(self, server: str, name: str) -> JsonObject:
        return await self.forward("load_skill", {"server": server, "name": name})

    async def list_resources(self, server: str) -> JsonObject:
        return await self.forward("list_resources", {"server": server})

    async def read_resource(self, server: str, uri: str) -> JsonObject:
        return await self.forward("read_resource", {"server": server, "uri": uri})

    async def watch_resource(self, server: str, uri: str) -> None:
        await self.forward("watch_resource", {"server": server, "uri": uri})

    async def unwatch_resource(self, server: str, uri: str) -> None:
        await self.forward("unwatch_resource", {"server": server, "uri": uri})

    async def server_log(self, server: str, limit: int = 200) -> list[JsonObject]:
        return await self.forward("server_log", {"server": server, "limit": limit})

    async def begin_sign_in(self, server: str, timeout: float | None = None) -> str:
        return await self.forward("begin_sign_in", {"server": server, "timeout": timeout})

    async def finish_sign_in(self, server: str) -> None:
        await self.forward("finish_sign_in", {"server": server})

    async def sign_out(self, server: str) -> None:
        await self.forward("sign_out", {"server": server})

    async def start_call(self, server: str, tool: str, arguments: JsonObject | None = None) -> OperationView:
        return await self.forward("start_call", {"server": server, "tool": tool, "arguments": arguments})

    async def cancel(self, op_id: str) -> None:
        await self.forward("cancel", {"op_id": op_id})

    async def rerun(self, op_id: str) -> OperationView:
        return await self.forward("rerun", {"op_id": op_id})

    async def operation(self, op_id: str) -> OperationView | None:
        return await self.forward("operation", {"op_id": op_id})

    async def operations(self, statuses: set[str] | None = None, limit: int = 200,
                         offset: int = 0, before: tuple[float, str] | None = None,
                         after: tuple[float, str] | None = None, top_level: bool = False,
                         view_of: str | None = None) -> list[OperationView]:
        # Only what is asked for is sent: an agent older than a parameter refuses it.
        keys: dict[str, Any] = {k: v for k, v in (("before", before), ("after", after), ("view_of", view_of))
                                if v is not None}
        if top_level:
            keys["top_level"] = top_level
        return await self.forward("operations", {"statuses": statuses, "limit": limit, "offset": offset, **keys})

    async def count_operations(self, statuses: set[str] | None = None, top_level: bool = False,
                               view_of: str | None = None) -> int:
        keys: dict[str, Any] = {"view_of": view_of} if view_of is not None else {}
        if top_level:
            keys["top_level"] = top_level
        return await self.forward("count_operations", {"statuses": statuses, **keys})

    async def unfinished_operations(self) -> list[OperationView]:
        return await self.forward("unfinished_operations", {})

    async def operation_rows(self, limit: int = 200) -> list[JsonObject]:
        return await self.forward("operation_rows", {"limit": limit})

    async def events(self, op_id: str) -> list[JsonObject]:
        return await self.forward("events", {"op_id": op_id})

    async def wait_finished(self, op_id: str) -> OperationView:
        return await self.forward("wait_finished", {"op_id": op_id})

    async def answer_input(self, request_id: str, answer: JsonObject) -> None:
        await self.forward("answer_input", {"request_id": request_id, "answer": answer})

    async def open_questions(self) -> list[InputRequest]:
        return await self.forward("open_questions", {})

    async def draft_reply(self, request_id: str) -> JsonObject:
        return await self.forward("draft_reply", {"request_id": request_id})

    async def model_settings(self) -> JsonObject:
        return await self.forward("model_settings", {})

    async def set_model(self, base_url: str, models: list[str], api_key: str | None = None) -> JsonObject:
        return await self.forward("set_model", {"base_url": base_url, "models": models, "api_key": api_key})

    async def clear_model(self) -> None:
        await self.forward("clear_model", {})

    async def set_sampling_policy(self, server: str, policy: str) -> None:
        await self.forward("set_sampling_policy", {"server": server, "policy": policy})

    async def read_app_view(self, server: str, uri: str) -> JsonObject:
        return await self.forward("read_app_view", {"server": server, "uri": uri})

    async def start_app_call(self, server: str, tool: str, arguments: JsonObject | None, view_of: str) -> OperationView:
        return await self.forward("start_app_call",
                                  {"server": server, "tool": tool, "arguments": arguments, "view_of": view_of})


# -- the agent ----------------------------------------------------------------------------

class AgentStatus(TypedDict):
    """``agent.status``: the agent's pid, start (epoch seconds), whether it was started at
    login, its operations in flight and its connected clients."""

    running: bool
    pid: int
    since: float
    autostart: bool
    operations: int
    clients: int


class LostOperation(TypedDict):
    """An operation in flight that a stop would not leave to be resumed, and why (its view's ``lost_at_stop``)."""

    id: str
    server: str
    tool: str | None
    status: str
    why: str


class AgentControl(Protocol):
    """What the agent answers itself, besides the facade: the
    ``agent.*`` methods of its wire (``agent.status`` is :meth:`status`, and so on)."""

    async def status(self) -> AgentStatus:
        """What the agent is doing now."""

    async def stop(self) -> dict[str, Any]:
        """Stop the agent (``{"stopping": true, "ended": [...]}``): what cannot survive the
        stop ends now, with the reason (``ended``: each as :meth:`unsurvivable` names it),
        and it says farewell to every client first."""

    async def unsurvivable(self) -> list[LostOperation]:
        """The operations in flight that a stop would not leave to be resumed, each with the
        reason (their views' ``lost_at_stop``)."""

    async def carried(self) -> list[str]:
        """The ids of the operations this agent drives now."""
