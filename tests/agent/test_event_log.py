"""The agent's numbered events kept for a client that reconnects, with more operations
changing than the log keeps events."""

from __future__ import annotations

import json

from hostapp.agent.endpoint import Limits, _EventLog


def test_each_operations_latest_change_is_kept_and_the_oldest_pushed_out():
    log = _EventLog(Limits(replay_events=100))
    latest: dict[str, int] = {}
    for i in range(3_000):
        op = f"op{(i * 7) % 250}"
        log.add({"kind": "operation_changed", "op": {"id": op, "n": i}}, change_of=op)
        latest[op] = i
    log.add({"kind": "problem", "problem": "x", "message": "y"})
    replay = log.since(log.stream, log._lost_through)
    assert replay is not None and len(replay) == 100
    seen = [json.loads(line)["params"] for line in replay]
    ops = [p["op"] for p in seen if p["kind"] == "operation_changed"]
    assert len({o["id"] for o in ops}) == len(ops) == 99  # one change per operation, its latest
    assert all(latest[o["id"]] == o["n"] for o in ops)
    assert [p["seq"] for p in seen] == sorted(p["seq"] for p in seen)
    # What the log tracks is bounded by what it keeps, not by every operation seen.
    assert len(log._change_of) == len(log._op_of) == 99
    assert log.since(log.stream, log._lost_through - 1) is None  # a gap: read everything again
