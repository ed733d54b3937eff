"""Feeds scripted events to a mechanism, as the engine would, for the mechanism tests."""

from __future__ import annotations

import json
from typing import Any

from hostapp.mechanisms import Mechanism, restore_mechanism
from hostapp.mechanisms.actions import TERMINAL_ACTIONS, Action

RESULT = {"content": [{"type": "text", "text": "forty-two"}], "isError": False}
CALL = {"name": "research", "arguments": {"topic": "tides"}}


def feed(m: Mechanism, event: tuple, now: float) -> list[Action]:
    """One event: ("result", payload, method|None) | ("error", error, method|None) |
    ("notification", method, params) | ("stream", event_id, retry_ms) |
    ("answer", responses) | ("wake",) | ("disconnect",) | ("resume",)."""
    kind = event[0]
    if kind == "result":
        return m.on_result(event[1], now=now, method=event[2])
    if kind == "error":
        return m.on_error(event[1], now=now, method=event[2])
    if kind == "notification":
        return m.on_notification(event[1], event[2], now=now)
    if kind == "stream":
        return m.on_stream_event(event[1], event[2], now=now)
    if kind == "answer":
        return m.answer_input(event[1], now=now)
    if kind == "wake":
        return m.wake(now=now)
    if kind == "disconnect":
        return m.on_disconnect(now=now)
    if kind == "resume":
        return m.resume(now=now)
    raise ValueError(kind)


def feed_all(m: Mechanism, events: list[tuple], now: float) -> list[Action]:
    actions: list[Action] = []
    for event in events:
        actions += feed(m, event, now)
    return actions


def terminals(actions: list[Action]) -> list[Action]:
    return [a for a in actions if isinstance(a, TERMINAL_ACTIONS)]


def of_type(actions: list[Action], cls: type) -> list[Any]:
    return [a for a in actions if isinstance(a, cls)]


def restart(m: Mechanism) -> Mechanism:
    """What a host restart leaves: the journaled state (through JSON, as SQLite would
    keep it) and the keyring's secret; checks that the state holds no secret."""
    text = json.dumps(m.state())
    secret = m.secret()
    if secret:
        assert secret not in text, "a secret reached the journal"
    return restore_mechanism(json.loads(text), secret)
