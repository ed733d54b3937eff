"""What the engine's helper modules are given of it: :class:`EnginePort`.

The helpers (:mod:`~hostapp.engine.accounts`, :mod:`~hostapp.engine.apps`,
:mod:`~hostapp.engine.diagnostics`, :mod:`~hostapp.engine.skills`) do one kind of work each
on the engine's behalf; the engine calls them with itself, and they see only this: its
journal, its keyring, its listener, its shared parts (:class:`~hostapp.engine.context.EngineContext`:
the request routing, the supervised connections) and the few facade methods they build on.
So the helpers import no engine, and the engine imports them without a circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from hostapp.engine import api

if TYPE_CHECKING:
    from hostapp.engine.context import EngineContext
    from hostapp.engine.session import ClientSession
    from hostapp.engine.supervisor import ServerConnection
    from hostapp.store.journal import OperationJournal, ServerConfig
    from hostapp.store.secrets import SecretStore


class SignInsPort(Protocol):
    """The sign-ins under way, as a helper sees them."""

    async def release(self, name: str) -> None:
        """Let go of a server's pending sign-in (its redirect listener, its page)."""
        ...


class CallBudgetPort(Protocol):
    """A rate limit per caller (the calls of an app view)."""

    def take(self, view_of: str) -> bool:
        """One call allowed now for the view of operation ``view_of``, or False when it goes too fast."""
        ...


class EnginePort(Protocol):
    """The engine as its helper modules see it (:class:`~hostapp.engine.service.Engine`
    implements it)."""

    #: The supervised connection of each server, by name.
    connections: dict[str, ServerConnection]

    @property
    def journal(self) -> OperationJournal: ...

    @property
    def secrets(self) -> SecretStore: ...

    @property
    def listener(self) -> api.EngineListener: ...

    @property
    def context(self) -> EngineContext: ...

    @property
    def sign_ins(self) -> SignInsPort: ...

    @property
    def view_call_budget(self) -> CallBudgetPort:
        """How often the views of app tools may call tools (:class:`~hostapp.engine.apps.ViewCallBudget`)."""
        ...

    async def add_server(self, cfg: ServerConfig, secrets: dict[str, dict[str, str]] | None = None) -> None: ...

    async def remove_server(self, name: str) -> None: ...

    @property
    def holds_connections(self) -> bool:
        """Whether this engine keeps its servers connected (the agent's does)."""
        ...

    async def live_session(self, name: str, timeout: float | None = None) -> tuple[ServerConnection, ClientSession]:
        """The connection of server ``name`` and its ready session, waited for (at most ``timeout``)."""
        ...

    def drop_server_config(self, name: str) -> None:
        """The server leaves the journal's configuration, and every client's list."""
        ...

    async def operation(self, op_id: str) -> api.OperationView | None: ...

    async def start_call(self, server: str, tool: str, arguments: dict[str, Any] | None = None, *,
                         view_of: str | None = None) -> api.OperationView:
        ...
