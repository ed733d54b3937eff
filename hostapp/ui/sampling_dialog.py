"""The prompt for a server's sampling request: what it asks a model to write, and the reply.

Beside the elicitation prompts (:mod:`hostapp.ui.elicitation_dialog`), with their header,
their answers and their awaiting. The request is shown whole as plain text (who asks, the
limits, the model preferences, the system prompt, every message); the person writes the
reply, or has the configured model draft it ("Ask the model") and reviews it: edit it,
send it, or decline. Nothing goes to the model unless the person asks, and nothing to the
server before "Send".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QDialogButtonBox, QPlainTextEdit, QPushButton, QWidget

from hostapp.engine.api import EngineError, InputRequest
from hostapp.protocol.sampling import Limits, describe_request, plain_text
from hostapp.ui.accessible import name_as_shown
from hostapp.ui.elicitation_dialog import ElicitationPromptBase
from hostapp.ui.forms import plain_label

#: Asks the engine's model for a draft of the reply to request ``id``: ``{"text", "model", ...}``.
Drafter = Callable[[str], Awaitable[dict[str, Any]]]


class SamplingPrompt(ElicitationPromptBase):
    """A ``sampling/createMessage`` shown to the person. "Send" answers
    ``{"action": "accept", "reply": TEXT, "model": ...}`` (the model's name when it drafted
    the reply, else none: the engine says the person wrote it)."""

    def __init__(self, request: InputRequest, operation_title: str | None, draft: Drafter | None,
                 parent: QWidget | None = None):
        super().__init__(request.server, operation_title, parent)
        self.setWindowTitle(f"{request.server} asks for a model's message")
        self.request = request
        self._draft = draft
        self._drafted: dict[str, Any] | None = None
        self._task: asyncio.Task[None] | None = None
        self._layout.addWidget(plain_label("It asks for a message from a language model. The request:"))
        self.request_text = QPlainTextEdit()  # plain text: server text is never markup here
        self.request_text.setPlainText(plain_text(describe_request(request.params), request.server, Limits()))
        self.request_text.setReadOnly(True)
        self.request_text.setTabChangesFocus(True)
        self.request_text.setAccessibleName("The sampling request")
        self._layout.addWidget(self.request_text, 2)
        self._layout.addWidget(plain_label("Your reply (write it, or ask the model and review its draft):"))
        self.reply_text = QPlainTextEdit()
        self.reply_text.setTabChangesFocus(True)
        self.reply_text.setAccessibleName("The reply sent to the server")
        self.reply_text.setPlaceholderText("The message the server gets back")
        self._layout.addWidget(self.reply_text, 1)
        self.status_label = plain_label("")
        self.status_label.setObjectName("status")
        self.status_label.hide()
        self._layout.addWidget(self.status_label)
        buttons = self._add_buttons("Send")
        self.model_button = QPushButton("Ask the &model")
        self.model_button.setToolTip("Send the request to the model set with 'hostapp model set'; "
                                     "its draft comes here to review before anything is sent")
        name_as_shown(self.model_button, "Ask the model for a draft of the reply")
        buttons.addButton(self.model_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.model_button.setEnabled(draft is not None)
        self.model_button.clicked.connect(self._ask_model)
        self.resize(620, 560)

    def _ask_model(self) -> None:
        if self._draft is None or (self._task is not None and not self._task.done()):
            return
        self.model_button.setEnabled(False)
        self._say("Asking the model…")
        self._task = asyncio.ensure_future(self._drafting(self._draft))

    async def _drafting(self, draft: Drafter) -> None:
        try:
            answer = await draft(self.request.id)
        except EngineError as exc:
            self._say(f"The model did not answer: {exc}")
            return
        finally:
            self.model_button.setEnabled(True)
        self._drafted = answer
        self.reply_text.setPlainText(str(answer.get("text", "")))
        self.reply_text.moveCursor(QTextCursor.MoveOperation.End)
        self.reply_text.setFocus()  # to be reviewed (the disabled button gave focus away)
        self._say(f"Drafted by {answer.get('model')}: review it, edit it if need be, then Send or Decline.")

    def _say(self, text: str) -> None:
        self.status_label.setText(text)
        self.status_label.show()

    def _on_accept_clicked(self) -> None:
        reply = self.reply_text.toPlainText()
        if not reply.strip():
            self._say("Write a reply (or ask the model) before sending, or decline.")
            return
        answer: dict[str, Any] = {"action": "accept", "reply": reply}
        if self._drafted is not None:
            answer["model"] = self._drafted.get("model")
            if reply == self._drafted.get("text") and self._drafted.get("stopReason"):
                answer["stopReason"] = self._drafted["stopReason"]
        self._finish(answer)
