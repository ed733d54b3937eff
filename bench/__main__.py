"""``python -m bench``: run every benchmark, print one table, write bench/results/*.json.

Each measurement runs in processes of its own and is set against a baseline measured in
the same run (a ratio is only meaningful on one machine at one moment). ``--smoke`` runs
everything tiny, to prove the benchmarks still work; its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
SECTIONS = ("intake", "journal", "window", "startup", "resume")


@dataclass
class Row:
    """One line of the table: a measurement, its baseline and the target it answers to."""

    section: str
    name: str
    value: float
    unit: str
    baseline: str | None = None     # what the ratio is taken against
    ratio: float | None = None      # value / baseline value
    target: str | None = None
    met: bool | None = None


@dataclass
class Sizes:
    notifications: int
    journal_notifications: int
    window_operations: int
    window_seconds: float
    history: int
    resume: tuple[int, ...]
    #: Seconds between two progress notifications of one operation in the window's load,
    #: and how many of its calls are started at once.
    window_interval: float = 0.1
    window_bulk: int = 1


FULL = Sizes(notifications=200_000, journal_notifications=50_000, window_operations=1_000, window_seconds=10.0,
             history=100_000, resume=(1_000, 10_000))
SMOKE = Sizes(notifications=2_000, journal_notifications=2_000, window_operations=50, window_seconds=1.0,
              history=1_000, resume=(20,))


def python(*args: str, env: dict[str, str] | None = None, timeout: float = 600, prefix: list[str] | None = None) -> str:
    """Run ``python -m ...`` from the repository and return its stdout (raising on failure)."""
    proc = subprocess.run([*(prefix or []), sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


def last_json(text: str) -> dict[str, Any]:
    return json.loads(text.strip().splitlines()[-1])


@contextmanager
def progress_server(python: str = sys.executable, cwd: Path = REPO,
                    env: dict[str, str] | None = None) -> Iterator[str]:
    """The HTTP progress server in a process of its own (``python`` run in ``cwd``); yields its URL."""
    proc = subprocess.Popen([python, "-m", "bench.progress_server", "--http", "0"], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("url "):
            raise RuntimeError("the progress server did not start")
        yield line.split()[1]
    finally:
        proc.terminate()
        proc.wait(10)


# -- 1. progress intake -------------------------------------------------------------------

def bench_intake(sizes: Sizes, raw: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    n = sizes.notifications
    with progress_server() as url:
        for transport in ("http", "stdio"):
            measured: dict[str, dict] = {}
            for client in ("floor", "sdk", "hostapp"):
                args = ["-m", "bench.intake_client", client, transport, str(n)]
                if transport == "http":
                    args += ["--url", url]
                result = last_json(python(*args))
                if result["received"] != n:
                    raise RuntimeError(f"{client} over {transport} received {result['received']} of {n}")
                measured[client] = result
            raw[f"intake_{transport}"] = measured
            floor = measured["floor"]["per_second"]
            sdk = measured["sdk"]["per_second"]
            host = measured["hostapp"]["per_second"]
            rows += [
                Row("intake", f"{transport}: floor (httpx-sse/lines + json.loads)", floor, "notif/s"),
                Row("intake", f"{transport}: official mcp SDK client", sdk, "notif/s", "floor", sdk / floor),
                Row("intake", f"{transport}: hostapp engine", host, "notif/s", "floor", host / floor,
                    ">= 0.5 x floor", host / floor >= 0.5),
                Row("intake", f"{transport}: hostapp vs official SDK", host / sdk, "x", "sdk", host / sdk,
                    "> 8 x sdk", host / sdk > 8),
            ]
            rows += bench_intake_agent(transport, n, url if transport == "http" else None, measured, raw)
    return rows


def bench_intake_agent(transport: str, n: int, url: str | None, measured: dict[str, dict],
                       raw: dict[str, Any]) -> list[Row]:
    """The same flood through the agent, measured where a client sees it (bench/agent_probe.py)."""
    args = ["-m", "bench.agent_probe", "intake", transport, str(n)] + (["--url", url] if url else [])
    agent = last_json(python(*args))
    if agent["received"] != n:
        raise RuntimeError(f"the agent's client over {transport} saw {agent['received']} of {n}")
    raw[f"intake_{transport}"]["agent"] = agent
    floor, host, through = (measured["floor"]["per_second"], measured["hostapp"]["per_second"],
                            agent["per_second"])
    return [
        Row("intake", f"{transport}: through the agent, to its client's last view", through, "notif/s",
            "hostapp engine", through / host),
        Row("intake", f"{transport}: through the agent vs floor", through / floor, "x", "floor", through / floor,
            ">= 0.5 x floor", through / floor >= 0.5),
        Row("intake", f"{transport}: in-flight views the agent's client received in its busiest second "
            f"({agent['views']} views in all)", agent["max_views_in_a_second"], "views", None, None,
            "<= ~30/s (coalesced)", agent["max_views_in_a_second"] <= 31),
    ]


# -- 5. journal write cost ----------------------------------------------------------------

_STRACE_LINE = re.compile(r"^\d+\s+(fsync|fdatasync|pwrite64)\((\d+).*\)\s+=\s+(-?\d+)")


def traced_intake(url: str, count: int, log: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """One hostapp intake run under strace: its result and the journal's fsyncs and bytes."""
    out = python("-m", "bench.intake_client", "hostapp", "http", str(count), "--url", url,
                 prefix=["strace", "-f", "-qq", "-o", str(log), "-e", "trace=fsync,fdatasync,pwrite64"])
    counts = {"fsyncs": 0, "bytes": 0}
    for line in log.read_text().splitlines():
        match = _STRACE_LINE.match(line)
        if not match:
            continue
        call, _fd, ret = match.groups()
        if call == "pwrite64":
            counts["bytes"] += max(0, int(ret))
        else:
            counts["fsyncs"] += 1
    return last_json(out), counts


def bench_journal(sizes: Sizes, raw: dict[str, Any]) -> list[Row]:
    import shutil

    if shutil.which("strace") is None:
        return [Row("journal", "skipped: strace is not installed", 0.0, "")]
    n = sizes.journal_notifications
    with progress_server() as url, tempfile.TemporaryDirectory(prefix="bench-strace-") as scratch:
        # The same run without notifications is the baseline: connecting, journaling the
        # operation and its end cost the same in both, so the difference is the progress.
        empty, empty_io = traced_intake(url, 0, Path(scratch) / "empty.log")
        full, full_io = traced_intake(url, n, Path(scratch) / "full.log")
    raw["journal"] = {"empty": {**empty, **empty_io}, "flooded": {**full, **full_io}}
    per = 1000 / n
    fsyncs = (full_io["fsyncs"] - empty_io["fsyncs"]) * per
    written = (full_io["bytes"] - empty_io["bytes"]) * per
    stats, empty_stats = full["journal"], empty["journal"]
    return [
        Row("journal", f"fsyncs per 1,000 progress ({n:,} notifications at full speed)", fsyncs, "fsync",
            "same run, 0 notifications", None, "durable batches only for handles", None),
        Row("journal", "bytes written per 1,000 progress", written, "B", "same run, 0 notifications"),
        Row("journal", "batches per 1,000 progress", (stats["batches"] - empty_stats["batches"]) * per, "batch"),
        Row("journal", "rows written per 1,000 progress", (stats["rows_written"] - empty_stats["rows_written"]) * per,
            "row"),
        Row("journal", "durable (synchronous=FULL) batches per 1,000 progress",
            (stats["durable_batches"] - empty_stats["durable_batches"]) * per, "batch"),
    ]


# -- 2. and 4. the window -----------------------------------------------------------------

def bench_window(sizes: Sizes, raw: dict[str, Any]) -> list[Row]:
    from bench import window_probe

    return window_probe.run_all(sizes, raw, python)


def bench_startup(sizes: Sizes, raw: dict[str, Any]) -> list[Row]:
    from bench import window_probe

    return window_probe.run_startup(sizes, raw, python)


# -- 3. resume at start-up ------------------------------------------------------------------

def bench_resume(sizes: Sizes, raw: dict[str, Any]) -> list[Row]:
    from tests.support.faults import LabProcess
    from tests.support.keyring_daemon import missing_programs, start_keyring_daemon

    if missing_programs():
        return [Row("resume", f"skipped: needs {', '.join(missing_programs())} for a keyring", 0.0, "")]
    rows: list[Row] = []
    first: tuple[int, float] | None = None
    with tempfile.TemporaryDirectory(prefix="bench-resume-") as scratch:
        base = Path(scratch)
        for count in sizes.resume:
            # A keyring of its own per count, as one person's home has: GNOME Keyring's
            # cost per item grows with every item it holds, other homes' included.
            keyring = start_keyring_daemon(base / f"keyring-{count}")
            try:
                lab = LabProcess(base / f"lab-{count}.sqlite3").start()
                try:
                    home = base / f"home-{count}"
                    home.mkdir()
                    prepared = last_json(python("-m", "bench.resume_probe", "prepare", "--home", str(home),
                                                "--url", lab.url, "--count", str(count), env=keyring.env,
                                                timeout=1800))
                    measured = measure_resume(home, count, keyring.env)
                    # Once more, on the home as that start left it: nothing may be lost from
                    # one restart to the next (positions, adopted sessions).
                    again = measure_resume(home, count, keyring.env)
                    # And through the agent, its client measuring; then its list at the
                    # window after one more restart.
                    through = last_json(python(
                        "-m", "bench.agent_probe", "resume", "--home", str(home), "--t0", repr(time.time()),
                        "--timeout", str(5 + count / 50), env=keyring.env, timeout=1800))
                    listed = last_json(python("-m", "bench.agent_probe", "list", "--home", str(home),
                                              "--timeout", "120", env=keyring.env, timeout=1800))
                    # The same first requests from a bare client: what the server allows.
                    assert lab.proc is not None  # started
                    floor = last_json(python("-m", "bench.resume_floor", "--home", str(home),
                                             "--lab-pid", str(lab.proc.pid), env=keyring.env, timeout=1800))
                finally:
                    lab.stop()
                raw[f"resume_{count}"] = {"prepare": prepared, "measure": measured, "measure_again": again,
                                          "through_agent": through, "list_through_agent": listed, "floor": floor}
                spread = ", ".join(f"{k} {v}" for k, v in sorted(prepared["mechanisms"].items()))
                shown, attached = measured["shown_s"], measured["all_attached_s"]
                rows.append(Row("resume", f"{count:,} unfinished ({spread}): start to all shown in the window",
                                shown or 0.0, "s"))
                if measured["ended_without_contact"]:
                    rows.append(Row("resume", f"{count:,}: ended at start-up without a word from the server "
                                    "(nothing committed to resume from)", measured["ended_without_contact"], "ops"))
                rows.append(list_through_agent(count, measured, listed))
                if attached is None:
                    rows += resume_through_agent(count, measured, again, through, floor)
                    rows.append(Row("resume", f"{count:,}: re-attached {measured['attached']:,} of "
                                    f"{measured['operations'] - measured['ended_without_contact']:,} "
                                    f"(not: {measured['not_attached']})",
                                    measured["median_attached_s"] or 0.0, "s (median)", met=False))
                    continue
                linear = None
                if first is None:
                    first = (count, attached)
                else:
                    linear = attached / first[1] / (count / first[0])
                rows.append(Row("resume", f"{count:,}: start to every operation re-attached", attached, "s",
                                f"{first[0]:,} scaled linearly" if linear else None, linear,
                                "< 2 s" if count <= 1000 else "linear (ratio <= ~1)",
                                attached < 2 if count <= 1000 else (linear is not None and linear <= 1.2)))
                # Operations that ended during the first restart (a tool that finished, a
                # server that cancelled) are not there any more; none may have ended unknown.
                ended = {k: measured["ended"].get(k, 0) + again["ended"].get(k, 0)
                         for k in {*measured["ended"], *again["ended"]}}
                ended_text = ", ".join(f"{v} {k}" for k, v in sorted(ended.items())) or "none"
                rows.append(Row("resume", f"{count:,}: restarted a second time, re-attached "
                                f"{again['attached']:,} of {again['operations']:,} (ended in the two runs: "
                                f"{ended_text})", again["all_attached_s"] or 0.0, "s",
                                target="all re-attached, none lost (unknown)",
                                met=again["all_attached_s"] is not None and not again["ended_without_contact"]
                                and again["operations"] == measured["operations"] - sum(measured["ended"].values())
                                and not ended.get("unknown")))
                rows += resume_through_agent(count, measured, again, through, floor)
            finally:
                keyring.stop()
    return rows


def list_through_agent(count: int, measured: dict[str, Any], listed: dict[str, Any]) -> Row:
    """The window as the agent's client after a restart: the agent's start to every row."""
    shown = listed["shown_s"]
    return Row("resume", f"{count:,}: the list after a restart through the agent, its start to all "
               f"{listed['listed']:,} of {listed['operations']:,} rows in the window", shown or 0.0, "s",
               "window in process", shown / measured["shown_s"] if shown and measured["shown_s"] else None,
               "< 1 s", shown is not None and shown < 1)


def resume_through_agent(count: int, measured: dict[str, Any], again: dict[str, Any],
                         through: dict[str, Any], floor: dict[str, Any]) -> list[Row]:
    """The third start of the same home: the agent, timed by a client connected at once;
    then the floor, ``bench.resume_floor``: the same first requests from a bare client."""
    rows = [Row("resume", f"{count:,}: through the agent, its start to all listed at a client "
                f"({through['listed']:,} of {through['operations']:,})", through["shown_s"], "s",
                "window in process", through["shown_s"] / measured["shown_s"] if measured["shown_s"] else None)]
    if through["all_attached_s"] is None:
        rows.append(Row("resume", f"{count:,}: through the agent, news from the server at the client for "
                        f"{through['attached']:,} of {through['watched']:,} (not: {through['not_attached']})",
                        through["median_attached_s"] or 0.0, "s (median)", met=False))
    else:
        baseline = again["all_attached_s"]
        rows.append(Row("resume", f"{count:,}: through the agent, its start to news from the server at the "
                        f"client for every one of {through['watched']:,} (left out: {through['left_out']})",
                        through["all_attached_s"], "s",
                        "in process, re-attached (2nd start)",
                        through["all_attached_s"] / baseline if baseline else None,
                        "< 2 s" if count <= 1000 else None, through["all_attached_s"] < 2 if count <= 1000 else None))
    answered, agent = floor["watched_answered_s"], through["all_attached_s"]
    if answered is None:
        rows.append(Row("resume", f"{count:,}: the floor, a bare client's answers for {floor['answered']:,} of "
                        f"{floor['requests_for']:,} ({floor['failed']} failed: {floor['failures']})",
                        floor["median_answered_s"] or 0.0, "s (median)", met=False))
    elif agent is not None:
        rows.append(Row("resume", f"{count:,}: through the agent, against the floor: the same first requests "
                        f"from a bare client, answered for all {floor['watched']:,} in {answered:.2f} s "
                        f"({floor['requests_for']:,} asked; the server's CPU meanwhile {floor['server_cpu_s']:.1f} s)",
                        agent, "s", "the floor", agent / answered))
    return rows


def measure_resume(home: Path, count: int, env: dict[str, str]) -> dict[str, Any]:
    """A new host process (the window) on ``home``, timed from its start."""
    return last_json(python("-m", "bench.resume_probe", "measure", "--home", str(home), "--t0", repr(time.time()),
                            "--timeout", str(5 + count / 50), env=env, timeout=1800))


RUNNERS: dict[str, Callable[[Sizes, dict[str, Any]], list[Row]]] = {
    "intake": bench_intake, "journal": bench_journal, "window": bench_window, "startup": bench_startup,
    "resume": bench_resume}


# -- output -------------------------------------------------------------------------------

def _num(value: float | None) -> str:
    if value is None:
        return ""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def table(rows: list[Row]) -> str:
    """A Markdown table (readable in a terminal too)."""
    lines = ["| section | measurement | value | unit | vs | ratio | target | met |",
             "|---|---|---:|---|---|---:|---|---|"]
    for r in rows:
        met = "" if r.met is None else ("yes" if r.met else "NO")
        lines.append(f"| {r.section} | {r.name} | {_num(r.value)} | {r.unit} | {r.baseline or ''} | "
                     f"{_num(r.ratio)} | {r.target or ''} | {met} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="everything tiny: proves the benchmarks work")
    parser.add_argument("--only", action="append", choices=SECTIONS, help="run only this section (repeatable)")
    parser.add_argument("--output", type=Path, help="where to write the JSON (default bench/results/<time>.json)")
    parser.add_argument("--resume", type=int, action="append", metavar="N",
                        help="journal sizes for the resume benchmark (default 1,000 and 10,000)")
    parser.add_argument("--window-operations", type=int, metavar="N",
                        help="operations in flight in the window's load (default 1,000)")
    parser.add_argument("--window-interval", type=float, default=0.1, metavar="SECONDS",
                        help="seconds between two updates of one operation in the window's load (default 0.1)")
    parser.add_argument("--window-bulk", type=int, default=1, metavar="N",
                        help="calls of the window's load started at once (default 1)")
    parser.add_argument("--markdown", type=Path, help="also write the table as Markdown here (bench/RESULTS.md)")
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    if args.resume:
        sizes = replace(sizes, resume=tuple(args.resume))
    if args.window_operations:
        sizes = replace(sizes, window_operations=args.window_operations)
    sizes = replace(sizes, window_interval=args.window_interval, window_bulk=args.window_bulk)
    raw: dict[str, Any] = {}
    rows: list[Row] = []
    started = time.perf_counter()
    for name in args.only or SECTIONS:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        try:
            rows += RUNNERS[name](sizes, raw)
        except (RuntimeError, subprocess.TimeoutExpired, OSError, ValueError) as exc:
            # One broken benchmark (a crashed probe) must not hide the others' numbers.
            raw[f"{name}_error"] = str(exc)
            rows.append(Row(name, f"FAILED: {str(exc).splitlines()[0]}", 0.0, "", met=False))
    stamp = dt.datetime.now(dt.UTC)
    report = {
        "date": stamp.isoformat(timespec="seconds"), "smoke": args.smoke, "sizes": asdict(sizes),
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count()},
        "seconds": time.perf_counter() - started,
        "sections": {name: [asdict(r) for r in rows if r.section == name] for name in (args.only or SECTIONS)},
        "raw": raw,
        "failed": [r.section for r in rows if r.name.startswith("FAILED")],
    }
    output = args.output or RESULTS / f"{stamp:%Y%m%dT%H%M%SZ}{'-smoke' if args.smoke else ''}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2))
    print(table(rows))
    if args.markdown:
        args.markdown.write_text(
            f"# Benchmark results\n\n`python -m bench` (`make bench`) on {report['date']}: "
            f"{report['machine']['platform']}, {report['machine']['cpus']} CPUs, Python "
            f"{report['machine']['python']}. Ratios are against the baseline named in \"vs\", measured in the "
            f"same run.\n\n{table(rows)}\n")
    print(f"\n{'smoke run' if args.smoke else 'run'} of {report['seconds']:.1f} s on {report['date']}; "
          f"JSON in {output}")
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
