"""Desktop notifications from the owner when no window is open.

The owner speaks the freedesktop Notifications service (``org.freedesktop.Notifications``
on the session D-Bus, as GNOME, KDE, Xfce, dunst and mako provide it) through jeepney:
an operation that finished, failed, ended unknown or needs the person's answer gets one
notification, with an action that opens the window. While a window is connected it shows
these itself, so the owner stays quiet.

Server-supplied text is escaped: a notification server that renders body markup must
show it as the plain text it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, Protocol

from hostapp.engine import api

if sys.platform.startswith("linux") or sys.platform.startswith("freebsd"):
    from jeepney import DBusAddress, MatchRule, new_method_call
    from jeepney.io.asyncio import DBusRouter, open_dbus_router

log = logging.getLogger(__name__)

class Notifier(Protocol):
    """What the owner needs of a platform's notifications."""

    async def start(self) -> bool: ...

    async def operation_changed(self, op: api.OperationView) -> None: ...

    async def close(self) -> None: ...


class NoNotifier:
    """Where the owner has no notification service to speak to (macOS and Windows for
    now: the window, when open, tells the person there)."""

    async def start(self) -> bool:
        return False

    async def operation_changed(self, op: api.OperationView) -> None:
        return None

    async def close(self) -> None:
        return None


def make_notifier(on_open: Callable[[str], None] | None = None) -> Notifier:
    if sys.platform.startswith("linux") or sys.platform.startswith("freebsd"):
        return DesktopNotifier(on_open)
    return NoNotifier()


def _service() -> DBusAddress:
    return DBusAddress("/org/freedesktop/Notifications", bus_name="org.freedesktop.Notifications",
                       interface="org.freedesktop.Notifications")


APP_NAME = "hostapp"
OPEN_ACTION = "open"

#: What a person reads first, per outcome (the outcome's own word).
TITLES = {
    api.OperationStatus.COMPLETED: "Completed",
    api.OperationStatus.FAILED: "Failed",
    api.OperationStatus.UNKNOWN: "Outcome unknown",
    api.OperationStatus.EXPIRED: "Expired",
}
NEEDS_INPUT = "Needs your input"


def describe(op: api.OperationView) -> tuple[str, str] | None:
    """The title and body of a notification for ``op``'s state, or None when it warrants none."""
    title = NEEDS_INPUT if op.needs_input or op.status == api.OperationStatus.INPUT_REQUIRED \
        else TITLES.get(api.OperationStatus(op.status))
    if title is None:
        return None
    what = f"{op.tool or op.method} on {op.server}"
    message = (op.message or "").strip()
    body = f"{what}: {message}" if message else what
    return f"{title}: {op.tool or op.method}", body[:500]


class DesktopNotifier:
    """Sends notifications and hears their actions; quiet (logs once) without a service."""

    def __init__(self, on_open: Callable[[str], None] | None = None) -> None:
        self._on_open = on_open
        self._router: DBusRouter | None = None
        self._router_cm: Any = None
        self._listening: asyncio.Task[None] | None = None
        self._shown: dict[int, str] = {}  # notification id -> operation id
        self._said: dict[str, str] = {}  # operation id -> the title last shown for it
        self._unavailable = False

    async def start(self) -> bool:
        if not os.environ.get("DBUS_SESSION_BUS_ADDRESS") and not os.environ.get("XDG_RUNTIME_DIR"):
            self._unavailable = True
            log.info("no session bus: desktop notifications are off")
            return False
        try:
            self._router_cm = open_dbus_router(bus="SESSION")
            self._router = await self._router_cm.__aenter__()
        except (OSError, KeyError, ValueError) as exc:
            self._unavailable = True
            log.info("no session bus (%s): desktop notifications are off", exc)
            return False
        service = _service()
        rule = MatchRule(type="signal", interface=service.interface, path=service.object_path)
        await self._add_match(rule)
        handle = self._router.filter(rule, bufsize=100)
        self._listening = asyncio.get_running_loop().create_task(self._listen(handle))
        return True

    async def _add_match(self, rule: MatchRule) -> None:
        assert self._router is not None
        bus = DBusAddress("/org/freedesktop/DBus", bus_name="org.freedesktop.DBus", interface="org.freedesktop.DBus")
        await self._router.send_and_get_reply(new_method_call(bus, "AddMatch", "s", (rule.serialise(),)))

    async def _listen(self, handle: Any) -> None:
        with handle as queue:
            while True:
                message = await queue.get()
                member = message.header.fields.get(3)  # HeaderFields.member
                if member == "ActionInvoked":
                    nid, action = message.body
                    op_id = self._shown.get(int(nid))
                    if op_id is not None and action in (OPEN_ACTION, "default") and self._on_open is not None:
                        self._on_open(op_id)
                elif member == "NotificationClosed":
                    self._shown.pop(int(message.body[0]), None)

    async def close(self) -> None:
        if self._listening is not None:
            self._listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listening
        if self._router_cm is not None:
            with contextlib.suppress(Exception):
                await self._router_cm.__aexit__(None, None, None)
        self._router = None

    async def operation_changed(self, op: api.OperationView) -> None:
        """Notify once per state worth telling (a repeat of the same state says nothing)."""
        text = describe(op)
        if text is None or self._router is None:
            return
        title, body = text
        if self._said.get(op.id) == title:
            return
        self._said[op.id] = title
        replaces = next((nid for nid, oid in self._shown.items() if oid == op.id), 0)
        hints: dict[str, tuple[str, Any]] = {"category": ("s", "transfer.complete" if title.startswith("Completed")
                                                          else "transfer.error" if not title.startswith(NEEDS_INPUT)
                                                          else "im.received")}
        if title.startswith(NEEDS_INPUT):
            hints["urgency"] = ("y", 2)
        call = new_method_call(_service(), "Notify", "susssasa{sv}i", (
            APP_NAME, replaces, "io.github.hostapp.hostapp", html.escape(title, quote=False),
            html.escape(body, quote=False), [OPEN_ACTION, "Open hostapp"], hints, -1))
        try:
            reply = await asyncio.wait_for(self._router.send_and_get_reply(call), 5)
        except (TimeoutError, OSError) as exc:
            log.info("a notification could not be shown: %s", exc)
            return
        if reply.header.message_type.name == "error":
            if not self._unavailable:
                log.info("no notification service on the session bus: %s", reply.body)
            self._unavailable = True
            return
        self._shown[int(reply.body[0])] = op.id
