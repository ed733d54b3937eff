"""JSON-RPC framing: every malformed shape gets a clear error, valid ones round-trip."""

import json

import pytest

from hostapp.protocol import jsonrpc as j


def test_round_trip_of_each_kind():
    for msg in (j.Request(7, "tools/call", {"name": "x"}), j.Notification("notifications/initialized"),
                j.Response("a", {"ok": True}), j.ErrorResponse(3, j.ErrorObject(-32602, "bad", {"k": 1}))):
        assert j.parse(j.encode(msg)) == msg


@pytest.mark.parametrize("raw, fragment", [
    (b"{not json", "malformed JSON"),
    (b"[]", "batches are not supported"),
    (b'[{"jsonrpc":"2.0","method":"a"}]', "batches are not supported"),
    (b'"hello"', "must be an object"),
    (b'{"jsonrpc":"1.0","method":"a"}', '"jsonrpc"'),
    (b'{"jsonrpc":"2.0","id":true,"method":"a"}', "invalid JSON-RPC id"),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"a"}', "invalid JSON-RPC id"),
    (b'{"jsonrpc":"2.0","id":1,"method":"a","params":[1]}', "params of a must be an object"),
    (b'{"jsonrpc":"2.0","id":1,"result":5}', "result must be an object"),
    (b'{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}', "integer code"),
    (b'{"jsonrpc":"2.0","id":1}', "neither a request"),
    (b"\xff\xfe", "malformed JSON"),
    (b'{"jsonrpc":"2.0","method":"a"} {"jsonrpc":"2.0","method":"b"}', "Extra data"),
    (b'{"jsonrpc":"2.0","method":"a"', "malformed JSON"),
])
def test_malformed_messages_are_refused_clearly(raw, fragment):
    with pytest.raises(j.ProtocolError) as info:
        j.parse(raw)
    assert fragment in str(info.value)


@pytest.mark.parametrize("raw, value", [
    (b'{"jsonrpc":"2.0","method":"m","params":{"v":123456789012345678901234567890}}', 123456789012345678901234567890),
    ('{"jsonrpc":"2.0","method":"m","params":{"v":"\\ud800"}}', "\ud800"),  # a lone surrogate
    (b'{"jsonrpc":"2.0","method":"m","params":{"v":1.5e3,"w":"\xc3\xa9"}}', 1500.0),
    ('{"jsonrpc":"2.0","method":"m","params":{"v":"caf\u00e9"}}', "caf\u00e9"),
    (b' {"jsonrpc":"2.0","method":"m","params":{"v":1}}\r\n', 1),  # whitespace around it
    ('{"jsonrpc":"2.0","method":"m","params":{"v":2}}'.encode("utf-16"), 2),  # another encoding
])
def test_what_json_reads_is_read(raw, value):
    # Integers beyond 64 bits stay exact (a faster parser tried here, orjson, turned them
    # into floats), and what json.loads reads is read.
    assert j.parse(raw).params["v"] == value


def test_oversized_message_refused_before_parsing(monkeypatch):
    monkeypatch.setattr(j, "MAX_MESSAGE_BYTES", 100)
    with pytest.raises(j.ProtocolError, match="exceeds the limit"):
        j.parse(json.dumps({"jsonrpc": "2.0", "method": "x" * 200}))


def test_error_response_without_id_is_kept():
    msg = j.parse(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}')
    assert isinstance(msg, j.ErrorResponse) and msg.id is None and msg.error.code == -32700


def test_ids_are_allocated_in_order_from_a_start():
    ids = j.IdAllocator(start=41)
    assert [ids.next(), ids.next()] == [41, 42]


def test_rpc_error_message_names_the_code():
    err = j.RpcError(-32042, "URL elicitation required", {"elicitations": []})
    assert "-32042" in str(err) and err.to_error().data == {"elicitations": []}


def test_id_allocator_takes_a_new_block_when_one_is_used_up():
    blocks = iter([100, 500])
    ids = j.IdAllocator(10, reserve=lambda: next(blocks), block=3)
    assert [ids.next() for _ in range(8)] == [10, 11, 12, 100, 101, 102, 500, 501]
    with pytest.raises(ValueError):
        j.IdAllocator(1, block=3)


@pytest.mark.parametrize("opening", ["[", '{"a":'])
def test_json_nested_too_deeply_is_a_protocol_error(opening):
    closing = "]" if opening == "[" else "}"
    with pytest.raises(j.ProtocolError) as caught:
        j.parse(opening * 100_000 + closing * 100_000)
    assert caught.value.code == j.PARSE_ERROR
    assert "nested too deeply" in str(caught.value)


def test_a_lone_surrogate_from_the_wire_is_written_back_escaped():
    # JSON allows "\ud800" as an escape; such an id must survive the answer the host sends.
    request = j.parse(b'{"jsonrpc":"2.0","id":"a\\ud800","method":"ping"}')
    data = j.encode(j.Response(request.id, {}))
    assert data.isascii() and j.parse(data) == j.Response("a\ud800", {})


def test_values_nested_deeper_than_the_bound_are_cut_visibly_at_intake():
    from hostapp.protocol.jsonrpc import CUT_MARKER, MAX_DEPTH, Response

    deep = "[" * 300 + '"x"' + "]" * 300
    message = j.parse('{"jsonrpc":"2.0","id":1,"result":{"ok":true,"v":' + deep + ',"w":[[1]]}}')
    assert isinstance(message, Response)
    assert message.result["ok"] is True and message.result["w"] == [[1]]
    value, depth = message.result["v"], 3  # message, result, v
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    assert value == CUT_MARKER and depth == MAX_DEPTH + 1
    # A message within the bound comes through unchanged.
    shallow = "[" * 50 + "1" + "]" * 50
    assert json.dumps(j.parse('{"jsonrpc":"2.0","id":1,"result":{"v":' + shallow + "}}").result["v"]) == shallow
