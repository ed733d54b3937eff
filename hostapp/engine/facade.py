"""The in-process implementation of :class:`hostapp.engine.api.EngineApi`.

:class:`LocalEngine` hands each request to an :class:`~hostapp.engine.service.Engine` in
the same process and translates what fails below the engine (transport, JSON-RPC,
keyring, sign-in) into the facade's exceptions, so that the window and the CLI catch
those only. The agent serves one to its clients (:mod:`hostapp.agent.owner`); the CLI's
commands that work in process under the home's lock get one from
:func:`hostapp.engine.open_engine`. The clients of an agent hold the other implementation,
a proxy over its socket (:class:`~hostapp.engine.api.ForwardingEngine`: the agent
client's :class:`hostapp.agent.client.RemoteEngine`, the window's ``AgentLink``).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from hostapp.engine import api
from hostapp.engine.accounts import NotSignable
from hostapp.engine.api import (
    InputRequest,
    JsonObject,
    OperationView,
    ServerSecrets,
    ServerView,
)

if TYPE_CHECKING:
    from hostapp.engine.api import ServerConfig
    from hostapp.engine.service import Engine

T = TypeVar("T")


def _loaded(module: str, name: str) -> type[BaseException] | None:
    # Only modules already imported can have raised their exceptions: checking them this
    # way keeps the OAuth client (slow to import) out of processes that never used it.
    mod = sys.modules.get(module)
    return getattr(mod, name, None) if mod is not None else None


def translate(exc: BaseException, missing: type[api.EngineError] = api.NoSuchServer) -> BaseException:
    """The facade exception for a failure below the engine (``exc`` itself when none applies)."""
    from hostapp.protocol.jsonrpc import RpcError
    from hostapp.transport.base import TransportError

    if isinstance(exc, api.EngineError):
        return exc
    sign_in_required = _loaded("hostapp.auth.errors", "SignInRequired")
    if sign_in_required is not None and isinstance(exc, sign_in_required):
        return api.SignInRequired(str(exc), getattr(exc, "server_name", ""))
    keyring = _loaded("hostapp.store.secrets", "KeyringUnavailable")
    if keyring is not None and isinstance(exc, keyring):
        return api.KeyringUnavailable(str(exc))
    authorization = _loaded("hostapp.auth.discovery", "AuthorizationError")
    if isinstance(exc, NotSignable) or (authorization is not None and isinstance(exc, authorization)):
        return api.SignInFailed(str(exc))
    skill_error = _loaded("hostapp.protocol.skills", "SkillError")
    if skill_error is not None and isinstance(exc, skill_error):
        return api.SkillRefused(str(exc), getattr(exc, "check", None))
    refused = _loaded("hostapp.engine.resources", "ResourcesRefused")
    if refused is not None and isinstance(exc, refused):
        return api.InvalidRequest(str(exc))
    malformed = _loaded("hostapp.protocol.resources", "ResourceError")
    if malformed is not None and isinstance(exc, malformed):
        return api.ServerError(str(exc))
    if isinstance(exc, TransportError):
        return api.ServerUnavailable(str(exc))
    if isinstance(exc, RpcError):
        return api.ServerError(str(exc), exc.code)
    if isinstance(exc, TimeoutError):
        return api.EngineTimeout(str(exc))
    if isinstance(exc, KeyError):
        return missing(exc.args[0] if exc.args else "")
    return exc


async def _call(awaitable: Awaitable[T], missing: type[api.EngineError] = api.NoSuchServer) -> T:
    try:
        return await awaitable
    except Exception as exc:
        translated = translate(exc, missing)
        if translated is exc:
            raise
        raise translated from exc


def _sync(fn: Callable[..., T], *args: Any, missing: type[api.EngineError] = api.NoSuchServer) -> T:
    try:
        return fn(*args)
    except Exception as exc:
        translated = translate(exc, missing)
        if translated is exc:
            raise
        raise translated from exc


async def _settings(awaitable: Awaitable[T]) -> T:
    """A server's settings given to the engine: a ValueError there is the engine's own word
    for settings that cannot work (elsewhere it would be a bug, not the facade's to explain)."""
    try:
        return await awaitable
    except ValueError as exc:
        if isinstance(exc, (api.EngineError, NotSignable)):
            raise
        raise api.InvalidRequest(str(exc)) from exc


class LocalEngine:
    """:class:`~hostapp.engine.api.EngineApi` over an engine in this process."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @property
    def listener(self) -> api.EngineListener:
        """Who hears what the engine does (set by a client that shows it)."""
        return self._engine.listener

    @listener.setter
    def listener(self, listener: api.EngineListener) -> None:
        self._engine.listener = listener

    # lifecycle
    async def start(self, *, resume: bool = True, only: frozenset[str] | None = None) -> None:
        await _call(self._engine.start(resume=resume, only=None if only is None else set(only)))

    async def stop(self) -> None:
        await _call(self._engine.stop())

    async def keyring_problem(self) -> str | None:
        return self._engine.keyring_problem

    # servers
    async def servers(self) -> list[ServerView]:
        return _sync(self._engine.servers)

    async def server_configs(self) -> list[ServerConfig]:
        return _sync(self._engine.server_configs)

    async def server_config(self, name: str) -> ServerConfig | None:
        return _sync(self._engine.server_config, name)

    async def add_server(self, cfg: ServerConfig, secrets: ServerSecrets | None = None) -> None:
        await _call(_settings(self._engine.add_server(cfg, secrets)))

    async def update_server(self, cfg: ServerConfig, secrets: ServerSecrets | None = None) -> None:
        await _call(_settings(self._engine.update_server(cfg, secrets)))

    async def replace_server(self, old_name: str, cfg: ServerConfig, secrets: ServerSecrets | None = None) -> None:
        await _call(_settings(self._engine.replace_server(old_name, cfg, secrets)))

    async def remove_server(self, name: str) -> None:
        await _call(self._engine.remove_server(name))

    async def forget_server(self, name: str) -> list[str]:
        return await _call(self._engine.forget_server(name))

    async def reconnect(self, name: str) -> None:
        await _call(self._engine.reconnect(name))

    async def wait_connected(self, name: str, timeout: float = 60.0) -> ServerView:
        try:
            conn = await _call(self._engine.connected(name, timeout))
        except api.EngineTimeout:
            from hostapp.engine.diagnostics import silent_step

            session = self._engine._connection(name).session
            handshake_done = session is not None and session.state == "ready"
            raise api.EngineTimeout(silent_step(name, handshake_done, timeout)) from None
        return conn.view

    async def list_tools(self, server: str, timeout: float = 30.0) -> list[JsonObject]:
        return await _call(self._engine.list_tools(server, timeout))

    async def probe_tools(self, server: str, timeout: float | None = None) -> list[JsonObject]:
        return await _call(self._engine.probe_tools(server, timeout))

    async def check_server(self, cfg: ServerConfig, secrets: ServerSecrets | None = None,
                           timeout: float | None = None) -> JsonObject:
        try:
            return await _call(self._engine.check_server(cfg, secrets, timeout))
        except ValueError as exc:  # settings that cannot work: said as the server's answer would be
            raise api.ServerUnavailable(str(exc)) from None

    async def stop_retrying(self, name: str) -> None:
        await _call(self._engine.stop_retrying(name))

    async def list_skills(self, server: str) -> list[JsonObject]:
        return await _call(self._engine.list_skills(server))

    async def load_skill(self, server: str, name: str) -> JsonObject:
        return await _call(self._engine.load_skill(server, name))

    async def begin_sign_in(self, server: str, timeout: float | None = None) -> str:
        return await _call(self._engine.begin_sign_in(server, timeout))

    async def finish_sign_in(self, server: str) -> None:
        await _call(self._engine.finish_sign_in(server))

    async def sign_out(self, server: str) -> None:
        await _call(self._engine.sign_out(server))

    # operations
    async def start_call(self, server: str, tool: str, arguments: JsonObject | None = None) -> OperationView:
        return await _call(self._engine.start_call(server, tool, arguments))

    async def cancel(self, op_id: str) -> None:
        await _call(self._engine.cancel(op_id), api.NoSuchOperation)

    async def rerun(self, op_id: str) -> OperationView:
        return await _call(self._engine.rerun(op_id), api.NoSuchOperation)

    async def operation(self, op_id: str) -> OperationView | None:
        return await _call(self._engine.operation(op_id))

    async def operations(self, statuses: set[str] | None = None, limit: int = 200,
                         offset: int = 0, before: tuple[float, str] | None = None,
                         after: tuple[float, str] | None = None, top_level: bool = False,
                         view_of: str | None = None) -> list[OperationView]:
        return await _call(self._engine.operations(statuses, limit, offset, before, after, top_level, view_of))

    async def count_operations(self, statuses: set[str] | None = None, top_level: bool = False,
                               view_of: str | None = None) -> int:
        return await _call(self._engine.count_operations(statuses, top_level, view_of))

    async def unfinished_operations(self) -> list[OperationView]:
        return await _call(self._engine.unfinished_operations())

    async def operation_rows(self, limit: int = 200) -> list[JsonObject]:
        return await _call(self._engine.operation_rows(limit))

    async def events(self, op_id: str) -> list[JsonObject]:
        return await _call(self._engine.events(op_id), api.NoSuchOperation)

    async def wait_finished(self, op_id: str) -> OperationView:
        return await _call(self._engine.wait_finished(op_id), api.NoSuchOperation)

    # questions
    async def answer_input(self, request_id: str, answer: JsonObject) -> None:
        _sync(self._engine.answer_input, request_id, answer, missing=api.NoSuchOperation)

    async def open_questions(self) -> list[InputRequest]:
        return self._engine.open_questions()

    async def draft_reply(self, request_id: str) -> JsonObject:
        return await _call(self._engine.draft_reply(request_id), api.NoSuchOperation)

    # the model
    async def model_settings(self) -> JsonObject:
        return await _call(self._engine.model_settings())

    async def set_model(self, base_url: str, models: list[str], api_key: str | None = None) -> JsonObject:
        return await _call(self._engine.set_model(base_url, models, api_key))

    async def clear_model(self) -> None:
        await _call(self._engine.clear_model())

    async def set_sampling_policy(self, server: str, policy: str) -> None:
        _sync(self._engine.set_sampling_policy, server, policy)

    # resources
    async def list_resources(self, server: str) -> JsonObject:
        return await _call(self._engine.list_resources(server))

    async def read_resource(self, server: str, uri: str) -> JsonObject:
        return await _call(self._engine.read_resource(server, uri))

    async def watch_resource(self, server: str, uri: str) -> None:
        await _call(self._engine.watch_resource(server, uri))

    async def unwatch_resource(self, server: str, uri: str) -> None:
        await _call(self._engine.unwatch_resource(server, uri))

    async def server_log(self, server: str, limit: int = 200) -> list[JsonObject]:
        return await _call(self._engine.server_log(server, limit))

    # MCP Apps
    async def read_app_view(self, server: str, uri: str) -> JsonObject:
        return await _call(self._engine.read_app_view(server, uri))

    async def start_app_call(self, server: str, tool: str, arguments: JsonObject | None,
                             view_of: str) -> OperationView:
        return await _call(self._engine.start_app_call(server, tool, arguments, view_of), api.NoSuchOperation)
