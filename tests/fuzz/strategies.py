"""Input for the fuzz targets: JSON values, JSON-RPC-shaped messages, and mutations of
their bytes (what a broken server, or a hostile one probing for a crash, would send)."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

from hypothesis import strategies as st

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
    st.sampled_from(["2.0", "tools/call", "notifications/progress", "elicitation/create", "ping", "",
                     "\x00", "\ufeff", "\ud800"[:0] + "é", "text", "object", "string"]),
)

json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5),
                            st.dictionaries(st.text(max_size=10), inner, max_size=5)),
    max_leaves=25,
)

ids = st.one_of(st.integers(min_value=-5, max_value=2 ** 63), st.text(max_size=8), st.none(), st.booleans(),
                st.floats(allow_nan=False), st.lists(st.integers(), max_size=2))
methods = st.one_of(st.sampled_from(["ping", "tools/call", "notifications/progress", "notifications/message",
                                     "notifications/cancelled", "elicitation/create", "roots/list",
                                     "sampling/createMessage", "notifications/tools/list_changed"]),
                    st.text(max_size=12), st.integers())


@st.composite
def jsonrpc_like(draw) -> dict[str, Any]:
    """A dict that is often a valid JSON-RPC message, and often nearly one."""
    obj: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        obj["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2]))
    kind = draw(st.sampled_from(["request", "notification", "response", "error", "junk"]))
    if kind in ("request", "response", "error") and draw(st.integers(0, 9)):
        obj["id"] = draw(ids)
    if kind in ("request", "notification"):
        obj["method"] = draw(methods)
        if draw(st.booleans()):
            obj["params"] = draw(st.one_of(st.dictionaries(st.sampled_from(
                ["progressToken", "progress", "total", "message", "requestId", "_meta", "data", "level",
                 "requestedSchema", "mode", "url", "elicitationId"]), json_values, max_size=4), json_values))
    elif kind == "response":
        obj["result"] = draw(st.one_of(st.dictionaries(st.text(max_size=8), json_values, max_size=4), json_values))
    elif kind == "error":
        obj["error"] = draw(st.one_of(st.fixed_dictionaries(
            {"code": st.one_of(st.integers(), st.booleans(), st.text(max_size=3))},
            optional={"message": json_values, "data": json_values}), json_values))
    else:
        obj.update(draw(st.dictionaries(st.text(max_size=8), json_values, max_size=3)))
    return obj


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """``data`` with a few byte-level changes: flips, insertions, deletions, a cut, nesting."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "cut", "nest", "dup"]))
        pos = draw(st.integers(0, len(buf)))
        if op == "flip" and buf:
            pos = min(pos, len(buf) - 1)
            buf[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            buf[pos:pos] = draw(st.sampled_from([b"{", b"}", b"[", b"]", b'"', b"\\", b",", b":", b"\n",
                                                 b"\r", b"\x00", b"\xff", b"\xc3", b"1e999", b"-", b"NaN"]))
        elif op == "delete" and buf:
            del buf[pos:pos + draw(st.integers(1, 4))]
        elif op == "cut":
            del buf[pos:]
        elif op == "nest":
            depth = draw(st.sampled_from([1, 10, 500, 5000, 50_000]))
            buf[pos:pos] = b"[" * depth
        elif op == "dup":
            buf[pos:pos] = buf[: draw(st.integers(0, 64))]
    return bytes(buf)


_INSERTS = [b"{", b"}", b"[", b"]", b'"', b"\\", b",", b":", b"\n", b"\r", b"\x00", b"\xff", b"\xc3",
            b"1e999", b"-", b"NaN", b"data: ", b"\n\n", b"[" * 5000, b'{"a":' * 2000]


def mutants(data: bytes, rnd: random.Random, n: int) -> list[bytes]:
    """``n`` cheap byte-level mutants of ``data`` (a fuzzer's inner loop: Hypothesis picks
    the seed input and the random generator, these multiply it without its overhead)."""
    out = []
    for _ in range(n):
        buf = bytearray(data)
        for _ in range(rnd.randint(1, 4)):
            pos = rnd.randint(0, len(buf))
            op = rnd.randrange(6)
            if op == 0 and buf:
                buf[min(pos, len(buf) - 1)] ^= 1 << rnd.randrange(8)
            elif op == 1:
                buf[pos:pos] = rnd.choice(_INSERTS)
            elif op == 2:
                del buf[pos:pos + rnd.randint(1, 8)]
            elif op == 3:
                del buf[pos:]
            elif op == 4:
                buf[pos:pos] = buf[: rnd.randint(0, 64)]
            else:
                buf[pos:pos] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 4)))
        out.append(bytes(buf))
    return out


def encoded(obj: Any, ascii_only: bool = True) -> bytes:
    # Both spellings of non-ASCII text reach the parser: escaped, and raw UTF-8 (lone
    # surrogates included, as invalid UTF-8).
    return json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@st.composite
def message_bytes(draw) -> bytes:
    """The bytes of one message as a server might send them: valid, nearly, or garbage."""
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return draw(st.binary(max_size=200))
    data = encoded(draw(jsonrpc_like()), draw(st.booleans()))
    return draw(mutated(data)) if choice >= 6 else data


#: A generator for the mutants, from a seed Hypothesis draws (its own ``st.randoms`` records
#: every call, which costs more than the targets themselves).
generators = st.integers(min_value=0, max_value=2 ** 32).map(random.Random)


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at the given offsets (taken modulo its length)."""
    if not data:
        return [data]
    points = sorted({c % len(data) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]
