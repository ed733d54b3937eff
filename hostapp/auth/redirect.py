"""How the authorization response comes back: a loopback redirect listener (RFC 8252).

A desktop app opens the authorization URL in the system browser; the authorization
server then redirects the browser to ``http://127.0.0.1:<port>/callback?code=...&state=...``.
:class:`LoopbackRedirectListener` listens on 127.0.0.1 only, on a random port (or the one
a client registration names, when it is free), accepts only the callback whose ``state``
is the one it waits for, and answers the browser with a plain "you can close this tab"
page. HTTP is parsed by h11, the sans-I/O parser httpx itself uses.

Every way of completing a sign-in implements :class:`RedirectHandler`; the headless
command line uses the listener and prints the URL instead of opening a browser.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import socket
import webbrowser
from collections.abc import Callable, Mapping
from typing import Protocol
from urllib.parse import parse_qsl, urlsplit

import h11

log = logging.getLogger(__name__)

CALLBACK_PATH = "/callback"
LOOPBACK_HOST = "127.0.0.1"
#: How long a person has to finish signing in, in seconds.
DEFAULT_SIGN_IN_TIMEOUT = 600.0

_DONE_PAGE = (
    "<!doctype html><html><head><meta charset='utf-8'><title>hostapp</title></head>"
    "<body style='font-family: sans-serif'><h1>{title}</h1><p>{text}</p></body></html>"
)


class RedirectHandler(Protocol):
    """One way to send a person to the authorization URL and get the redirect back."""

    async def prepare(self, preferred_redirect_uri: str | None = None) -> str:
        """Get ready and return the redirect URI to put into the authorization request."""
        ...

    async def authorize(self, authorization_url: str, state: str) -> Mapping[str, str]:
        """Show ``authorization_url``; return the query parameters of the redirect."""
        ...

    async def close(self) -> None: ...


def _port_of(uri: str | None) -> int | None:
    if not uri:
        return None
    parts = urlsplit(uri)
    if parts.hostname != LOOPBACK_HOST or parts.path != CALLBACK_PATH:
        return None
    return parts.port


class LoopbackRedirectListener:
    """Receives the authorization redirect on 127.0.0.1 (RFC 8252 section 7.3).

    States: idle -> listening (after :meth:`prepare`) -> answered -> closed. ``open_url``
    shows the authorization URL (default: the system browser; the command line prints it).
    """

    def __init__(self, open_url: Callable[[str], object] | None = None, *,
                 timeout: float = DEFAULT_SIGN_IN_TIMEOUT):
        self.open_url = open_url or webbrowser.open
        self.timeout = timeout
        self._server: asyncio.base_events.Server | None = None
        self._expected_state: str | None = None
        self._answer: asyncio.Future[dict[str, str]] | None = None
        self.redirect_uri: str | None = None

    async def prepare(self, preferred_redirect_uri: str | None = None) -> str:
        if self._server is not None:
            return self.redirect_uri  # type: ignore[return-value]
        sock = self._bind(_port_of(preferred_redirect_uri))
        self._server = await asyncio.start_server(self._serve, sock=sock)
        port = sock.getsockname()[1]
        self.redirect_uri = f"http://{LOOPBACK_HOST}:{port}{CALLBACK_PATH}"
        return self.redirect_uri

    @staticmethod
    def _bind(preferred_port: int | None) -> socket.socket:
        # The registered port first (a client registration lists exact redirect URIs),
        # any free port when it is taken.
        for port in ([preferred_port] if preferred_port else []) + [0]:
            # IPPROTO_TCP named so that asyncio sets TCP_NODELAY on accepted connections.
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            try:
                sock.bind((LOOPBACK_HOST, port))
            except OSError:
                sock.close()
                continue
            sock.listen(8)
            sock.setblocking(False)
            return sock
        raise OSError("no free loopback port for the sign-in redirect")

    async def authorize(self, authorization_url: str, state: str) -> Mapping[str, str]:
        if self._server is None:
            await self.prepare()
        self._expected_state = state
        self._answer = asyncio.get_running_loop().create_future()
        self.open_url(authorization_url)
        try:
            return await asyncio.wait_for(asyncio.shield(self._answer), self.timeout)
        except TimeoutError:
            raise TimeoutError("the sign-in was not finished in the browser in time") from None

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                await server.wait_closed()
        if self._answer is not None and not self._answer.done():
            self._answer.cancel()

    # -- the HTTP side ------------------------------------------------------------------

    def _accept(self, target: str) -> tuple[int, str, str]:
        """Decide about one request: ``(status, title, text)`` of the page to answer with."""
        parts = urlsplit(target)
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        waiting = self._answer is not None and not self._answer.done()
        if parts.path != CALLBACK_PATH or not waiting:
            return 404, "Not found", "hostapp is not waiting for a sign-in here."
        if params.get("state") != self._expected_state:
            # Another tab, an old link, or a forged request: not the sign-in we started.
            return (400, "Sign-in not recognised",
                    "This sign-in response does not belong to the sign-in hostapp started.")
        assert self._answer is not None
        self._answer.set_result(params)
        if "error" in params:
            return 200, "Sign-in was not completed", "You can close this tab and return to hostapp."
        return 200, "Signed in", "You can close this tab and return to hostapp."

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            request = None
            while request is None:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await asyncio.wait_for(reader.read(65536), 30)
                    conn.receive_data(data)
                    if not data:
                        return
                elif isinstance(event, h11.Request):
                    request = event
                elif isinstance(event, h11.ConnectionClosed):
                    return
            status, title, text = (
                self._accept(request.target.decode("ascii", "replace"))
                if request.method == b"GET"
                else (405, "Not allowed", "Only the browser's redirect is expected here.")
            )
            body = _DONE_PAGE.format(title=html.escape(title), text=html.escape(text)).encode("utf-8")
            writer.write(conn.send(h11.Response(status_code=status, headers=[
                ("Content-Type", "text/html; charset=utf-8"),
                ("Content-Length", str(len(body))),
                ("Cache-Control", "no-store"),
                ("Connection", "close"),
            ])))
            writer.write(conn.send(h11.Data(data=body)))
            writer.write(conn.send(h11.EndOfMessage()))
            await writer.drain()
        except (TimeoutError, h11.RemoteProtocolError, ConnectionError) as exc:
            log.debug("sign-in redirect listener dropped a connection: %s", type(exc).__name__)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
