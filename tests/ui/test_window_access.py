"""Keyboard and screen-reader access, and both colour schemes: every control that takes
the focus has a name a screen reader says, the focus is visible, and the glyphs and
check boxes read on a dark palette as on a light one."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QAccessible, QColor, QImage, QPalette
from PySide6.QtWidgets import QApplication, QCheckBox, QPushButton, QStyle, QStyleOptionButton, QWidget

from hostapp.ui.theme import apply_color_scheme, dark_palette, glyph_icon

pytestmark = pytest.mark.timeout(120)


def unnamed_controls(root: QWidget) -> list[str]:
    """The focusable, shown controls under ``root`` that a screen reader cannot name."""
    missing = []
    for widget in [root, *root.findChildren(QWidget)]:
        if not widget.isVisibleTo(root) or not (widget.focusPolicy() & Qt.FocusPolicy.TabFocus):
            continue
        if widget.metaObject().className() in ("QScrollBar", "QTabBar", "QToolButton", "QSplitterHandle") \
                or widget.objectName().startswith("qt_"):
            continue  # parts of other controls, named through them
        iface = QAccessible.queryAccessibleInterface(widget)
        name = iface.text(QAccessible.Text.Name) if iface is not None else ""
        if not (name or widget.accessibleName()).strip():
            missing.append(f"{widget.metaObject().className()} {widget.objectName()!r} in "
                           f"{widget.parentWidget().metaObject().className() if widget.parentWidget() else '-'}")
    return missing


@pytest.fixture
def window(qtbot, qloop, isolated_home, agents):
    from hostapp.app import HostApp, agent_link
    from tests.ui.test_window import dispose

    app = HostApp(isolated_home, agent_link(isolated_home))
    app.window.resize(1280, 800)
    app.window.show()
    try:
        yield app
    finally:
        if not app.stopped.is_set():
            qloop.run_until_complete(app.shutdown(stop_loop=False))
        dispose(app.window)


def test_every_control_of_the_window_and_its_dialogs_has_a_name(window, qloop, qtbot, tmp_path):
    from hostapp.engine.api import InputRequest
    from hostapp.ui.call_dialog import StartCallDialog
    from hostapp.ui.elicitation_dialog import prompt_for
    from hostapp.ui.server_dialog import ImportDialog, ServerDialog

    main = window.window
    QAccessible.setActive(True)
    assert unnamed_controls(main) == []

    async def tools(_server):
        return [{"name": "t", "description": "d", "inputSchema": {"type": "object", "properties": {
            "n": {"type": "integer"}, "s": {"type": "string"}, "b": {"type": "boolean"},
            "e": {"type": "string", "enum": ["a", "b"]}}}}]

    async def scenario():
        from tests.ui.test_window import until

        dialog = StartCallDialog(["lab"], tools, main)
        qtbot.addWidget(dialog)
        dialog.show()
        await until(lambda: dialog.form is not None)
        return dialog

    call = qloop.run_until_complete(scenario())
    dialogs = [call, ServerDialog(), ImportDialog(search_home=tmp_path, search_cwd=tmp_path)]
    request = InputRequest(id="q1", operation_id=None, server="lab", mode="form", message="Who?",
                           params={"message": "Who?", "requestedSchema": {"type": "object", "properties": {
                               "email": {"type": "string", "format": "email", "title": "Email"},
                               "ok": {"type": "boolean", "title": "OK"}}}})
    dialogs.append(prompt_for(request, None, main))
    from hostapp.ui.server_log_dialog import ServerLogDialog

    dialogs.append(ServerLogDialog("lab", main.engine, main))
    for dialog in dialogs:
        qtbot.addWidget(dialog)
        dialog.show()
        assert unnamed_controls(dialog) == [], dialog.windowTitle()


def test_tab_moves_a_visible_focus_through_the_window(window, qloop, qtbot):
    main = window.window
    from hostapp.engine.api import ServerView

    main.servers_model.update_server(ServerView(name="lab", transport="stdio", target="lab"))
    main.servers_table.selectRow(0)  # a current row, as after a click
    main.activateWindow()
    main.servers_table.setFocus()
    qtbot.waitUntil(main.servers_table.hasFocus)
    seen = []
    for _ in range(8):
        qtbot.keyClick(QApplication.focusWidget() or main, Qt.Key.Key_Tab)
        seen.append(QApplication.focusWidget())
    # Tab leaves a table at once (it does not walk the cells of its row) and moves on.
    assert seen[0] is not main.servers_table, seen
    assert len({id(w) for w in seen if w is not None}) >= 6, seen
    assert main.ops_table in seen


def luminance(color: QColor) -> float:
    return 0.2126 * color.red() + 0.7152 * color.green() + 0.0722 * color.blue()


@pytest.fixture
def dark(qapp):
    old_style, old_palette, old_sheet = qapp.style().name(), qapp.palette(), qapp.styleSheet()
    apply_color_scheme(qapp, "dark")
    yield qapp
    qapp.setStyleSheet(old_sheet)
    qapp.setStyle(old_style)
    qapp.setPalette(old_palette)


@pytest.mark.parametrize("kind", ["play", "stop", "rerun"])
def test_glyphs_read_on_dark_and_light(dark, kind):
    def ink(scheme: str) -> float:
        apply_color_scheme(dark, scheme)
        image = glyph_icon(kind).pixmap(32, 32).toImage()
        inked = [QColor(image.pixel(x, y)) for x in range(32) for y in range(32)
                 if QColor.fromRgba(image.pixel(x, y)).alpha() > 200]
        assert inked, "nothing drawn"
        return sum(luminance(c) for c in inked) / len(inked)

    background = luminance(dark_palette().color(QPalette.ColorRole.Window))
    assert ink("dark") - background > 100   # light ink on the dark window
    assert ink("light") < 100               # dark ink on the light window


def render(widget: QWidget) -> QImage:
    image = QImage(widget.size(), QImage.Format.Format_ARGB32)
    image.fill(widget.palette().color(QPalette.ColorRole.Window))
    widget.render(image, QPoint(0, 0))
    return image


def test_unchecked_check_box_is_visible_on_dark(dark, qtbot):
    box = QCheckBox("Remember me")
    qtbot.addWidget(box)
    box.resize(160, 30)
    box.show()
    image = render(box)
    option = QStyleOptionButton()
    option.initFrom(box)
    indicator = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, option, box)
    window = luminance(box.palette().color(QPalette.ColorRole.Window))
    contrast = max(abs(luminance(QColor(image.pixel(x, y))) - window)
                   for x in range(indicator.left(), indicator.right() + 1)
                   for y in range(indicator.top(), indicator.bottom() + 1))
    assert contrast > 80, contrast


def test_tray_balloon_text_reads_on_its_pale_yellow_in_the_dark_scheme(dark, qtbot):
    """Qt draws its own tray balloon (QBalloonTip) on a fixed pale yellow where no
    notification service shows messages (IceWM, say); its labels must not take the dark
    palette's pale text. Qt's balloon cannot be made without a tray, so a widget of its
    class name and palette stands in for it; the window manager check is by eye
    (docs/tray-balloon-dark.png)."""
    from PySide6.QtWidgets import QLabel, QVBoxLayout

    class QBalloonTip(QWidget):  # the class name the style sheet selects, as Qt's has
        pass

    balloon = QBalloonTip()
    palette = balloon.palette()
    palette.setColor(QPalette.ColorRole.Window, QColor(0xff, 0xff, 0xe1))  # what Qt's balloon sets
    palette.setColor(QPalette.ColorRole.WindowText, QColor(0, 0, 0))
    balloon.setPalette(palette)
    balloon.setAutoFillBackground(True)
    label = QLabel("long_task_ext on lab completed in 2 min.")
    QVBoxLayout(balloon).addWidget(label)
    qtbot.addWidget(balloon)
    balloon.show()
    image = render(balloon)
    inked = [luminance(QColor(image.pixel(x, y))) for x in range(image.width()) for y in range(image.height())]
    assert min(inked) < 80, min(inked)  # dark text on a background of luminance ~255


def test_focused_button_shows_a_frame(dark, qtbot):
    def highlight_pixels(focused: bool) -> int:
        button = QPushButton("Start")
        qtbot.addWidget(button)
        button.resize(120, 34)
        button.show()
        if focused:
            button.activateWindow()
            button.setFocus(Qt.FocusReason.TabFocusReason)
            qtbot.waitUntil(button.hasFocus)
        image = render(button)
        highlight = button.palette().color(QPalette.ColorRole.Highlight)
        count = 0
        for x in range(image.width()):
            for y in range(image.height()):
                c = QColor(image.pixel(x, y))
                if abs(c.red() - highlight.red()) + abs(c.green() - highlight.green()) \
                        + abs(c.blue() - highlight.blue()) < 60:
                    count += 1
        return count

    assert highlight_pixels(True) > highlight_pixels(False) + 150


def test_each_action_has_one_visible_place_besides_the_menus(window):
    from PySide6.QtWidgets import QAbstractButton

    main = window.window
    main.resize(1280, 800)
    buttons = [b for b in main.findChildren(QAbstractButton) if b.isVisibleTo(main)]

    def places(name: str) -> int:
        return sum(1 for b in buttons if b.text().replace("&", "").rstrip("…").strip() == name)

    for name in ("Start call", "Add server", "Import servers", "Edit server", "Remove server", "Re-run",
                 "Cancel call"):
        assert places(name) == 1, (name, [b.text() for b in buttons])
    assert places("Cancel") == 0  # not a second Cancel beside "Cancel call"


def test_spoken_names_are_the_visible_words_and_start_call_tabs_in_reading_order(window, qloop, qtbot, tmp_path):
    """A control is announced by the words it shows ("Edit server…" as "Edit server", what it
    does in its description), the search fields' clear buttons have a name, and Tab in
    Start call goes server, search, tools, the form's fields, then the buttons, with no
    stop that shows no focus."""
    from PySide6.QtWidgets import QAbstractButton, QLineEdit, QScrollArea, QToolButton

    from hostapp.engine.api import ServerView
    from hostapp.ui.accessible import shown_words
    from hostapp.ui.call_dialog import StartCallDialog
    from hostapp.ui.quit_dialog import QuitDialog
    from hostapp.ui.server_dialog import ServerDialog
    from tests.ui.test_window import until

    main = window.window
    QAccessible.setActive(True)
    main.servers_model.update_server(ServerView(name="lab", transport="stdio", target="lab"))
    main.banner.set_message("servers", "lab is offline.")

    def mismatches(root: QWidget) -> list[str]:
        wrong = []
        for button in root.findChildren(QAbstractButton):
            if isinstance(button, QToolButton) or not button.text() or not button.isVisibleTo(root):
                continue
            iface = QAccessible.queryAccessibleInterface(button)
            spoken = iface.text(QAccessible.Text.Name) if iface is not None else ""
            if shown_words(button.text()).lower() not in spoken.lower():
                wrong.append(f"{button.text()!r} is announced as {spoken!r}")
        return wrong

    async def tools(_server):
        return [{"name": "t", "description": "d", "inputSchema": {"type": "object", "properties": {
            "n": {"type": "integer"}, "s": {"type": "string"}}}}]

    async def opened() -> StartCallDialog:
        dialog = StartCallDialog(["lab"], tools, main)
        qtbot.addWidget(dialog)
        dialog.show()
        await until(lambda: dialog.form is not None)
        return dialog

    call = qloop.run_until_complete(opened())
    from hostapp.engine.api import InputRequest
    from hostapp.ui.elicitation_dialog import prompt_for

    asked = {"message": "Who?", "requestedSchema": {"type": "object", "properties": {}}}
    question = prompt_for(InputRequest(id="q1", operation_id=None, server="lab", mode="form", message="Who?",
                                       params=asked), None, main)
    others = [ServerDialog(), QuitDialog([], main), question]
    for dialog in others:
        qtbot.addWidget(dialog)
        dialog.show()
    for root in [main, call, *others]:
        assert mismatches(root) == [], root
    edit = main.server_buttons[main.edit_server_action]
    assert edit.accessibleName() == "Edit server" and "Change the selected server" in edit.accessibleDescription()

    for search in (main.ops_pane.search, call.tool_search):
        search.setText("t")  # the clear button shows once there is something to clear (the tool still matches)
        clear = [b for b in search.findChildren(QToolButton) if b.isVisibleTo(search)]
        assert clear and all(b.accessibleName() == "Clear the search" for b in clear), search.accessibleName()

    stops, widget = [], call.server_box
    for _ in range(100):
        widget = widget.nextInFocusChain()
        if widget is call.server_box:
            break
        if widget.isVisibleTo(call) and widget.isEnabled() and widget.focusPolicy() & Qt.FocusPolicy.TabFocus:
            stops.append(widget)
    assert not any(isinstance(w, QScrollArea) for w in stops)
    fields = [call.form.raw_toggle, *[w for w in call.form.findChildren(QLineEdit) if w.isVisibleTo(call)]]
    assert stops == [call.tool_search, call.tool_list, *fields, call.start_button,
                     call.buttons.button(call.buttons.StandardButton.Cancel)], [
        f"{w.metaObject().className()} {w.accessibleName()}" for w in stops]
    call.reject()
