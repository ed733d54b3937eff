"""Listing a server's skills and loading one on request (SEP-2640).

Listing reads only ``skills/list``. Loading reads the skill's files with
``resources/read``, ``SKILL.md`` first, and verifies each one as it arrives
(:mod:`hostapp.protocol.skills`); the first mismatch stops the load, so no file after a
tampered one is even requested. Nothing is fetched ahead of a person's asking.

A server the engine keeps connected is asked on that connection; otherwise, like
``hostapp tools``, each call connects once and disconnects (a second process of a stdio
server, for a moment): a failure is the answer, not something to retry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hostapp.engine.diagnostics import server_session
from hostapp.protocol.skills import (
    LIST_METHOD,
    LoadedSkill,
    SkillEntry,
    find_skill,
    load_order,
    parse_list_result,
    read_contents,
    verify_read,
)

if TYPE_CHECKING:
    from hostapp.engine.port import EnginePort
    from hostapp.engine.session import ClientSession

#: Pages of ``skills/list`` followed at most (a server that repeats its cursor stops sooner).
MAX_PAGES = 50


async def list_skills(session: ClientSession) -> list[SkillEntry]:
    """Every skill the server lists, following ``nextCursor``; no file is read."""
    entries: list[SkillEntry] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page, cursor = parse_list_result(await session.request(LIST_METHOD, {"cursor": cursor} if cursor else {}))
        entries.extend(page)
        if cursor is None or cursor in seen:
            break
        seen.add(cursor)
    return entries


async def load_skill(session: ClientSession, entry: SkillEntry) -> LoadedSkill:
    """Read and verify every file of ``entry``; :class:`SkillVerificationError` on the first mismatch."""
    files: dict[str, bytes] = {}
    for uri in load_order(entry):
        data = read_contents(await session.request("resources/read", {"uri": uri}), uri)
        verify_read(entry, uri, data)
        files[uri] = data
    return LoadedSkill(entry, files)


#: How long the skills wait for the server's connection (a server that is offline says so).
CONNECT_TIMEOUT_SECONDS = 30.0


async def server_skills(engine: EnginePort, name: str) -> list[dict[str, Any]]:
    """The skills server ``name`` lists, as plain dicts (``SkillEntry.to_dict``), asked on
    the host's connection to it (:func:`hostapp.engine.diagnostics.server_session`)."""
    async with server_session(engine, name, CONNECT_TIMEOUT_SECONDS) as (session, _info):
        return [entry.to_dict() for entry in await list_skills(session)]


async def load_server_skill(engine: EnginePort, name: str, skill: str) -> dict[str, Any]:
    """Load the skill named ``skill`` (its name or URI) of server ``name``, verified.

    The answer: the entry (``SkillEntry.to_dict``), ``instructions`` (SKILL.md's text)
    and ``files`` (URI to text, SKILL.md first).
    """
    async with server_session(engine, name, CONNECT_TIMEOUT_SECONDS) as (session, _info):
        entry = find_skill(await list_skills(session), skill)
        loaded = await load_skill(session, entry)
    return {
        **entry.to_dict(),
        "instructions": loaded.instructions,
        "files": {uri: data.decode("utf-8", errors="replace") for uri, data in loaded.files.items()},
    }
