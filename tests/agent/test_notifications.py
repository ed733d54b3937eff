"""Desktop notifications from the owner, against a notification service of our own on the
tests' private session bus."""

from __future__ import annotations

import asyncio

from hostapp.agent.client import RemoteEngine
from hostapp.agent.endpoint import endpoint_path
from hostapp.agent.notify import DesktopNotifier, describe
from hostapp.engine import api
from tests.agent.conftest import Agents
from tests.agent.test_owner import _connect, _lab_config
from tests.support.notification_service import NotificationService
from tests.support.waiting import until_async


def _op(**fields) -> api.OperationView:
    base = {"id": "op1", "server": "lab", "tool": "crunch", "method": "tools/call", "arguments": {},
            "status": api.OperationStatus.RUNNING}
    return api.OperationView(**{**base, **fields})


def test_each_outcome_is_named_by_its_own_word():
    assert describe(_op()) is None
    assert describe(_op(status="completed"))[0] == "Completed: crunch"
    assert describe(_op(status="failed"))[0] == "Failed: crunch"
    assert describe(_op(status="unknown"))[0] == "Outcome unknown: crunch"
    assert describe(_op(status="input_required", needs_input=True))[0] == "Needs your input: crunch"
    assert describe(_op(status="cancelled")) is None  # the person did that themself


async def test_notifications_without_a_window_and_none_with_one(agents: Agents, real_keyring):
    with NotificationService(real_keyring.bus_address) as service:
        agents.start("--idle-exit", "600")
        cli = await _connect(agents.home)
        try:
            await cli.add_server(_lab_config())
            await cli.wait_connected("lab", timeout=60)
            done = await cli.start_call("lab", "sleep_with_progress", {"seconds": 0.3, "steps": 3})
            failed = await cli.start_call("lab", "fail", {"mode": "tool_error"})
            for op in (done, failed):
                await asyncio.wait_for(cli.wait_finished(op.id), 60)
            shown = service.wait_for(2)
            summaries = sorted(s.summary for s in shown)
            assert summaries == ["Completed: sleep_with_progress", "Failed: fail"], shown
            assert all(s.app == "hostapp" and "open" in s.actions for s in shown)
            assert all("<" not in s.body for s in shown)  # server text reaches the service escaped

            # With a window connected, the window tells the person: the owner stays quiet.
            window = await RemoteEngine.connect(endpoint_path(agents.home), client="window")
            try:
                quiet = await cli.start_call("lab", "sleep_with_progress", {"seconds": 0.2, "steps": 2})
                await asyncio.wait_for(cli.wait_finished(quiet.id), 60)
                await asyncio.sleep(1)
                assert len(service.shown) == 2
            finally:
                await window.close()
        finally:
            await cli.close()
        assert agents.run("agent", "stop").returncode == 0


async def test_the_open_action_reaches_the_owner(real_keyring, monkeypatch):
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", real_keyring.bus_address)
    opened: list[str] = []
    with NotificationService(real_keyring.bus_address) as service:
        notifier = DesktopNotifier(on_open=opened.append)
        assert await notifier.start()
        try:
            await notifier.operation_changed(_op(status="failed", message="<b>disk</b> full & more"))
            await notifier.operation_changed(_op(status="failed", message="again"))  # said once
            (shown,) = service.wait_for(1)
            assert shown.body == "crunch on lab: &lt;b&gt;disk&lt;/b&gt; full &amp; more"
            service.click(shown.id)
            await until_async(lambda: opened, what="the open action to reach the owner")
            assert opened == ["op1"]
        finally:
            await notifier.close()


async def test_no_session_bus_means_no_notifications_and_no_error(monkeypatch):
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    notifier = DesktopNotifier()
    assert await notifier.start() is False
    await notifier.operation_changed(_op(status="completed"))
    await notifier.close()
