"""The engine's facade: everything the window, the CLI and the conformance client may do.

:class:`EngineApi` is the contract. The in-process engine implements it
(:class:`hostapp.engine.facade.LocalEngine`, made by :func:`hostapp.engine.open_engine`);
a proxy over a local socket will implement it for clients of a background agent. So every
method takes and returns plain data (strings, numbers, JSON objects, the frozen views
below) and is awaitable, and what the engine tells its clients goes through one listener
contract, :class:`EngineListener`.

Nothing here names a mechanism's internals: an operation is an operation, whatever
carries it. The clients catch only the exceptions declared here; the engine translates
the transport's, the keyring's and the sign-in's failures into them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from hostapp.store.status import IN_FLIGHT, TERMINAL, OperationStatus

if TYPE_CHECKING:
    from hostapp.store.journal import ServerConfig

__all__ = [
    "EVENT_RESUMED",
    "IN_FLIGHT",
    "TERMINAL",
    "AppViewRefused",
    "EngineApi",
    "EngineError",
    "EngineListener",
    "EngineTimeout",
    "InputRequest",
    "InvalidRequest",
    "JsonObject",
    "KeyringUnavailable",
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


def __getattr__(name: str) -> Any:
    # ServerConfig, the definition of a server a client passes in, is the journal's own
    # class, loaded on first use: the journal's modules take a large part of a second to
    # import, and a CLI command that never touches a configuration (``lab serve``) or the
    # window's first paint should not wait for them.
    if name == "ServerConfig":
        from hostapp.store.journal import ServerConfig

        return ServerConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The timeline event (``EngineListener.operation_event`` and ``EngineApi.events``) of an
#: unfinished operation that a host taking over the home (after a quit or a crash) picks up
#: again; its data says how (``{"mechanism": ..., "message": ...}``).
EVENT_RESUMED = "resumed"
#: The timeline event of an operation whose call the server refused because it no longer
#: knew the session (HTTP 404: not processed), sent again once in a new session; its data
#: says so (``{"message": ...}``).
EVENT_SESSION_RENEWED = "session_renewed"


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
    resumable: bool = True
    #: How the call is carried (a mechanism's name, e.g. "tasks_extension", "direct"), once
    #: the engine chose it; None before. Lets a client say whether it survives a restart.
    mechanism: str | None = None

    @property
    def in_flight(self) -> bool:
        return self.status in IN_FLIGHT

    @property
    def fraction(self) -> float | None:
        """0..1 when the server gave a total, else None (an indeterminate bar)."""
        if self.total and self.progress is not None and self.total > 0:
            return max(0.0, min(1.0, self.progress / self.total))
        return None


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
    #: What last happened to the connection that the person should know although it is
    #: connected now, in plain words with the time ("the server restarted or ended the
    #: session; new session at 14:02:11"); None: nothing to tell.
    note: str | None = None


@dataclass(frozen=True, slots=True)
class InputRequest:
    """A question a server asks on behalf of an operation (form or URL elicitation)."""

    id: str                    # unique per question
    operation_id: str | None   # None when the question belongs to no known operation
    server: str
    mode: str                  # "form" | "url"
    message: str
    params: JsonObject         # the elicitation params as the server sent them


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

    def problem(self, kind: str, message: str) -> None:
        """A banner-worthy condition: kind is "keyring", "server", "journal"."""


# -- the facade -------------------------------------------------------------------------

class EngineApi(Protocol):
    """What a client may ask of the engine. Every method is awaitable and takes and
    returns plain data; failures are the exceptions of this module."""

    # lifecycle (the owner of the home starts and stops it)
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
                         offset: int = 0) -> list[OperationView]:
        """Newest first; ``statuses`` filters."""

    async def count_operations(self, statuses: set[str] | None = None) -> int: ...

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
