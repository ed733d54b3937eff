"""MCP Apps in the window, with QtWebEngine rendering real views offscreen.

- server-system-monitor (npm): its view renders beside the result, asks to call its
  app-only polling tool, the person agrees once, each poll is an operation of its own and
  its result goes back to the view;
- a probe server of our own (tests/support/app_view_server.py): its view tries an
  undeclared origin (blocked), a declared one (let through), a model-only tool and an
  unknown method (refused), then to navigate away (refused); after a restart of the
  window the view is read again and gets the stored result again.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import sys
import threading

from hostapp.ui.apps import prepare_process

prepare_process()  # before any QApplication of this session exists

import pytest  # noqa: E402
from PySide6.QtWidgets import QApplication, QMessageBox  # noqa: E402

from hostapp.engine import apps as engine_apps  # noqa: E402
from hostapp.store.journal import ServerConfig  # noqa: E402
from hostapp.ui.call_dialog import StartCallDialog  # noqa: E402
from tests.engine.test_app_resources import PROBE, monitor_config  # noqa: E402
from tests.ui.test_window import shown_host, until  # noqa: E402

pytestmark = pytest.mark.timeout(180)


class Hits(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.paths.append(self.path)
        self.send_response(200)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


@pytest.fixture
def origins():
    """Two loopback HTTP servers recording the paths asked of them: (declared, undeclared)."""
    servers = []
    for _ in range(2):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hits)
        server.paths = []
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    yield servers
    for server in servers:
        server.shutdown()
        server.server_close()


def origin(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def consent_boxes() -> list[QMessageBox]:
    return [w for w in QApplication.topLevelWidgets()
            if isinstance(w, QMessageBox) and w.objectName() == "appConsent" and w.isVisible()]


async def select(window, op_id: str) -> None:
    await until(lambda: window.ops_model.row_of(op_id) is not None, 30, "the operation in the table")
    window.ops_table.selectRow(window.ops_model.row_of(op_id))


def test_the_system_monitor_view_polls_through_the_engine_after_consent(qtbot, qloop, isolated_home):
    with shown_host(qloop, isolated_home) as app:
        window, engine = app.window, app.api

        notes: list[str] = []
        window.notified.connect(lambda title, text: notes.append(text))

        async def scenario():
            await app.start()
            await engine.add_server(monitor_config())
            await engine.wait_connected("monitor", 30)
            op = await engine.start_call("monitor", "get-system-info", {})
            await engine.wait_finished(op.id)
            await select(window, op.id)
            views = window.details.app_views
            await until(lambda: views.bridge is not None and views.bridge.initialized, 90, "the view's handshake")
            assert window.details.result_tabs.currentWidget() is window.details.app_pane
            await until(lambda: consent_boxes(), 30, "the question about the view's first tool call")
            [box] = consent_boxes()
            assert "poll-system-stats" in box.text()
            assert not views.bridge.calls  # nothing was called before the person agreed
            box.button(QMessageBox.StandardButton.Yes).click()
            bridge = views.bridge
            await until(lambda: len(bridge.tool_replies) >= 2, 60, "two polls answered")
            assert not consent_boxes()  # asked once per tool
            first = bridge.tool_replies[0]
            polled = await engine.operation(bridge.calls[0])
            assert polled.tool == "poll-system-stats" and polled.status == "completed"
            assert first["result"] == polled.result  # the journaled outcome is what the view got
            origin_events = [e for e in await engine.events(polled.id) if e["kind"] == engine_apps.ORIGIN_EVENT]
            assert origin_events[0]["data"]["app_view_of"] == op.id
            assert not bridge.refusals and not window.details.app_pane.sandbox.refusals
            # The view shows its calls' outcomes: no desktop notice for each poll.
            assert not [n for n in notes if "poll-system-stats" in n], notes

            # Shown again: its calls are answered from the record, none is made again.
            other = await engine.start_call("monitor", "get-system-info", {})
            await engine.wait_finished(other.id)
            await select(window, other.id)
            await until(lambda: views.bridge is not None and views.bridge is not bridge
                        and views.bridge.op.id == other.id, 90, "the other operation's view")
            async def calls_of_its_view() -> list[dict]:
                return [e for e in await engine.events(op.id) if e["kind"] == engine_apps.VIEW_CALL_EVENT]

            made = await calls_of_its_view()
            assert len(made) >= 2
            await select(window, op.id)
            await until(lambda: views.bridge is not None and views.bridge.op.id == op.id, 90, "the view shown again")
            again = views.bridge
            assert again.record
            await until(lambda: len(again.tool_replies) >= 2, 60, "two polls answered from the record")
            assert not again.calls and again.replayed
            assert set(again.replayed) <= set(bridge.calls)
            assert await calls_of_its_view() == made  # nothing started by the view shown again
            # Its calls are no rows of the list, nor counted there; its details list and count them.
            assert all(window.ops_model.row_of(call) is None for call in bridge.calls)
            assert window.ops_model.total == 2
            await until(lambda: window.details.view_call_count == len(made), 30, "the view's calls in its details")
            assert window.details.view_calls.topLevelItemCount() == len(made)
            assert f"its view made {len(made)} calls" in window.details.summary.text()
            assert again.tool_replies[0]["result"] == (await engine.operation(again.replayed[0])).result
            assert "Shown again from the record" in window.details.app_pane.status.text()
            # The app-only tool is the view's, not offered to the person.
            dialog = StartCallDialog(["monitor"], engine.list_tools, window, server="monitor")
            await until(lambda: dialog.select_tool("get-system-info"), 30, "the tools in the dialog")
            assert not dialog.select_tool("poll-system-stats")
            dialog.reject()
            dialog.deleteLater()

        qloop.run_until_complete(scenario())


def test_a_view_is_held_to_its_declared_origins_and_stays_where_it_is(qtbot, qloop, isolated_home, tmp_path,
                                                                      origins):
    declared, undeclared = origins
    report = tmp_path / "report.jsonl"
    probe = ServerConfig(name="probe", transport="stdio", command=sys.executable,
                         args=[str(PROBE), str(report), origin(declared), origin(undeclared)])

    def reports() -> list[dict]:
        return [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []

    with shown_host(qloop, isolated_home) as app:
        window, engine = app.window, app.api

        async def scenario():
            await app.start()
            await engine.add_server(probe)
            await engine.wait_connected("probe", 30)
            op = await engine.start_call("probe", "show", {"colour": "blue"})
            await engine.wait_finished(op.id)
            window.details.app_views.consent.grant("probe", "report")
            await select(window, op.id)
            await until(lambda: len(reports()) >= 2, 90, "the view's reports")
            seen, echo = reports()[:2]
            assert seen["undeclared"].startswith("blocked"), seen
            assert seen["declared"] == "fetched", seen
            assert "does not let its views call secret" in seen["secret"]
            assert seen["unknown"] == -32601
            assert echo == {"echo": "report done"}  # the call's result came back into the view
            assert undeclared.paths == [] and declared.paths == ["/fetch"]
            sandbox = window.details.app_pane.sandbox
            await until(lambda: any(kind == "navigation" and target.startswith(origin(declared))
                                    for kind, target in sandbox.refusals), 30, "the navigation refused")
            assert "/nav" not in declared.paths
            assert not consent_boxes()  # the model-only tool was refused without asking anyone
            return op.id

        op_id = qloop.run_until_complete(scenario())

    # A new window on the same home: the view is read again and given the stored result
    # again; its calls are answered with what they returned the first time, none made again.
    with shown_host(qloop, isolated_home) as app:
        window, engine = app.window, app.api

        async def again():
            await app.start()
            await engine.wait_connected("probe", 30)
            views = window.details.app_views
            await select(window, op_id)
            await until(lambda: views.bridge is not None and len(views.bridge.replayed) >= 2, 90,
                        "the view's two reports answered from the record")
            bridge = views.bridge
            assert not bridge.calls and len(reports()) == 2  # nothing made again
            assert not consent_boxes()  # nothing to consent to: nothing runs
            answers = [r["result"]["content"][0]["text"] for r in bridge.tool_replies if "result" in r]
            assert answers == ["report done", "report done"]

        qloop.run_until_complete(again())


def probe_config(tmp_path, declared: str = "http://127.0.0.1:1", undeclared: str = "http://127.0.0.1:2"):
    return ServerConfig(name="probe", transport="stdio", command=sys.executable,
                        args=[str(PROBE), str(tmp_path / "report.jsonl"), declared, undeclared])


def test_a_call_the_person_declines_is_not_made(qtbot, qloop, isolated_home, tmp_path):
    with shown_host(qloop, isolated_home) as app:
        window, engine = app.window, app.api

        async def scenario():
            await app.start()
            await engine.add_server(probe_config(tmp_path))
            await engine.wait_connected("probe", 30)
            op = await engine.start_call("probe", "show", {})
            await engine.wait_finished(op.id)
            await select(window, op.id)
            await until(lambda: consent_boxes(), 90, "the question about the view's call of report")
            [box] = consent_boxes()
            assert "report" in box.text()
            box.button(QMessageBox.StandardButton.No).click()
            bridge = window.details.app_views.bridge
            declined = "the person did not allow this view to call report"
            await until(lambda: any(r.get("error", {}).get("message") == declined for r in bridge.tool_replies),
                        30, "the view's call of report refused")
            assert not bridge.calls and not (tmp_path / "report.jsonl").exists()
            assert [o.tool for o in await engine.operations()] == ["show"]  # nothing was started

        qloop.run_until_complete(scenario())


def test_without_qtwebengine_the_tab_says_how_to_get_it(qtbot, qloop, isolated_home, tmp_path, monkeypatch):
    from hostapp.ui.apps import MISSING_MESSAGE

    monkeypatch.setitem(sys.modules, "PySide6.QtWebEngineWidgets", None)  # an import of it fails
    with shown_host(qloop, isolated_home) as app:
        window, engine = app.window, app.api

        async def scenario():
            await app.start()
            await engine.add_server(probe_config(tmp_path))
            await engine.wait_connected("probe", 30)
            op = await engine.start_call("probe", "show", {})
            await engine.wait_finished(op.id)
            await select(window, op.id)
            pane = window.details.app_pane
            await until(lambda: pane.status.text().startswith(MISSING_MESSAGE), 30, "the message in the tab")
            # Run from this clone: the way to add it here, not a pip line for another install.
            assert "'make apps'" in pane.status.text() and "pip install -e '.[apps]'" in pane.status.text()
            assert window.details.result_tabs.indexOf(pane) >= 0 and pane.sandbox is None

        qloop.run_until_complete(scenario())


class _Listeners:
    """A TCP and a UDP socket on loopback that count what reaches them (a TURN and a STUN server)."""

    def __init__(self) -> None:
        import socket

        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.reached: list[str] = []
        for target in (self._accept, self._receive):
            threading.Thread(target=target, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.tcp.accept()
                self.reached.append("tcp")
                conn.close()

    def _receive(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.udp.recvfrom(65536)
                self.reached.append("udp")

    def close(self) -> None:
        self.tcp.close()
        self.udp.close()


def test_a_view_has_no_webrtc_in_its_frame_nor_in_one_it_nests(qtbot, qloop, isolated_home, tmp_path):
    """WebRTC's STUN and TURN traffic passes neither the content policy nor the network
    filter (a TURN user name carries whatever the view puts in it): views have none."""
    listeners = _Listeners()
    report = tmp_path / "report.jsonl"
    probe = ServerConfig(name="probe", transport="stdio", command=sys.executable, args=[
        str(PROBE), str(report), "http://127.0.0.1:1", "http://127.0.0.1:2",
        f"webrtc={listeners.tcp.getsockname()[1]},{listeners.udp.getsockname()[1]}"])
    try:
        with shown_host(qloop, isolated_home) as app:
            window, engine = app.window, app.api

            async def scenario():
                await app.start()
                await engine.add_server(probe)
                await engine.wait_connected("probe", 30)
                op = await engine.start_call("probe", "show", {})
                await engine.wait_finished(op.id)
                window.details.app_views.consent.grant("probe", "report")
                await select(window, op.id)
                await until(lambda: report.exists() and report.read_text().strip(), 90, "the view's report")
                return json.loads(report.read_text().splitlines()[0])

            seen = qloop.run_until_complete(scenario())
    finally:
        listeners.close()
    assert seen["view"]["type"] == "undefined" and "gathered" not in seen["view"], seen
    assert seen["nested"]["type"] in ("undefined", "inaccessible") and "gathered" not in seen["nested"], seen
    assert listeners.reached == []


def test_the_install_hint_fits_how_hostapp_runs(tmp_path):
    from hostapp.ui.apps import install_hint

    clone = tmp_path / "clone"
    (clone / "hostapp").mkdir(parents=True)
    (clone / "pyproject.toml").write_text("[project]\nname = 'hostapp'\n")
    assert install_hint(clone / "hostapp") == \
        f"in {clone}, run 'make apps' (it runs .venv/bin/pip install -e '.[apps]')"
    installed = tmp_path / "venv" / "lib" / "site-packages" / "hostapp"
    installed.mkdir(parents=True)
    assert install_hint(installed, python="/opt/py/bin/python") == \
        "run /opt/py/bin/python -m pip install 'hostapp[apps]'"
