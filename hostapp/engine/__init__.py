"""The engine layer: servers kept connected, operations started, carried and resumed.

Its clients (the window, the CLI) use :mod:`hostapp.engine.api` only, and get an engine
from :func:`open_engine`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hostapp.engine.api import EngineApi, EngineListener


def open_engine(home: Path | None = None, listener: EngineListener | None = None, *,
                connect: bool = True) -> EngineApi:
    """The engine of ``home`` (``$HOSTAPP_HOME`` or the per-user data folder by default),
    telling ``listener`` what happens. Not started: a client calls ``start`` when it needs
    servers connected and operations resumed. ``connect=False`` keeps servers unconnected
    (configuration commands)."""
    from hostapp.engine.facade import LocalEngine
    from hostapp.engine.service import Engine
    from hostapp.store.paths import home_dir

    return LocalEngine(Engine(home if home is not None else home_dir(), listener, connect=connect))
