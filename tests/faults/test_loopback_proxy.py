"""The fault tests' proxy behaves as a network would (tests/support/faults.py): what the
server's side of a connection does, the host's side sees."""

from __future__ import annotations

import socket
import struct
import threading

from tests.support.faults import LoopbackProxy
from tests.support.waiting import DEADLINE


def test_a_connection_the_server_resets_is_ended_for_the_host_too():
    # A server killed with the proxy's connection still in its accept queue resets it. The
    # proxy kept the host's side open, and a request sent just then waited for ever.
    server = socket.create_server(("127.0.0.1", 0))

    def reset_each() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN
            conn.close()

    threading.Thread(target=reset_each, daemon=True).start()
    proxy = LoopbackProxy(server.getsockname()[1]).start()
    try:
        host = socket.create_connection(("127.0.0.1", proxy.port), timeout=DEADLINE)
        body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
        host.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        try:
            assert host.recv(65536) == b""  # ended (or reset, below), never left waiting
        except ConnectionResetError:
            pass
        host.close()
    finally:
        proxy.stop()
        server.close()
