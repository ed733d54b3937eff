"""The one operation status vocabulary and its lifecycle (hostapp.store.status)."""

from __future__ import annotations

import json

import pytest

from hostapp.store.status import (
    IN_FLIGHT,
    TERMINAL,
    OperationStatus,
    StatusTransitionError,
    check_transition,
)

ALLOWED = {
    ("pending", "running"), ("pending", "input_required"),
    ("running", "input_required"), ("input_required", "running"),
    *((old, new) for old in ("pending", "running", "input_required") for new in TERMINAL),
    *((s, s) for s in ("pending", "running", "input_required")),
}


@pytest.mark.parametrize("old", [status.value for status in OperationStatus])
@pytest.mark.parametrize("new", [status.value for status in OperationStatus])
def test_transition_table(old: str, new: str):
    if (old, new) in ALLOWED:
        check_transition(old, new)
    else:
        with pytest.raises(StatusTransitionError):
            check_transition(old, new)


def test_unknown_statuses_are_refused():
    with pytest.raises(StatusTransitionError, match="unknown operation status"):
        check_transition("running", "paused")


def test_statuses_are_named_once():
    assert set(IN_FLIGHT) == {"pending", "running", "input_required"}
    assert set(OperationStatus) == IN_FLIGHT | TERMINAL
    assert not IN_FLIGHT & TERMINAL


def test_a_status_is_its_value():
    # Stored in SQLite, sent as JSON and compared with plain strings by the layers above.
    assert OperationStatus.RUNNING == "running" and f"{OperationStatus.RUNNING}" == "running"
    assert json.dumps({"status": OperationStatus.UNKNOWN}) == '{"status": "unknown"}'
    assert OperationStatus.COMPLETED.terminal and OperationStatus.INPUT_REQUIRED.in_flight
