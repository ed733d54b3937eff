"""What the engine tells about a server and does to its operations: stray answers counted on
the server's view, the next retry's time, stopping the retries, removing a server while its
calls run, re-running a call whose server is gone, a settings check that saves nothing.

Real processes: the hostile stdio server (tests/support/hostile_server.py), the lab."""

from __future__ import annotations

import asyncio
import time

import pytest

from hostapp.engine import api
from hostapp.engine.facade import LocalEngine
from hostapp.engine.service import Engine
from hostapp.store.journal import ServerConfig
from tests.support.hostile_server import SECRET, stdio_command
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(90)


def hostile() -> ServerConfig:
    command, *args = stdio_command()
    return ServerConfig(name="hostile", transport="stdio", command=command, args=args)


def missing_command(name: str = "nocmd") -> ServerConfig:
    return ServerConfig(name=name, transport="stdio", command="/nonexistent/mcp-server-for-a-test")


async def test_stray_answers_are_counted_on_the_server_view(isolated_home, recorder, real_keyring):
    engine = Engine(isolated_home, recorder)
    recorder.engine = engine
    await engine.start()
    try:
        await engine.add_server(hostile())
        [view] = engine.servers()
        assert view.stray_answers == 0
        for _ in range(2):
            op = await engine.start_call("hostile", "stray", {})
            done = await asyncio.wait_for(engine.wait_finished(op.id), 20)
            assert done.status == api.COMPLETED
        [view] = engine.servers()
        assert view.stray_answers == 2
        assert view.last_stray is not None and "not pending" in view.last_stray
        assert SECRET not in view.last_stray
        # The window hears of it without asking.
        assert recorder.servers[-1].stray_answers == 2
    finally:
        await engine.stop()


async def test_a_failing_server_says_when_it_retries_and_can_stop_retrying(isolated_home, recorder, real_keyring):
    engine = LocalEngine(Engine(isolated_home, recorder))
    await engine.start()
    try:
        await engine.add_server(missing_command())
        view = await until_async(lambda: next((v for v in recorder.servers if v.retry_at is not None), None),
                           what="a planned retry")
        assert view.error and view.retry_in is not None
        assert view.retry_at == pytest.approx(time.time() + view.retry_in, abs=5)

        await engine.stop_retrying("nocmd")
        [stopped] = await engine.servers()
        assert stopped.state == api.DISABLED and stopped.retry_at is None
        assert recorder.servers[-1].state == api.DISABLED and recorder.servers[-1].error  # the last error stays shown
        config = await engine.server_config("nocmd")
        assert config is not None and not config.enabled  # paused, still configured
        seen = len(recorder.servers)
        await asyncio.sleep(1.5)  # a retry would be due by now
        assert all(v.state == api.DISABLED for v in recorder.servers[seen:])

        await engine.reconnect("nocmd")  # tries again, and is enabled again
        await until_async(lambda: any(v.state != api.DISABLED for v in recorder.servers[seen:]), what="a new attempt")
        config = await engine.server_config("nocmd")
        assert config is not None and config.enabled
        with pytest.raises(api.NoSuchServer):
            await engine.stop_retrying("nobody")
    finally:
        await engine.stop()


async def test_removing_a_server_ends_its_calls_with_the_true_reason(isolated_home, recorder, real_keyring):
    inner = Engine(isolated_home, recorder)
    engine = LocalEngine(inner)
    await engine.start()
    try:
        await engine.add_server(hostile())
        running = await engine.start_call("hostile", "silent", {})
        await until_async(lambda: inner.runners[running.id].view.status == api.RUNNING, what="the call to run")
        await engine.add_server(missing_command())
        unsent = await engine.start_call("nocmd", "anything", {})
        await engine.remove_server("hostile")
        await engine.remove_server("nocmd")

        ran = await asyncio.wait_for(engine.wait_finished(running.id), 10)
        assert ran.status == api.UNKNOWN
        assert "'hostile' was removed while the call ran" in ran.error["message"]
        assert "dropped" not in ran.error["message"]
        never = await asyncio.wait_for(engine.wait_finished(unsent.id), 10)
        assert never.status == api.FAILED and "did not run" in never.error["message"]
        await asyncio.sleep(0.3)  # whatever the runners were doing has stopped
        assert not [p for p in recorder.problems if "no server named" in p[1] or "internal error" in p[1]]

        with pytest.raises(api.NoSuchServer, match="was removed; add it again"):
            await engine.rerun(ran.id)
        await engine.add_server(hostile())  # added again: its calls can be re-run
        again = await engine.rerun(ran.id)
        assert again.server == "hostile"
    finally:
        await engine.stop()


async def test_list_tools_of_a_server_that_cannot_connect_says_why(isolated_home, recorder, real_keyring):
    engine = LocalEngine(Engine(isolated_home, recorder))
    await engine.start()
    try:
        await engine.add_server(missing_command())
        with pytest.raises(api.EngineTimeout) as caught:
            await engine.list_tools("nocmd", timeout=1.5)
        assert str(caught.value).startswith("nocmd did not connect within 1.5 s")
        assert "last error:" in str(caught.value)
    finally:
        await engine.stop()


async def test_check_server_connects_once_and_saves_nothing(isolated_home, recorder, real_keyring):
    engine = LocalEngine(Engine(isolated_home, recorder))
    await engine.start()
    try:
        checked = await engine.check_server(hostile())
        assert checked["tools_count"] >= 1 and checked["protocol_version"] == "2025-06-18"
        assert checked["server_name"] == "hostile"
        assert await engine.server_configs() == []
        with pytest.raises(api.ServerUnavailable) as missing:
            await engine.check_server(missing_command())
        assert str(missing.value)
        with pytest.raises(api.ServerUnavailable, match="only HTTP servers sign in"):
            await engine.check_server(ServerConfig(name="s", transport="stdio", command="x",
                                                   auth={"grant": "client_credentials", "client_id": "m"}))
    finally:
        await engine.stop()


async def test_renaming_a_server_moves_its_sign_in_credentials(isolated_home, recorder, real_keyring):
    from hostapp.auth import TokenStore

    inner = Engine(isolated_home, recorder, connect=False)
    engine = LocalEngine(inner)
    await engine.start()
    try:
        cfg = ServerConfig(name="svc", transport="http", url="https://example.test/mcp",
                           auth={"grant": "client_credentials", "client_id": "machine"}, protocol_version="2025-11-25")
        await engine.add_server(cfg, {"credentials": {"client_secret": "moved-secret-1"}})
        renamed = ServerConfig(name="svc2", transport="http", url=cfg.url, auth=cfg.auth,
                               protocol_version=cfg.protocol_version)
        await engine.replace_server("svc", renamed)
        tokens = TokenStore(inner.secrets)
        assert await asyncio.to_thread(tokens.load_credential, "svc2", "client_secret") == "moved-secret-1"
        assert await asyncio.to_thread(tokens.credential_names, "svc") == []
        moved = await engine.server_config("svc2")
        assert moved is not None and moved.auth == cfg.auth and moved.protocol_version == "2025-11-25"
        # A secret given with the rename replaces the one kept.
        await engine.replace_server("svc2", ServerConfig(name="svc3", transport="http", url=cfg.url, auth=cfg.auth),
                                    {"credentials": {"client_secret": "new-secret-2"}})
        assert await asyncio.to_thread(tokens.load_credential, "svc3", "client_secret") == "new-secret-2"
    finally:
        await engine.stop()


async def test_a_paused_server_stays_paused_after_a_restart_with_its_call_waiting(isolated_home, recorder,
                                                                                   real_keyring):
    engine = Engine(isolated_home, recorder)
    await engine.start()
    try:
        await engine.add_server(hostile())
        op = await engine.start_call("hostile", "silent", {})
        await until_async(lambda: engine.runners[op.id].view.status == api.RUNNING, what="the call to run")
        await engine.stop_retrying("hostile")
    finally:
        await engine.stop()
    again = Engine(isolated_home, recorder)
    await again.start()
    try:
        await asyncio.sleep(0.5)
        assert "hostile" not in again.connections  # not connected behind the person's back
        [view] = again.servers()
        assert view.state == api.DISABLED
        assert (await again.operation(op.id)).status == api.RUNNING  # waiting, not ended
        await again.reconnect("hostile")
        await until_async(lambda: "hostile" in again.connections and again.connections["hostile"].is_ready,
                    what="the reconnection")
    finally:
        await again.stop()
