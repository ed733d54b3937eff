"""A server's skills (SEP-2640): the list, and one skill loaded when the person asks.

Opening the dialog reads only the listing; no skill file is fetched until the person
presses Load. Loading verifies every file against the listing (size, digest, SKILL.md's
frontmatter) in the engine; a refusal is shown with the check that failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from hostapp.engine.api import EngineError, SkillRefused
from hostapp.ui.result_view import plain_label, plain_tooltip

SkillLister = Callable[[str], Awaitable[list[dict[str, Any]]]]
SkillLoader = Callable[[str, str], Awaitable[dict[str, Any]]]


class SkillsDialog(QDialog):
    """The skills of one server: pick one to see what the listing says, Load to read it."""

    def __init__(self, server: str, list_skills: SkillLister, load_skill: SkillLoader,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Skills of {server}")
        self.server = server
        self._load_skill = load_skill
        self._skills: dict[str, dict[str, Any]] = {}
        self._task: asyncio.Task | None = None
        #: The skill loaded last (the engine's answer), None until one loads.
        self.loaded: dict[str, Any] | None = None

        self.skill_list = QListWidget()
        self.skill_list.setAccessibleName("Skills")
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setAccessibleName("Skill")
        self.status = plain_label("")
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.skill_list)
        split.addWidget(self.text)
        split.setStretchFactor(1, 2)

        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.load_button = self.buttons.addButton("&Load", QDialogButtonBox.ButtonRole.ActionRole)
        self.load_button.setEnabled(False)
        self.load_button.clicked.connect(self._load_chosen)
        self.buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addWidget(split, 1)
        layout.addWidget(self.status)
        layout.addWidget(self.buttons)
        self.resize(820, 560)

        self.skill_list.currentItemChanged.connect(self._skill_chosen)
        self.status.setText(f"Reading the skills of {server}…")
        self._task = asyncio.ensure_future(self._read(list_skills))

    def done(self, result: int) -> None:
        if self._task is not None:
            self._task.cancel()
        super().done(result)

    async def _read(self, list_skills: SkillLister) -> None:
        try:
            skills = await list_skills(self.server)
        except EngineError as exc:
            self.status.setText(f"Cannot read the skills of {self.server}: {exc}")
            return
        self._skills = {s["uri"]: s for s in skills}
        for skill in skills:
            item = QListWidgetItem(skill["name"])
            item.setData(Qt.ItemDataRole.UserRole, skill["uri"])
            item.setToolTip(plain_tooltip(skill.get("description") or ""))
            self.skill_list.addItem(item)
        self.status.setText(f"{len(skills)} skills; none is read until you load it." if skills
                            else f"{self.server} offers no skills.")
        if skills:
            self.skill_list.setCurrentRow(0)

    def select_skill(self, name: str) -> bool:
        matches = self.skill_list.findItems(name, Qt.MatchFlag.MatchExactly)
        if matches:
            self.skill_list.setCurrentItem(matches[0])
        return bool(matches)

    def _skill_chosen(self, item: QListWidgetItem | None, _previous: QListWidgetItem | None = None) -> None:
        skill = self._skills.get(item.data(Qt.ItemDataRole.UserRole)) if item else None
        self.load_button.setEnabled(skill is not None)
        if skill is None:
            self.text.setPlainText("")
            return
        files = skill["resources"]
        lines = [skill["name"], "", skill.get("description") or "", "", skill["uri"]]
        if files == "dynamic":
            lines.append("files: not listed by the server")
        else:
            lines += [f"  {f['uri']}  ({f['size']} bytes)" for f in files]
        self.text.setPlainText("\n".join(lines))

    def _load_chosen(self) -> None:
        item = self.skill_list.currentItem()
        if item is None:
            return
        uri = item.data(Qt.ItemDataRole.UserRole)
        self.load_button.setEnabled(False)
        self.status.setText(f"Loading {item.text()} and verifying its files…")
        self._task = asyncio.ensure_future(self._load(uri, item.text()))

    async def _load(self, uri: str, name: str) -> None:
        try:
            skill = await self._load_skill(self.server, uri)
        except SkillRefused as exc:
            self.status.setText(f"{name} was not loaded: {exc}")
            return
        except EngineError as exc:
            self.status.setText(f"Cannot load {name}: {exc}")
            return
        finally:
            self.load_button.setEnabled(self.skill_list.currentItem() is not None)
        self.loaded = skill
        self.text.setPlainText(skill["instructions"])
        self.status.setText(f"{name}: {len(skill['files'])} file(s) read and verified (size, digest, frontmatter).")
