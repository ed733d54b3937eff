"""The conformance suite's ``auth/`` client scenarios, played by the host's OAuth client.

Every ``auth/`` scenario the installed suite lists for 2025-11-25 and 2026-07-28 that is
not an ``[extension]`` runs at that revision, the two 2025-03-26 back-compat scenarios
at theirs, and the ``[extension]`` ``auth/`` scenarios at the suite's own choice, against
``python -m hostapp conformance-client``. The list is checked
in; a separate test fails when the installed suite lists other scenarios.
"""

from __future__ import annotations

import sys

import pytest

from tests.support.conformance import (
    ConformanceSuiteMissing,
    list_client_scenarios,
    require_suite,
    scenario_runs_started,
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
    "2026-07-28": [
        *BOTH,
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
#: The authorization extensions (client credentials, enterprise-managed authorization,
#: workload identity federation, DPoP): on no revision's timeline, so run at the suite's
#: choice of revision (its latest dated release).
EXTENSION_SCENARIOS = [
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/enterprise-managed-authorization",
    "auth/dpop",
    "auth/dpop-nonce",
    "auth/wif-jwt-bearer",
]
CASES: list[tuple[str | None, str]] = [
    (version, scenario) for version, scenarios in AUTH_SCENARIOS.items() for scenario in scenarios
] + [(None, scenario) for scenario in EXTENSION_SCENARIOS]
#: The host's one conformance client command; it hands auth/ scenarios to hostapp.conformance_auth.
CLIENT_COMMAND = [sys.executable, "-m", "hostapp", "conformance-client"]


@pytest.mark.parametrize("spec_version", ["2025-11-25", "2026-07-28"])
def test_checked_in_auth_scenarios_match_the_installed_suite(spec_version: str) -> None:
    try:
        listed = list_client_scenarios(spec_version, auth=True)
    except ConformanceSuiteMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    # The suite lists older scenarios cumulatively; the back-compat ones run at 2025-03-26.
    listed = [name for name in listed if name not in AUTH_SCENARIOS["2025-03-26"]]
    assert listed == AUTH_SCENARIOS[spec_version]


def test_checked_in_extension_auth_scenarios_match_the_installed_suite() -> None:
    try:
        listed = list_client_scenarios(None, auth=True, extension=True)
    except ConformanceSuiteMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    assert listed == EXTENSION_SCENARIOS


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
    with scenario_runs_started(
        selected,
        CLIENT_COMMAND,
        lambda spec_version, scenario: tmp_path_factory.mktemp(
            f"auth-{spec_version or 'extension'}-{scenario.replace('/', '-')}"),
    ) as runs:
        yield runs


# The runs of every selected case start together, in one process (the module's fixture):
# the cases stay on one xdist worker, or each worker would run them all.
@pytest.mark.xdist_group("conformance-auth")
@pytest.mark.parametrize(("spec_version", "scenario"), CASES, ids=[f"{v or 'extension'}-{s}" for v, s in CASES])
def test_auth_scenario(spec_version: str | None, scenario: str, auth_runs) -> None:
    if isinstance(auth_runs, ConformanceSuiteMissing):
        pytest.fail(str(auth_runs), pytrace=False)
    run = auth_runs[(spec_version, scenario)].result()
    if not run.passed():
        pytest.fail(run.failure_report(), pytrace=False)
