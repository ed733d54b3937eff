"""A status request whose answer never comes (kept by a proxy or a load balancer, a
connection that stalled) is given up after ``Timing.poll_answer`` and asked again.

Before, the host waited for that answer for good. Its operation went on (the stall watch
checks on a silent operation with another poll), but the lost request kept one of the
transport's request slots (``MAX_REQUESTS_IN_FLIGHT`` POSTs wait for their answers at
once): once as many answers had been lost, over hours of polls through a flaky proxy,
every request to that server waited for a slot, until the connection itself was given up
and made again; a call waiting meanwhile ended "unknown" (seen in the 2026-07-28 cases
below before the change; the 2025-11-25 one came through by its reconnection).

The server here is the lab (a real process) behind a loopback proxy that keeps two polls
from it, for each mechanism that polls: 2025-11-25 tasks, extension tasks and asynchronous
tools; the transport has two slots.
"""

from __future__ import annotations

import pytest

from hostapp.engine.service import Engine
from hostapp.store.journal import ServerConfig
from hostapp.transport import http
from tests.engine.conftest import Recorder
from tests.support.faults import LoopbackProxy
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(("version", "tool", "poll"), [
    ("2025-11-25", "long_task", "tasks/get"),
    (None, "long_task_ext", "tasks/get"),
    (None, "long_async", "tools/async/status"),
])
async def test_lost_answers_to_polls_do_not_keep_the_server_s_other_requests_waiting(
        tmp_path, lab, engine_timing, monkeypatch, version, tool, poll):
    monkeypatch.setattr(http, "MAX_REQUESTS_IN_FLIGHT", 2)
    engine_timing(poll_answer=1.0)
    proxy = LoopbackProxy(lab.port).start()
    recorder = Recorder()
    engine = Engine(tmp_path / "home", recorder)
    recorder.engine = engine
    await engine.start()
    try:
        await engine.add_server(ServerConfig(name="lab", transport="http", url=proxy.url(),
                                             protocol_version=version))
        await engine.connected("lab")
        lost = [proxy.hold(lambda r: r.rpc_method == poll) for _ in range(2)]  # kept from the lab for good
        running = [await engine.start_call("lab", tool, {"seconds": 60, "steps": 60}) for _ in range(2)]
        await until_async(lambda: all(h.arrived() is not None for h in lost), what=f"two {poll} sent and lost")
        # A new call to the same server goes out and ends.
        call = await engine.start_call("lab", "lab_stats", {})
        view = await until_async(lambda: (v := recorder.latest.get(call.id)) is not None and not v.in_flight and v,
                                 timeout=30, what="the new call's end")
        assert view.status == "completed", view
        # The operations whose polls were lost are asked about again, and go on.
        await until_async(lambda: poll in proxy.rpc_methods(), what=f"a {poll} that reached the lab")
        assert all(recorder.latest[op.id].in_flight for op in running)
        assert [len(proxy.tool_calls(name)) for name in (tool, "lab_stats")] == [2, 1]  # nothing sent twice
    finally:
        await engine.stop()
        proxy.stop()
