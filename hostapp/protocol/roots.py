"""MCP roots: the folders a person gives a server, as the client answers ``roots/list``.

A root is a ``file://`` URI (the specification allows no other scheme) with an optional
name. The configuration keeps absolute, resolved paths (:func:`normalize_root`, checked
when the person gives them); :func:`roots_result` turns them into the answer, each URI
percent-encoded by :meth:`pathlib.PurePath.as_uri` (spaces, ``%``, ``#``, non-ASCII
names), its name the folder's own. A folder that is no longer there when the server asks
is left out of the answer (the specification asks clients to check that a root is
accessible before exposing it); the configuration keeps it, for when it comes back.

Roots are declared with ``listChanged``: a change on a live handshake-era connection is
told with ``notifications/roots/list_changed``. The 2026-07-28 era has no session to tell:
its servers ask with a ``roots/list`` input request each time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

LIST_METHOD = "roots/list"
LIST_CHANGED = "notifications/roots/list_changed"


def normalize_root(path: str | os.PathLike[str], base: Path | None = None) -> str:
    """``path`` as the configuration keeps it: absolute (relative to ``base``, else the
    current folder), ``~`` expanded, links resolved. ValueError, in plain words, for a
    path that is not an existing folder."""
    text = os.fspath(path)
    if not text.strip():
        raise ValueError("a root must name a folder, got an empty path")
    if "\x00" in text:
        raise ValueError("a root's path cannot hold a NUL character")
    candidate = Path(text).expanduser()
    if not candidate.is_absolute():
        candidate = (base or Path.cwd()) / candidate
    resolved = candidate.resolve()
    if not resolved.is_dir():
        raise ValueError(f"{text!r} is not a folder" + ("" if resolved.exists() else " (it does not exist)"))
    return str(resolved)


def normalize_roots(paths: Iterable[str | os.PathLike[str]], base: Path | None = None) -> list[str]:
    """Every path normalized (:func:`normalize_root`), in the order given, each once."""
    out: list[str] = []
    for path in paths:
        root = normalize_root(path, base)
        if root not in out:
            out.append(root)
    return out


def root_entry(path: str) -> dict[str, Any]:
    """The ``Root`` object of one configured folder: its ``file://`` URI and its name."""
    resolved = Path(path)
    return {"uri": resolved.as_uri(), "name": resolved.name or str(resolved)}


def roots_result(paths: Iterable[str]) -> dict[str, Any]:
    """The answer to ``roots/list``: the configured folders that exist now."""
    return {"roots": [root_entry(p) for p in paths if Path(p).is_absolute() and Path(p).is_dir()]}
