"""The conformance suite's ``auth/`` client scenarios, played by the host's OAuth client.

Every ``auth/`` scenario the installed suite lists for 2025-11-25 and 2026-07-28 that is
not an ``[extension]`` runs at that revision, and the two 2025-03-26 back-compat
scenarios at theirs, against ``python -m hostapp conformance-client``. The list is checked
in; a separate test fails when the installed suite lists other scenarios.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.conformance import (
    CONFORMANCE_CLI,
    ConformanceSuiteMissing,
    ScenarioRun,
    require_suite,
    run_client_scenario,
    suite_env,
)

BOTH = [
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
]
AUTH_SCENARIOS: dict[str, list[str]] = {
    "2025-03-26": ["auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback"],
    "2025-11-25": BOTH,
    "2026-07-28": BOTH + [
        "auth/resource-mismatch",
        "auth/offline-access-scope",
        "auth/offline-access-not-supported",
        "auth/authorization-server-migration",
        "auth/iss-supported",
        "auth/iss-not-advertised",
        "auth/iss-supported-missing",
        "auth/iss-wrong-issuer",
        "auth/iss-unexpected",
        "auth/iss-normalized",
        "auth/metadata-issuer-mismatch",
    ],
}
CASES = [(version, scenario) for version, scenarios in AUTH_SCENARIOS.items() for scenario in scenarios]
#: The host's one conformance client command; it hands auth/ scenarios to hostapp.auth.conformance.
CLIENT_COMMAND = [sys.executable, "-m", "hostapp", "conformance-client"]
PARALLEL_RUNS = 2

_LINE = re.compile(r"^\s*-\s+(?P<name>auth/\S+)\s+\[(?P<tags>[^\]]*)\]\s*$")


def listed_auth_scenarios(spec_version: str) -> list[str]:
    """The suite's ``auth/`` client scenarios at ``spec_version`` that are not extensions."""
    require_suite()
    listing = subprocess.run([str(CONFORMANCE_CLI), "list", "--client", "--spec-version", spec_version],
                             capture_output=True, text=True, env=suite_env(), timeout=60, check=True).stdout
    names = []
    for line in listing.splitlines():
        match = _LINE.match(line)
        if match and "extension" not in [t.strip() for t in match.group("tags").split(",")]:
            names.append(match.group("name"))
    return names


def run_auth_scenario(scenario: str, spec_version: str, output_dir: Path) -> ScenarioRun:
    """One run; the suite files an ``auth/x`` scenario's results under ``<output-dir>/auth/x-<time>``."""
    run = run_client_scenario(scenario, spec_version, CLIENT_COMMAND, output_dir)
    nested = output_dir / scenario.split("/")[0]
    result_dirs = sorted(p for p in nested.iterdir() if p.is_dir()) if nested.is_dir() else []
    if not run.checks and result_dirs:
        result_dir = result_dirs[-1]
        if (result_dir / "checks.json").exists():
            run.checks = json.loads((result_dir / "checks.json").read_text())
        for name in ("stdout", "stderr"):
            path = result_dir / f"{name}.txt"
            if path.exists():
                setattr(run, f"client_{name}", path.read_text(errors="replace"))
    return run


@pytest.mark.parametrize("spec_version", ["2025-11-25", "2026-07-28"])
def test_checked_in_auth_scenarios_match_the_installed_suite(spec_version: str) -> None:
    try:
        listed = listed_auth_scenarios(spec_version)
    except ConformanceSuiteMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    # The suite lists older scenarios cumulatively; the back-compat ones run at 2025-03-26.
    listed = [name for name in listed if name not in AUTH_SCENARIOS["2025-03-26"]]
    assert listed == AUTH_SCENARIOS[spec_version]


@pytest.fixture(scope="module")
def auth_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Futures of the runs of every selected (spec_version, scenario), started together."""
    try:
        require_suite()
    except ConformanceSuiteMissing as exc:
        yield exc
        return
    selected = [
        (item.callspec.params["spec_version"], item.callspec.params["scenario"])
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_auth_scenario" and hasattr(item, "callspec")
    ]
    runs: dict[tuple[str, str], Future[ScenarioRun]] = {}
    with ThreadPoolExecutor(max_workers=PARALLEL_RUNS, thread_name_prefix="conformance-auth") as pool:
        for spec_version, scenario in selected:
            output_dir = tmp_path_factory.mktemp(f"auth-{spec_version}-{scenario.replace('/', '-')}")
            runs[(spec_version, scenario)] = pool.submit(
                run_auth_scenario, scenario, spec_version, output_dir
            )
        yield runs
        for future in runs.values():
            future.cancel()


@pytest.mark.parametrize(("spec_version", "scenario"), CASES, ids=[f"{v}-{s}" for v, s in CASES])
def test_auth_scenario(spec_version: str, scenario: str, auth_runs) -> None:
    if isinstance(auth_runs, ConformanceSuiteMissing):
        pytest.fail(str(auth_runs), pytrace=False)
    run = auth_runs[(spec_version, scenario)].result()
    if not run.passed():
        pytest.fail(run.failure_report(), pytrace=False)
