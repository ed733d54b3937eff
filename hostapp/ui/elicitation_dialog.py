"""Non-modal prompts for the questions a server asks: a form, or a URL to open.

Each prompt says which server asks and for which operation, shows the server's text as
plain text, and ends with exactly one ``ElicitResult``: ``accept`` (with content for a
form), ``decline`` or ``cancel`` (also when the window is closed). Prompts are awaitable:
:meth:`ElicitationPromptBase.ask` connects ``finished`` to a future and calls ``show()``,
never ``exec()``, so the qasync loop keeps running while the person thinks.

A URL prompt fetches nothing. The full URL and its domain (with the punycode form when
the domain is internationalized) are on screen before the person chooses; only the
"Open in browser" button hands the URL to the desktop (:mod:`hostapp.ui.desktop`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QFont, QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from hostapp.engine.api import InputRequest
from hostapp.protocol.elicitation import (
    Field,
    UrlElicitation,
    build_accept,
    build_cancel,
    build_decline,
    describe_form_request,
    describe_url_request,
)
from hostapp.ui.accessible import name_as_shown
from hostapp.ui.desktop import UrlOpener
from hostapp.ui.forms import ElicitationForm, plain_label


class ElicitationPromptBase(QDialog):
    """What both prompts share: the header, the three answers, and awaiting the answer.

    Signals:
        answered(dict): the ``ElicitResult``, emitted once, just before the dialog closes.

    States: open (no answer yet) → answered (``answer()`` returns the result; closed).
    """

    answered = Signal(dict)

    def __init__(self, server_name: str, operation_title: str | None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setModal(False)
        self.setWindowModality(Qt.WindowModality.NonModal)
        self._answer: dict[str, Any] | None = None
        self._later = False
        self._layout = QVBoxLayout(self)
        asker = plain_label(f"{server_name} asks for your input")
        asker.setObjectName("asker")
        font = asker.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.15)
        asker.setFont(font)
        self._layout.addWidget(asker)
        if operation_title:
            operation = plain_label(f"For the operation: {operation_title}")
            operation.setObjectName("operation")
            self._layout.addWidget(operation)
        self.setWindowTitle(f"{server_name} asks for input")

    def _add_message(self, message: str) -> None:
        label = plain_label(message)
        label.setObjectName("message")
        frame = QFrame()
        frame.setFrameShape(QFrame.Shape.StyledPanel)
        inner = QVBoxLayout(frame)
        inner.addWidget(label)
        self._layout.addWidget(frame)

    def _add_buttons(self, accept_text: str) -> QDialogButtonBox:
        buttons = QDialogButtonBox()
        self.accept_button = buttons.addButton(accept_text, QDialogButtonBox.ButtonRole.AcceptRole)
        self.decline_button = buttons.addButton("Decline", QDialogButtonBox.ButtonRole.DestructiveRole)
        self.cancel_button = buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.cancel_button.setToolTip("Tell the server you will not answer (the call may end)")
        # Esc and the window's close button do the same: the question stays open.
        self.later_button = buttons.addButton("Answer &later", QDialogButtonBox.ButtonRole.RejectRole)
        self.later_button.setToolTip("Close this for now; the question stays open and the server waits "
                                     "(open it again from \"questions waiting for you\")")
        self.later_button.clicked.connect(self.reject)
        for button, description in ((self.accept_button, f"{accept_text} the request"),
                                    (self.decline_button, "Decline the request"),
                                    (self.cancel_button, "Cancel: refuse to answer"),
                                    (self.later_button, "Answer later: keep the question open")):
            name_as_shown(button, description)
        self.accept_button.setDefault(True)
        self.accept_button.clicked.connect(self._on_accept_clicked)
        self.decline_button.clicked.connect(lambda: self._finish(build_decline()))
        self.cancel_button.clicked.connect(lambda: self._finish(build_cancel()))
        self._layout.addWidget(buttons)
        return buttons

    # -- answers ------------------------------------------------------------------------

    def answer(self) -> dict[str, Any] | None:
        """The ``ElicitResult`` once the person answered, else ``None``."""
        return self._answer

    def _on_accept_clicked(self) -> None:
        raise NotImplementedError

    def _finish(self, answer: dict[str, Any]) -> None:
        if self._answer is not None:
            return
        self._answer = answer
        self.answered.emit(answer)
        self.done(QDialog.DialogCode.Accepted if answer["action"] == "accept" else QDialog.DialogCode.Rejected)

    def reject(self) -> None:
        # Escape, the window's close button and "Answer later": closed without an answer;
        # the question stays open (ask() returns None, the queue keeps it for later).
        if self._answer is None:
            self._later = True
        super().reject()

    def withdraw(self) -> None:
        """Close because the question no longer needs an answer (the server moved on)."""
        self._finish(build_cancel())

    async def ask(self) -> dict[str, Any] | None:
        """Show the prompt and wait for the answer without blocking the event loop; None
        when the person chose to answer later (Esc, the close button, "Answer later").

        If the awaiting task is cancelled, the prompt closes with ``cancel``.
        """
        future: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()

        def on_finished(_code: int) -> None:
            if not future.done():
                future.set_result(None if self._later and self._answer is None else self._answer or build_cancel())

        self.finished.connect(on_finished)
        try:
            if self._answer is not None:  # answered before anyone awaited
                return self._answer
            self.show()
            self.raise_()
            self.activateWindow()
            return await future
        except asyncio.CancelledError:
            self.withdraw()
            raise
        finally:
            self.finished.disconnect(on_finished)


class ElicitationPrompt(ElicitationPromptBase):
    """A form-mode question: the server's message and an :class:`ElicitationForm`.

    "Send" validates first and stays open with the problems shown under their fields.
    """

    def __init__(
        self,
        server_name: str,
        operation_title: str | None,
        message: str,
        fields: Sequence[Field],
        parent: QWidget | None = None,
    ):
        super().__init__(server_name, operation_title, parent)
        self._add_message(message)
        self.form = ElicitationForm(fields)
        scroll = QScrollArea()
        scroll.setAccessibleName("The form")
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(self.form)
        self._layout.addWidget(scroll, 1)
        caution = plain_label(
            "Answer only if you trust this server. Never type passwords or keys into a form."
        )
        small = caution.font()
        small.setPointSizeF(small.pointSizeF() * 0.9)
        caution.setFont(small)
        self._layout.addWidget(caution)
        self._add_buttons("Send")
        # The scroll area asks for little; size the window to the form, within reason.
        chrome = self.sizeHint().height() - scroll.sizeHint().height()
        self.resize(520, min(chrome + self.form.sizeHint().height() + 8, 760))

    @classmethod
    def from_params(
        cls, server_name: str, operation_title: str | None, params: dict[str, Any], parent: QWidget | None = None
    ) -> ElicitationPrompt:
        """Build from ``elicitation/create`` params; raises ``ElicitationSchemaError``."""
        request = describe_form_request(params)
        return cls(server_name, operation_title, request.message, request.fields, parent)

    def _on_accept_clicked(self) -> None:
        if self.form.validate():
            return
        self._finish(build_accept(self.form.fields, self.form.content()))


class UrlElicitationPrompt(ElicitationPromptBase):
    """A URL-mode question: where the server wants the person to go, and why.

    "Open in browser" is the consent: only then is the URL handed to the desktop
    (:class:`~hostapp.ui.desktop.UrlOpener`), and the answer ``accept`` sent once it took
    it. If the desktop cannot open it, the prompt stays open, says why, and the address
    can be copied.
    """

    def __init__(
        self,
        server_name: str,
        operation_title: str | None,
        request: UrlElicitation,
        parent: QWidget | None = None,
    ):
        super().__init__(server_name, operation_title, parent)
        self.request = request
        self._add_message(request.message)
        self._layout.addWidget(plain_label("It asks you to open this page in your browser:"))

        self.domain_label = plain_label(f"Site: {request.display_domain}")
        self.domain_label.setObjectName("domain")
        bold = QFont(self.domain_label.font())
        bold.setBold(True)
        bold.setPointSizeF(bold.pointSizeF() * 1.15)
        self.domain_label.setFont(bold)
        self._layout.addWidget(self.domain_label)
        if request.is_internationalized:
            self._layout.addWidget(plain_label(
                "This name contains letters beyond plain ASCII. Look-alike letters can imitate "
                f"another site: its real name is {request.ascii_domain}."
            ))

        self._layout.addWidget(plain_label("Full address:"))
        self.url_text = QPlainTextEdit()  # plain text, wraps, selectable, never a link
        self.url_text.setPlainText(request.url)
        self.url_text.setReadOnly(True)
        self.url_text.setTabChangesFocus(True)
        # Tall enough to show the whole address without scrolling, up to a point.
        lines = min(max(2, len(request.url) // 55 + 2), 8)
        self.url_text.setFixedHeight(self.url_text.fontMetrics().lineSpacing() * lines + 16)
        self._layout.addWidget(self.url_text)

        self.status_label = plain_label("")
        self.status_label.hide()
        self._layout.addWidget(self.status_label)

        buttons = self._add_buttons("Open in browser")
        self.copy_button = QPushButton("Copy address")
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.clicked.connect(self._copy)
        self.resize(560, self.sizeHint().height())

    @classmethod
    def from_params(
        cls, server_name: str, operation_title: str | None, params: dict[str, Any], parent: QWidget | None = None
    ) -> UrlElicitationPrompt:
        """Build from ``elicitation/create`` params; raises ``UrlElicitationError``."""
        return cls(server_name, operation_title, describe_url_request(params), parent)

    def _on_accept_clicked(self) -> None:
        url = QUrl(self.request.url, QUrl.ParsingMode.StrictMode)
        if not url.isValid():
            self._not_opened("not a valid address")
            return
        # Consent is given, but the answer goes only once the browser has the page: a
        # desktop without one leaves the prompt open, saying so, to copy the address.
        self.accept_button.setEnabled(False)
        self.status_label.setText("Opening your browser…")
        self.status_label.show()
        opener = UrlOpener(self)
        opener.opened.connect(lambda: self._finish({"action": "accept"}))
        opener.failed.connect(self._not_opened)
        opener.open(url.toString(QUrl.ComponentFormattingOption.FullyEncoded))

    def _not_opened(self, why: str) -> None:
        self.accept_button.setEnabled(True)
        self.status_label.setText(f"The address could not be opened here ({why}). Copy it and open it yourself.")
        self.status_label.show()

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.request.url)
        self.status_label.setText("Address copied.")
        self.status_label.show()


def prompt_for(
    request: InputRequest, operation_title: str | None = None, parent: QWidget | None = None
) -> ElicitationPromptBase:
    """The prompt for a question the engine routed to the person (a sampling request's
    is :class:`hostapp.ui.sampling_dialog.SamplingPrompt`).

    Raises ``ElicitationSchemaError`` or ``UrlElicitationError`` (both ``ValueError``) for
    a question that cannot be shown safely; the caller answers the server accordingly.
    """
    if request.mode == "url":
        return UrlElicitationPrompt.from_params(request.server, operation_title, request.params, parent)
    return ElicitationPrompt.from_params(request.server, operation_title, request.params, parent)
