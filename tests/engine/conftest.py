"""Fixtures for the engine tests: a real lab process, a real keyring, an in-process Engine."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostapp.engine import api
from hostapp.protocol.timing import Timing
from hostapp.store.journal import ServerConfig
from tests.support.faults import LabProcess


@pytest.fixture
def engine_timing(monkeypatch: pytest.MonkeyPatch):
    """``engine_timing(commit_every=3600.0)``: every Engine the test builds without a timing
    of its own waits by the environment's timing with these changes (as if the
    environment named them); returns that timing."""
    def use(**changes: float) -> Timing:
        timing = dataclasses.replace(Timing.from_environment(), **changes)
        monkeypatch.setattr(Timing, "from_environment", classmethod(lambda cls, environ=None: timing))
        return timing
    return use


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[LabProcess]:
    proc = LabProcess(tmp_path / "lab.sqlite3").start()
    yield proc
    proc.stop()


class Recorder:
    """An EngineListener that keeps everything and answers questions from a script."""

    def __init__(self) -> None:
        self.changes: dict[str, list[tuple]] = {}
        self.latest: dict[str, api.OperationView] = {}  # each operation's last view told
        self.events: list[tuple[str, str, dict]] = []
        self.servers: list[api.ServerView] = []
        self.questions: list[api.InputRequest] = []
        self.problems: list[tuple[str, str]] = []
        self.answers: list[dict[str, Any]] = []
        self.engine: Any = None

    def operation_changed(self, op: api.OperationView) -> None:
        self.changes.setdefault(op.id, []).append((op.status, op.progress, op.total, op.message))
        self.latest[op.id] = op

    def operation_event(self, op_id: str, kind: str, data: dict) -> None:
        self.events.append((op_id, kind, data))

    def server_changed(self, server: api.ServerView) -> None:
        self.servers.append(api.ServerView(**{k: getattr(server, k) for k in server.__slots__}))

    def input_requested(self, request: api.InputRequest) -> None:
        self.questions.append(request)
        answer = self.answers.pop(0) if self.answers else {"action": "decline"}
        asyncio.get_running_loop().call_soon(self.engine.answer_input, request.id, answer)

    def input_withdrawn(self, request_id: str) -> None:
        pass

    def server_removed(self, name: str) -> None:
        pass

    def problem(self, kind: str, message: str) -> None:
        self.problems.append((kind, message))

    def progress_of(self, op_id: str) -> list[float]:
        return [p for _s, p, _t, _m in self.changes.get(op_id, []) if p is not None]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def lab_server(lab: LabProcess, name: str = "lab", version: str | None = None) -> ServerConfig:
    return ServerConfig(name=name, transport="http", url=lab.url, protocol_version=version)
