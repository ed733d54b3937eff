"""How fast an operation with a total moves, and how long it has left.

The engine reports progress as numbers with a total (the server's own, or a "step N/M"
status message read by the engine); this turns a series of them into a rate and an
estimate of the time left. The rate is measured from the first progress this window saw
of the operation (so a call resumed after a restart is not judged by the time it spent
waiting), or over its whole life until the progress moves once more.

Between two pieces of news the time left counts down. When none comes for much longer
than the usual gap between them, the call is *stalled*: the rate is then measured up to
now, so the time left grows for as long as nothing arrives, instead of promising the same
figure for ever. A pause (a question to the person, no agent carrying the work) starts
the measure afresh once the work goes on, so the time spent paused does not slow the rate.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from hostapp.engine.api import OperationStatus, OperationView


@dataclass(frozen=True, slots=True)
class Estimate:
    rate: float  # progress units per second
    seconds_left: float
    stalled: bool = False  # no news for much longer than usual: the time left grows meanwhile


def format_duration(seconds: float) -> str:
    """``45 s``, ``3 min``, ``1 h 20 min``: a rough figure, as estimates are."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def format_rate(rate: float, total: float | None) -> str:
    """A rate in the units of the progress: steps a second (or a minute when slow), or
    percent when the total is 100."""
    unit = "%" if total == 100 else " steps"
    if rate >= 1:
        return f"{rate:.3g}{unit}/s"
    return f"{rate * 60:.3g}{unit}/min"


#: A call is stalled once it has been silent this many times its usual gap between news...
STALL_FACTOR = 3.0
#: ...and at least this many seconds.
MIN_STALL_SECONDS = 10.0


@dataclass(slots=True)
class _Measure:
    """Where the rate of one operation is measured from."""

    since: float      # when the measure began: the first progress seen, or the end of a pause
    base: float       # the progress then
    last: float       # the latest progress seen
    news: int = 0     # how many times the progress moved since


class ProgressEstimator:
    """Keeps where each operation's rate is measured from; estimates from it."""

    def __init__(self) -> None:
        self._measures: dict[str, _Measure] = {}
        # Operations that were paused by a question: their whole life is no measure of them.
        self._asked: set[str] = set()
        self._resumed_at = 0.0  # when an agent last took the work up again after none did

    def observe(self, op: OperationView) -> None:
        if not op.in_flight:
            self._measures.pop(op.id, None)
            self._asked.discard(op.id)
            return
        if op.status == OperationStatus.INPUT_REQUIRED:
            self._measures.pop(op.id, None)  # the rate begins afresh once the answer is in
            self._asked.add(op.id)
            return
        if op.fraction is None or op.progress is None:
            return
        measure = self._measures.get(op.id)
        if measure is None:
            self._measures[op.id] = _Measure(max(op.updated_at, self._resumed_at), op.progress, op.progress)
        elif op.progress > measure.last:
            measure.last = op.progress
            measure.news += 1

    def resumed(self, now: float) -> None:
        """An agent carries the work again after none did: each rate is measured afresh."""
        self._measures.clear()
        self._resumed_at = now

    def estimate(self, op: OperationView, now: float | None = None) -> Estimate | None:
        """Rate and time left at ``now`` (the wall clock when None), or None: no total, not
        moving since the last pause, waiting for the person, or already ended."""
        if op.status != OperationStatus.RUNNING or op.fraction is None or op.progress is None or not op.total:
            return None
        measured = self._measured(op)
        if measured is None:
            return None
        since, gained, news = measured
        span = op.updated_at - since
        rate = gained / span
        now = time.time() if now is None else now
        quiet = max(0.0, now - op.updated_at)
        if quiet <= max(MIN_STALL_SECONDS, STALL_FACTOR * span / news):
            return Estimate(rate, max(0.0, (op.total - op.progress) / rate - quiet))
        # Stalled: measured up to now, the rate falls and the time left grows while nothing comes.
        rate = gained / (now - since)
        return Estimate(rate, (op.total - op.progress) / rate, stalled=True)

    def usual_gap(self, op: OperationView) -> float | None:
        """Seconds between two pieces of progress news of ``op``, on average, if known."""
        measured = self._measured(op)
        if measured is None:
            return None
        since, _gained, news = measured
        return (op.updated_at - since) / news

    def _measured(self, op: OperationView) -> tuple[float, float, int] | None:
        """(since when, how much progress, in how many pieces of news) the rate is measured over."""
        if op.progress is None:
            return None
        measure = self._measures.get(op.id)
        if measure is not None and op.progress > measure.base and op.updated_at > measure.since:
            return measure.since, op.progress - measure.base, max(1, measure.news)
        whole_life = op.id not in self._asked and op.created_at >= self._resumed_at
        if whole_life and op.created_at and op.updated_at > op.created_at and op.progress > 0:
            return op.created_at, op.progress, 1
        return None
