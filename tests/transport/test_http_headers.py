"""The mirrored request headers of Streamable HTTP 2026-07-28 (sans-I/O rules)."""

from __future__ import annotations

import pytest

from hostapp.transport.http_headers import (
    InvalidHeaderAnnotation,
    decode_header_value,
    encode_header_value,
    header_params,
    param_headers,
    standard_headers,
)


@pytest.mark.parametrize("value, encoded", [
    # the examples of the specification's value-encoding table
    ("us-west1", "us-west1"),
    ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
    (" padded ", "=?base64?IHBhZGRlZCA=?="),
    ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
    ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
    ("inner space ok", "inner space ok"),
    ("", "=?base64??="),
])
def test_value_encoding(value, encoded):
    assert encode_header_value(value) == encoded
    assert decode_header_value(encoded) == value


def test_standard_headers_per_method():
    assert standard_headers("tools/call", {"name": "get_weather"}) == {
        "Mcp-Method": "tools/call", "Mcp-Name": "get_weather"}
    assert standard_headers("resources/read", {"uri": "file:///x.json"})["Mcp-Name"] == "file:///x.json"
    assert standard_headers("prompts/get", {"name": "p"})["Mcp-Name"] == "p"
    assert standard_headers("tasks/get", {"taskId": "t-1"})["Mcp-Name"] == "t-1"
    assert standard_headers("tools/list", {}) == {"Mcp-Method": "tools/list"}
    assert standard_headers("tools/call", None) == {"Mcp-Method": "tools/call"}


SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "priority": {"type": "integer", "x-mcp-header": "Priority"},
        "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
        "nested": {"type": "object", "properties": {"tenant": {"type": "string", "x-mcp-header": "Tenant"}}},
        "query": {"type": "string"},
    },
}


def test_designated_parameters_and_their_headers():
    designated = header_params(SCHEMA)
    assert designated == {"Region": ("region",), "Priority": ("priority",), "Verbose": ("verbose",),
                          "Tenant": ("nested", "tenant")}
    headers = param_headers(designated, {"region": "eu-west 1 ", "priority": -7, "verbose": False,
                                         "nested": {"tenant": "acme"}, "query": "SELECT 1"})
    assert headers == {"Mcp-Param-Region": "=?base64?ZXUtd2VzdCAxIA==?=", "Mcp-Param-Priority": "-7",
                       "Mcp-Param-Verbose": "false", "Mcp-Param-Tenant": "acme"}
    # absent or null values send no header
    assert param_headers(designated, {"region": None}) == {}
    assert param_headers(designated, None) == {}


@pytest.mark.parametrize("bad_schema", [
    {"properties": {"x": {"type": "number", "x-mcp-header": "X"}}},
    {"properties": {"x": {"type": "object", "x-mcp-header": "X"}}},
    {"properties": {"x": {"type": "string", "x-mcp-header": ""}}},
    {"properties": {"x": {"type": "string", "x-mcp-header": "Has Space"}}},
    {"properties": {"x": {"type": "string", "x-mcp-header": "Dup"}, "y": {"type": "string", "x-mcp-header": "dup"}}},
    {"properties": {"x": {"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}}}},
    {"properties": {"x": {"oneOf": [{"type": "string", "x-mcp-header": "Choice"}]}}},
])
def test_invalid_annotations_are_rejected(bad_schema):
    with pytest.raises(InvalidHeaderAnnotation):
        header_params(bad_schema)
