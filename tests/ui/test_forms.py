"""Elicitation forms, tool-argument forms and the two elicitation prompts, on a real Qt."""

from __future__ import annotations

import asyncio
import os
import shutil

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from PySide6.QtCore import QDate, QDateTime, QObject, Qt, QTime, QUrl, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDateEdit,
    QDateTimeEdit,
    QDoubleSpinBox,
    QGroupBox,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QSpinBox,
)

from hostapp.engine.api import InputRequest
from hostapp.protocol.elicitation import UrlElicitationError, parse_requested_schema
from hostapp.ui.elicitation_dialog import (
    ElicitationPrompt,
    UrlElicitationPrompt,
    prompt_for,
)
from hostapp.ui.forms import ElicitationForm, ToolArgumentsForm

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "description": "Full name", "minLength": 2},
        "email": {"type": "string", "format": "email"},
        "homepage": {"type": "string", "format": "uri"},
        "birthday": {"type": "string", "format": "date"},
        "meeting": {"type": "string", "format": "date-time"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150, "default": 30},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5},
        "guests": {"type": "integer", "minimum": 1},
        "subscribe": {"type": "boolean", "default": True},
        "colour": {"type": "string", "enum": ["red", "green"], "default": "green"},
        "hero": {"type": "string",
                 "oneOf": [{"const": "h1", "title": "Superman"}, {"const": "h2", "title": "Wonder Woman"}]},
        "pet": {"type": "string", "enum": ["p1", "p2"], "enumNames": ["Cats", "Dogs"]},
        "instruments": {
            "type": "array", "items": {"type": "string", "enum": ["guitar", "piano", "drums"]},
            "minItems": 1, "maxItems": 2, "default": ["piano"],
        },
        "fish": {"type": "array",
                 "items": {"anyOf": [{"const": "f1", "title": "Tuna"}, {"const": "f2", "title": "Trout"}]}},
    },
    "required": ["name", "hero", "guests"],
}

MESSAGE = "Please tell us who you are."


def make_form(qtbot, schema=SCHEMA) -> ElicitationForm:
    form = ElicitationForm(parse_requested_schema(schema))
    qtbot.addWidget(form)
    return form


def make_prompt(qtbot, schema=SCHEMA, message=MESSAGE) -> ElicitationPrompt:
    prompt = ElicitationPrompt.from_params(
        "lab", "import photos", {"message": message, "requestedSchema": schema}
    )
    qtbot.addWidget(prompt)
    return prompt


def check(list_widget: QListWidget, *titles: str) -> None:
    for i in range(list_widget.count()):
        item = list_widget.item(i)
        item.setCheckState(Qt.CheckState.Checked if item.text() in titles else Qt.CheckState.Unchecked)


def fill_everything(qtbot, form: ElicitationForm) -> None:
    qtbot.keyClicks(form.editor("name"), "Ada Lovelace")
    qtbot.keyClicks(form.editor("email"), "ada@example.org")
    qtbot.keyClicks(form.editor("homepage"), "https://example.org/ada")
    form.optional_toggle("birthday").setChecked(True)
    form.editor("birthday").setDate(QDate(1815, 12, 10))
    form.optional_toggle("meeting").setChecked(True)
    form.editor("meeting").setDateTime(QDateTime(QDate(2026, 11, 22), QTime(10, 30, 0)))
    form.editor("age").setValue(36)
    form.editor("ratio").setValue(0.25)
    form.editor("guests").setValue(3)
    form.editor("subscribe").setChecked(False)
    combo = form.editor("colour")
    combo.setCurrentIndex(combo.findText("red"))
    combo = form.editor("hero")
    combo.setCurrentIndex(combo.findText("Wonder Woman"))
    combo = form.editor("pet")
    combo.setCurrentIndex(combo.findText("Dogs"))
    check(form.editor("instruments"), "guitar", "drums")
    check(form.editor("fish"), "Trout")


# ------------------------------------------------------------------ ElicitationForm


def test_each_kind_gets_its_editor(qtbot):
    form = make_form(qtbot)
    expected = {
        "name": QLineEdit, "email": QLineEdit, "homepage": QLineEdit, "birthday": QDateEdit,
        "meeting": QDateTimeEdit, "age": QSpinBox, "ratio": QDoubleSpinBox, "guests": QSpinBox,
        "subscribe": QCheckBox, "colour": QComboBox, "hero": QComboBox, "pet": QComboBox,
        "instruments": QListWidget, "fish": QListWidget,
    }
    for name, kind in expected.items():
        assert isinstance(form.editor(name), kind), name
    assert not isinstance(form.editor("meeting"), QDateEdit)
    assert (form.editor("age").minimum(), form.editor("age").maximum()) == (0, 150)


def test_defaults_are_pre_filled_and_nothing_else_is_chosen_for_the_person(qtbot):
    form = make_form(qtbot)
    assert form.content() == {
        "age": 30, "ratio": 0.5, "guests": 1, "subscribe": True, "colour": "green", "instruments": ["piano"],
    }
    assert form.editor("hero").currentText() == "— choose —"
    assert form.optional_toggle("birthday") is not None and not form.optional_toggle("birthday").isChecked()
    assert not form.editor("birthday").isEnabled()
    assert form.optional_toggle("guests") is None  # required: always has a value


def test_every_kind_filled_in_gives_typed_content(qtbot):
    form = make_form(qtbot)
    fill_everything(qtbot, form)
    content = form.content()
    meeting = content.pop("meeting")
    assert content == {
        "name": "Ada Lovelace", "email": "ada@example.org", "homepage": "https://example.org/ada",
        "birthday": "1815-12-10", "age": 36, "ratio": 0.25, "guests": 3, "subscribe": False,
        "colour": "red", "hero": "h2", "pet": "p2", "instruments": ["guitar", "drums"], "fish": ["f2"],
    }
    assert meeting.startswith("2026-11-22T10:30:00") and meeting[19] in "+-"
    assert form.validate() == {}


def test_validation_messages_appear_under_their_fields_and_go_when_edited(qtbot):
    form = make_form(qtbot)
    form.show()
    qtbot.keyClicks(form.editor("name"), "A")
    qtbot.keyClicks(form.editor("email"), "not-an-address")
    check(form.editor("instruments"), "guitar", "piano", "drums")
    errors = form.validate()
    assert set(errors) == {"name", "email", "hero", "instruments"}
    assert form.error_text("name") == "must be at least 2 characters long"
    assert "email address" in form.error_text("email")
    assert form.error_text("hero") == "required"
    assert form.error_text("instruments") == "choose at most 2"
    assert form.error_text("age") == ""
    qtbot.keyClicks(form.editor("name"), "da")
    assert form.error_text("name") == ""
    assert form.error_text("email") != ""


def test_the_fields_below_stay_put_when_an_error_goes(qtbot):
    """An error taken away leaves its room, so the next click lands where the person aimed."""
    from PySide6.QtCore import QPoint

    form = make_form(qtbot)
    form.resize(600, 900)
    form.show()
    qtbot.waitExposed(form)
    qtbot.keyClicks(form.editor("name"), "A")
    form.validate()
    assert form.error_text("name") != ""

    def top_of(name: str) -> int:
        return form.editor(name).mapTo(form, QPoint(0, 0)).y()

    qtbot.wait(10)
    below = {name: top_of(name) for name in ("email", "hero", "age")}
    qtbot.keyClicks(form.editor("name"), "da")  # corrected: its message goes
    qtbot.wait(10)
    assert form.error_text("name") == ""
    assert {name: top_of(name) for name in below} == below
    # Nothing taken away reads as an error to a screen reader or to the form.
    assert form.validate().get("name") is None and form.error_text("name") == ""


def test_blank_text_and_untouched_optional_fields_are_left_out(qtbot):
    form = make_form(qtbot)
    qtbot.keyClicks(form.editor("email"), "   ")
    assert "email" not in form.content()
    assert "birthday" not in form.content() and "pet" not in form.content()


def test_server_text_is_shown_literally_never_as_rich_text(qtbot):
    schema = {
        "type": "object",
        "properties": {
            "x": {"type": "string", "title": "<b>x</b>", "description": "<a href='https://evil.example'>click</a>"},
            "pick": {"type": "string", "oneOf": [{"const": "a", "title": "<i>A</i>"}]},
        },
    }
    prompt = make_prompt(qtbot, schema, message="<h1>Urgent</h1><img src=x>")
    labels = prompt.findChildren(QLabel)
    assert labels and all(label.textFormat() == Qt.TextFormat.PlainText for label in labels)
    assert all(not label.openExternalLinks() for label in labels)
    texts = {label.text() for label in labels}
    assert {"<b>x</b>", "<a href='https://evil.example'>click</a>", "<h1>Urgent</h1><img src=x>"} <= texts
    assert prompt.form.editor("pick").itemText(1) == "<i>A</i>"


# ------------------------------------------------------------------ ElicitationPrompt


def test_send_with_a_valid_form_accepts_with_coerced_content(qtbot):
    prompt = make_prompt(qtbot)
    prompt.show()
    fill_everything(qtbot, prompt.form)
    with qtbot.waitSignal(prompt.answered) as answered:
        qtbot.mouseClick(prompt.accept_button, Qt.MouseButton.LeftButton)
    answer = answered.args[0]
    assert answer["action"] == "accept"
    assert answer["content"]["hero"] == "h2" and answer["content"]["guests"] == 3
    assert prompt.answer() == answer
    assert not prompt.isVisible()


def test_send_with_problems_stays_open_and_sends_nothing(qtbot):
    prompt = make_prompt(qtbot)
    prompt.show()
    with qtbot.assertNotEmitted(prompt.answered):
        qtbot.mouseClick(prompt.accept_button, Qt.MouseButton.LeftButton)
    assert prompt.isVisible() and prompt.answer() is None
    assert prompt.form.error_text("name") == "required"


def test_decline_and_cancel(qtbot):
    declined = make_prompt(qtbot)
    declined.show()
    qtbot.mouseClick(declined.decline_button, Qt.MouseButton.LeftButton)
    assert declined.answer() == {"action": "decline"}

    cancelled = make_prompt(qtbot)
    cancelled.show()
    qtbot.mouseClick(cancelled.cancel_button, Qt.MouseButton.LeftButton)
    assert cancelled.answer() == {"action": "cancel"}


def test_closing_the_window_or_escape_is_not_an_answer(qtbot):
    closed = make_prompt(qtbot)
    closed.show()
    closed.close()
    assert closed.answer() is None and not closed.isVisible()

    escaped = make_prompt(qtbot)
    escaped.show()
    qtbot.keyClick(escaped, Qt.Key.Key_Escape)
    assert escaped.answer() is None and not escaped.isVisible()


def test_only_the_first_answer_counts(qtbot):
    prompt = make_prompt(qtbot)
    prompt.show()
    qtbot.mouseClick(prompt.decline_button, Qt.MouseButton.LeftButton)
    prompt.withdraw()
    assert prompt.answer() == {"action": "decline"}


def test_prompt_is_not_modal_and_names_server_and_operation(qtbot):
    prompt = make_prompt(qtbot)
    assert not prompt.isModal()
    assert prompt.findChild(QLabel, "asker").text() == "lab asks for your input"
    assert prompt.findChild(QLabel, "operation").text() == "For the operation: import photos"
    assert prompt.findChild(QLabel, "message").text() == MESSAGE


async def test_ask_waits_for_the_answer_without_blocking_the_loop(qtbot):
    prompt = make_prompt(qtbot)
    asking = asyncio.ensure_future(prompt.ask())
    await asyncio.sleep(0)
    assert prompt.isVisible() and not asking.done()
    qtbot.mouseClick(prompt.decline_button, Qt.MouseButton.LeftButton)
    assert await asyncio.wait_for(asking, 5) == {"action": "decline"}


async def test_ask_accepts_a_filled_form(qtbot):
    prompt = make_prompt(qtbot)
    asking = asyncio.ensure_future(prompt.ask())
    await asyncio.sleep(0)
    fill_everything(qtbot, prompt.form)
    qtbot.mouseClick(prompt.accept_button, Qt.MouseButton.LeftButton)
    answer = await asyncio.wait_for(asking, 5)
    assert answer["action"] == "accept" and answer["content"]["name"] == "Ada Lovelace"


async def test_cancelling_the_wait_closes_the_prompt_with_cancel(qtbot):
    prompt = make_prompt(qtbot)
    asking = asyncio.ensure_future(prompt.ask())
    await asyncio.sleep(0)
    asking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asking
    assert prompt.answer() == {"action": "cancel"} and not prompt.isVisible()


# ------------------------------------------------------------------ UrlElicitationPrompt


class UrlRecorder(QObject):
    """What the stand-in browser was given (through xdg-open, or Qt's URL-handler hook)."""

    def __init__(self):
        super().__init__()
        self.handled: list[str] = []
        self.seen_file = None

    @property
    def opened(self) -> list[str]:
        launched = self.seen_file.read_text().splitlines() if self.seen_file and self.seen_file.exists() else []
        return [*launched, *self.handled]

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.handled.append(url.toString(QUrl.ComponentFormattingOption.FullyEncoded))


#: freedesktop sessions xdg-open recognises (it would hand the address to the real one).
DESKTOP_VARIABLES = ("XDG_CURRENT_DESKTOP", "DESKTOP_SESSION", "KDE_FULL_SESSION", "GNOME_DESKTOP_SESSION_ID",
                     "MATE_DESKTOP_SESSION_ID", "XDG_SESSION_DESKTOP")


def use_browser(monkeypatch, tmp_path, program: str) -> None:
    """xdg-open (where hostapp hands addresses to) in its plain mode, with ``program`` as
    the person's browser ($BROWSER)."""
    for name in DESKTOP_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BROWSER", program)


@pytest.fixture
def browser(qapp, monkeypatch, tmp_path):
    """A browser that writes down what it is given: through xdg-open where it is
    installed, else through Qt's own URL-handler hook."""
    recorder = UrlRecorder()
    seen = tmp_path / "opened.txt"
    script = tmp_path / "browser"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> "{seen}"\n')
    script.chmod(0o755)
    use_browser(monkeypatch, tmp_path, str(script))
    recorder.seen_file = seen
    for scheme in ("http", "https"):
        QDesktopServices.setUrlHandler(scheme, recorder, "open")
    yield recorder
    for scheme in ("http", "https"):
        QDesktopServices.unsetUrlHandler(scheme)


URL = "https://xn--pple-43d.com/authorize?client_id=hostapp&state=0f3c9a"


def make_url_prompt(qtbot, url=URL) -> UrlElicitationPrompt:
    prompt = UrlElicitationPrompt.from_params(
        "lab", "import photos",
        {"mode": "url", "message": "<b>Sign in</b> to continue", "url": url, "elicitationId": "el-7"},
    )
    qtbot.addWidget(prompt)
    return prompt


def test_url_prompt_shows_full_url_and_domain_plainly_and_opens_nothing_by_itself(qtbot, browser):
    prompt = make_url_prompt(qtbot)
    prompt.show()
    qtbot.wait(50)
    assert prompt.url_text.toPlainText() == URL and prompt.url_text.isReadOnly()
    assert prompt.domain_label.text() == "Site: \u0430pple.com (xn--pple-43d.com)"  # a Cyrillic a
    labels = prompt.findChildren(QLabel)
    assert all(label.textFormat() == Qt.TextFormat.PlainText for label in labels)
    assert "<b>Sign in</b> to continue" in {label.text() for label in labels}
    assert any("xn--pple-43d.com" in label.text() and "Look-alike" in label.text() for label in labels)
    assert browser.opened == []


def test_open_is_consent_then_the_url_goes_to_the_desktop(qtbot, browser):
    prompt = make_url_prompt(qtbot)
    prompt.show()
    qtbot.mouseClick(prompt.accept_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: prompt.answer() is not None, timeout=30_000)
    assert browser.opened == [URL]
    assert prompt.answer() == {"action": "accept"}


@pytest.mark.skipif(shutil.which("xdg-open") is None, reason="needs xdg-open (Debian: xdg-utils)")
def test_open_in_browser_without_a_browser_says_so_and_keeps_the_prompt(qtbot, monkeypatch, tmp_path):
    """xdg-open starts, finds no browser and fails: the prompt stays open and says why,
    instead of closing as if the page had opened (Qt calls that a success)."""
    fallbacks = [b for b in ("x-www-browser", "www-browser", "links2", "elinks", "links", "lynx", "w3m", "firefox",
                             "mozilla", "epiphany", "konqueror", "chromium", "chromium-browser", "google-chrome")
                 if shutil.which(b)]
    if fallbacks:
        pytest.skip(f"a browser is installed here ({fallbacks[0]}): xdg-open would find it")
    use_browser(monkeypatch, tmp_path, "/bin/false")  # the one browser named fails
    prompt = make_url_prompt(qtbot)
    prompt.show()
    qtbot.mouseClick(prompt.accept_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "could not be opened" in prompt.status_label.text(), timeout=30_000)
    assert "xdg-open found no browser" in prompt.status_label.text()
    assert prompt.answer() is None and prompt.isVisible() and prompt.accept_button.isEnabled()


def test_declining_a_url_opens_nothing(qtbot, browser):
    prompt = make_url_prompt(qtbot)
    prompt.show()
    qtbot.mouseClick(prompt.decline_button, Qt.MouseButton.LeftButton)
    assert prompt.answer() == {"action": "decline"} and browser.opened == []


def test_copy_address_puts_the_url_on_the_clipboard(qtbot, qapp, browser):
    prompt = make_url_prompt(qtbot, "https://example.com/pay")
    prompt.show()
    qtbot.mouseClick(prompt.copy_button, Qt.MouseButton.LeftButton)
    assert qapp.clipboard().text() == "https://example.com/pay"
    assert prompt.answer() is None and browser.opened == []


def test_unsafe_url_gets_no_prompt(qtbot):
    with pytest.raises(UrlElicitationError):
        UrlElicitationPrompt.from_params(
            "lab", None, {"mode": "url", "message": "m", "url": "javascript:alert(1)", "elicitationId": "e"}
        )


def test_prompt_for_picks_the_prompt_by_mode(qtbot):
    form = prompt_for(InputRequest("q1", "op1", "lab", "form", MESSAGE,
                                   {"message": MESSAGE, "requestedSchema": SCHEMA}))
    url = prompt_for(InputRequest("q2", "op1", "lab", "url", "m",
                                  {"mode": "url", "message": "m", "url": URL, "elicitationId": "e"}))
    qtbot.addWidget(form)
    qtbot.addWidget(url)
    assert isinstance(form, ElicitationPrompt) and isinstance(url, UrlElicitationPrompt)


# ------------------------------------------------------------------ ToolArgumentsForm

TOOL_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "title": "<b>Query</b>", "minLength": 1},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
        "ratio": {"type": "number"},
        "exact": {"type": "boolean", "default": False},
        "strict": {"type": "boolean"},
        "sort": {"enum": ["asc", "desc"], "default": "desc"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "sizes": {"type": "array", "items": {"type": "integer"}},
        "flags": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
        "filters": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string"}, "value": {"type": "string", "default": "*"}},
                "required": ["field"],
            },
        },
        "owner": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        "paging": {"type": "object", "properties": {"page": {"type": "integer"}}},
        "target": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    },
    "required": ["query", "owner"],
}


def make_tool_form(qtbot, schema=TOOL_SCHEMA) -> ToolArgumentsForm:
    form = ToolArgumentsForm(schema)
    qtbot.addWidget(form)
    return form


def test_tool_form_starts_with_the_schema_defaults(qtbot):
    form = make_tool_form(qtbot)
    assert form.arguments() == {"limit": 10, "exact": False, "sort": "desc", "owner": {}}


def test_tool_form_collects_typed_arguments_from_every_widget(qtbot):
    form = make_tool_form(qtbot)
    qtbot.keyClicks(form.editor_widget("query"), "cats")
    form.editor_widget("limit").setText("25")
    form.editor_widget("ratio").setText("0.5")
    form.editor_widget("strict").setCurrentIndex(form.editor_widget("strict").findText("true"))
    form.editor_widget("tags").setPlainText("red\n\nblue\n")
    form.editor_widget("sizes").setPlainText("1\n2")
    check(form.editor_widget("flags"), "a", "c")
    form.editor_widget("owner", "id").setText("u-1")
    paging = form.editor_widget("paging")
    assert isinstance(paging, QGroupBox) and not paging.isChecked()
    paging.setChecked(True)
    form.editor_widget("paging", "page").setText("2")
    form.editor_widget("target").setPlainText("7")
    assert form.arguments() == {
        "query": "cats", "limit": 25, "ratio": 0.5, "exact": False, "strict": True, "sort": "desc",
        "tags": ["red", "blue"], "sizes": [1, 2], "flags": ["a", "c"], "owner": {"id": "u-1"},
        "paging": {"page": 2}, "target": 7,
    }
    assert form.validate() == []
    assert form.error_text() == ""


def test_tool_form_validation_names_paths_and_marks_fields(qtbot):
    form = make_tool_form(qtbot)
    form.editor_widget("limit").setText("500")
    messages = form.validate()
    assert "$: 'query' is a required property" in messages
    assert "$.limit: 500 is greater than the maximum of 100" in messages
    assert "$.owner: 'id' is a required property" in messages
    assert "$.limit: 500 is greater than the maximum of 100" in form.error_text()
    limit_error = form.editor_widget("limit").parent().findChild(QLabel, "fieldError")
    assert limit_error.text() == "500 is greater than the maximum of 100"


def test_tool_form_reports_text_that_does_not_parse(qtbot):
    form = make_tool_form(qtbot)
    form.editor_widget("limit").setText("ten")
    form.editor_widget("target").setPlainText("{oops")
    messages = form.validate()
    assert "$.limit: enter a whole number" in messages
    assert any(m.startswith("$.target: not valid JSON") for m in messages)


def test_raw_json_toggle_carries_arguments_both_ways(qtbot):
    form = make_tool_form(qtbot)
    qtbot.keyClicks(form.editor_widget("query"), "dogs")
    form.raw_toggle.setChecked(True)
    assert form.is_raw() and form.raw_text.isVisibleTo(form)
    assert form.arguments()["query"] == "dogs"
    form.raw_text.setPlainText('{"query": "birds", "owner": {"id": "x"}, "target": "t", "extra": 1}')
    assert form.arguments()["extra"] == 1  # raw mode sends what was typed
    form.raw_toggle.setChecked(False)
    assert not form.is_raw()
    assert form.editor_widget("query").text() == "birds"
    assert form.arguments()["target"] == "t"


def test_raw_json_that_does_not_parse_keeps_raw_mode(qtbot):
    form = make_tool_form(qtbot)
    form.raw_toggle.setChecked(True)
    form.raw_text.setPlainText("[1, 2")
    form.raw_toggle.setChecked(False)
    assert form.is_raw()
    assert "Cannot show this as a form" in form.error_text()
    with pytest.raises(ValueError):
        form.arguments()
    assert form.validate()[0].startswith("$: not valid JSON")


def test_tool_form_labels_are_plain(qtbot):
    form = make_tool_form(qtbot)
    labels = form.findChildren(QLabel)
    assert all(label.textFormat() == Qt.TextFormat.PlainText for label in labels)
    assert "<b>Query</b> *" in {label.text() for label in labels}


def test_tool_without_arguments_and_unrepresentable_root(qtbot):
    empty = make_tool_form(qtbot, {"type": "object"})
    assert empty.arguments() == {} and empty.validate() == []
    union = make_tool_form(qtbot, {"anyOf": [{"type": "object"}, {"type": "null"}, {"type": "string"}]})
    assert union.is_raw() and not union.raw_toggle.isEnabled()


def test_dialogs_render(qtbot, tmp_path):
    """Both prompts paint without warnings at a sensible size."""
    prompt = make_prompt(qtbot)
    url_prompt = make_url_prompt(qtbot)
    for widget in (prompt, url_prompt):
        widget.show()
        image = widget.grab()
        assert image.width() >= 400 and image.height() >= 250
        assert image.save(str(tmp_path / f"{type(widget).__name__}.png"))


def element_boxes(container) -> list[QGroupBox]:
    return [box for box in container.findChildren(QGroupBox) if box.isVisibleTo(container)]


def button(container, text: str) -> QPushButton:
    return next(b for b in container.findChildren(QPushButton) if b.text() == text and b.isVisibleTo(container))


def test_arrays_of_objects_get_one_sub_form_per_element(qtbot):
    form = make_tool_form(qtbot)
    filters = form.editor_widget("filters")
    assert "filters" not in form.arguments()
    for _ in range(3):
        qtbot.mouseClick(button(filters, "Add"), Qt.MouseButton.LeftButton)
    boxes = element_boxes(filters)
    assert [box.title() for box in boxes] == ["1.", "2.", "3."]
    assert [box.findChildren(QLineEdit)[1].text() for box in boxes] == ["*", "*", "*"]  # item defaults
    for box, field in zip(boxes, ["colour", "size", "shape"], strict=True):
        box.findChildren(QLineEdit)[0].setText(field)
    boxes[2].findChildren(QLineEdit)[1].setText("round")
    qtbot.mouseClick(button(boxes[1], "Remove"), Qt.MouseButton.LeftButton)
    assert [box.title() for box in element_boxes(filters)] == ["1.", "2."]
    assert form.arguments()["filters"] == [{"field": "colour", "value": "*"}, {"field": "shape", "value": "round"}]


def test_arrays_of_objects_survive_the_raw_json_round_trip(qtbot):
    form = make_tool_form(qtbot)
    form.raw_toggle.setChecked(True)
    form.raw_text.setPlainText('{"query": "q", "owner": {"id": "o"}, '
                               '"filters": [{"field": "a"}, {"field": "b", "value": "1"}]}')
    form.raw_toggle.setChecked(False)
    assert form.arguments()["filters"] == [{"field": "a"}, {"field": "b", "value": "1"}]
    first = element_boxes(form.editor_widget("filters"))[0]
    first.findChildren(QLineEdit)[0].setText("")
    assert "$.filters[0]: 'field' is a required property" in form.validate()


@pytest.mark.parametrize("how", ["escape", "close", "later"])
async def test_escape_or_close_leaves_the_question_for_later(qtbot, how):
    """Esc, the window's ✕ and "Answer later" close the prompt without an answer: nothing
    is sent to the server (ask() says None), unlike Cancel and Decline."""
    prompt = make_prompt(qtbot)
    asking = asyncio.ensure_future(prompt.ask())
    await asyncio.sleep(0)
    if how == "escape":
        qtbot.keyClick(prompt, Qt.Key.Key_Escape)
    elif how == "close":
        prompt.close()
    else:
        qtbot.mouseClick(prompt.later_button, Qt.MouseButton.LeftButton)
    assert await asyncio.wait_for(asking, 5) is None
    assert prompt.answer() is None and not prompt.isVisible()
    assert prompt.cancel_button.isVisible() is False  # closed, but Cancel is its own button
    assert prompt.cancel_button.text() and prompt.decline_button.text() == "Decline"
