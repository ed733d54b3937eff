"""How fast an operation with a total moves, and how long it has left.

The engine reports progress as numbers with a total (the server's own, or a "step N/M"
status message read by the engine); this turns a series of them into a rate and an
estimate of the time left. The rate is measured from the first progress this window saw
of the operation (so a call resumed after a restart is not judged by the time it spent
waiting), or over its whole life until the progress moves once more.
"""

from __future__ import annotations

from dataclasses import dataclass

from hostapp.engine.api import OperationView


@dataclass(frozen=True, slots=True)
class Estimate:
    rate: float  # progress units per second
    seconds_left: float


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


class ProgressEstimator:
    """Keeps the first progress seen of each operation; estimates from it."""

    def __init__(self) -> None:
        self._first: dict[str, tuple[float, float]] = {}  # op id -> (time, progress)

    def observe(self, op: OperationView) -> None:
        if not op.in_flight:
            self._first.pop(op.id, None)
        elif op.fraction is not None and op.id not in self._first and op.progress is not None:
            self._first[op.id] = (op.updated_at, op.progress)

    def estimate(self, op: OperationView) -> Estimate | None:
        """Rate and time left, or None (no total, not moving, or already ended)."""
        if not op.in_flight or op.fraction is None or op.progress is None or not op.total:
            return None
        rate = None
        first = self._first.get(op.id)
        if first is not None and op.progress > first[1] and op.updated_at > first[0]:
            rate = (op.progress - first[1]) / (op.updated_at - first[0])
        elif op.created_at and op.updated_at > op.created_at and op.progress > 0:
            rate = op.progress / (op.updated_at - op.created_at)
        if not rate or rate <= 0:
            return None
        return Estimate(rate, max(0.0, (op.total - op.progress) / rate))
