"""Era negotiation rules, without I/O."""

import pytest

from hostapp.protocol import eras
from hostapp.protocol.jsonrpc import ProtocolError


def test_revisions_and_eras():
    assert eras.STATELESS_VERSION == "2026-07-28"
    assert eras.HANDSHAKE_OFFER == "2025-11-25"
    assert eras.era_of("2024-11-05") == eras.HANDSHAKE
    assert eras.era_of("2026-07-28") == eras.STATELESS
    with pytest.raises(ProtocolError, match="unsupported protocol version"):
        eras.era_of("1999-01-01")


@pytest.mark.parametrize("counter", ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
def test_initialize_accepts_counter_offers(counter):
    info = eras.accept_initialize_result({"protocolVersion": counter, "capabilities": {"tools": {}},
                                          "serverInfo": {"name": "s", "version": "1"}})
    assert info.protocol_version == counter and info.era == eras.HANDSHAKE and info.name == "s"


def test_initialize_refuses_unknown_counter_offer():
    with pytest.raises(ProtocolError, match="does not speak"):
        eras.accept_initialize_result({"protocolVersion": "2030-01-01", "capabilities": {}})
    with pytest.raises(ProtocolError, match="no protocolVersion"):
        eras.accept_initialize_result({"capabilities": {}})


def test_discover_result():
    ok = eras.accept_discover_result({"supportedVersions": ["2025-11-25", "2026-07-28"], "capabilities": {"tools": {}},
                                      "resultType": "complete", "cacheScope": "public", "ttlMs": 0})
    assert ok is not None and ok.era == eras.STATELESS and ok.capabilities == {"tools": {}}
    assert eras.accept_discover_result({"supportedVersions": ["2025-11-25"], "capabilities": {}}) is None


def test_stateless_meta_carries_version_capabilities_and_identity():
    meta = eras.stateless_meta({"name": "hostapp", "version": "1"}, {"elicitation": {}})
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {"elicitation": {}}
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "hostapp"


def test_result_type_defaults_to_complete():
    assert eras.result_type({}) == "complete"
    assert eras.result_type({"resultType": "input_required"}) == "input_required"


def test_revisions_and_meta_keys_are_those_of_mcp_types():
    import mcp_types
    import mcp_types.version

    from hostapp.protocol import eras

    for name in ("CLIENT_CAPABILITIES_META_KEY", "CLIENT_INFO_META_KEY", "LOG_LEVEL_META_KEY",
                 "PROTOCOL_VERSION_META_KEY"):
        assert getattr(eras, name) == getattr(mcp_types, name), name
    assert eras.HANDSHAKE_PROTOCOL_VERSIONS == tuple(mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS)
    assert eras.LATEST_HANDSHAKE_VERSION == mcp_types.version.LATEST_HANDSHAKE_VERSION
    assert eras.LATEST_MODERN_VERSION == mcp_types.version.LATEST_MODERN_VERSION


def test_the_host_does_not_import_mcp_types_to_start():
    import subprocess
    import sys

    code = ("import sys, hostapp.engine.service, hostapp.app, hostapp.ui.main_window;"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp_types', 'authlib', 'jsonschema')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
