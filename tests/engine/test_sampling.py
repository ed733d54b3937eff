"""Sampling end to end in-process: the lab's ``ask_model`` asks the engine for a message
mid-call (sampling/createMessage in the handshake era, an input request of a multi
round-trip call in the stateless era); the person writes the reply or lets the model
endpoint (a real HTTP process on loopback) draft it; a server set to "auto" is answered by
the model unasked; the key goes out as a bearer token only; the bounds refuse clearly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostapp.engine import api
from hostapp.engine.sampling import read_settings, write_settings
from hostapp.engine.service import Engine
from hostapp.protocol.sampling import Limits
from tests.engine.conftest import Recorder, lab_server
from tests.support.model_endpoint import ModelEndpoint

pytestmark = pytest.mark.timeout(120)

API_KEY = "sk-test-7c1f0e9a3b5d4e2f8a6b"


@pytest.fixture
def model(tmp_path: Path) -> Iterator[ModelEndpoint]:
    endpoint = ModelEndpoint(tmp_path / "model-requests.jsonl", key=API_KEY).start()
    yield endpoint
    endpoint.stop()


async def run_engine(home: Path, recorder: Recorder) -> Engine:
    engine = Engine(home, recorder)
    recorder.engine = engine
    await engine.start()
    return engine


async def call(engine: Engine, tool: str, args: dict) -> api.OperationView:
    op = await engine.start_call("lab", tool, args)
    return await asyncio.wait_for(engine.wait_finished(op.id), 60)


def _files_hold(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.mark.parametrize("version", ["2025-11-25", None], ids=["handshake", "stateless"])
async def test_the_persons_reply_goes_back_to_the_server(isolated_home, lab, recorder, real_keyring, version):
    recorder.answers = [{"action": "accept", "reply": "Hello from the person"}]
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(lab_server(lab, version=version))
        await engine.connected("lab")
        final = await call(engine, "ask_model", {"prompt": "Greet the lab"})
    finally:
        await engine.stop()
    assert final.status == api.COMPLETED, final.error
    assert final.result["structuredContent"] == {"sampled": True, "text": "Hello from the person",
                                                 "model": "written-by-person"}
    [asked] = recorder.questions
    assert asked.mode == "sampling" and asked.message == "Greet the lab" and asked.operation_id == final.id
    kinds = [e["kind"] for e in await _events(isolated_home, final.id)]
    assert "input_requested" in kinds and "input_answered" in kinds


async def _events(home: Path, op_id: str) -> list[dict]:
    from hostapp.store.journal import OperationJournal

    with OperationJournal(home / "journal.sqlite3") as journal:
        return [{"kind": e.kind, "data": e.data} for e in journal.events(op_id)]


async def test_a_declined_request_is_the_error_the_specification_names(isolated_home, lab, recorder, real_keyring):
    recorder.answers = [{"action": "decline"}]
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(lab_server(lab, version="2025-11-25"))
        await engine.connected("lab")
        final = await call(engine, "ask_model", {})
    finally:
        await engine.stop()
    # The lab reports the client's refusal in its result: error -1, "declined".
    assert final.result["structuredContent"]["sampled"] is False
    assert "declined" in final.result["structuredContent"]["error"]


async def test_declined_as_an_input_request_the_call_ends_cancelled(isolated_home, lab, recorder, real_keyring):
    """2026-07-28: an input response cannot carry a refusal, so declining ends the call."""
    recorder.answers = [{"action": "decline"}]
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(lab_server(lab))
        await engine.connected("lab")
        final = await call(engine, "ask_model", {})
    finally:
        await engine.stop()
    assert final.status == api.CANCELLED and final.result is None, (final.result, final.error)
    assert len(recorder.questions) == 1


async def test_the_model_drafts_and_the_person_sends_it(isolated_home, lab, recorder, real_keyring, model):
    engine = await run_engine(isolated_home, recorder)
    recorder.answers = []  # answered below, after the model's draft
    drafted: list[dict] = []

    def review(request: api.InputRequest) -> None:
        recorder.questions.append(request)

        async def draft_then_send() -> None:
            draft = await engine.draft_reply(request.id)
            drafted.append(draft)
            engine.answer_input(request.id, {"action": "accept", "reply": draft["text"] + " (reviewed)",
                                             "model": draft["model"]})
        asyncio.get_running_loop().create_task(draft_then_send())

    recorder.input_requested = review  # type: ignore[method-assign]
    try:
        await engine.sampling.configure(model.base_url, ["big-model", "small-model"], API_KEY)
        await engine.add_server(lab_server(lab, version="2025-11-25"))
        await engine.connected("lab")
        final = await call(engine, "ask_model", {"prompt": "Name a colour", "max_tokens": 100000})
    finally:
        await engine.stop()
    assert final.status == api.COMPLETED, final.error
    # The lab's hint "small" chose the configured model whose name holds it.
    assert final.result["structuredContent"] == {"sampled": True, "model": "small-model",
                                                 "text": "model reply to: Name a colour (reviewed)"}
    [sent] = model.requests()
    assert sent["authorization"] == f"Bearer {API_KEY}"
    assert sent["body"]["model"] == "small-model"
    assert sent["body"]["max_tokens"] == Limits().max_tokens  # the server's 100000 is capped
    assert sent["body"]["messages"][0]["role"] == "system"
    assert not _files_hold(isolated_home, API_KEY)  # the key is in the keyring alone


async def test_a_server_set_to_auto_is_answered_by_the_model_unasked(isolated_home, lab, recorder,
                                                                     real_keyring, model):
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.sampling.configure(model.base_url, ["m1"], API_KEY)
        await engine.add_server(lab_server(lab))  # the newest revision: an input request of a call
        engine.sampling.set_policy("lab", "auto")
        await engine.connected("lab")
        final = await call(engine, "ask_model", {"prompt": "Say hi"})
    finally:
        await engine.stop()
    assert final.result["structuredContent"]["text"] == "model reply to: Say hi", final
    assert recorder.questions == []  # nobody was asked
    assert [e["data"] for e in await _events(isolated_home, final.id) if e["kind"] == "sampling_answered"] == [
        {"by": "model", "model": "m1"}]
    assert len(model.requests()) == 1


async def test_a_wrong_key_is_said_without_the_key(isolated_home, lab, recorder, real_keyring, model):
    """The endpoint refuses the key: the draft fails with its words, and the key is
    nowhere in the error, the journal or the home."""
    wrong = "sk-wrong-0f3b2a1c9d8e7f6a"
    engine = await run_engine(isolated_home, recorder)
    errors: list[str] = []

    def review(request: api.InputRequest) -> None:
        async def draft() -> None:
            try:
                await engine.draft_reply(request.id)
            except api.EngineError as exc:
                errors.append(str(exc))
            engine.answer_input(request.id, {"action": "decline"})
        asyncio.get_running_loop().create_task(draft())

    recorder.input_requested = review  # type: ignore[method-assign]
    try:
        await engine.sampling.configure(model.base_url, ["m1"], wrong)
        assert (await engine.sampling.view())["api_key"] is True
        await engine.add_server(lab_server(lab, version="2025-11-25"))
        await engine.connected("lab")
        await call(engine, "ask_model", {})
    finally:
        await engine.stop()
    [error] = errors
    assert "HTTP 401" in error and "Incorrect API key" in error and wrong not in error
    assert not _files_hold(isolated_home, wrong)


async def test_too_many_requests_a_minute_are_refused(isolated_home, lab, recorder, real_keyring):
    write_settings(isolated_home, read_settings(isolated_home).__class__(limits=Limits(per_minute=1)))
    recorder.answers = [{"action": "accept", "reply": "one"}, {"action": "accept", "reply": "two"}]
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(lab_server(lab, version="2025-11-25"))
        await engine.connected("lab")
        first = await call(engine, "ask_model", {})
        second = await call(engine, "ask_model", {})
    finally:
        await engine.stop()
    assert first.result["structuredContent"]["text"] == "one"
    assert second.result["structuredContent"]["sampled"] is False
    assert "more than 1 times in a minute" in second.result["structuredContent"]["error"]
    assert len(recorder.questions) == 1  # the refused one was never shown
    refused = [e["data"] for e in await _events(isolated_home, second.id) if e["kind"] == "input_refused"]
    assert refused and "in a minute" in refused[0]["reason"]


async def test_a_request_too_large_is_refused_before_anyone_sees_it(isolated_home, lab, recorder, real_keyring):
    write_settings(isolated_home, read_settings(isolated_home).__class__(limits=Limits(max_chars=50)))
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(lab_server(lab, version="2025-11-25"))
        await engine.connected("lab")
        final = await call(engine, "ask_model", {"prompt": "x" * 200})
    finally:
        await engine.stop()
    assert recorder.questions == []
    assert "at most 50" in final.result["structuredContent"]["error"]


async def test_model_settings_refuse_what_cannot_work(isolated_home, recorder, real_keyring):
    engine = await run_engine(isolated_home, recorder)
    try:
        with pytest.raises(api.InvalidRequest, match="http or https"):
            await engine.sampling.configure("ftp://models.example", ["m"], None)
        with pytest.raises(api.InvalidRequest, match="user name"):
            await engine.sampling.configure("https://me:pw@models.example/v1", ["m"], None)
        with pytest.raises(api.InvalidRequest, match="at least one model"):
            await engine.sampling.configure("https://models.example/v1", [" "], None)
        view = await engine.sampling.configure("http://127.0.0.1:9/v1/", ["m"], "sk-x-123456")
        assert view["base_url"] == "http://127.0.0.1:9/v1" and view["api_key"] is True
        assert json.loads((isolated_home / "model.json").read_text())["models"] == ["m"]
        await engine.sampling.clear()
        assert (await engine.sampling.view())["api_key"] is False
        assert not (isolated_home / "model.json").exists()
    finally:
        await engine.stop()
