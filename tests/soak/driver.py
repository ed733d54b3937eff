"""The chaos soak: long calls of every mechanism, in both eras, started from several
``hostapp call`` processes and from a client of the agent, while the owner of the home
and the lab servers are SIGKILLed at random and the network is cut, refused and slowed
by loopback proxies. Then the chaos stops, everything is resumed, and the journal is
held against what the servers did (:mod:`tests.soak.oracle`).

Run it with ``make soak`` (``SOAK_SECONDS``, 600 by default) or
``python -m tests.soak.driver --seconds 120``; ``tests/soak/test_soak.py`` runs it for two
minutes in the suite. Exit status 1 when a check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostapp.agent.client import RemoteEngine
from hostapp.engine import api
from tests.soak.oracle import Report, check_run
from tests.soak.world import Lab, Owner, answer_for, host_env, start_lab
from tests.support.faults import REPO_ROOT

#: Calls in flight at most (the machine is shared: each CLI process is a Python).
MAX_IN_FLIGHT = 8
#: How long the drain may take before what is left counts as stuck: the longest tool
#: (12 s) after the longest reconnection back-off (30 s), with room to spare.
DRAIN_SECONDS = 90.0


class Answerer:
    """The driver's own client of the agent: it answers every question a few seconds
    after it is asked (a ``hostapp call`` that follows the operation answers first), and
    counts what it saw."""

    def __init__(self) -> None:
        self.engine: RemoteEngine | None = None
        self.answered: set[str] = set()
        self.asked: dict[str, float] = {}
        self.seen: dict[str, tuple[str, Any]] = {}

    def operation_changed(self, op: api.OperationView) -> None:
        if op.status in api.TERMINAL:
            self.seen[op.id] = (op.status, op.result)

    def operation_event(self, op_id: str, kind: str, data: api.JsonObject) -> None: ...

    def server_changed(self, server: api.ServerView) -> None: ...

    def input_requested(self, request: api.InputRequest) -> None:
        self.asked.setdefault(request.id, time.monotonic())

    def input_withdrawn(self, request_id: str) -> None:
        self.asked.pop(request_id, None)

    def server_removed(self, name: str) -> None: ...

    def problem(self, kind: str, message: str) -> None: ...

    async def answer_open(self, delay: float) -> None:
        engine = self.engine
        if engine is None or engine.closed:
            return
        with contextlib.suppress(api.EngineError, ConnectionError, TimeoutError):
            for question in await engine.open_questions():
                first = self.asked.setdefault(question.id, time.monotonic())
                if time.monotonic() - first < delay:
                    continue
                with contextlib.suppress(api.EngineError):
                    await engine.answer_input(question.id, answer_for(question.params))
                    self.answered.add(question.id)


@dataclass
class CliCall:
    proc: asyncio.subprocess.Process
    started: float
    server: str
    tool: str
    arguments: dict[str, Any]
    lines: list[dict[str, Any]] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None

    def outcome(self) -> tuple[str, str, dict[str, Any], str, Any] | None:
        """(server, tool, arguments, status, result) if the command printed an outcome."""
        statuses = [e.get("status") for e in self.lines if e.get("event") == "status"]
        results = [e.get("result") for e in self.lines if e.get("event") == "result"]
        if not statuses or statuses[-1] not in api.TERMINAL:
            return None
        return self.server, self.tool, self.arguments, statuses[-1], results[-1] if results else None

    @property
    def settled(self) -> bool:
        """Connected and under way (it printed something), or ended, or long started."""
        return bool(self.lines) or self.proc.returncode is not None or time.monotonic() - self.started > 20


@dataclass
class Soak:
    home: Path
    env: dict[str, str]
    labs: list[Lab]
    owner: Owner
    seconds: float
    rng: random.Random
    answerer: Answerer = field(default_factory=Answerer)
    calls: list[CliCall] = field(default_factory=list)
    remote_starts: int = 0
    figures: dict[str, Any] = field(default_factory=dict)
    chaos: dict[str, int] = field(default_factory=lambda: {
        "agent_kills": 0, "lab_kills": 0, "cuts": 0, "refusals": 0, "delays": 0})
    events: list[str] = field(default_factory=list)
    #: When connections broke: (wall-clock time, the lab whose connections were cut, or
    #: None when the agent was killed and all of its connections with it).
    breaks: list[tuple[float, str | None]] = field(default_factory=list)
    agent_gone: list[tuple[float, float]] = field(default_factory=list)  # (kill, next start)
    _connecting: asyncio.Lock = field(default_factory=asyncio.Lock)
    _gate: asyncio.Lock = field(default_factory=asyncio.Lock)
    _agent_down: bool = False
    _plan_index: int = 0

    def note(self, what: str) -> None:
        """One line of the run's log (``chaos.log`` in the run folder): what happened when."""
        self.events.append(f"{time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d} {what}")

    # -- the owner and the driver's client ------------------------------------------------
    async def connect(self) -> None:
        async with self._connecting:  # the chaos and the starter may both find it gone
            old = self.answerer.engine
            if old is not None and not old.closed and old.agent.get("pid") == self.owner.owner_pid():
                return
            if old is not None:
                await old.close()
            self.answerer.engine = await self.owner.connect(self.answerer, client="soak", timeout=60)

    async def engine(self) -> RemoteEngine | None:
        engine = self.answerer.engine
        if engine is None or engine.closed:
            if self._agent_down:
                return None
            await self.connect()
            engine = self.answerer.engine
        return engine

    # -- calls ----------------------------------------------------------------------------
    def plan(self) -> tuple[Lab, str, dict[str, Any]]:
        """The next (lab, tool, arguments): every tool of both eras in turn."""
        pairs = [(lab, tool) for lab in self.labs for tool in lab.tools]
        lab, tool = pairs[self._plan_index % len(pairs)]
        self._plan_index += 1
        seconds = round(self.rng.uniform(3, 12), 1)
        args: dict[str, Any] = {"seconds": seconds, "steps": max(2, int(seconds * 2))}
        if tool in ("long_task", "long_task_ext") and self.rng.random() < 0.5:
            args["ask"] = True
        return lab, tool, args

    async def start_cli(self, lab: Lab, tool: str, args: dict[str, Any]) -> None:
        answers = self.home / "answers.json"
        if not answers.exists():
            answers.write_text(json.dumps([{"action": "accept", "content": {"proceed": True}}]))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hostapp", "call", lab.name, tool, "--json", "--args", json.dumps(args),
            "--answers", str(answers), "--timeout", "900", cwd=REPO_ROOT, env=self.env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        call = CliCall(proc, time.monotonic(), lab.name, tool, args)
        self.note(f"hostapp call {lab.name} {tool} {json.dumps(args)} (pid {proc.pid})")
        call.reader = asyncio.create_task(self._read(call))
        self.calls.append(call)

    async def _read(self, call: CliCall) -> None:
        assert call.proc.stdout is not None
        async for raw in call.proc.stdout:
            with contextlib.suppress(ValueError):
                call.lines.append(json.loads(raw))
        await call.proc.wait()

    async def start_remote(self, lab: Lab, tool: str, args: dict[str, Any]) -> None:
        engine = await self.engine()
        if engine is None:
            return
        with contextlib.suppress(api.EngineError, ConnectionError):
            op = await engine.start_call(lab.name, tool, args)
            self.remote_starts += 1
            self.note(f"client call {lab.name} {tool} {json.dumps(args)}: {op.id}")

    async def in_flight(self) -> int:
        engine = await self.engine()
        if engine is None:
            return MAX_IN_FLIGHT
        try:
            return await engine.count_operations(set(api.IN_FLIGHT))
        except (api.EngineError, ConnectionError):
            return MAX_IN_FLIGHT

    async def starter(self, until: float) -> None:
        while time.monotonic() < until:
            await asyncio.sleep(self.rng.uniform(0.8, 2.5))
            if self._agent_down or await self.in_flight() >= MAX_IN_FLIGHT:
                continue
            lab, tool, args = self.plan()
            if self.rng.random() < 0.25:
                await self.start_remote(lab, tool, args)
                continue
            async with self._gate:  # not while the owner is being killed (see kill_owner)
                if not self._agent_down:
                    await self.start_cli(lab, tool, args)

    # -- chaos ----------------------------------------------------------------------------
    async def kill_owner(self) -> None:
        # A command line that has not reached the owner yet would run an engine of its
        # own on this home if the owner vanished under it: wait until each is under way,
        # and start no new one until the owner is back.
        async with self._gate:
            while not all(c.settled for c in self.calls):
                await asyncio.sleep(0.1)
            self._agent_down = True
        try:
            pid = self.owner.owner_pid()
            killed = None
            if await asyncio.to_thread(self.owner.kill):
                killed = time.time()
                self.breaks.append((killed, None))
                self.chaos["agent_kills"] += 1
                self.note(f"SIGKILL agent {pid}")
            await asyncio.sleep(self.rng.uniform(0.3, 3.0))
            await self.owner.start()
            if killed is not None:
                self.agent_gone.append((killed, time.time()))
            self.note(f"agent {self.owner.owner_pid()} started")
        finally:
            self._agent_down = False
        await self.connect()

    async def kill_lab(self) -> None:
        lab = self.rng.choice(self.labs)
        await lab.kill()
        self.breaks.append((time.time(), lab.name))
        self.chaos["lab_kills"] += 1
        self.note(f"SIGKILL lab {lab.name}")
        await asyncio.sleep(self.rng.uniform(0.2, 4.0))
        await lab.start()
        lab.restarts += 1
        self.note(f"lab {lab.name} started")

    async def network(self, kind: str | None = None) -> None:
        lab = self.rng.choice(self.labs)
        kind = kind or self.rng.choice(["cut", "cut", "refuse", "delay"])
        if kind == "cut":
            self.note(f"network to {lab.name}: {lab.proxy.cut()} connections cut")
            self.breaks.append((time.time(), lab.name))
            self.chaos["cuts"] += 1
        elif kind == "refuse":
            seconds = self.rng.uniform(1, 8)
            lab.proxy.refuse(seconds)  # cuts what is open, too
            self.breaks.append((time.time(), lab.name))
            self.note(f"network to {lab.name}: refused for {seconds:.1f} s")
            self.chaos["refusals"] += 1
        else:
            delay, seconds = self.rng.uniform(0.05, 0.5), self.rng.uniform(2, 8)
            lab.proxy.delay(delay)
            self.note(f"network to {lab.name}: {delay:.2f} s delay for {seconds:.1f} s")
            self.chaos["delays"] += 1
            asyncio.get_running_loop().call_later(seconds, lab.proxy.delay, 0)

    async def chaos_loop(self, until: float) -> None:
        actions: list[Callable[[], Awaitable[None]]] = [self.kill_owner] * 2 + [self.kill_lab] * 2 + [self.network] * 4
        # Every kind of fault once first, in a random order, then any at random.
        first: list[Callable[[], Awaitable[None]]] = [
            self.kill_owner, self.kill_lab, lambda: self.network("cut"), lambda: self.network("refuse"),
            lambda: self.network("delay")]
        self.rng.shuffle(first)
        while time.monotonic() < until:
            await asyncio.sleep(self.rng.uniform(3, 9))
            if time.monotonic() >= until:
                break
            await (first.pop() if first else self.rng.choice(actions))()

    async def answer_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.answerer.answer_open(delay=3.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)

    # -- the run --------------------------------------------------------------------------
    async def run(self) -> Report:
        began = time.monotonic()
        await self.owner.start()
        await self.connect()
        engine = await self.engine()
        assert engine is not None
        for lab in self.labs:
            await engine.add_server(lab.config())
        for lab in self.labs:
            await engine.wait_connected(lab.name, timeout=60)

        stop_answering = asyncio.Event()
        answering = asyncio.create_task(self.answer_loop(stop_answering))
        until = time.monotonic() + self.seconds
        await asyncio.gather(self.starter(until), self.chaos_loop(until))
        chaos_end = time.monotonic()

        self.note("chaos ends: drain")
        # Drain: no more chaos; every server up and reachable, an owner running.
        for lab in self.labs:
            await lab.proxy.heal()
            if not lab.running:
                await lab.start()
        await self.owner.start()
        await self.connect()
        left = await self._drain()
        drained = time.monotonic()
        stop_answering.set()
        await answering
        await self._end_calls()
        if self.answerer.engine is not None:
            await self.answerer.engine.close()
        await asyncio.to_thread(self.owner.stop)
        for lab in self.labs:
            await lab.proxy.close()
            await asyncio.to_thread(lab.process.stop)

        report = check_run(self.home, self.labs, [o for c in self.calls if (o := c.outcome())],
                           self.answerer.seen, self.breaks, self.agent_gone)
        report.notes.extend(left)
        report.figures.update({
            "seconds of chaos": round(chaos_end - began, 1), "seconds of drain": round(drained - chaos_end, 1),
            "cli calls": len(self.calls), "client calls": self.remote_starts,
            "questions answered by the soak's client": len(self.answerer.answered),
            **{k.replace("_", " "): v for k, v in self.chaos.items()},
            "connections cut": sum(lab.proxy.cuts for lab in self.labs),
        })
        return report

    async def _drain(self) -> list[str]:
        deadline = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < deadline:
            engine = await self.engine()
            if engine is not None:
                with contextlib.suppress(api.EngineError, ConnectionError):
                    if await engine.count_operations(set(api.IN_FLIGHT)) == 0:
                        return []
            await asyncio.sleep(1.0)
        engine = await self.engine()
        if engine is None:
            return ["no owner answered at the end of the drain"]
        return [f"{op.id} {op.server}/{op.tool} still {op.status} after a {DRAIN_SECONDS:.0f} s drain"
                for op in await engine.unfinished_operations()]

    async def _end_calls(self) -> None:
        for call in self.calls:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(call.proc.wait(), 15)
            if call.proc.returncode is None:
                call.proc.kill()
                await call.proc.wait()
            if call.reader is not None:
                await call.reader


async def soak(seconds: float, work: Path, keyring_env: dict[str, str], seed: int) -> Report:
    home = work / "home"
    home.mkdir(parents=True)
    env = host_env(home, keyring_env)
    labs = [await start_lab("hs", work, handshake=True), await start_lab("sl", work, handshake=False)]
    owner = Owner(home, env)
    run = Soak(home, env, labs, owner, seconds, random.Random(seed))
    try:
        report = await run.run()
    finally:
        (work / "chaos.log").write_text("\n".join(run.events) + "\n")
        await asyncio.to_thread(owner.stop)
        for lab in labs:
            await lab.proxy.close()
            await asyncio.to_thread(lab.process.stop)
    report.figures["seed"] = seed
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak.driver", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="how long the chaos lasts (default 600)")
    parser.add_argument("--seed", type=int, default=None, help="the random seed (default: from the clock)")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder (home, journal, lab states)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.time())

    from tests.support.keyring_daemon import missing_programs, start_keyring_daemon

    missing = missing_programs()
    if missing:
        print(f"the soak needs {', '.join(missing)} for a private keyring", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="hostapp-soak-"))
    daemon = start_keyring_daemon(work / "keyring")
    try:
        report = asyncio.run(soak(args.seconds, work, dict(daemon.env), seed))
    finally:
        daemon.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(report.render())
    if args.keep:
        print(f"run folder: {work}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
