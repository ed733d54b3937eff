"""What the lab offers besides its long tools, so that a first run can try every feature:
one skill (SEP-2640, extension ``io.modelcontextprotocol/skills``) and one tool with a small
app view (MCP Apps, a ``ui://`` resource). Nothing here reaches the network: the skill's
files and the view are strings of this module, and the view declares no origin.

The skill ``lab-tour`` has two files, ``SKILL.md`` and ``references/TOOLS.md``, listed
with their sizes and digests by ``skills/list`` and read with ``resources/read``. The tool
``show_card`` answers with a short text and ``structuredContent``; its view draws them as a
card, sized to its content.
"""

from __future__ import annotations

import hashlib
from typing import Any

from hostapp.protocol.apps import RESOURCE_MIME
from hostapp.protocol.skills import EXTENSION_ID as SKILLS_EXTENSION

__all__ = ["SHOW_CARD", "SKILLS_EXTENSION", "VIEW_URI", "read_resource", "show_card", "skills_list"]

SKILL_NAME = "lab-tour"
SKILL_DESCRIPTION = "A short tour of the hostapp lab, and which of its tools shows which way a long call survives"
SKILL_URI = f"skill://{SKILL_NAME}/SKILL.md"
TOOLS_URI = f"skill://{SKILL_NAME}/references/TOOLS.md"

SKILL_MD = f"""---
name: {SKILL_NAME}
description: {SKILL_DESCRIPTION}
---

# A tour of the lab

The lab is hostapp's built-in MCP server. Each of its long tools is carried by another
way of surviving a break, so that you can watch one survive a restart of hostapp:

1. Start `long_task_ext` (or `long_task` on a 2025-11-25 connection) for two minutes.
2. Quit hostapp while it runs, start it again: the task is found again by its id.
3. Try `ask_form` for a question that waits for you, and `show_card` for an app view.

See `references/TOOLS.md` for the whole list.
"""

TOOLS_MD = """# The lab's tools

- `sleep_with_progress`: a plain call with progress; lost if hostapp stops.
- `long_sse`: resumed from the last SSE event id (HTTP only).
- `long_task`, `long_task_ext`: run as tasks, polled by id after a restart.
- `long_mrtr`: asks a question half-way; the question survives a restart.
- `long_resume_token`, `long_stream`, `long_resumable`, `long_async`: the drafts.
- `ask_form`, `ask_url`: questions to the person.
- `ask_model`: asks your model for a message (sampling), for you to write or review.
- `show_card`: a result drawn by a small app view.
"""

FILES = {SKILL_URI: SKILL_MD, TOOLS_URI: TOOLS_MD}

VIEW_URI = "ui://lab/card.html"
VIEW_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>Lab card</title>
<style>
  body { font: 14px system-ui, sans-serif; margin: 0; padding: 12px; }
  .card { border: 1px solid #8884; border-radius: 8px; padding: 12px 16px; }
  h1 { font-size: 16px; margin: 0 0 6px; }
  p { margin: 0; }
</style></head>
<body><div class="card"><h1 id="title">Waiting for the result…</h1><p id="text"></p></div>
<script>
let next = 1; const waiting = {};
function send(msg) { window.parent.postMessage(msg, "*"); }
function request(method, params) {
  const id = next++; send({jsonrpc: "2.0", id, method, params});
  return new Promise(resolve => { waiting[id] = resolve; });
}
function resize() {
  send({jsonrpc: "2.0", method: "ui/notifications/size-changed",
        params: {height: document.documentElement.scrollHeight}});
}
window.addEventListener("message", ev => {
  if (ev.source !== window.parent) return;
  const m = ev.data;
  if (m.id !== undefined && waiting[m.id]) { waiting[m.id](m); delete waiting[m.id]; return; }
  if (m.method === "ui/notifications/tool-result") {
    const card = (m.params.structuredContent || {});
    document.getElementById("title").textContent = card.title || "Lab card";
    document.getElementById("text").textContent = card.text || "";
    resize();
  }
});
request("ui/initialize", {protocolVersion: "2026-01-26", appInfo: {name: "lab-card", version: "1"},
                          appCapabilities: {}}).then(() => {
  send({jsonrpc: "2.0", method: "ui/notifications/initialized", params: {}});
  resize();
});
</script></body></html>"""

#: The tool's definition without its name, as the lab's catalogue holds its tools.
SHOW_CARD: dict[str, Any] = {
    "description": "Show a short note as a card drawn by the lab's own app view (MCP Apps; no network).",
    "inputSchema": {"type": "object", "properties": {
        "title": {"type": "string", "default": "Hello from the lab", "maxLength": 80,
                  "description": "The card's title."},
        "text": {"type": "string", "default": "This card is an app view: HTML the lab serves, drawn by hostapp.",
                 "maxLength": 500, "description": "The card's text."}}},
    "_meta": {"ui": {"resourceUri": VIEW_URI}},
}


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def skills_list() -> dict[str, Any]:
    """The answer to ``skills/list``: the lab's one skill, with its files' sizes and digests."""
    return {"skills": [{
        "uri": SKILL_URI,
        "frontmatter": {"name": SKILL_NAME, "description": SKILL_DESCRIPTION},
        "resources": [{"uri": uri, "size": len(text.encode()), "digest": _digest(text)}
                      for uri, text in FILES.items()],
    }]}


def read_resource(uri: str) -> dict[str, Any] | None:
    """The answer to ``resources/read`` of one of these files or the view; None for another URI."""
    if uri in FILES:
        return {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": FILES[uri]}]}
    if uri == VIEW_URI:
        # No csp: the view may reach no origin at all.
        return {"contents": [{"uri": uri, "mimeType": RESOURCE_MIME, "text": VIEW_HTML}]}
    return None


def show_card(args: dict[str, Any]) -> dict[str, Any]:
    """The result of ``show_card``: the text for any client, the card's fields for the view."""
    title = str(args.get("title") or SHOW_CARD["inputSchema"]["properties"]["title"]["default"])[:80]
    text = str(args.get("text") or SHOW_CARD["inputSchema"]["properties"]["text"]["default"])[:500]
    return {"content": [{"type": "text", "text": f"{title}: {text}"}],
            "structuredContent": {"title": title, "text": text}}
