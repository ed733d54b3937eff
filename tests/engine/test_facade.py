"""The engine's facade (hostapp.engine.api.EngineApi): complete, immutable, the only way in.

The in-process implementation offers every method the protocol declares; views are
frozen; failures below the engine reach clients as the facade's exceptions; and nothing
the window or the CLI imports reaches past it.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from hostapp.engine import api
from hostapp.engine.facade import LocalEngine, translate
from hostapp.engine.service import Engine
from hostapp.store.secrets import InMemoryKeyring, SecretStore

ROOT = Path(__file__).resolve().parents[2] / "hostapp"
#: What the clients (the window and the CLI) must not import: they use the facade.
BEYOND_THE_FACADE = ("hostapp.store", "hostapp.transport", "hostapp.mechanisms", "hostapp.auth",
                     "hostapp.engine.service", "hostapp.engine.session", "hostapp.engine.connections",
                     "hostapp.engine.supervisor", "hostapp.engine.facade")


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(fn) for name, fn in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_")}


def test_the_local_engine_implements_the_whole_facade_with_the_same_signatures():
    declared = public_methods(api.EngineApi)
    implemented = public_methods(LocalEngine)
    assert set(declared) == set(implemented)
    for name, signature in declared.items():
        assert str(signature) == str(implemented[name]), name
        assert inspect.iscoroutinefunction(getattr(LocalEngine, name)), f"{name} is not awaitable"


def test_the_engine_has_what_the_facade_hands_it():
    engine_methods = public_methods(Engine)
    for name in public_methods(api.EngineApi):
        if name not in ("keyring_problem", "wait_connected"):  # an attribute; connected()
            assert name in engine_methods, name


def test_views_are_immutable_and_change_by_copy():
    op = api.OperationView("a1", "lab", "sleep", "tools/call", {}, api.OperationStatus.RUNNING)
    with pytest.raises(dataclasses.FrozenInstanceError):
        op.status = api.OperationStatus.COMPLETED  # type: ignore[misc]
    done = dataclasses.replace(op, status=api.OperationStatus.COMPLETED)
    assert not done.in_flight and op.in_flight
    server = api.ServerView("lab", "stdio", "lab serve")
    assert server.state == api.ServerState.OFFLINE == "offline"
    with pytest.raises(dataclasses.FrozenInstanceError):
        server.state = api.ServerState.CONNECTED  # type: ignore[misc]


def test_one_status_vocabulary():
    from hostapp.store import status

    assert api.OperationStatus is status.OperationStatus
    assert api.TERMINAL is status.TERMINAL and api.IN_FLIGHT is status.IN_FLIGHT
    assert api.COMPLETED is api.OperationStatus.COMPLETED
    assert api.NEEDS_SIGN_IN is api.ServerState.NEEDS_SIGN_IN


def test_failures_below_the_engine_become_facade_exceptions():
    from hostapp.auth.errors import SignInRequired
    from hostapp.protocol.jsonrpc import RpcError
    from hostapp.store.secrets import KeyringUnavailable
    from hostapp.transport.base import TransportError

    unreachable = translate(TransportError("cannot connect to lab: refused"))
    assert isinstance(unreachable, api.ServerUnavailable) and str(unreachable) == "cannot connect to lab: refused"
    rpc = translate(RpcError(-32602, "bad arguments"))
    assert isinstance(rpc, api.ServerError) and rpc.code == -32602 and "bad arguments" in str(rpc)
    assert isinstance(translate(KeyringUnavailable("locked")), api.KeyringUnavailable)
    sign_in = translate(SignInRequired("lab", "no tokens"))
    assert isinstance(sign_in, api.SignInRequired) and sign_in.server_name == "lab"
    assert str(sign_in) == "lab needs sign-in: no tokens"
    missing = translate(KeyError("no server named 'x'"))
    assert isinstance(missing, api.NoSuchServer) and str(missing) == "no server named 'x'"
    assert isinstance(translate(TimeoutError()), TimeoutError)
    other = ValueError("a bug")
    assert translate(other) is other  # not the facade's to explain


@pytest.fixture
def facade(isolated_home: Path) -> LocalEngine:
    return LocalEngine(Engine(isolated_home, connect=False, secrets=SecretStore(isolated_home, InMemoryKeyring())))


async def test_servers_through_the_facade_keep_secret_values_in_the_keyring(facade: LocalEngine):
    try:
        cfg = api.ServerConfig(name="one", transport="stdio", command="true")
        await facade.add_server(cfg, {"env": {"TOKEN": "s3cret"}, "headers": {}})
        [stored] = await facade.server_configs()
        ref = stored.secret_env["TOKEN"]
        assert ref != "s3cret" and "s3cret" not in repr(stored)

        # Renamed: the value kept under the old name comes along.
        renamed = dataclasses.replace(stored, name="two")
        await facade.replace_server("one", renamed, {})
        assert await facade.server_config("one") is None
        two = await facade.server_config("two")
        assert two is not None and "TOKEN" in two.secret_env

        assert await facade.forget_server("two") == []
        assert await facade.server_configs() == []
        with pytest.raises(api.NoSuchServer):
            await facade.forget_server("two")
        with pytest.raises(api.NoSuchOperation):
            await facade.cancel("nope")
    finally:
        await facade.stop()


async def test_a_stdio_server_offers_no_sign_in(facade: LocalEngine):
    try:
        await facade.add_server(api.ServerConfig(name="local", transport="stdio", command="true"))
        with pytest.raises(api.SignInFailed):
            await facade.begin_sign_in("local")
    finally:
        await facade.stop()


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("path", [*sorted((ROOT / "ui").rglob("*.py")), *sorted((ROOT / "cli").rglob("*.py"))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_clients_use_only_the_facade(path: Path):
    reaching = sorted(m for m in imported_modules(path)
                      if any(m == b or m.startswith(b + ".") for b in BEYOND_THE_FACADE))
    assert not reaching, f"{path.name} reaches past the engine's facade: {reaching}"


def test_auth_does_not_import_the_engine():
    for path in sorted((ROOT / "auth").rglob("*.py")):
        assert not [m for m in imported_modules(path) if m.startswith("hostapp.engine")], path.name


async def test_settings_that_cannot_work_are_refused_in_the_engines_words(facade: LocalEngine):
    """A ValueError below the facade arrives as InvalidRequest with its message (over the
    agent's wire too, where an unnamed exception would say only its class name)."""
    with pytest.raises(api.InvalidRequest, match="a stdio server needs a command") as caught:
        await facade.add_server(api.ServerConfig(name="broken", transport="stdio", command=""))
    assert isinstance(caught.value, ValueError)
