"""Roots on the engine's live connection: a change of roots alone keeps the session and is
told to the server (server-everything over stdio asks again and shows what it got); any
other change starts a new connection, which is asked anew."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from hostapp.engine import api
from hostapp.engine.service import Engine
from hostapp.store.journal import ServerConfig
from tests.engine.conftest import Recorder
from tests.support.peers import EVERYTHING, NODE, require_everything
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(120)


async def roots_text(engine: Engine) -> str:
    op = await engine.start_call("ev", "get-roots-list", {})
    final = await asyncio.wait_for(engine.wait_finished(op.id), 60)
    assert final.status == api.COMPLETED, final.error
    return final.result["content"][0]["text"]


async def test_a_change_of_roots_keeps_the_session_and_the_server_hears_of_it(
        isolated_home, tmp_path, recorder: Recorder, real_keyring):
    require_everything()
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    engine = Engine(isolated_home, recorder)
    recorder.engine = engine
    await engine.start()
    try:
        cfg = ServerConfig(name="ev", transport="stdio", command=str(NODE), args=[str(EVERYTHING), "stdio"],
                           roots=[str(first)])
        await engine.add_server(cfg)
        await engine.connected("ev")
        session = engine.connections["ev"].session
        assert first.as_uri() in await roots_text(engine)

        await engine.update_server(dataclasses.replace(cfg, roots=[str(second)]))
        assert engine.journal.get_server("ev").roots == [str(second)]
        await until_async(lambda: roots_text_has(engine, second.as_uri()), what="the server to ask for the new roots")
        assert engine.connections["ev"].session is session  # the same connection all along

        # Anything else is how to reach the server: a new connection, asked anew.
        await engine.update_server(dataclasses.replace(cfg, roots=[str(first)], env={"MODE": "x"}))
        await engine.connected("ev")
        assert engine.connections["ev"].session is not session
        assert first.as_uri() in await roots_text(engine)
    finally:
        await engine.stop()


async def roots_text_has(engine: Engine, uri: str) -> bool:
    return uri in await roots_text(engine)
