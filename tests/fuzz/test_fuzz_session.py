"""Fuzz: the client session takes whatever messages a server sends, in any order, while
requests of its own wait: it raises nothing to the transport, answers server requests
(or refuses them) without failing, and stays usable (a request still gets its answer).

The transport is a stand-in that records what the session sends; messages are built by
the JSON-RPC parser from generated and mutated bytes, as a real transport would.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostapp.engine.session import ClientSession
from hostapp.protocol.eras import ServerInfo
from hostapp.protocol.jsonrpc import Message, ProtocolError, Response, RpcError, parse
from hostapp.transport.base import Transport, TransportListener
from tests.fuzz.budget import MUTANTS, count, fuzz, time_limit
from tests.fuzz.strategies import generators, message_bytes, mutants

pytestmark = pytest.mark.timeout(time_limit())


class RecordingTransport(Transport):
    def __init__(self) -> None:
        self.sent: list[Message] = []

    async def connect(self, listener: TransportListener) -> None:
        self.listener = listener

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    async def close(self, *, end_session: bool = True) -> None:
        pass


def messages_from(seeds: list[bytes], rnd) -> list[Message | ProtocolError]:
    out: list[Message | ProtocolError] = []
    for data in seeds + [m for seed in seeds for m in mutants(seed, rnd, MUTANTS // 4)]:
        try:
            out.append(parse(data))
        except ProtocolError as exc:
            out.append(exc)
    return out


async def scenario(inputs: list[Message | ProtocolError], related: list) -> None:
    transport = RecordingTransport()
    session = ClientSession(transport)
    await session.adopt(ServerInfo("2025-11-25", "handshake"))
    # Requests of our own, waiting while the server sends what it sends.
    waiting = [asyncio.ensure_future(session.request("tools/call", {"name": "t"}, on_progress=lambda *a: None))
               for _ in range(2)]
    await asyncio.sleep(0)
    for item, rel in zip(inputs, related, strict=True):
        count("engine.session")
        if isinstance(item, ProtocolError):
            session.on_invalid(item, b"")
        else:
            session.on_message(item, rel)
    for _ in range(3):
        await asyncio.sleep(0)  # let the served requests answer
    # Still usable: a new request is answered, whatever happened before.
    probe = asyncio.ensure_future(session.request("ping"))
    await asyncio.sleep(0)
    rid = transport.sent[-1].id  # type: ignore[union-attr]
    session.on_message(Response(rid, {"ok": True}))
    assert await probe == {"ok": True}
    for future in waiting:
        future.cancel()
    await asyncio.gather(*waiting, return_exceptions=True)
    for future in waiting:
        # cancelled, answered (the server may have sent an answer to its id) or refused
        assert future.cancelled() or future.exception() is None or isinstance(future.exception(), RpcError)
    await session.close()


LOOP = asyncio.new_event_loop()


@fuzz
@given(st.lists(message_bytes(), max_size=5), st.lists(st.one_of(st.none(), st.integers(1, 3)), max_size=40),
       generators)
def test_the_session_survives_what_a_server_sends(seeds, related, rnd):
    inputs = messages_from(seeds, rnd)
    related = (related * (len(inputs) // max(len(related), 1) + 1))[: len(inputs)] if related else [None] * len(inputs)
    LOOP.run_until_complete(asyncio.wait_for(scenario(inputs, related), 10))
