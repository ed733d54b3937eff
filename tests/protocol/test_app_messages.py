"""MCP Apps without I/O: a tool's _meta.ui, the view resource's checks, the policy built
from declared origins, the network rule, and the validation of every bridge message."""

from __future__ import annotations

import json

import pytest

from hostapp.protocol import apps
from hostapp.protocol.apps import BridgeRefused, check_view_message

URI = "ui://x/view.html"


def read_result(text: str = "<html></html>", mime: str = apps.RESOURCE_MIME, csp=None) -> dict:
    item = {"uri": URI, "mimeType": mime, "text": text}
    if csp is not None:
        item["_meta"] = {"ui": {"csp": csp}}
    return {"contents": [item]}


def msg(**fields) -> str:
    return json.dumps({"jsonrpc": "2.0", **fields})


# -- tools ----------------------------------------------------------------------------------

def test_a_tools_view_and_visibility_are_read_in_both_formats():
    assert apps.tool_ui({"name": "a", "_meta": {"ui": {"resourceUri": URI}}}).resource_uri == URI
    assert apps.tool_ui({"name": "a", "_meta": {"ui/resourceUri": URI}}).resource_uri == URI
    assert apps.tool_ui({"name": "a", "_meta": {"ui": {"resourceUri": "https://x/view"}}}).resource_uri is None
    plain = apps.tool_ui({"name": "a"})
    assert plain.resource_uri is None and plain.app_callable and plain.model_visible
    app_only = apps.tool_ui({"name": "a", "_meta": {"ui": {"visibility": ["app"]}}})
    assert app_only.app_callable and not app_only.model_visible
    assert not apps.tool_ui({"name": "a", "_meta": {"ui": {"visibility": ["model"]}}}).app_callable


# -- the resource ---------------------------------------------------------------------------

def test_a_view_resource_is_accepted_with_its_declared_origins():
    view = apps.parse_view_resource(read_result(csp={"connectDomains": ["https://api.example.com"],
                                                     "resourceDomains": ["https://*.cdn.example.com"]}), URI)
    assert view.html == "<html></html>"
    assert view.csp.connect == ("https://api.example.com",)
    assert apps.ViewResource.from_json(json.loads(json.dumps(view.to_json()))) == view


@pytest.mark.parametrize("result, reason", [
    (read_result(mime="text/html"), "not text/html;profile=mcp-app"),
    (read_result(text="x" * (apps.MAX_VIEW_BYTES + 1)), "larger than"),
    (read_result(csp={"connectDomains": ["https://a.example; script-src *"]}), "not an origin"),
    (read_result(csp={"connectDomains": ["*"]}), "not an origin"),
    (read_result(csp={"resourceDomains": ["'unsafe-eval'"]}), "not an origin"),
    (read_result(csp={"connectDomains": "https://a.example"}), "must be a list"),
    ({"contents": []}, "no content"),
    ({"nothing": 1}, "no contents"),
])
def test_a_view_resource_that_breaks_a_rule_is_refused(result, reason):
    with pytest.raises(apps.AppResourceError, match=reason):
        apps.parse_view_resource(result, URI)


def test_only_ui_uris_are_views():
    with pytest.raises(apps.AppResourceError, match="not a ui://"):
        apps.parse_view_resource(read_result(), "file:///etc/passwd")


def test_the_policy_allows_no_network_unless_declared():
    none = apps.content_security_policy(apps.ViewCsp())
    assert "connect-src 'none'" in none and "frame-src 'none'" in none and "default-src 'none'" in none
    some = apps.content_security_policy(apps.ViewCsp(connect=("https://api.example.com",)))
    assert "connect-src https://api.example.com" in some


def test_the_network_rule_lets_through_declared_origins_only():
    origins = ("https://api.example.com", "https://*.cdn.example.com", "http://127.0.0.1:8000")
    assert apps.url_allowed("https://api.example.com/v1?q=1", origins)
    assert apps.url_allowed("https://a.cdn.example.com/x.js", origins)
    assert apps.url_allowed("http://127.0.0.1:8000/x", origins)
    assert apps.url_allowed("data:text/plain,hi", origins)
    assert not apps.url_allowed("https://cdn.example.com/x.js", origins)  # *. is subdomains only
    assert not apps.url_allowed("http://api.example.com/", origins)       # another scheme
    assert not apps.url_allowed("http://127.0.0.1:8001/x", origins)       # another port
    assert not apps.url_allowed("https://api.example.com.evil.net/", origins)
    assert not apps.url_allowed("file:///etc/passwd", origins)
    assert not apps.url_allowed("https://api.example.com/", ())


# -- the bridge -----------------------------------------------------------------------------

def test_known_messages_pass_with_their_params():
    init = check_view_message(msg(id=1, method="ui/initialize", params={
        "protocolVersion": apps.PROTOCOL_VERSION, "appInfo": {"name": "a", "version": "1"}, "appCapabilities": {}}))
    assert init.is_request and init.rid == 1
    call = check_view_message(msg(id="c", method="tools/call", params={"name": "poll", "arguments": {"a": 1}}))
    assert call.params["name"] == "poll"
    size = check_view_message(msg(method="ui/notifications/size-changed", params={"height": 300}))
    assert not size.is_request and size.params == {"height": 300}
    answer = check_view_message(msg(id=7, result={}))
    assert answer.method is None and answer.rid == 7


def test_an_unknown_method_is_refused_with_method_not_found():
    with pytest.raises(BridgeRefused) as refused:
        check_view_message(msg(id=3, method="resources/read", params={"uri": "file:///etc/passwd"}))
    assert refused.value.code == apps.METHOD_NOT_FOUND and refused.value.rid == 3
    with pytest.raises(BridgeRefused) as dropped:
        check_view_message(msg(method="ui/notifications/whatever"))
    assert dropped.value.rid is None


def test_an_oversize_message_is_refused_before_it_is_parsed():
    huge = msg(id=1, method="tools/call", params={"name": "a", "arguments": {"x": "y" * apps.MAX_MESSAGE_BYTES}})
    with pytest.raises(BridgeRefused, match="larger than"):
        check_view_message(huge)


@pytest.mark.parametrize("text, reason", [
    ("not json", "not JSON"),
    (json.dumps([1, 2]), "JSON-RPC"),
    (json.dumps({"id": 1, "method": "ping"}), "JSON-RPC"),
    (msg(id={"a": 1}, method="ping"), "id"),
    (msg(id=1, method="tools/call", params={"arguments": {}}), "name"),
    (msg(id=1, method="tools/call", params={"name": "a", "arguments": [1]}), "arguments"),
    (msg(id=1, method="tools/call", params=[1]), "params must be an object"),
    (msg(id=1, method="ui/open-link", params={"url": "javascript:alert(1)"}), "only http and https"),
    (msg(id=1, method="ui/open-link", params={"url": "file:///etc/passwd"}), "only http and https"),
    (msg(method="ui/notifications/size-changed", params={"height": -5}), "width and height"),
    (msg(method="ui/notifications/size-changed", params={"height": 1e12}), "width and height"),
    (msg(id=1, method="ui/initialize", params={}), "protocolVersion"),
    (msg(id=1), "either a result or an error"),
])
def test_malformed_messages_are_refused(text, reason):
    with pytest.raises(BridgeRefused, match=reason):
        check_view_message(text)
