"""``python -m bench.compare REF`` (``make bench-compare REF=<commit>``): this tree against
another commit, the intake and window-model cases of both run interleaved on one machine.

On a shared or throttled machine a figure measured now and one measured an hour ago say
little about the change between them; two commits measured in alternation, in the same
minutes, against the same server, do. REF is checked out in a git worktree under a
temporary folder; it runs on this tree's virtual environment when both ask for the same
dependencies (``pyproject.toml``'s), else on a venv of its own built there; this tree's
``bench`` scripts are copied over REF's, so that one instrument measures both. Each round
measures the floor once, then both commits (in alternating order, so that neither always
goes first); the figure that counts is each round's ratio of this tree to REF, and their
median.

Cases (each the same command on both commits, each tree's own code):

intake   the engine in process (``bench.intake_client hostapp http N``), in notifications/s;
agent    the same flood through the background agent, to its client's last view
         (``bench.agent_probe intake http N``);
cli      whole processes: ``hostapp call bench flood --json > /dev/null`` on N notifications
         through an agent already running, less the same command on 0 notifications (the
         commands' start-up and the call's round trip), as N / seconds;
rows     the window's operations model alone (``bench.window_probe rows``): 10,000 calls
         starting 500 at a time while those started move, then each moving once, in
         operations told per second of the model's time (no floor: only the ratio of the
         two commits says something).
lag      the real window (offscreen) as the agent's client with 10,000 calls in flight, each
         stepping once a second (``bench.agent_probe load``): its event loop's lag, 99th
         percentile, in ms (lower is better; no floor).

Prints one table (and ``--json`` writes the rounds); the exit status is 0 whatever the
figures say: the numbers are for a person (or a commit message) to read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bench.__main__ as bench_main

REPO = Path(__file__).resolve().parents[1]
CASES = ("intake", "agent", "cli", "rows", "lag")
#: Cases not measured against the floor (not an intake).
FLOORLESS = ("rows", "lag")
#: Each case's unit, where it is not per second; the lag is better lower.
UNITS = {"lag": " ms"}
#: The rows case: calls started, and how many at a time.
ROWS_OPERATIONS, ROWS_BULK = 10_000, 500
#: The lag case: calls in flight, seconds between each one's steps, calls started at a time,
#: seconds measured once all are in flight.
LAG_OPERATIONS, LAG_INTERVAL, LAG_BULK, LAG_SECONDS = 10_000, 1.0, 500, 10.0


@dataclass
class Tree:
    """One commit's checkout and the interpreter that runs it."""

    label: str
    root: Path
    python: str
    homes: list[Path] = field(default_factory=list)
    #: Seconds of ``hostapp call`` on 0 notifications, per round of the cli case.
    call_seconds: list[float] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        # The tree first on the path: an editable install of the other tree must not win.
        return {**os.environ, "PYTHONPATH": str(self.root), **extra}

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = 900) -> str:
        proc = subprocess.run([self.python, *args], cwd=self.root, env=env or self.env(), capture_output=True,
                              text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{self.label}: {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
        return proc.stdout

    def has(self, path: str) -> bool:
        return (self.root / path).exists()


def _dependencies(pyproject: Path) -> Any:
    project = tomllib.loads(pyproject.read_text()).get("project", {})
    return project.get("dependencies"), project.get("optional-dependencies")


@contextmanager
def checkout(ref: str, scratch: Path) -> Iterator[Tree]:
    """REF in a worktree of its own (removed afterwards), with an interpreter for it."""
    root = scratch / "ref"
    subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(root), ref], cwd=REPO, check=True)
    try:
        # One instrument for both: this tree's benchmark scripts measure REF's code.
        shutil.copytree(REPO / "bench", root / "bench", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("results", "__pycache__"))
        python = sys.executable
        if _dependencies(root / "pyproject.toml") != _dependencies(REPO / "pyproject.toml"):
            print(f"{ref} asks for other dependencies: building a venv for it ...", file=sys.stderr, flush=True)
            venv = scratch / "venv"
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            python = str(venv / "bin" / "python")
            subprocess.run([python, "-m", "pip", "install", "-q", "-e", f"{root}[test]"], check=True)
        yield Tree(ref, root, python)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(root)], cwd=REPO, check=False)


def progress_server(tree: Tree) -> AbstractContextManager[str]:
    """One HTTP progress server for both commits (this tree's): the server is not measured."""
    return bench_main.progress_server(tree.python, tree.root, tree.env())


# -- the cases: each returns notifications per second ----------------------------------------

def floor(tree: Tree, url: str, count: int) -> float:
    result = bench_main.last_json(tree.run("-m", "bench.intake_client", "floor", "http", str(count), "--url", url))
    return float(result["per_second"])


def intake(tree: Tree, url: str, count: int) -> float:
    result = bench_main.last_json(tree.run("-m", "bench.intake_client", "hostapp", "http", str(count), "--url", url))
    if result["received"] != count:
        raise RuntimeError(f"{tree.label}: the engine received {result['received']} of {count}")
    return float(result["per_second"])


def agent(tree: Tree, url: str, count: int) -> float:
    result = bench_main.last_json(tree.run("-m", "bench.agent_probe", "intake", "http", str(count), "--url", url))
    if result["received"] != count:
        raise RuntimeError(f"{tree.label}: the agent's client saw {result['received']} of {count}")
    return float(result["per_second"])


def _cli_home(tree: Tree, url: str, scratch: Path) -> Path:
    """A home of this tree with the progress server configured and its agent running."""
    if tree.homes:
        return tree.homes[0]
    home = Path(tempfile.mkdtemp(prefix=f"home-{len(os.listdir(scratch))}-", dir=scratch))
    tree.run("-m", "hostapp", "servers", "add", "bench", "--url", url, env=tree.env(HOSTAPP_HOME=str(home)))
    tree.homes.append(home)
    return home


def _timed_call(tree: Tree, home: Path, count: int) -> float:
    started = time.perf_counter()
    with open(os.devnull, "w") as sink:
        subprocess.run([tree.python, "-m", "hostapp", "call", "bench", "flood", "--args", json.dumps({"count": count}),
                        "--json"], cwd=tree.root, env=tree.env(HOSTAPP_HOME=str(home)), stdout=sink,
                       stderr=subprocess.PIPE, check=True, timeout=900)
    return time.perf_counter() - started


def cli(tree: Tree, url: str, count: int, scratch: Path) -> float:
    home = _cli_home(tree, url, scratch)
    _timed_call(tree, home, 0)  # the agent started (on demand) and the server connected
    empty = min(_timed_call(tree, home, 0) for _ in range(2))
    tree.call_seconds.append(empty)
    full = _timed_call(tree, home, count)
    return count / max(full - empty, 1e-9)


def rows(tree: Tree) -> float:
    result = bench_main.last_json(tree.run("-m", "bench.window_probe", "rows", "--operations", str(ROWS_OPERATIONS),
                                           "--bulk", str(ROWS_BULK)))
    return 2 * ROWS_OPERATIONS / (result["start_total_s"] + result["progress_total_s"])


def lag(tree: Tree, operations: int = LAG_OPERATIONS, seconds: float = LAG_SECONDS) -> float:
    result = bench_main.last_json(tree.run(
        "-m", "bench.agent_probe", "load", "--operations", str(operations), "--interval", str(LAG_INTERVAL),
        "--bulk", str(min(LAG_BULK, operations)), "--seconds", str(seconds)))
    if result["in_flight"] != operations:
        raise RuntimeError(f"{tree.label}: {result['in_flight']} of {operations} calls were in flight")
    return float(result["lag_p99_ms"])


def stop_agents(tree: Tree) -> None:
    for home in tree.homes:
        subprocess.run([tree.python, "-m", "hostapp", "agent", "stop"], cwd=tree.root,
                       env=tree.env(HOSTAPP_HOME=str(home)), capture_output=True, timeout=60, check=False)


# -- rounds ------------------------------------------------------------------------------------

def compare(head: Tree, ref: Tree, cases: list[str], count: int, rounds: int, scratch: Path,
            lag_operations: int = LAG_OPERATIONS, lag_seconds: float = LAG_SECONDS) -> dict[str, Any]:
    runners: dict[str, Callable[[Tree, str], float]] = {
        "intake": lambda t, u: intake(t, u, count),
        "agent": lambda t, u: agent(t, u, count),
        "cli": lambda t, u: cli(t, u, count, scratch),
        "rows": lambda t, u: rows(t),
        "lag": lambda t, u: lag(t, lag_operations, lag_seconds),
    }
    needs = {"intake": "bench/intake_client.py", "agent": "bench/agent_probe.py", "cli": "hostapp/cli",
             "rows": "hostapp/ui/operations_model.py", "lag": "hostapp/agent"}
    cases = [c for c in cases if all(t.has(needs[c]) for t in (head, ref))]
    measured: dict[str, list[dict[str, float]]] = {case: [] for case in cases}
    with progress_server(head) as url:
        for i in range(rounds):
            base = floor(head, url, count)
            order = (head, ref) if i % 2 == 0 else (ref, head)
            for case in cases:
                values = {t.label: runners[case](t, url) for t in order}
                measured[case].append({"floor": base, "head": values[head.label], "ref": values[ref.label]})
                unit = UNITS.get(case, "/s")
                print(f"round {i + 1}/{rounds} {case}: floor {base:,.0f}/s, {ref.label} "
                      f"{values[ref.label]:,.1f}{unit}, this tree {values[head.label]:,.1f}{unit}", file=sys.stderr,
                      flush=True)
    return measured


def report(measured: dict[str, list[dict[str, float]]], head: Tree, ref: Tree) -> str:
    lines = [f"| case | {ref.label} vs floor | this tree vs floor | this tree / {ref.label} (median of rounds) "
             "| rounds |",
             "|---|---:|---:|---:|---|"]
    for case, rounds in measured.items():
        if not rounds:
            continue
        # (a lag of 0 ms against 0 ms is no change; a rate is never 0)
        change = [r["head"] / r["ref"] if r["ref"] else (1.0 if not r["head"] else float("inf")) for r in rounds]
        if case in FLOORLESS:
            unit = UNITS.get(case)
            values = (f"{statistics.median(r['ref'] for r in rounds):.1f}{unit}",
                      f"{statistics.median(r['head'] for r in rounds):.1f}{unit}") if unit else ("", "")
            lines.append(f"| {case} | {values[0]} | {values[1]} | {statistics.median(change):.2f} x "
                         f"({min(change):.2f}-{max(change):.2f}) | {len(rounds)} |")
            continue
        ref_ratio = statistics.median(r["ref"] / r["floor"] for r in rounds)
        head_ratio = statistics.median(r["head"] / r["floor"] for r in rounds)
        lines.append(f"| {case} | {ref_ratio:.3f} x | {head_ratio:.3f} x | {statistics.median(change):.2f} x "
                     f"({min(change):.2f}-{max(change):.2f}) | {len(rounds)} |")
    if measured.get("lag"):
        lines.append("\nlag: the window's event-loop lag, 99th percentile, each commit's median in its columns; "
                     "lower is better (a ratio below 1 is this tree's gain)")
    if head.call_seconds and ref.call_seconds:
        before, after = statistics.median(ref.call_seconds), statistics.median(head.call_seconds)
        lines.append(f"\n`hostapp call` on 0 notifications, whole process, agent running (median of rounds): "
                     f"{ref.label} {before:.3f} s, this tree {after:.3f} s ({after / before:.2f} x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.splitlines()[0])
    parser.add_argument("ref", help="the commit to compare this tree with")
    parser.add_argument("--case", action="append", choices=CASES, help="only this case (repeatable)")
    parser.add_argument("--count", type=int, default=200_000, help="notifications per flood (default 200,000)")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two commits (default 3)")
    parser.add_argument("--json", type=Path, help="also write every round's figures here")
    parser.add_argument("--lag-operations", type=int, default=LAG_OPERATIONS,
                        help=f"lag: calls in flight (default {LAG_OPERATIONS:,})")
    parser.add_argument("--lag-seconds", type=float, default=LAG_SECONDS,
                        help=f"lag: seconds measured once all are in flight (default {LAG_SECONDS:g})")
    args = parser.parse_args(argv)
    if shutil.which("git") is None:
        parser.error("needs git")
    head = Tree("HEAD", REPO, sys.executable)
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as scratch, checkout(args.ref, Path(scratch)) as ref:
        try:
            measured = compare(head, ref, args.case or list(CASES), args.count, args.rounds, Path(scratch),
                               args.lag_operations, args.lag_seconds)
        finally:
            stop_agents(head)
            stop_agents(ref)
    print(f"{args.count:,} progress notifications per flood, {args.rounds} rounds interleaved; this tree is "
          f"{REPO} (its uncommitted changes included)\n")
    print(report(measured, head, ref))
    if args.json:
        args.json.write_text(json.dumps({"ref": args.ref, "count": args.count, "rounds": measured,
                                         "call_seconds": {"head": head.call_seconds, "ref": ref.call_seconds}},
                                        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
