"""Progress reaches the listener and the journal coalesced; anything else at once, its
pending progress first (hostapp.engine.context.ProgressPublisher)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import Any

from hostapp.engine import api
from hostapp.engine.context import ProgressPublisher


@dataclass
class _Runner:
    """What the publisher reads of an operation: its id, its view, whether it ended."""

    view: api.OperationView

    @property
    def id(self) -> str:
        return self.view.id

    @property
    def done(self) -> bool:
        return self.view.status in api.TERMINAL

    def step(self, progress: float) -> None:
        self.view = replace(self.view, progress=progress, total=100.0, message=f"step {progress:g}")


@dataclass
class _Journal:
    progress: list[tuple[str, Any, Any, Any]] = field(default_factory=list)

    def record_progress(self, op_id: str, progress: Any, total: Any = None, message: Any = None) -> None:
        self.progress.append((op_id, progress, total, message))


@dataclass
class _Context:
    journal: _Journal = field(default_factory=_Journal)
    told: list[api.OperationView] = field(default_factory=list)

    @property
    def listener(self) -> _Context:
        return self

    def operation_changed(self, op: api.OperationView) -> None:
        self.told.append(op)


def _runner(op_id: str) -> _Runner:
    return _Runner(api.OperationView(id=op_id, server="s", tool="t", method="tools/call", arguments={},
                                     status=api.RUNNING))


async def test_a_flood_of_progress_is_told_and_journaled_once_per_publication() -> None:
    context = _Context()
    publisher = ProgressPublisher(context)  # type: ignore[arg-type]
    a, b = _runner("a"), _runner("b")
    for step in range(1, 1001):
        a.step(step)
        publisher.later(a)  # type: ignore[arg-type]
    b.step(7)
    publisher.later(b)  # type: ignore[arg-type]
    assert context.told == [] and context.journal.progress == []  # nothing yet: a timer tells
    publisher.publish()
    assert [(op.id, op.progress) for op in context.told] == [("a", 1000), ("b", 7)]
    assert context.journal.progress == [("a", 1000, 100.0, "step 1000"), ("b", 7, 100.0, "step 7")]
    publisher.publish()  # nothing pending: nothing told again
    assert len(context.told) == 2


async def test_the_timer_publishes_what_is_pending() -> None:
    context = _Context()
    publisher = ProgressPublisher(context)  # type: ignore[arg-type]
    a = _runner("a")
    a.step(3)
    publisher.later(a)  # type: ignore[arg-type]
    while not context.told:
        await asyncio.sleep(0.01)
    assert [op.progress for op in context.told] == [3]


async def test_progress_pending_at_an_end_is_journaled_and_told_first_and_not_after_it() -> None:
    context = _Context()
    publisher = ProgressPublisher(context)  # type: ignore[arg-type]
    a = _runner("a")
    a.step(42)
    publisher.later(a)  # type: ignore[arg-type]
    publisher.now(a)  # as the runner does before journaling its end
    assert context.journal.progress == [("a", 42, 100.0, "step 42")]
    assert [(op.progress, op.status) for op in context.told] == [(42, api.RUNNING)]  # in flight, before the end
    publisher.now(a)  # nothing pending: nothing again
    a.view = replace(a.view, status=api.COMPLETED)
    a.step(43)  # arrived while the end was being journaled
    publisher.later(a)  # type: ignore[arg-type]
    publisher.publish()
    assert len(context.told) == 1 and len(context.journal.progress) == 1


async def test_a_change_told_at_once_takes_the_pending_progress_to_the_journal() -> None:
    context = _Context()
    publisher = ProgressPublisher(context)  # type: ignore[arg-type]
    a = _runner("a")
    a.step(5)
    publisher.later(a)  # type: ignore[arg-type]
    publisher.journal_now(a)  # as EngineContext.changed does before telling the new view
    assert context.journal.progress == [("a", 5, 100.0, "step 5")] and context.told == []
    publisher.publish()  # no longer pending
    assert context.told == [] and len(context.journal.progress) == 1
