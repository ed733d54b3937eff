"""Dialogs and panels on their own: server settings, importing other clients' servers,
the result view, and the queue that routes questions to prompts."""

from __future__ import annotations

import base64
import json
import struct

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QFileDialog, QGroupBox, QLabel, QPlainTextEdit, QTreeWidget

from hostapp.engine import api
from hostapp.engine.api import InputRequest
from hostapp.ui.config_import import known_config_files, parse_config
from hostapp.ui.elicitation_queue import ElicitationQueue
from hostapp.ui.result_view import ResultView, result_as_text
from hostapp.ui.server_dialog import ImportDialog, ServerDialog, ServerSettings

CLAUDE = {"mcpServers": {
    "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
    "github": {"command": "docker", "args": ["run", "-i", "ghcr.io/github/github-mcp-server"],
               "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_example", "LOG_LEVEL": "info"}},
}}
VSCODE = {"inputs": [{"id": "key", "type": "promptString", "password": True}], "servers": {
    "remote": {"type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${input:key}",
                                                                              "X-Team": "blue"}},
    "old": {"type": "sse", "url": "https://example.com/sse"},
    "local": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"], "envFile": "${workspaceFolder}/.env"},
}}
CURSOR = {"mcpServers": {"web": {"url": "http://127.0.0.1:9000/mcp", "headers": {"API_KEY": "k"}}, "broken": 3}}


def test_parse_claude_desktop():
    servers = {s.name: s for s in parse_config(json.dumps(CLAUDE), "Claude Desktop")}
    assert servers["files"].transport == "stdio" and servers["files"].args[-1] == "/tmp"
    gh = servers["github"]
    assert gh.secret_names == {"GITHUB_PERSONAL_ACCESS_TOKEN"}
    env, _headers, secrets = gh.split_secrets()
    assert env == {"LOG_LEVEL": "info"} and secrets["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_example"}


def test_parse_vscode_and_cursor():
    vs = {s.name: s for s in parse_config(json.dumps(VSCODE))}
    assert vs["remote"].transport == "http" and vs["remote"].secret_names == {"Authorization"}
    assert any("${input:key}" in w for w in vs["remote"].warnings)
    assert any("Streamable HTTP" in w for w in vs["old"].warnings)
    assert any("envFile" in w for w in vs["local"].warnings) and vs["local"].command == "uvx"
    cur = parse_config(json.dumps(CURSOR), "Cursor")
    assert [s.name for s in cur] == ["web"] and cur[0].secret_names == {"API_KEY"}


def test_parse_rejects_other_files():
    for text in ("[]", "{\"editor.fontSize\": 12}", "not json"):
        try:
            parse_config(text)
        except ValueError as exc:
            assert str(exc)
        else:
            raise AssertionError(f"{text!r} was accepted")


def test_import_dialog_finds_known_files(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / "config" / "Claude").mkdir(parents=True)
    (tmp_path / "config" / "Claude" / "claude_desktop_config.json").write_text(json.dumps(CLAUDE))
    (tmp_path / ".cursor").mkdir()
    (tmp_path / ".cursor" / "mcp.json").write_text(json.dumps(CURSOR))
    found = known_config_files(tmp_path, tmp_path / "project")
    assert [c for c, _ in found] == ["Claude Desktop", "Cursor"]
    dialog = ImportDialog(taken_names={"files"}, search_home=tmp_path, search_cwd=tmp_path / "project")
    qtbot.addWidget(dialog)
    assert [s.name for s in dialog.found] == ["files", "github", "web"]
    # A clash with an existing name is left unchecked.
    assert [s.name for s in dialog.chosen()] == ["github", "web"]
    settings = ServerSettings.from_imported(dialog.chosen()[0])
    assert settings.secrets["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_example"}
    assert "GITHUB_PERSONAL_ACCESS_TOKEN" not in settings.env


def test_server_dialog_separates_secrets(qtbot):
    dialog = ServerDialog(taken_names={"lab"})
    qtbot.addWidget(dialog)
    dialog.name_edit.setText("lab")
    dialog.command_edit.setText("python")
    dialog.args_edit.setText("-m 'my server' --flag")
    dialog.env_table.add_row("API_TOKEN", "s3cret", True)
    dialog.env_table.add_row("MODE", "fast", False)
    dialog._try_accept()
    assert dialog.result_settings is None and "already exists" in dialog.error_label.text()
    dialog.name_edit.setText("mine")
    dialog._try_accept()
    s = dialog.result_settings
    assert s.args == ["-m", "my server", "--flag"]
    assert s.env == {"MODE": "fast"} and s.secrets["env"] == {"API_TOKEN": "s3cret"}

    http = ServerDialog()
    qtbot.addWidget(http)
    http.name_edit.setText("remote")
    http.transport.setCurrentIndex(1)
    http.url_edit.setText("ftp://nope")
    http._try_accept()
    assert "http://" in http.error_label.text()
    http.url_edit.setText("https://example.com/mcp")
    http.headers_table.add_row("Authorization", "Bearer t", True)
    http._try_accept()
    assert http.result_settings.secrets["headers"] == {"Authorization": "Bearer t"}
    assert http.result_settings.headers == {}


def _png(w=4, h=3) -> bytes:
    image = QImage(w, h, QImage.Format.Format_RGB32)
    image.fill(QColor("red"))
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buf, "PNG")
    return bytes(data)


def test_result_view_renders_every_content_type_as_plain_text(qtbot, tmp_path):
    view = ResultView(tmp_path / "attachments")
    qtbot.addWidget(view)
    wav = b"RIFF" + struct.pack("<I", 4) + b"WAVE"
    result = {
        "content": [
            {"type": "text", "text": "<b>bold?</b> <img src=x>"},
            {"type": "image", "mimeType": "image/png", "data": base64.b64encode(_png()).decode()},
            {"type": "audio", "mimeType": "audio/wav", "data": base64.b64encode(wav).decode()},
            {"type": "resource", "resource": {"uri": "file:///r.txt", "mimeType": "text/plain", "text": "inside"}},
            {"type": "resource_link", "uri": "https://example.com/<i>doc</i>", "name": "<i>doc</i>"},
        ],
        "structuredContent": {"answer": {"name": "Ada", "tags": ["a", "b"]}},
    }
    view.show_outcome(result, None, op_id="op1")
    texts = [w.toPlainText() for w in view.findChildren(QPlainTextEdit)]
    assert "<b>bold?</b> <img src=x>" in texts and "inside" in texts
    labels = view.findChildren(QLabel)
    assert all(label.textFormat() == Qt.TextFormat.PlainText for label in labels if label.text())
    assert any("<i>doc</i>" in label.text() for label in labels)
    assert any(label.pixmap() is not None and not label.pixmap().isNull() for label in labels)
    assert not view.saved_files and not (tmp_path / "attachments").exists()  # nothing written until saved
    tree = view.findChildren(QTreeWidget)[0]
    assert tree.topLevelItem(0).text(0) == "answer" and tree.topLevelItem(0).child(0).text(1) == '"Ada"'
    titles = {box.title() for box in view.findChildren(QGroupBox)}
    assert {"Embedded resource", "Resource link", "Structured content", "Audio (audio/wav)"} <= titles

    view.show_outcome(None, {"code": -32603, "message": "<script>boom</script>"})
    assert any(label.text() == "-32603: <script>boom</script>" for label in view.findChildren(QLabel))
    assert result_as_text(result, None) == "<b>bold?</b> <img src=x>"
    assert result_as_text(None, {"code": 5, "message": "m"}) == "Error 5: m"


FORM = {"message": "Your <b>name</b>?", "requestedSchema": {
    "type": "object", "properties": {"name": {"type": "string", "default": "Ada"}}, "required": ["name"]}}
URL = {"mode": "url", "message": "Sign in", "url": "https://example.com/login", "elicitationId": "e1"}


def test_questions_are_shown_one_at_a_time_and_routed(qtbot, qloop):
    answers: list[tuple[str, dict]] = []
    queue = ElicitationQueue(lambda qid, a: answers.append((qid, a)), lambda op: f"op {op}")
    shown = []
    queue.promptShown.connect(shown.append)

    async def scenario():
        queue.enqueue(InputRequest("q1", "o1", "lab", "form", FORM["message"], FORM))
        queue.enqueue(InputRequest("q2", "o2", "lab", "url", URL["message"], URL))
        queue.enqueue(InputRequest("q3", "o3", "lab", "form", "third", FORM))
        assert len(shown) == 1 and queue.waiting == 3
        queue.withdraw("q3")                      # withdrawn while queued: never shown
        assert queue.waiting == 2
        first = shown[0]
        await qtbot_wait(first.isVisible)
        assert any(label.text() == "For the operation: op o1" for label in first.findChildren(QLabel))
        first.accept_button.click()
        await qtbot_wait(lambda: len(shown) == 2)
        assert answers == [("q1", {"action": "accept", "content": {"name": "Ada"}})]
        shown[1].decline_button.click()
        await qtbot_wait(lambda: queue.waiting == 0)
        assert answers[1] == ("q2", {"action": "decline"})

    qloop.run_until_complete(scenario())
    assert len(shown) == 2


def test_withdrawn_question_closes_its_prompt_without_answer(qtbot, qloop):
    answers = []
    queue = ElicitationQueue(lambda qid, a: answers.append(qid), lambda op: None)
    shown = []
    queue.promptShown.connect(shown.append)

    async def scenario():
        queue.enqueue(InputRequest("q1", None, "lab", "url", URL["message"], URL))
        queue.withdraw("q1")
        await qtbot_wait(lambda: queue.waiting == 0 and not shown[0].isVisible())

    qloop.run_until_complete(scenario())
    assert answers == []


def test_unsafe_question_is_declined_without_a_prompt(qtbot, qloop):
    answers = []
    queue = ElicitationQueue(lambda qid, a: answers.append((qid, a)), lambda op: None)
    bad = {"mode": "url", "message": "x", "url": "javascript:alert(1)", "elicitationId": "e"}
    qloop.run_until_complete(_enqueue(queue, InputRequest("q1", None, "lab", "url", "x", bad)))
    assert answers == [("q1", {"action": "decline"})] and queue.waiting == 0


async def _enqueue(queue, request):
    queue.enqueue(request)


async def qtbot_wait(predicate, timeout: float = 5.0):
    import asyncio

    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def test_details_keep_counting_the_elapsed_time_of_a_silent_call(qtbot, tmp_path):
    import time

    from hostapp.engine.api import OperationView
    from hostapp.ui.details import OperationDetails

    details = OperationDetails(tmp_path)
    qtbot.addWidget(details)
    started = time.time() - 65
    op = OperationView(id="op1", server="lab", tool="slow", method="tools/call", arguments={},
                       status="running", created_at=started, updated_at=started)
    details.show_operation(op)
    assert "elapsed 1:05" in details.summary.text()
    # No update comes from the server: the clock moves on by itself.
    qtbot.waitUntil(lambda: "elapsed 1:06" in details.summary.text() or "elapsed 1:07" in details.summary.text(),
                    timeout=3000)
    ended = OperationView(id="op1", server="lab", tool="slow", method="tools/call", arguments={},
                          status="completed", created_at=started, updated_at=started, ended_at=started + 70)
    details.update_operation(ended)
    assert "elapsed 1:10" in details.summary.text()


SAMPLING = {"messages": [{"role": "user", "content": {"type": "text", "text": "Name a <b>colour</b>"}}],
            "systemPrompt": "Be brief.", "maxTokens": 50, "modelPreferences": {"hints": [{"name": "small"}]}}


def test_a_sampling_request_is_shown_as_plain_text_and_the_model_draft_reviewed(qtbot, qloop):
    from hostapp.engine.api import EngineError

    answers: list[tuple[str, dict]] = []
    drafts = iter([EngineError("no model is configured"), {"text": "Blue.", "model": "m-small",
                                                           "stopReason": "endTurn"}])

    async def draft(request_id: str) -> dict:
        outcome = next(drafts)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    queue = ElicitationQueue(lambda qid, a: answers.append((qid, a)), lambda op: None, draft=draft)
    shown = []
    queue.promptShown.connect(shown.append)

    async def scenario():
        queue.enqueue(InputRequest("s1", "o1", "lab", "sampling", "Name a <b>colour</b>", SAMPLING))
        prompt = shown[0]
        await qtbot_wait(prompt.isVisible)
        text = prompt.request_text.toPlainText()
        assert "User:\nName a <b>colour</b>" in text and "System prompt:\nBe brief." in text
        assert "models like small" in text and "at most 50 tokens" in text
        prompt.accept_button.click()  # nothing written yet: not sent
        assert answers == [] and "Write a reply" in prompt.status_label.text()
        prompt.model_button.click()
        await qtbot_wait(lambda: "did not answer: no model is configured" in prompt.status_label.text())
        prompt.model_button.click()
        await qtbot_wait(lambda: prompt.reply_text.toPlainText() == "Blue.")
        assert "Drafted by m-small" in prompt.status_label.text()
        prompt.reply_text.setPlainText("Blue, edited.")
        prompt.accept_button.click()
        await qtbot_wait(lambda: queue.waiting == 0)

    qloop.run_until_complete(scenario())
    assert answers == [("s1", {"action": "accept", "reply": "Blue, edited.", "model": "m-small"})]


def test_server_dialog_keeps_the_folders_given_to_the_server(qtbot, tmp_path):
    kept, chosen = tmp_path / "kept", tmp_path / "chosen one"
    kept.mkdir()
    chosen.mkdir()
    existing = api.ServerConfig(name="files", transport="stdio", command="server", roots=[str(kept)],
                                log_level="warning")
    dialog = ServerDialog(existing=existing)
    qtbot.addWidget(dialog)
    assert dialog.roots() == [str(kept)]
    dialog._choose_folder()
    folder_dialog = dialog._folder_dialog
    assert folder_dialog is not None and folder_dialog.fileMode() == QFileDialog.FileMode.Directory
    folder_dialog.fileSelected.emit(str(chosen / ".." / "chosen one"))  # as the person picks it
    folder_dialog.reject()
    dialog.add_folder(str(kept))  # once only
    dialog.add_folder(str(tmp_path / "missing"))
    assert "does not exist" in dialog.error_label.text()
    assert dialog.roots() == [str(kept), str(chosen)]
    dialog.roots_list.item(0).setSelected(True)
    dialog._remove_folders()
    dialog._try_accept()
    assert dialog.result_settings is not None and dialog.result_settings.roots == [str(chosen)]
    assert dialog.result_settings.to_config().roots == [str(chosen)]
    assert dialog.result_settings.to_config().log_level == "warning"  # kept, though the dialog does not show it
