"""What a person is shown of one operation, and the progress taken into it.

Progress can arrive by the thousand a second per operation. :class:`ProgressIntake` keeps
an operation's last view snapshot and, beside it, the progress fields set in place per
notification; a new snapshot is made of them only when someone asks for the view (a
frozen copy per notification was a fifth of the intake's time). It is told of each step
that moved through one callback, and the engine tells and journals the steps coalesced
(:class:`~hostapp.engine.context.ProgressPublisher`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from hostapp.engine import api
from hostapp.engine.operation import progress_in_message
from hostapp.store.status import TERMINAL


class TakesProgress(Protocol):
    """The mechanism carrying the operation, as the intake sees it: it keeps the newest
    progress for its persisted state."""

    def take_progress(self, progress: float) -> None: ...


class ProgressIntake:
    """One operation's view: the snapshot last made, and the progress taken since.

    ``clock`` stamps each step; ``progressed`` is called at the first step taken since the
    view was last read (the engine then publishes it, coalesced, reading the view).
    ``mechanism`` is the one carrying the operation now (replaced when another takes it
    over before the call leaves).
    """

    def __init__(self, view: api.OperationView, *, mechanism: TakesProgress, clock: Callable[[], float],
                 progressed: Callable[[], None]):
        self.mechanism = mechanism
        self._clock = clock
        self._progressed_cb = progressed
        self._view = view
        self._progressed = False
        self._progress, self._total, self._message = view.progress, view.total, view.message
        self._updated_at = view.updated_at

    @property
    def view(self) -> api.OperationView:
        """What a person is shown now: the last snapshot, with the progress taken since
        then (copied into a new snapshot once, when asked)."""
        if self._progressed:
            self._progressed = False
            self._view = replace(self._view, progress=self._progress, total=self._total, message=self._message,
                                 updated_at=self._updated_at)
        return self._view

    @view.setter
    def view(self, view: api.OperationView) -> None:
        self._view = view
        self._progressed = False
        self._progress, self._total, self._message = view.progress, view.total, view.message
        self._updated_at = view.updated_at

    def change(self, **fields: Any) -> api.OperationView:
        """A new snapshot with ``fields`` changed (and the progress taken so far)."""
        self.view = view = replace(self.view, **fields)
        return view

    @property
    def done(self) -> bool:
        return self._view.status in TERMINAL  # the status is never pending in the live fields

    def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        """A progress notification (the session checked its types). The hot path: fed
        synchronously, without a task hop, checked once (against the step shown, which is
        beyond the mechanism's own), set in place, told through ``progressed``."""
        if self._view.status in TERMINAL or (self._progress is not None and progress <= self._progress):
            return
        self.mechanism.take_progress(progress)
        self._take(progress, total, message)

    def step(self, progress: float, total: float | None, message: str | None) -> None:
        """One progress step a mechanism reported. A mechanism's steps only rise, but after
        a host restart it starts afresh while the journal already holds a later step (a
        stream replayed from its first event id reports its steps again): a step not
        beyond the one shown is dropped, so progress never moves backwards."""
        if self._progress is not None and progress <= self._progress:
            return
        self._take(progress, total, message)

    def step_in_message(self, message: str | None) -> None:
        """A message stating "N/M" or "NN%" moves the progress bar as progress would."""
        step = progress_in_message(message)
        # Not mixed with progress on another scale (the request's own progress notifications).
        if step is not None and self._total in (None, step[1]):
            self.step(step[0], step[1], message)

    def _take(self, progress: float, total: float | None, message: str | None) -> None:
        self._progress = progress
        if total is not None:
            self._total = total
        if message:
            self._message = message
        self._updated_at = self._clock()
        if not self._progressed:
            # Told once per snapshot: until the view is read again (the publisher reads it
            # when it publishes), this operation is already among those to publish.
            self._progressed = True
            self._progressed_cb()
