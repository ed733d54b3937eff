"""The wire carries the whole facade: every EngineApi method, with its signature, on both
sides, and every view and error round-trips."""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest

from hostapp.agent import wire
from hostapp.agent.client import RemoteEngine
from hostapp.engine import api
from hostapp.ui.agent_link import AgentLink


def _facade_methods() -> dict[str, inspect.Signature]:
    return {name: inspect.signature(member) for name, member in vars(api.EngineApi).items()
            if inspect.iscoroutinefunction(member)}


@pytest.mark.parametrize("proxy", [RemoteEngine, AgentLink])
def test_the_proxies_are_the_whole_facade_with_the_same_signatures(proxy: type):
    methods = _facade_methods()
    assert methods
    for name, signature in methods.items():
        remote = getattr(proxy, name, None)
        assert remote is not None and inspect.iscoroutinefunction(remote), name
        assert list(inspect.signature(remote).parameters) == list(signature.parameters), name
        assert [p.default for p in inspect.signature(remote).parameters.values()] == \
               [p.default for p in signature.parameters.values()], name


async def test_each_proxy_method_forwards_its_own_name_and_every_argument():
    class Recorder(api.ForwardingEngine):
        async def forward(self, method: str, arguments: api.JsonObject) -> object:
            self.heard = (method, arguments)
            return None

        async def start(self, *, resume: bool = True, only: frozenset[str] | None = None) -> None: ...

        async def stop(self) -> None: ...

    recorder = Recorder()
    for name, method in wire.FACADE.items():
        marks = {p: f"<{p}>" for p in method.parameters}
        await getattr(recorder, name)(**marks)
        assert recorder.heard == (name, marks), name


def test_every_facade_method_but_the_lifecycle_is_served():
    assert set(_facade_methods()) - {"start", "stop"} == set(wire.RESULTS)


def test_views_and_errors_round_trip():
    op = api.OperationView(id="a", server="s", tool="t", method="tools/call", arguments={"x": [1, 2]},
                           status=api.OperationStatus.RUNNING, progress=1.0, total=3.0)
    assert wire.operation_view(wire.encode(op)) == op
    server = api.ServerView(name="s", transport="http", target="http://x", tools=({"name": "t"},))
    assert wire.server_view(wire.encode(server)) == server
    assert wire.operation_view({**wire.encode(op), "a_field_from_a_newer_agent": 1}) == op
    for exc in (api.NoSuchServer("no server named 'x'"), api.ServerError("Task not found", -32602),
                api.SignInRequired("sign in", "s"), api.KeyringUnavailable("locked"),
                api.SkillRefused("digest check failed", "digest"), api.EngineTimeout("no answer"),
                api.InvalidRequest("server 'x': a stdio server needs a command")):
        back = wire.decode_error(wire.encode_error(exc))
        assert type(back) is type(exc) and str(back) == str(exc)
    assert wire.decode_error(wire.encode_error(api.ServerError("x", -1))).code == -1
    assert wire.decode_error(wire.encode_error(api.SkillRefused("x", "size"))).check == "size"
    with pytest.raises(wire.WireError):
        wire.operation_view({"id": "missing the rest"})
    with pytest.raises(wire.WireError):
        wire.loads(b"[" * 100_000)


def test_a_view_with_every_field_reads_as_the_one_with_some_left_out_and_as_the_class_makes_it():
    """Views with every field (the agent's own) are read by setting their slots; those from
    an older or newer agent, with fields left out or extra, the general way: either way the
    view is the one the class makes, equal and frozen."""
    op = api.OperationView(id="a", server="s", tool=None, method="tools/call", arguments={"x": [1, 2]},
                           status="input_required", progress=None, total=3.0, message="m",
                           needs_input=True, stalled="quiet", view_calls=2, lost_at_stop=None, view_of="b")
    every = wire.encode(op)
    assert set(every) >= {f.name for f in dataclasses.fields(api.OperationView)}
    fast = wire.operation_view(json.loads(json.dumps(every)))
    assert fast == op and repr(fast) == repr(op)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.status = "completed"  # type: ignore[misc]
    older = {k: v for k, v in every.items() if k not in ("view_of", "view_calls", "stalled")}
    assert wire.operation_view(older) == dataclasses.replace(op, view_of=None, view_calls=0, stalled=None)
    assert wire.operation_view({**every, "from_a_newer_agent": 1}) == op
    server = api.ServerView(name="s", transport="http", target="http://x", tools=({"name": "t"},))
    assert wire.server_view(json.loads(json.dumps(wire.encode(server)))) == server  # a tuple field: general
    with pytest.raises(wire.WireError):
        wire.operation_view({"id": "a"})  # the fields without a default left out


def test_a_line_says_and_reads_what_json_does_where_the_fast_encoder_refuses():
    """The wire's lines are written and read by orjson; what it refuses (an integer beyond 64
    bits from a server's result, NaN in a line) goes through json, as before."""
    message = {"jsonrpc": "2.0", "id": 1, "result": {"big": 2**70, "neg": -(2**65), "text": "ünï ✓ \u2028",
                                                     "nested": [{"a": None, "b": 1.5e16, "c": True}]}}
    line = wire.dumps(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert wire.loads(line) == message == json.loads(line)
    assert wire.loads(b'{"x": NaN, "y": 1}\n')["y"] == 1  # json reads it; orjson refuses
    small = {"jsonrpc": "2.0", "method": "event", "params": {"seq": 3, "op": {"id": "a", "progress": 0.1}}}
    assert json.loads(wire.dumps(small)) == small
    with pytest.raises((TypeError, ValueError)):
        wire.dumps({"text": "\ud800"})  # not valid Unicode: refused by both, as it was
    for bad in (b"{not json}\n", b"\xff\xfe\n", b"[1, 2]\n"):
        with pytest.raises(wire.WireError):
            wire.loads(bad)
