"""The skills dialog: the listing is shown without reading a file; Load reads and shows
SKILL.md, or says which check refused it."""

from __future__ import annotations

from hostapp.engine.api import SkillRefused
from hostapp.ui.skills_dialog import SkillsDialog
from tests.support.waiting import until_async as until

ENTRY = {"uri": "skill://pdf-processing/SKILL.md", "name": "pdf-processing",
         "description": "Extract, fill, and assemble PDF documents",
         "frontmatter": {"name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents"},
         "resources": [{"uri": "skill://pdf-processing/SKILL.md", "size": 97, "digest": "sha256:" + "0" * 64}]}


def test_skills_are_listed_and_one_is_loaded_only_on_request(qtbot, qloop):
    loads: list[tuple[str, str]] = []
    refuse = False

    async def list_skills(server: str) -> list[dict]:
        return [ENTRY]

    async def load_skill(server: str, name: str) -> dict:
        loads.append((server, name))
        if refuse:
            raise SkillRefused("digest check failed for skill://pdf-processing/SKILL.md: ...", "digest")
        return {**ENTRY, "instructions": "---\nname: pdf-processing\n---\n\nSkill body.\n",
                "files": {ENTRY["uri"]: "..."}}

    async def scenario() -> None:
        nonlocal refuse
        dialog = SkillsDialog("srv", list_skills, load_skill)
        qtbot.addWidget(dialog)
        await until(lambda: dialog.skill_list.count() == 1)
        assert dialog.select_skill("pdf-processing")
        assert "Extract, fill" in dialog.text.toPlainText() and "97 bytes" in dialog.text.toPlainText()
        assert loads == []

        dialog.load_button.click()
        await until(lambda: dialog.loaded is not None)
        assert loads == [("srv", ENTRY["uri"])]
        assert "Skill body." in dialog.text.toPlainText() and "verified" in dialog.status.text()

        refuse = True
        dialog.loaded = None
        dialog.load_button.click()
        await until(lambda: "not loaded" in dialog.status.text())
        assert "digest check failed" in dialog.status.text() and dialog.loaded is None
        dialog.reject()

    qloop.run_until_complete(scenario())

