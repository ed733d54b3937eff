"""The details of the selected operation: what it is, its timeline, its result, and actions."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QPushButton,
    QSplitter,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from hostapp.engine import api
from hostapp.engine.api import OperationView
from hostapp.presentation import (
    SURVIVES_BY,
    Estimate,
    at_stop_words,
    capitalized,
    clock,
    format_rate,
    rough,
    status_word,
    time_left,
)
from hostapp.ui.accessible import name_as_shown
from hostapp.ui.operations_model import elapsed_of, shown_fraction, status_text
from hostapp.ui.result_view import ResultView, plain_label, plain_tooltip

#: Most timeline lines kept for one operation (a chatty server must not eat the memory).
MAX_TIMELINE_ROWS = 2000

#: Most of a view's calls listed in its operation's details (the newest; all are counted).
VIEW_CALLS_SHOWN = 200

#: Names in the Event column for the timeline's kinds (others: the kind, spaced).
EVENT_LABELS = {api.EVENT_RESUMED: "resumed", "status_message": "message"}


def describe_event(kind: str, data: dict[str, Any]) -> str:
    """One line for the timeline."""
    if kind == "status":
        to = data.get("to") or data.get("status") or ""
        text = capitalized(status_word(str(to)))
        return text + (f": {data['message']}" if data.get("message") else "")
    if kind == "progress":
        progress, total = data.get("progress"), data.get("total")
        amount = f"{100 * progress / total:.0f}%" if total and progress is not None else f"{progress}"
        return amount + (f" {data['message']}" if data.get("message") else "")
    if kind == "log":
        value = data.get("data")
        return f"[{data.get('level', 'info')}] " + (value if isinstance(value, str) else json.dumps(value))
    if kind == "partial_result":
        return partial_text(data.get("result"))
    if kind == api.EVENT_RESUMED:
        how = SURVIVES_BY.get(str(data.get("mechanism") or ""), "")
        return str(data.get("message") or "resumed") + (f" — {how}" if how else "")
    if kind == "input_requested":
        return f"asked for input ({data.get('mode', 'form')}): {data.get('message', '')}"
    if kind == "input_answered":
        return f"answered: {data.get('action', '')}"
    if kind == api.EVENT_STALLED:
        return f"stalled: {data.get('message', '')}"
    if data.get("message"):
        return str(data["message"])
    return json.dumps(data, ensure_ascii=False, default=str)


def _calls_made(count: int) -> str:
    return f"its view made {count} call{'' if count == 1 else 's'}"


def partial_text(result: Any) -> str:
    """A partial result in one readable line: its text blocks, else a short description."""
    if not isinstance(result, dict):
        return "partial result"
    texts = [str(b.get("text", "")) for b in result.get("content") or []
             if isinstance(b, dict) and b.get("type") == "text" and b.get("text")]
    if texts:
        line = " ".join(" ".join(texts).split())
        return line if len(line) <= 200 else line[:199] + "…"
    kinds = [str(b.get("type")) for b in result.get("content") or [] if isinstance(b, dict)]
    return "partial result" + (f" ({', '.join(kinds)})" if kinds else "")


class OperationDetails(QWidget):
    """Header, actions, timeline and result of one operation.

    Signals:
        cancelRequested(str), rerunRequested(str), copyRequested(str), saveRequested(str): op id.
    """

    cancelRequested = Signal(str)
    rerunRequested = Signal(str)
    copyRequested = Signal(str)
    saveRequested = Signal(str)

    def __init__(self, attachments_dir: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.op: OperationView | None = None
        #: Rate and time left of an operation (the window sets the operations model's).
        self.estimate: Callable[[OperationView], Estimate | None] = lambda _op: None
        #: The status in words (the window sets the operations model's, which knows a pause).
        self.status: Callable[[OperationView], str] = status_text
        self._shown_outcome: tuple | None = None
        #: How many calls the shown operation's app view made (None: not read yet).
        self.view_call_count: int | None = None

        self.title = plain_label("Select an operation to see its details.", selectable=False)
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.15)
        font.setBold(True)
        self.title.setFont(font)
        self.title.setAccessibleName("Operation")
        self.summary = plain_label("")
        self.summary.setAccessibleName("Operation summary")

        self.cancel_button = QPushButton("&Cancel call")
        name_as_shown(self.cancel_button, "Cancel the selected operation")
        self.rerun_button = QPushButton("&Re-run")
        name_as_shown(self.rerun_button, "Run the selected call again as a new operation")
        self.copy_button = QPushButton("Cop&y result")
        name_as_shown(self.copy_button, "Copy the result to the clipboard")
        self.save_button = QPushButton("&Save result…")
        name_as_shown(self.save_button, "Save the result to a file")
        for button, signal in ((self.cancel_button, self.cancelRequested), (self.rerun_button, self.rerunRequested),
                               (self.copy_button, self.copyRequested), (self.save_button, self.saveRequested)):
            button.clicked.connect(lambda _=False, s=signal: self.op and s.emit(self.op.id))

        self.timeline = QTreeWidget()
        self.timeline.setHeaderLabels(["Time", "Event", "Detail"])
        self.timeline.setRootIsDecorated(True)  # partial results fold into one expandable row
        self.timeline.setUniformRowHeights(True)
        self.timeline.setAccessibleName("Timeline")
        self.timeline.setColumnWidth(0, 80)
        self.timeline.setColumnWidth(1, 110)
        self.result_view = ResultView(attachments_dir)

        actions = QHBoxLayout()
        for b in (self.cancel_button, self.rerun_button, self.copy_button, self.save_button):
            actions.addWidget(b)
        actions.addStretch(1)

        timeline_box = QGroupBox("Timeline")
        QVBoxLayout(timeline_box).addWidget(self.timeline)
        # The calls the operation's app view made (a monitor's polls): not rows of the
        # operations list, listed here, newest first, read with the view_of filter.
        self.view_calls = QTreeWidget()
        self.view_calls.setHeaderLabels(["Started", "Tool", "Status", "Detail"])
        self.view_calls.setRootIsDecorated(False)
        self.view_calls.setUniformRowHeights(True)
        self.view_calls.setAccessibleName("Calls its view made")
        self.view_calls.setColumnWidth(0, 80)
        self.view_calls_box = QGroupBox("Calls its view made")
        QVBoxLayout(self.view_calls_box).addWidget(self.view_calls)
        self.view_calls_box.hide()
        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(timeline_box)
        left.addWidget(self.view_calls_box)
        left.setChildrenCollapsible(False)
        result_box = QGroupBox("Result")
        # The plain result, and beside it the tool's app view when it has one (enable_app_views).
        self.result_tabs = QTabWidget()
        self.result_tabs.setTabBarAutoHide(True)
        self.result_tabs.addTab(self.result_view, "Result")
        self.app_views: Any = None
        QVBoxLayout(result_box).addWidget(self.result_tabs)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(result_box)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setSizes([480, 720])
        split.setChildrenCollapsible(False)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.summary)
        layout.addLayout(actions)
        layout.addWidget(split, 1)
        # The elapsed time of a call in flight goes on even when the server is silent.
        self._clock = QTimer(self)
        self._clock.setInterval(1000)
        self._clock.timeout.connect(self._tick)
        self._clock.start()
        self.show_operation(None)

    def enable_app_views(self, engine: api.EngineApi) -> None:
        """Show a tool's app view (MCP Apps) in a tab beside the result."""
        from hostapp.ui.apps.pane import AppViewPane, AppViews

        self.app_pane = AppViewPane()
        self.app_views = AppViews(engine, self.app_pane, self)
        self.app_views.available.connect(self._app_view_available)

    def _app_view_available(self, available: bool) -> None:
        index = self.result_tabs.indexOf(self.app_pane)
        if available and index < 0:
            self.result_tabs.setCurrentIndex(self.result_tabs.addTab(self.app_pane, "App view"))
        elif not available and index >= 0:
            self.result_tabs.removeTab(index)

    # -- content ----------------------------------------------------------------------

    def show_operation(self, op: OperationView | None, events: list[dict[str, Any]] | None = None) -> None:
        """Show another operation (with its journaled timeline), or nothing."""
        self.op = op
        self._shown_outcome = None
        self.timeline.clear()
        self.view_calls.clear()
        self.view_calls_box.hide()
        self.view_call_count = None
        for ev in events or []:
            # The journal's event records, or plain {"at", "kind", "data"} dicts.
            if isinstance(ev, dict):
                kind, data, at = ev.get("kind", ""), ev.get("data"), ev.get("at")
            else:
                kind, data, at = getattr(ev, "kind", ""), getattr(ev, "data", None), getattr(ev, "at", None)
            self.add_event(kind, data or {}, at)
        self.update_operation(op)
        if self.app_views is not None:
            self.app_views.show_operation(op)

    def update_operation(self, op: OperationView | None) -> None:
        """Refresh header, buttons and result for a new snapshot of the shown operation."""
        if op is not None and self.op is not None and op.id != self.op.id:
            return
        self.op = op
        if op is not None and self.app_views is not None:
            self.app_views.update_operation(op)
        if op is None:
            self.title.setText("Select an operation to see its details.")
            self.summary.setText("")
            self.result_view.show_outcome(None, None, placeholder="")
        else:
            self.title.setText(f"{op.tool or op.method} on {op.server}")
            self._render_summary(op)
            outcome = (op.id, op.status, id(op.result), id(op.error))
            if outcome != self._shown_outcome:
                self._shown_outcome = outcome
                placeholder = ("Waiting for the server…" if op.in_flight else
                               "The outcome of this call is unknown: it may or may not have run. "
                               "Re-run it only if that is safe." if op.status == api.OperationStatus.UNKNOWN
                               else "No result.")
                self.result_view.show_outcome(op.result, op.error, op_id=op.id, placeholder=placeholder,
                                              server=op.server)
        has_outcome = op is not None and (op.result is not None or op.error is not None)
        self.cancel_button.setEnabled(op is not None and op.in_flight)
        self.rerun_button.setEnabled(op is not None and not op.in_flight and op.tool is not None)
        self.copy_button.setEnabled(has_outcome)
        self.save_button.setEnabled(has_outcome)

    def _render_summary(self, op: OperationView) -> None:
        parts = [self.status(op)]
        fraction = shown_fraction(op)
        if fraction is not None:
            parts.append(f"{fraction * 100:.0f}%")
        parts.append(f"elapsed {clock(elapsed_of(op))}")
        estimate = self.estimate(op)
        if estimate is not None:
            if estimate.stalled:
                parts.append(f"no news for {rough(time.time() - op.updated_at)}")
            parts.append(format_rate(estimate.rate, op.total))
            parts.append(time_left(estimate.seconds_left))
        elif op.in_flight and fraction is None and op.status != api.OperationStatus.INPUT_REQUIRED:
            parts.append("the server reports no share of the work done")
        survives = at_stop_words(op)
        if survives:
            parts.append(survives)
        if op.arguments:
            parts.append("arguments " + json.dumps(op.arguments, ensure_ascii=False)[:200])
        if op.in_flight and op.stalled:
            parts.append(f"stalled: {op.stalled}")
        if op.message:
            parts.append(op.message)
        if self.view_call_count:
            parts.append(_calls_made(self.view_call_count))
        self.summary.setText(" · ".join(parts))

    # -- the calls its app view made ------------------------------------------------------

    def show_view_calls(self, op_id: str, calls: list[OperationView], count: int) -> None:
        """List the calls the app view of operation ``op_id`` made (the newest ``calls`` of
        ``count``), if it is the one shown."""
        if self.op is None or self.op.id != op_id:
            return
        self.view_calls.clear()
        for call in calls[:VIEW_CALLS_SHOWN]:
            self.view_calls.addTopLevelItem(self._view_call_item(call))
        self._set_view_call_count(count)

    def update_view_call(self, call: OperationView) -> None:
        """A call a view made changed: its line, if its operation is shown (a new one on top)."""
        if self.op is None or call.view_of != self.op.id or self.view_call_count is None:
            return
        for i in range(self.view_calls.topLevelItemCount()):
            item = self.view_calls.topLevelItem(i)
            if item is not None and item.data(0, Qt.ItemDataRole.UserRole) == call.id:
                self._fill_view_call_item(item, call)
                return
        self.view_calls.insertTopLevelItem(0, self._view_call_item(call))
        while self.view_calls.topLevelItemCount() > VIEW_CALLS_SHOWN:
            self.view_calls.takeTopLevelItem(self.view_calls.topLevelItemCount() - 1)
        self._set_view_call_count(self.view_call_count + 1)

    def _set_view_call_count(self, count: int) -> None:
        self.view_call_count = count
        listed = self.view_calls.topLevelItemCount()
        title = _calls_made(count).capitalize()
        self.view_calls_box.setTitle(title + (f" (the newest {listed} listed)" if listed < count else ""))
        self.view_calls_box.setVisible(count > 0)
        if self.op is not None:
            self._render_summary(self.op)

    def _view_call_item(self, call: OperationView) -> QTreeWidgetItem:
        item = QTreeWidgetItem()
        item.setData(0, Qt.ItemDataRole.UserRole, call.id)
        self._fill_view_call_item(item, call)
        return item

    def _fill_view_call_item(self, item: QTreeWidgetItem, call: OperationView) -> None:
        detail = (call.error or {}).get("message") if call.error else call.message
        texts = [time.strftime("%H:%M:%S", time.localtime(call.created_at)), call.tool or call.method,
                 self.status(call), str(detail or "").replace("\n", " ")]
        for column, text in enumerate(texts):
            item.setText(column, text)
        item.setToolTip(3, plain_tooltip(texts[3]))

    def _tick(self) -> None:
        if self.op is not None and self.op.in_flight:
            self._render_summary(self.op)

    def add_event(self, kind: str, data: dict[str, Any], at: float | None = None) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(at if at is not None else time.time()))
        text = describe_event(kind, data)
        if kind == "partial_result":
            self._add_partial(stamp, text)
            return
        label = EVENT_LABELS.get(kind, kind.replace("_", " "))
        item = QTreeWidgetItem([stamp, label, text])
        item.setToolTip(2, plain_tooltip(item.text(2)))
        self.timeline.addTopLevelItem(item)
        self._trim()

    def _add_partial(self, stamp: str, text: str) -> None:
        """Partial results in a row collapse into one row (expandable to each of them); a
        result that repeats the one before is counted, not listed again."""
        last = self.timeline.topLevelItem(self.timeline.topLevelItemCount() - 1)
        if last is None or last.data(0, Qt.ItemDataRole.UserRole) != "partial_result":
            last = QTreeWidgetItem([stamp, "partial results", ""])
            last.setData(0, Qt.ItemDataRole.UserRole, "partial_result")
            self.timeline.addTopLevelItem(last)
        child = last.child(last.childCount() - 1) if last.childCount() else None
        if child is not None and child.data(2, Qt.ItemDataRole.UserRole) == text:
            repeats = int(child.data(1, Qt.ItemDataRole.UserRole) or 1) + 1
            child.setData(1, Qt.ItemDataRole.UserRole, repeats)
            child.setText(0, stamp)
            child.setText(1, f"× {repeats}")
        else:
            child = QTreeWidgetItem([stamp, "", text])
            child.setData(2, Qt.ItemDataRole.UserRole, text)
            child.setToolTip(2, plain_tooltip(text))
            last.addChild(child)
            while last.childCount() > MAX_TIMELINE_ROWS:
                last.takeChild(0)
        count = 0
        for i in range(last.childCount()):
            item = last.child(i)
            count += int((item.data(1, Qt.ItemDataRole.UserRole) if item is not None else None) or 1)
        last.setText(1, "partial result" if count == 1 else f"partial results ({count})")
        last.setText(2, f"latest: {text}" if count > 1 else text)
        last.setToolTip(2, plain_tooltip(text))
        self._trim()

    def _trim(self) -> None:
        while self.timeline.topLevelItemCount() > MAX_TIMELINE_ROWS:
            self.timeline.takeTopLevelItem(0)
        self.timeline.scrollToBottom()
