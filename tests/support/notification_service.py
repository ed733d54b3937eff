"""A small freedesktop Notifications service for tests, on a private session bus.

It owns ``org.freedesktop.Notifications``, answers ``Notify`` with increasing ids and
``GetCapabilities``/``GetServerInformation`` as a real service does, keeps every
notification it was sent, and can emit ``ActionInvoked`` as if the person clicked.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from jeepney import HeaderFields, MessageType, new_error, new_method_return, new_signal
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import DBusConnection, open_dbus_connection

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"


@dataclass
class Shown:
    id: int
    app: str
    replaces: int
    summary: str
    body: str
    actions: list[str]
    hints: dict[str, Any]


class NotificationService:
    """Run with ``with NotificationService(bus_address) as service:``."""

    def __init__(self, bus_address: str) -> None:
        self.bus_address = bus_address
        self.shown: list[Shown] = []
        self._conn: DBusConnection | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="notification-service", daemon=True)
        self._lock = threading.Lock()

    def __enter__(self) -> NotificationService:
        self._conn = open_dbus_connection(self.bus_address)
        reply = self._conn.send_and_get_reply(message_bus.RequestName(NAME, 4))
        assert reply.body[0] == 1, "could not own the notifications name"
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        if self._conn is not None:
            self._conn.close()

    def _serve(self) -> None:
        assert self._conn is not None
        while not self._stop.is_set():
            try:
                msg = self._conn.receive(timeout=0.2)
            except TimeoutError:
                continue
            except OSError:
                return
            if msg.header.message_type != MessageType.method_call:
                continue
            member = msg.header.fields.get(HeaderFields.member)
            if member == "Notify":
                app, replaces, _icon, summary, body, actions, hints, _timeout = msg.body
                with self._lock:
                    nid = replaces or len(self.shown) + 1
                    self.shown.append(Shown(nid, app, replaces, summary, body, list(actions), dict(hints)))
                self._conn.send(new_method_return(msg, "u", (nid,)))
            elif member == "GetCapabilities":
                self._conn.send(new_method_return(msg, "as", (["actions", "body", "body-markup"],)))
            elif member == "GetServerInformation":
                self._conn.send(new_method_return(msg, "ssss", ("test", "hostapp", "1", "1.2")))
            else:
                self._conn.send(new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod"))

    def wait_for(self, count: int, timeout: float = 30) -> list[Shown]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.shown) >= count:
                    return list(self.shown)
            time.sleep(0.05)
        with self._lock:
            return list(self.shown)

    def click(self, nid: int, action: str = "open") -> None:
        """The person pressed ``action`` on notification ``nid``."""
        assert self._conn is not None
        from jeepney import DBusAddress

        here = DBusAddress(PATH, interface=NAME)
        self._conn.send(new_signal(here, "ActionInvoked", "us", (nid, action)))
