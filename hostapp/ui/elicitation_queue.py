"""Routes the servers' questions (and sampling requests) to the person, one prompt at a time.

When several operations ask at once, the questions wait in arrival order; a question
the server withdraws (its operation ended, the URL was completed elsewhere) leaves the
queue or closes its prompt. Each answer goes back to the engine by question id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from hostapp.engine.api import InputRequest

if TYPE_CHECKING:  # the prompts (and the form builder under them) load with the first question
    from hostapp.ui.elicitation_dialog import ElicitationPromptBase

log = logging.getLogger(__name__)


class ElicitationQueue(QObject):
    """Shows the prompts of :class:`InputRequest` s in turn and answers through ``answer``.

    Signals:
        waitingChanged(int): how many questions are open (shown or queued).
        promptShown(object): the prompt now on screen (an ElicitationPromptBase).
    """

    waitingChanged = Signal(int)
    promptShown = Signal(object)

    def __init__(self, answer: Callable[[str, dict[str, Any]], None],
                 operation_title: Callable[[str | None], str | None], parent_widget: QWidget | None = None,
                 draft: Callable[[str], Awaitable[dict[str, Any]]] | None = None) -> None:
        super().__init__(parent_widget)
        self._answer = answer
        self._draft = draft  # the model's reply to a sampling request, for its prompt
        self._title = operation_title
        self._parent_widget = parent_widget
        self._queue: list[InputRequest] = []
        # Questions the person chose to answer later: open, waiting for "open_later".
        self.later: list[InputRequest] = []
        self.current: InputRequest | None = None
        self.prompt: ElicitationPromptBase | None = None
        self._task: asyncio.Task | None = None

    @property
    def waiting(self) -> int:
        return len(self._queue) + len(self.later) + (1 if self.current is not None else 0)

    def holds(self, request_id: str) -> bool:
        """The question is shown, queued or kept for later already."""
        return any(r.id == request_id for r in (*self._queue, *self.later, *filter(None, [self.current])))

    def enqueue(self, request: InputRequest) -> None:
        if self.holds(request.id):  # asked again (read at a start that had told it already)
            return
        self._queue.append(request)
        self.waitingChanged.emit(self.waiting)
        self._show_next()

    def withdraw(self, request_id: str) -> None:
        before = self.waiting
        self._queue = [r for r in self._queue if r.id != request_id]
        self.later = [r for r in self.later if r.id != request_id]
        if self.current is not None and self.current.id == request_id and self.prompt is not None:
            self.current = None  # the engine no longer waits: do not answer it
            self.prompt.withdraw()
        if self.waiting != before:
            self.waitingChanged.emit(self.waiting)

    def _show_next(self) -> None:
        if self.current is not None or not self._queue:
            return
        request = self._queue.pop(0)
        self.current = request
        try:
            prompt: ElicitationPromptBase
            if request.mode == "sampling":
                from hostapp.ui.sampling_dialog import SamplingPrompt

                prompt = SamplingPrompt(request, self._title(request.operation_id), self._draft, self._parent_widget)
            else:
                from hostapp.ui.elicitation_dialog import prompt_for

                prompt = prompt_for(request, self._title(request.operation_id), self._parent_widget)
        except ValueError as exc:
            # A question that cannot be shown safely is declined, and the person is told why in the log.
            log.warning("a question from %s cannot be shown: %s", request.server, exc)
            self._deliver(request, {"action": "decline"})
            self._done_with(request)
            return
        self.prompt = prompt
        self._task = asyncio.ensure_future(self._ask(request, prompt))
        self.promptShown.emit(prompt)

    async def _ask(self, request: InputRequest, prompt: ElicitationPromptBase) -> None:
        try:
            answer = await prompt.ask()
            if self.current is request:
                if answer is None:
                    self.later.append(request)  # still open: the server keeps waiting
                else:
                    self._deliver(request, answer)
        finally:
            prompt.deleteLater()
            self._done_with(request)

    def _deliver(self, request: InputRequest, answer: dict[str, Any]) -> None:
        try:
            self._answer(request.id, answer)
        except KeyError:
            pass  # the engine stopped waiting in the meantime

    def _done_with(self, request: InputRequest) -> None:
        if self.current is request or self.current is None:
            self.current = None
            self.prompt = None
        self.waitingChanged.emit(self.waiting)
        self._show_next()

    def open_later(self) -> None:
        """Show the questions left for later again (they go before any still queued);
        with one on screen already, bring it to the front."""
        if self.later:
            self._queue[:0] = self.later
            self.later = []
            self._show_next()
        if self.prompt is not None:
            self.prompt.show()
            self.prompt.raise_()
            self.prompt.activateWindow()

    def close_all(self) -> None:
        """On quit: close what is open without answering (the engine is stopping too)."""
        self._queue.clear()
        self.later.clear()
        self.current = None
        if self.prompt is not None:
            self.prompt.withdraw()
