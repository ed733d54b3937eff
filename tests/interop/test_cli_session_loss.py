"""A restarted server, seen from the command line: the next call works (sent again once
in a new session when the old one's 404 refused it, which means it was not processed; or
sent once in the new session when the agent noticed the loss first) and
`hostapp servers list` says what happened. The TypeScript SDK's example server (sessions
in memory), restarted on the same port, behind a proxy that counts the calls."""

from __future__ import annotations

import json

from tests.support.agents import kill_owner
from tests.support.faults import LoopbackProxy
from tests.support.peers import events, hostapp, start_ts_example_server


def test_calls_after_a_server_restart_run_once_and_servers_list_says_so(isolated_home, monkeypatch):
    # The note lives in the agent that renewed the session: it must not leave for being idle
    # between the commands (the suite's agents leave after 3 s; a loaded machine takes longer).
    monkeypatch.setenv("HOSTAPP_AGENT_IDLE_EXIT", "600")
    peer = start_ts_example_server()
    proxy = LoopbackProxy(peer.port).start()
    try:
        assert hostapp("servers", "add", "ts", "--url", proxy.url(), home=isolated_home).returncode == 0
        first = hostapp("call", "ts", "greet", "--args", json.dumps({"name": "one"}), "--json", home=isolated_home)
        assert first.returncode == 0, first.stderr
        peer.restart()
        for name in ("two", "three"):
            proc = hostapp("call", "ts", "greet", "--args", json.dumps({"name": name}), "--json",
                           home=isolated_home)
            assert proc.returncode == 0, proc.stderr
            assert events(proc)[-1]["result"]["content"][0]["text"] == f"Hello, {name}!"
        listed = hostapp("servers", "list", home=isolated_home)
        assert "connected" in listed.stdout and "new session" in listed.stdout, listed.stdout
        as_json = json.loads(hostapp("servers", "list", "--json", home=isolated_home).stdout)
        assert "restarted" in as_json[0]["note"]
    finally:
        kill_owner(isolated_home)
        proxy.stop()
        peer.stop()
    calls = [(r.message["params"]["arguments"]["name"], r.headers.get("mcp-session-id"))
             for r in proxy.requests if r.rpc_method == "tools/call"]
    first_session = calls[0][1]
    assert calls[0] == ("one", first_session) and first_session, calls
    # Every call ran once: once in a session the server knew. "two" either went out in the
    # forgotten session (refused with 404, not processed) and was sent again once in the new
    # one, or, when the agent noticed the loss first (its standalone stream's 404), went out
    # only in the new session; "three" always in the new one.
    new_session = next(session for name, session in calls if name == "three")
    assert new_session not in (None, first_session), calls
    assert calls[1:] in ([("two", first_session), ("two", new_session), ("three", new_session)],
                         [("two", new_session), ("three", new_session)]), calls
