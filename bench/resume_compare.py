"""``python -m bench.resume_compare REF --count N``: resume at start-up, this tree against
another commit, on one prepared home, in alternation.

Preparing 10,000 unfinished operations takes minutes and a restart changes little of what
the next one finds (the same calls still run on the lab), so both commits restart the same
home, one after the other, ``--rounds`` times each, in alternating order: through the agent
(``bench.agent_probe resume``: its start to news from the server at its client for every
operation but the asynchronous tools', which no client can see re-attached before they end)
and, with ``--list``, the window as the agent's client (``bench.agent_probe list``: its start
to every row listed). Each figure is printed with the load average of the moment: the machine
may be shared. ``--floor`` adds, after each round, ``bench.resume_floor`` on the same home:
the same first requests sent by a bare client, the least the server and this machine allow.
``--profile DIR`` runs each agent under cProfile and writes its statistics
there (one file per run; the figures of those runs are slower by the profiler's cost).

REF is checked out as :mod:`bench.compare` does (this tree's ``bench`` scripts over it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench.__main__ as bench_main
from bench.compare import Tree, checkout

REPO = Path(__file__).resolve().parents[1]


def _load() -> float:
    return os.getloadavg()[0]


def _probe(tree: Tree, mode: str, home: Path, env: dict[str, str], timeout: float) -> dict[str, Any]:
    args = ["-m", "bench.agent_probe", mode, "--home", str(home), "--timeout", str(timeout)]
    if mode == "resume":
        args += ["--t0", repr(time.time())]
    return _timed(tree, args, env)


def _timed(tree: Tree, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """The JSON a ``tree.run`` of ``args`` printed last, with the load average before and after."""
    load = _load()
    result = bench_main.last_json(tree.run(*args, env={**tree.env(), **env}, timeout=1800))
    return {**result, "load_before": round(load, 2), "load_after": round(_load(), 2)}


def main(argv: list[str] | None = None) -> int:
    from tests.support.faults import LabProcess
    from tests.support.keyring_daemon import missing_programs, start_keyring_daemon

    parser = argparse.ArgumentParser(prog="python -m bench.resume_compare", description=__doc__.splitlines()[0])
    parser.add_argument("ref", nargs="?", help="the commit to compare this tree with (none: this tree alone)")
    parser.add_argument("--count", type=int, default=1000, help="unfinished operations (default 1,000)")
    parser.add_argument("--rounds", type=int, default=2, help="restarts per commit (default 2)")
    parser.add_argument("--list", action="store_true", help="also the window's list after each restart")
    parser.add_argument("--floor", action="store_true",
                        help="also the bare client's floor (bench.resume_floor) after each round")
    parser.add_argument("--profile", type=Path, help="cProfile each agent, statistics written here")
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    args = parser.parse_args(argv)
    if missing_programs():
        parser.error(f"needs {', '.join(missing_programs())} for a keyring")
    head = Tree("HEAD", REPO, sys.executable)
    runs: list[dict[str, Any]] = []
    timeout = 5 + args.count / 50
    with tempfile.TemporaryDirectory(prefix="bench-resume-compare-") as scratch:
        base = Path(scratch)
        keyring = start_keyring_daemon(base / "keyring")
        try:
            lab = LabProcess(base / "lab.sqlite3").start()
            try:
                home = base / "home"
                home.mkdir()
                started = time.perf_counter()
                prepared = bench_main.last_json(head.run(
                    "-m", "bench.resume_probe", "prepare", "--home", str(home), "--url", lab.url,
                    "--count", str(args.count), env={**head.env(), **keyring.env}, timeout=3600))
                print(f"prepared {prepared['prepared']:,} ({prepared['mechanisms']}) in "
                      f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
                assert lab.proc is not None  # started
                runs += _rounds(args, head, base, home, keyring.env, timeout, lab.proc.pid)
            finally:
                lab.stop()
        finally:
            keyring.stop()
    print(report(runs))
    if args.json:
        args.json.write_text(json.dumps({"ref": args.ref, "count": args.count, "runs": runs}, indent=2))
    return 0


def _rounds(args: argparse.Namespace, head: Tree, base: Path, home: Path, env: dict[str, str],
            timeout: float, lab_pid: int) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []

    def measure(trees: list[Tree]) -> None:
        for i in range(args.rounds):
            for tree in trees if i % 2 == 0 else trees[::-1]:
                extra = dict(env)
                if args.profile:
                    args.profile.mkdir(parents=True, exist_ok=True)
                    extra["BENCH_AGENT_PROFILE"] = str(args.profile / f"{tree.label}-{i + 1}.prof")
                modes = ["resume", "list"] if args.list else ["resume"]
                for mode in modes:
                    result = _probe(tree, mode, home, extra, timeout)
                    runs.append({**result, "tree": tree.label, "round": i + 1, "mode": mode})
                    print(f"round {i + 1} {tree.label} {mode}: {_figure(result)} "
                          f"(load {result['load_before']}-{result['load_after']})", file=sys.stderr, flush=True)
            if args.floor:
                result = _timed(head, ["-m", "bench.resume_floor", "--home", str(home), "--lab-pid", str(lab_pid)],
                                env)
                runs.append({**result, "tree": "floor", "round": i + 1, "mode": "floor"})
                print(f"round {i + 1} floor: {_figure(result)} "
                      f"(load {result['load_before']}-{result['load_after']})", file=sys.stderr, flush=True)

    if args.ref:
        with checkout(args.ref, base) as ref:
            ref.label = args.ref
            measure([ref, head])
    else:
        measure([head])
    return runs


def _value(run: dict[str, Any]) -> float | None:
    key = {"list": "shown_s", "floor": "watched_answered_s"}.get(run["mode"], "all_attached_s")
    return run.get(key)


#: What each mode's figure measures.
_MEASURES = {"list": "agent's start to all rows in the window",
             "floor": "a bare client's first request to an answer for every watched operation",
             "resume": "agent's start to news at its client for every operation"}


def _figure(result: dict[str, Any]) -> str:
    if result.get("mode") == "resume-floor":
        answered = result["watched_answered_s"]
        return (f"answers for all {result['watched']:,} watched at {answered:.2f} s "
                f"({result['requests_for']:,} asked), "
                f"the server's CPU {result['server_cpu_s']:.2f} s" if answered is not None else
                f"answers for {result['answered']:,} of {result['requests_for']:,} ({result['failed']} failed)")
    if "listed" in result and "watched" not in result:
        return f"listed {result['listed']:,} of {result['operations']:,} at {result['shown_s']} s"
    attached = result["all_attached_s"]
    return (f"news for all {result['watched']:,} at {attached:.2f} s" if attached is not None else
            f"news for {result['attached']:,} of {result['watched']:,} (median {result['median_attached_s']})")


def report(runs: list[dict[str, Any]]) -> str:
    lines = ["| commit | round | measurement | value | load average (before-after) |", "|---|---:|---|---:|---|"]
    for run in runs:
        name = _MEASURES[run["mode"]]
        value = _value(run)
        shown = f"{value:.2f} s" if value is not None else f"not all: {_figure(run)}"
        lines.append(f"| {run['tree']} | {run['round']} | {name} | {shown} | "
                     f"{run['load_before']}-{run['load_after']} |")
    by_tree: dict[tuple[str, str], list[float]] = {}
    for run in runs:
        value = _value(run)
        if value is not None:
            by_tree.setdefault((run["tree"], run["mode"]), []).append(value)
    for (tree, mode), values in sorted(by_tree.items()):
        lines.append(f"\n{tree} {mode}: median {statistics.median(values):.2f} s of {len(values)}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
