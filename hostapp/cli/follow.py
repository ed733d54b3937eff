"""Following operations on the command line: their events printed, their questions answered.

:class:`CallFollower` is the engine listener of ``hostapp call`` and ``hostapp resume``:
it prints what happens to the operations it follows through an :class:`EventPrinter`
(JSON lines with ``--json``, short lines otherwise) and answers their questions from the
scripted answers. :func:`emit_outcome` prints a followed operation's last lines and gives
the exit status it deserves; :func:`unless_stalled` lets go of an operation the engine
found stalled, so that no command waits for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TextIO, TypeVar

from hostapp.cli.exits import EXIT_ERROR, EXIT_OK, EXIT_STALLED
from hostapp.cli.progress import LiveView, PlainView, board_for
from hostapp.cli.text import echo, is_terminal, json_text, terminal_safe
from hostapp.engine.api import (
    TERMINAL,
    EngineApi,
    EngineError,
    InputRequest,
    JsonObject,
    OperationView,
    ServerView,
)
from hostapp.protocol.elicitation import (
    ElicitationContentError,
    ElicitationSchemaError,
    build_accept,
    describe_form_request,
)
from hostapp.protocol.tool_results import content_blocks, text_of


class EventPrinter:
    """Prints call events as JSON lines (``--json``) or for a person: a live progress line
    on a terminal, short lines elsewhere (:mod:`hostapp.cli.progress`). ``live=False``
    asks for the short lines on a terminal too."""

    def __init__(self, as_json: bool, stream: TextIO | None = None, operation_id: str | None = None,
                 live: bool = True):
        self.as_json = as_json
        self.stream = stream or sys.stdout
        self.operation_id = operation_id
        live = live and not as_json and is_terminal(self.stream)
        self.view = LiveView(board_for(self.stream), operation_id) if live else PlainView(self.stream)

    def emit(self, event: str, **fields: Any) -> None:
        if self.as_json:
            obj: dict[str, Any] = {"event": event}
            if self.operation_id is not None:
                obj["operation"] = self.operation_id
            obj.update(fields)
            self.stream.write(json_text(obj) + "\n")
        else:
            self.view.show(event, fields, lambda: terminal_safe(self._human(event, fields)))
        self.stream.flush()

    def known(self, op: OperationView) -> None:
        """Where ``op`` stood before it is followed again: a live line starts from there."""
        if not self.as_json:
            self.view.known(op)

    def let_go(self) -> None:
        """The command stops following (Ctrl+C): no stale progress stays on the screen."""
        if not self.as_json:
            self.view.let_go()

    def _human(self, event: str, f: dict[str, Any]) -> str:
        prefix = f"[{self.operation_id}] " if self.operation_id else ""
        if event == "progress":
            total = f.get("total")
            amount = f"{100 * f['progress'] / total:5.1f}%" if total else f"{f['progress']:g}"
            return f"{prefix}progress {amount}" + (f" {f['message']}" if f.get("message") else "")
        if event == "status":
            return f"{prefix}status: {f['status']}" + (f" ({f['message']})" if f.get("message") else "")
        if event == "elicitation":
            where = f" {f['url']}" if f.get("url") else ""
            answer = f.get("answer") or ("left open" if f.get("pending") else "none")
            return f"{prefix}the server asks ({f['mode']}): {f.get('message', '')}{where} -> {answer}"
        if event == "sampling":
            answer = f.get("answer") or ("left open" if f.get("pending") else "none")
            by = f" ({f['model']})" if f.get("model") else ""
            return f"{prefix}the server asks for a model's message: {f.get('message', '')} -> {answer}{by}"
        if event == "log":
            return f"{prefix}log [{f.get('level', 'info')}] {f.get('data')}"
        if event == "result":
            return prefix + render_result_text(f["result"])
        if event == "error":
            code = f.get("code")  # None: hostapp's own error (a connection that failed), not the server's
            return f"{prefix}error{'' if code is None else f' {code}'}: {f.get('message')}"
        return f"{prefix}{event}: {json.dumps(f, ensure_ascii=False)}"


def render_result_text(result: JsonObject) -> str:
    """A CallToolResult as plain text for a terminal (whatever shape the server gave it)."""
    lines: list[str] = []
    if not isinstance(result, dict):
        return json.dumps(result, ensure_ascii=False)
    if result.get("isError") is True:
        lines.append("the tool reported an error:")
    for block in content_blocks(result):
        kind = block.get("type")
        if kind == "text":
            lines.append(text_of(block.get("text", "")))
        elif kind in ("image", "audio"):
            data = block.get("data")
            size = len(data) * 3 // 4 if isinstance(data, str) else 0
            lines.append(f"<{kind} {text_of(block.get('mimeType', '?'))}, {size} bytes>")
        elif kind == "resource_link":
            lines.append(f"<resource link {text_of(block.get('uri'))}>")
        elif kind == "resource":
            res = block.get("resource")
            res = res if isinstance(res, dict) else {}
            lines.append(text_of(res["text"]) if "text" in res else f"<resource {text_of(res.get('uri'))}>")
        else:
            lines.append(json.dumps(block, ensure_ascii=False))
    if result.get("structuredContent") is not None and not lines:
        lines.append(json.dumps(result["structuredContent"], ensure_ascii=False, indent=2))
    return "\n".join(lines)


class CallFollower:
    """Engine listener for the CLI: prints the events of the operations it follows and
    answers their questions from the scripted answers."""

    def __init__(self, printer_for: Callable[[str | None], EventPrinter], answers: list[JsonObject],
                 unanswered: str = "decline", *, approve_sampling: bool = False):
        self.printer_for = printer_for
        self.answers = list(answers)
        #: Let the configured model answer sampling requests with no scripted reply left.
        self.approve_sampling = approve_sampling
        #: What to do with a question when no scripted answer is left: "decline" it, or
        #: "wait": leave it open (answered later by ``hostapp resume --answers`` or the window).
        self.unanswered = unanswered
        self.engine: EngineApi | None = None
        self.follow: set[str] | None = None  # None: every operation
        self._last: dict[str, tuple[float | None, float | None, str | None]] = {}
        self._answering: set[asyncio.Task[None]] = set()
        self._statuses: dict[str | None, tuple[str, str | None]] = {}  # the last status line printed, per op
        #: Per watched operation: set once the server showed a sign of working on it.
        self.heard: dict[str, asyncio.Event] = {}
        #: Per watched operation: set while the engine finds it stalled.
        self.stalled: dict[str, asyncio.Event] = {}
        self._asked: set[str] = set()  # the questions handled (one comes as an event and in a listing)

    def watch(self, op: OperationView) -> asyncio.Event:
        """Follow ``op``; the event is set on the server's first sign of life for it."""
        if self.follow is not None:
            self.follow.add(op.id)
        heard = self.heard.setdefault(op.id, asyncio.Event())
        self.stalled.setdefault(op.id, asyncio.Event())
        self._note(op)
        return heard

    def _note(self, op: OperationView) -> None:
        stalled = self.stalled.get(op.id)
        if stalled is not None:
            if op.stalled is not None and op.status not in TERMINAL:
                stalled.set()
            else:
                stalled.clear()
        # "pending" and "running" (and their messages) are the host's own doing: the request went out.
        if op.id in self.heard and (op.progress is not None or op.needs_input
                                    or op.status not in ("pending", "running")):
            self.heard[op.id].set()

    def _follows(self, op_id: str | None) -> bool:
        return op_id is not None and (self.follow is None or op_id in self.follow)

    def seen(self, op: OperationView) -> None:
        """What ``op`` showed before: only news about it is printed."""
        self._last[op.id] = (op.progress, op.total, op.message)
        self.printer_for(op.id).known(op)

    def operation_changed(self, op: OperationView) -> None:
        if not self._follows(op.id):
            return
        self._note(op)
        key = (op.progress, op.total, op.message)
        if op.progress is not None and self._last.get(op.id) != key and op.status not in TERMINAL:
            self._last[op.id] = key
            self.printer_for(op.id).emit("progress", progress=op.progress, total=op.total, message=op.message)

    def operation_event(self, op_id: str, kind: str, data: JsonObject) -> None:
        if op_id in self.heard and not (kind == "status" and data.get("to") in ("pending", "running")):
            self.heard[op_id].set()
        if kind == "status" and self._follows(op_id) and data.get("to") not in TERMINAL:
            self.status(op_id, str(data.get("to")), data.get("message"))
        elif kind == "log" and (self.follow is None or len(self.follow) == 1):
            op = next(iter(self.follow)) if self.follow else None
            self.printer_for(op).emit("log", level=data.get("level"), logger=data.get("logger"), data=data.get("data"))

    def status(self, op_id: str | None, status: str, message: str | None = None) -> None:
        """Print a status line, unless it only repeats the last one of the operation (the
        command's own "running" and the engine's, for one)."""
        last = self._statuses.get(op_id)
        if last is not None and last[0] == status and (not message or message == last[1]):
            return
        self._statuses[op_id] = (status, message or None)
        fields = {"status": status}
        if message:
            fields["message"] = message
        self.printer_for(op_id).emit("status", **fields)

    def server_changed(self, server: ServerView) -> None:
        pass

    def input_requested(self, request: InputRequest) -> None:
        if request.operation_id is not None and not self._follows(request.operation_id):
            return
        if request.id in self._asked:
            return
        self._asked.add(request.id)
        if request.operation_id in self.heard:
            self.heard[request.operation_id].set()
        if request.mode == "sampling":
            self._sampling_requested(request)
            return
        fields: dict[str, Any] = {"mode": request.mode, "message": request.message}
        if request.mode == "url":
            fields["url"] = request.params.get("url")
        if not self.answers and self.unanswered == "wait":
            self.printer_for(request.operation_id).emit("elicitation", **fields, answer=None, pending=True)
            return  # the question stays open in the journal
        answer = self.answers.pop(0) if self.answers else {"action": "decline"}
        if request.mode == "url":
            answer = {k: v for k, v in answer.items() if k != "content"}  # URL mode carries no content
        elif answer.get("action") == "accept":
            checked = self._checked(request, answer)
            if checked is None and self.unanswered == "wait":
                self.printer_for(request.operation_id).emit("elicitation", **fields, answer=None, pending=True)
                return  # the question stays open, for a better answer
            answer = checked or {"action": "decline"}
        fields["answer"] = answer.get("action")
        self.printer_for(request.operation_id).emit("elicitation", **fields)
        self._send(request, answer)

    def _send(self, request: InputRequest, answer: JsonObject) -> None:
        assert self.engine is not None
        # Listener calls return at once; the answer goes to the engine as its own request.
        self._track(asyncio.ensure_future(self.engine.answer_input(request.id, answer)))

    def _track(self, task: asyncio.Future[None]) -> None:
        self._answering.add(task)  # type: ignore[arg-type]
        task.add_done_callback(self._answered)  # type: ignore[arg-type]

    def _sampling_requested(self, request: InputRequest) -> None:
        """A sampling request: answered by the next scripted ``{"reply": ...}`` (or decline),
        else by the configured model with ``--approve-sampling``, else left open or
        declined as a question is."""
        emit = self.printer_for(request.operation_id).emit
        if self.answers and ("reply" in self.answers[0] or self.answers[0].get("action") != "accept"):
            answer = self.answers.pop(0)
            emit("sampling", message=request.message, answer="reply" if "reply" in answer else answer.get("action"))
            self._send(request, answer)
            return
        if self.approve_sampling:
            self._track(asyncio.ensure_future(self._model_answers(request)))
            return
        if self.answers:  # a form's answer, where a reply was wanted: it does not fit
            self.answers.pop(0)
            echo(f"hostapp: the answer scripted for {request.server}'s sampling request has no \"reply\"; "
                 "it is not sent", file=sys.stderr)
        if self.unanswered == "wait":
            emit("sampling", message=request.message, answer=None, pending=True)
            return
        emit("sampling", message=request.message, answer="decline")
        self._send(request, {"action": "decline"})

    async def _model_answers(self, request: InputRequest) -> None:
        assert self.engine is not None
        emit = self.printer_for(request.operation_id).emit
        try:
            draft = await self.engine.draft_reply(request.id)
        except EngineError as exc:
            echo(f"hostapp: the model did not answer {request.server}'s sampling request: {exc}", file=sys.stderr)
            if self.unanswered == "wait":
                emit("sampling", message=request.message, answer=None, pending=True)
                return
            emit("sampling", message=request.message, answer="decline")
            await self.engine.answer_input(request.id, {"action": "decline"})
            return
        emit("sampling", message=request.message, answer="model", model=draft.get("model"))
        await self.engine.answer_input(request.id, {"action": "accept", "reply": draft.get("text", ""),
                                                    "model": draft.get("model"),
                                                    "stopReason": draft.get("stopReason")})

    def _answered(self, task: asyncio.Task[None]) -> None:
        self._answering.discard(task)
        # A refusal means the question was answered already (by another client of the
        # owner, or the window) or withdrawn: the owner sent the server one answer.
        if not task.cancelled() and task.exception() is not None and not isinstance(task.exception(), EngineError):
            echo(f"hostapp: the answer was not delivered: {task.exception()}", file=sys.stderr)

    def input_withdrawn(self, request_id: str) -> None:
        pass

    def server_removed(self, name: str) -> None:
        pass

    @staticmethod
    def _checked(request: InputRequest, answer: JsonObject) -> JsonObject | None:
        """A scripted form answer checked against the form as the window checks it (and its
        values coerced the same way), or None, said on stderr, when it does not fit."""
        try:
            form = describe_form_request(request.params)
            content = answer.get("content")
            return build_accept(form.fields, content if isinstance(content, dict) else {})
        except ElicitationContentError as exc:
            problems = "; ".join(f"{name}: {message}" for name, message in exc.errors.items())
            echo(f"hostapp: the answer to {request.server}'s question does not fit its form ({problems}); "
                 "it is not sent", file=sys.stderr)
        except ElicitationSchemaError as exc:
            echo(f"hostapp: {request.server} asks with a form that cannot be filled ({exc}); "
                 "the answer is not sent", file=sys.stderr)
        return None

    def problem(self, kind: str, message: str) -> None:
        echo(f"hostapp: {message}", file=sys.stderr)


def emit_outcome(printer: EventPrinter, op: OperationView) -> int:
    """The last lines of a followed operation; the exit status it deserves. One still in
    flight was let go of because it stalled: said so, with what to do next."""
    if op.status not in TERMINAL:
        printer.emit("status", status="stalled", message=op.stalled or "the operation stalled")
        echo(f"hostapp: let go of operation {op.id}, which stalled; it goes on in the background "
             f"('hostapp follow {op.id}' follows it again, 'hostapp cancel {op.id}' ends it)",
             file=sys.stderr, flush=True)
        return EXIT_STALLED
    printer.emit("status", status=op.status)
    if op.result is not None:
        printer.emit("result", result=op.result)
        return EXIT_OK
    error = op.error or {}
    printer.emit("error", code=error.get("code"), message=error.get("message") or op.status)
    return EXIT_ERROR


T = TypeVar("T")


async def unless_stalled(engine: EngineApi, op_id: str, waiting: Awaitable[T], stalled: asyncio.Event
                         ) -> T | OperationView:
    """What ``waiting`` gives, or (``stalled`` set first: the engine found the operation
    stalled) the operation's view as it is, still in flight."""
    work = asyncio.ensure_future(waiting)
    mark = asyncio.ensure_future(stalled.wait())
    try:
        await asyncio.wait({work, mark}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        mark.cancel()
    if work.done():
        return work.result()
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await work
    view = await engine.operation(op_id)
    if view is None or view.status in TERMINAL:  # ended meanwhile: that is the outcome
        return await engine.wait_finished(op_id)
    return view


async def finished_unless_silent(engine: EngineApi, op_id: str, heard: asyncio.Event,
                                 timeout: float) -> OperationView | None:
    """The operation once it ended; None if the server showed no sign of working on it
    (``heard``) within ``timeout`` seconds. After a sign it is followed to its end."""
    finished = asyncio.ensure_future(engine.wait_finished(op_id))
    signed = asyncio.ensure_future(heard.wait())
    try:
        await asyncio.wait({finished, signed}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        signed.cancel()
    if not finished.done() and not heard.is_set():
        finished.cancel()
        return None
    return await finished
