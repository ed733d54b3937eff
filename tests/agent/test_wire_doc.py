"""docs/agent-wire.md is the wire's contract: it is held to the code. Every method it names
is served and every method served is in it (with its arguments), and likewise the events,
the error codes, the limits, ``hello``'s answer and the version."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from pathlib import Path

from hostapp.agent import wire
from hostapp.agent.endpoint import Limits
from tests.agent.test_wire_contract import serving

DOC = Path(__file__).resolve().parents[2] / "docs" / "agent-wire.md"


def _sections() -> dict[str, dict[str, str]]:
    """``## chapter`` -> ``### `name` `` -> its text (the chapter's own text under "")."""
    chapters: dict[str, dict[str, str]] = {}
    chapter, name = "", ""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            chapter, name = line[3:].strip(), ""
            chapters.setdefault(chapter, {"": ""})
            continue
        heading = re.fullmatch(r"### `([^`]+)`", line)
        if heading:
            name = heading.group(1)
            chapters[chapter][name] = ""
            continue
        if line.startswith("### "):
            name = ""  # a section that names no method or event
        chapters.setdefault(chapter, {"": ""})
        chapters[chapter][name] = chapters[chapter].get(name, "") + line + "\n"
    return chapters


def _table(text: str) -> list[list[str]]:
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("|")]
    return rows[2:]  # past the header and its rule


def test_every_method_in_the_document_is_served_and_every_served_method_is_in_it():
    documented = {name for name in _sections()["Methods"] if name}
    served = set(wire.FACADE) | set(wire.CONTROL)
    assert documented - served == set(), "documented but not served"
    assert served - documented == set(), "served but not documented"


def test_each_method_says_its_arguments_and_its_result():
    methods = _sections()["Methods"]
    for name, method in wire.FACADE.items():
        text = methods[name]
        arguments = re.search(r"^- arguments: (.*)$", text, re.M)
        assert arguments is not None and re.search(r"^- result: ", text, re.M), name
        assert set(re.findall(r"`(\w+)` \(", arguments.group(1))) == set(method.parameters), name
    for name in wire.CONTROL:
        assert re.search(r"^- result: ", methods[name], re.M), name


def test_the_events_are_those_the_agent_sends():
    assert {name for name in _sections()["Events"] if name} == set(wire.EVENT_KINDS)


def test_the_error_table_is_the_codes():
    rows = _table(_sections()["Errors"][""])
    assert {row[1].strip("`"): int(row[0]) for row in rows} == {code.name: int(code) for code in wire.Code}


def test_the_limits_are_the_endpoints():
    rows = {row[0].strip("`"): row[1] for row in _table(_sections()["Limits"][""])}
    units = {"MiB": 1024 * 1024}
    defaults = {}
    for name, text in rows.items():
        number, *unit = text.split()
        defaults[name] = float(number) * (units[unit[0]] if unit else 1)
    assert defaults == {f.name: float(getattr(Limits(), f.name)) for f in dataclasses.fields(Limits)}


def test_the_version_history_reaches_this_version():
    versions = [int(row[0]) for row in _table(_sections()["Version history"][""])]
    assert versions == list(range(1, wire.VERSION + 1))
    assert f"(minimum {wire.MIN_VERSION})" in _sections()["Version history"][""]


async def test_hellos_answer_is_the_documented_one(isolated_home: Path):
    hello = _sections()["`hello`"][""]
    documented = set()
    for row in _table(hello.split("Result:")[1]):
        documented |= set(re.findall(r"`(\w+)`", row[0]))
    params = {name for row in _table(hello.split("Result:")[0]) for name in re.findall(r"`(\w+)`", row[0])}
    async with serving(isolated_home) as endpoint:
        endpoint.info = {"pid": 1, "since": 0.0, "autostart": False}  # what the owner adds
        reader, writer = await asyncio.open_unix_connection(str(endpoint.path))
        writer.write(wire.dumps({"jsonrpc": "2.0", "id": 1, "method": "hello", "params": {
            "version": wire.VERSION, "min_version": wire.CLIENT_MIN_VERSION, "client": "test", "pid": 1,
            "since": {"stream": "x", "seq": 0}}}))
        answer = json.loads(await reader.readline())
        writer.close()
    assert set(answer["result"]) == documented
    assert {"version", "min_version", "client", "pid", "key", "since"} == params


def test_the_operation_view_table_is_its_fields():
    from hostapp.engine.api import OperationView

    rows = _table(_sections()["Views"][""])
    documented = {name.strip().strip("`") for row in rows for name in row[0].split(",")}
    assert documented == {f.name for f in dataclasses.fields(OperationView)} | {"resumable"}


def test_an_operation_view_says_whether_it_survives_a_stop_to_clients_old_and_new():
    from hostapp.engine.api import OperationStatus, OperationView

    lost = OperationView("op-1", "lab", "t", "tools/call", {}, OperationStatus.RUNNING, mechanism="direct",
                         lost_at_stop="a plain request: nothing can resume it")
    kept = dataclasses.replace(lost, mechanism="tasks_extension", lost_at_stop=None)
    for view in (lost, kept):
        data = json.loads(json.dumps(wire.encode(view)))
        assert data["resumable"] is view.survives_stop  # what a client before the field reads
        assert wire.operation_view(data) == view
    # From an agent before the field: its "resumable" says it.
    older = {k: v for k, v in wire.encode(lost).items() if k != "lost_at_stop"}
    assert wire.operation_view(older).lost_at_stop == wire.OLDER_AGENT_LOST
    assert wire.operation_view({**older, "resumable": True}).lost_at_stop is None
    ended = {**older, "status": OperationStatus.COMPLETED}
    assert wire.operation_view(ended).lost_at_stop is None
