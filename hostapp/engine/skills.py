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

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from hostapp.engine import api
from hostapp.engine.accounts import configured, off_loop
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


async def _session(engine: EnginePort, name: str) -> ClientSession:
    from hostapp.engine.connections import open_session

    cfg = configured(engine, name)
    secret_store = None
    if cfg.secret_headers or cfg.secret_env:
        await off_loop(engine.secrets.check)
        secret_store = engine.secrets
    session, _info = await open_session(cfg, secret_store=secret_store)
    return session


@contextlib.asynccontextmanager
async def _session_for(engine: EnginePort, name: str) -> AsyncIterator[ClientSession]:
    """The live session of server ``name`` when the engine keeps it connected, else a
    session of its own for this call, closed after it."""
    conn = engine.connections.get(name)
    if conn is not None and conn.session is not None and conn.view.state == api.CONNECTED:
        yield conn.session
        return
    session = await _session(engine, name)
    try:
        yield session
    finally:
        await session.close()


async def server_skills(engine: EnginePort, name: str) -> list[dict[str, Any]]:
    """The skills server ``name`` lists, as plain dicts (``SkillEntry.to_dict``)."""
    async with _session_for(engine, name) as session:
        return [entry.to_dict() for entry in await list_skills(session)]


async def load_server_skill(engine: EnginePort, name: str, skill: str) -> dict[str, Any]:
    """Load the skill named ``skill`` (its name or URI) of server ``name``, verified.

    The answer: the entry (``SkillEntry.to_dict``), ``instructions`` (SKILL.md's text)
    and ``files`` (URI to text, SKILL.md first).
    """
    async with _session_for(engine, name) as session:
        entry = find_skill(await list_skills(session), skill)
        loaded = await load_skill(session, entry)
    return {
        **entry.to_dict(),
        "instructions": loaded.instructions,
        "files": {uri: data.decode("utf-8", errors="replace") for uri, data in loaded.files.items()},
    }
