"""A view's sandbox: QtWebEngine with one page per view and nothing but the bridge.

The page is a small host document (loaded once, from memory) holding one ``<iframe
sandbox="allow-scripts">`` into which the view's HTML goes as ``srcdoc``: the view runs in
an opaque origin (no storage, no cookies, no access to the host document, no top-level
navigation, no popups) under the content policy built from its declared origins, which a
``srcdoc`` frame inherits from the host document and which is also written into the view's
own head. Around that:

- its own off-the-record :class:`QWebEngineProfile` per view: nothing shared with other
  views or written to disk; no file access, no clipboard, no plugins, no downloads, every
  permission (camera, microphone, location, notifications…) denied;
- a network filter on the page (:class:`NetworkFilter`) that lets a request through only to
  an origin the view's resource declared (none by default), whatever the document says,
  and loads no document from the network at all (no navigation, no nested frame);
- no navigation: the policy's ``frame-src 'none'`` stops the view's frame from loading
  anything else (the host document hears of it), the network filter loads no document,
  and :meth:`SandboxPage.acceptNavigationRequest` refuses every navigation of the page but
  its host document's own load;
- the bridge: a ``QWebChannel`` object exposed only in the host's isolated JavaScript world
  (``ApplicationWorld``), never in the view's. A script there relays ``postMessage``
  between the view's frame and Python, text only; Python checks every message
  (:func:`hostapp.protocol.apps.check_view_message`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, QFile, QIODevice, QObject, QUrl, Signal, Slot
from PySide6.QtWebChannel import QWebChannel
from PySide6.QtWebEngineCore import (
    QWebEngineDownloadRequest,
    QWebEnginePage,
    QWebEngineProfile,
    QWebEngineScript,
    QWebEngineSettings,
    QWebEngineUrlRequestInfo,
    QWebEngineUrlRequestInterceptor,
)
from PySide6.QtWebEngineWidgets import QWebEngineView
from PySide6.QtWidgets import QWidget

from hostapp.protocol.apps import MAX_MESSAGE_BYTES, ViewResource, content_security_policy, url_allowed

log = logging.getLogger(__name__)

#: Most refused requests and navigations remembered per view (shown to the person).
MAX_REFUSALS = 200

_HOST_DOCUMENT = """<!doctype html><html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{policy}">
<style>html,body{{margin:0;padding:0;background:transparent}}
iframe{{display:block;border:0;width:100%;height:{height}}}</style></head>
<body><iframe id="view" sandbox="allow-scripts" referrerpolicy="no-referrer" allow=""
title="App view"></iframe></body></html>"""

# Runs in the isolated world of the host document only: the view's frame never sees `qt`.
_RELAY = """
(function () {
  var MAX = %(max)d;
  new QWebChannel(qt.webChannelTransport, function (channel) {
    var bridge = channel.objects.bridge;
    var frame = document.getElementById('view');
    bridge.loadView.connect(function (html) { frame.srcdoc = html; });
    bridge.toView.connect(function (text) {
      if (frame.contentWindow) frame.contentWindow.postMessage(JSON.parse(text), '*');
    });
    bridge.resize.connect(function (height) { frame.style.height = height + 'px'; });
    // The view's frame navigating away breaks this document's frame-src: reported here,
    // where the view cannot make one up.
    document.addEventListener('securitypolicyviolation', function (event) {
      bridge.violation(String(event.effectiveDirective), String(event.blockedURI));
    });
    window.addEventListener('message', function (event) {
      if (event.source !== frame.contentWindow) return;
      var text;
      try { text = JSON.stringify(event.data); } catch (e) { text = null; }
      if (typeof text !== 'string') text = '"unserializable"';
      if (text.length > MAX) text = '"oversize"';
      bridge.fromView(text);
    });
    bridge.ready();
  });
})();
"""


#: WebRTC off, in every frame of a view: neither the content policy nor the network filter
#: sees its STUN and TURN traffic (a TURN user name carries whatever a view puts in it), so
#: its interfaces are taken away before the view's first script runs. Chromium is also
#: started with non-proxied UDP off for WebRTC (:func:`hostapp.ui.apps.prepare_process`).
WEBRTC_NAMES = ("RTCPeerConnection", "webkitRTCPeerConnection", "RTCDataChannel", "RTCSessionDescription",
                "RTCIceCandidate", "RTCRtpSender", "RTCRtpReceiver", "RTCRtpTransceiver", "RTCCertificate",
                "RTCDtlsTransport", "RTCIceTransport", "RTCSctpTransport", "RTCDTMFSender",
                "RTCPeerConnectionIceEvent", "RTCDataChannelEvent", "RTCTrackEvent", "RTCError",
                "RTCErrorEvent", "RTCStatsReport", "RTCEncodedAudioFrame", "RTCEncodedVideoFrame")
NO_WEBRTC = ("(function(){var n=" + json.dumps(WEBRTC_NAMES) + ";for(var i=0;i<n.length;i++){try{"
             "Object.defineProperty(window,n[i],{value:undefined,writable:false,configurable:false});"
             "}catch(e){}}})();")


def _webchannel_js() -> str:
    f = QFile(":/qtwebchannel/qwebchannel.js")
    if not f.open(QIODevice.OpenModeFlag.ReadOnly):
        raise RuntimeError("QtWebChannel's qwebchannel.js is missing from this Qt")
    try:
        return bytes(f.readAll().data()).decode("utf-8")
    finally:
        f.close()


def with_policy(html: str, policy: str) -> str:
    """The view's HTML with the content policy as the first element of its head, and the
    script that takes WebRTC away (:data:`NO_WEBRTC`) right after it."""
    meta = f'<meta http-equiv="Content-Security-Policy" content="{policy}"><script>{NO_WEBRTC}</script>'
    for pattern in (r"<head(\s[^>]*)?>", r"<html(\s[^>]*)?>"):
        match = re.search(pattern, html, re.IGNORECASE)
        if match:
            return html[:match.end()] + meta + html[match.end():]
    return meta + html


class NetworkFilter(QWebEngineUrlRequestInterceptor):
    """Lets a request through only to the view's declared origins (and data:/blob:)."""

    def __init__(self, origins: tuple[str, ...], refused: Callable[[str, str], None], parent: QObject) -> None:
        super().__init__(parent)
        self.origins = origins
        self._refused = refused

    def interceptRequest(self, info: QWebEngineUrlRequestInfo) -> None:
        url = info.requestUrl().toString()
        kinds = QWebEngineUrlRequestInfo.ResourceType
        if info.resourceType() in (kinds.ResourceTypeMainFrame, kinds.ResourceTypeSubFrame):
            # A document load is a navigation: the frame going away (which not every
            # Chromium navigation reports to acceptNavigationRequest) or a nested frame.
            # Only the host document and the view's srcdoc are ever loaded.
            if not url.startswith(("data:", "about:")):
                info.block(True)
                self._refused("navigation", url)
            return
        if not url_allowed(url, self.origins):
            info.block(True)
            self._refused("request", url)


class SandboxPage(QWebEnginePage):
    """A page that stays where it was put: no navigation, no new windows, no permissions."""

    def __init__(self, profile: QWebEngineProfile, refused: Callable[[str, str], None], parent: QObject) -> None:
        super().__init__(profile, parent)
        self._refused = refused
        self._host_loaded = False
        self.permissionRequested.connect(lambda permission: permission.deny())
        self.fileSystemAccessRequested.connect(lambda request: request.reject())
        self.desktopMediaRequested.connect(lambda request: request.cancel())

    def acceptNavigationRequest(self, url: QUrl | str, kind: QWebEnginePage.NavigationType,
                                is_main_frame: bool) -> bool:
        text = url.toString() if isinstance(url, QUrl) else str(url)
        if is_main_frame and not self._host_loaded and text.startswith("data:text/html"):
            self._host_loaded = True  # the host document, put there by load()
            return True
        if not is_main_frame and text in ("about:srcdoc", "about:blank"):
            return True  # the view's frame taking its srcdoc
        self._refused("navigation", text)
        return False

    def createWindow(self, kind: QWebEnginePage.WebWindowType) -> QWebEnginePage:
        self._refused("window", str(kind))
        return None  # type: ignore[return-value]  # None: no window is made

    def javaScriptConsoleMessage(self, level: QWebEnginePage.JavaScriptConsoleMessageLevel,
                                 message: str, line: int, source: str) -> None:
        log.debug("app view console: %s", message[:500])


class _BridgeObject(QObject):
    """The one object of the channel: text in, text out."""

    toView = Signal(str)
    loadView = Signal(str)
    resize = Signal(int)

    def __init__(self, on_ready: Callable[[], None], on_message: Callable[[str], None],
                 on_violation: Callable[[str, str], None], parent: QObject) -> None:
        super().__init__(parent)
        self._on_ready = on_ready
        self._on_message = on_message
        self._on_violation = on_violation

    @Slot(str, str)
    def violation(self, directive: str, target: str) -> None:
        self._on_violation("navigation" if directive == "frame-src" else directive[:40], target)

    @Slot()
    def ready(self) -> None:
        self._on_ready()

    @Slot(str)
    def fromView(self, text: str) -> None:
        self._on_message(text)


def _lock_down(profile: QWebEngineProfile) -> None:
    profile.setHttpCacheType(QWebEngineProfile.HttpCacheType.MemoryHttpCache)
    profile.setPersistentCookiesPolicy(QWebEngineProfile.PersistentCookiesPolicy.NoPersistentCookies)
    profile.setPersistentPermissionsPolicy(QWebEngineProfile.PersistentPermissionsPolicy.AskEveryTime)
    profile.setSpellCheckEnabled(False)
    profile.downloadRequested.connect(lambda item: item.cancel() if isinstance(item, QWebEngineDownloadRequest)
                                      else None)
    settings = profile.settings()
    attr = QWebEngineSettings.WebAttribute
    for name in ("LocalContentCanAccessFileUrls", "LocalContentCanAccessRemoteUrls", "LocalStorageEnabled",
                 "JavascriptCanOpenWindows", "JavascriptCanAccessClipboard", "JavascriptCanPaste",
                 "PluginsEnabled", "PdfViewerEnabled", "AllowGeolocationOnInsecureOrigins",
                 "AllowRunningInsecureContent", "ScreenCaptureEnabled", "AllowWindowActivationFromJavaScript",
                 "NavigateOnDropEnabled", "FullScreenSupportEnabled", "HyperlinkAuditingEnabled",
                 "DnsPrefetchEnabled", "FocusOnNavigationEnabled", "ErrorPageEnabled", "WebGLEnabled"):
        settings.setAttribute(getattr(attr, name), False)
    settings.setAttribute(attr.WebRTCPublicInterfacesOnly, True)
    settings.setAttribute(attr.JavascriptEnabled, True)


class AppSandbox(QWebEngineView):
    """One view, rendered. ``messageReceived`` carries each raw message the view sent;
    :meth:`post` sends one; ``refused`` reports what the sandbox stopped (kind, target)."""

    messageReceived = Signal(str)
    refused = Signal(str, str)
    bridgeReady = Signal()

    def __init__(self, resource: ViewResource, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.resource = resource
        self.refusals: list[tuple[str, str]] = []
        self._ready = False
        # Its own off-the-record profile (no storage name): nothing shared, nothing on disk.
        # It must outlive its page: it goes once the page is gone (or with the application).
        self.profile = QWebEngineProfile(QCoreApplication.instance())
        _lock_down(self.profile)
        page = SandboxPage(self.profile, self._refuse, self)
        page.destroyed.connect(self.profile.deleteLater)
        self.network_filter = NetworkFilter(resource.csp.network, self._refuse, page)
        page.setUrlRequestInterceptor(self.network_filter)
        self._bridge = _BridgeObject(self._bridge_ready, self.messageReceived.emit, self._refuse, page)
        self._channel = QWebChannel(page)
        self._channel.registerObject("bridge", self._bridge)
        page.setWebChannel(self._channel, QWebEngineScript.ScriptWorldId.ApplicationWorld)
        relay = QWebEngineScript()
        relay.setName("hostapp-app-relay")
        relay.setWorldId(QWebEngineScript.ScriptWorldId.ApplicationWorld)
        relay.setInjectionPoint(QWebEngineScript.InjectionPoint.DocumentReady)
        relay.setRunsOnSubFrames(False)
        relay.setSourceCode(_webchannel_js() + _RELAY % {"max": MAX_MESSAGE_BYTES})
        page.scripts().insert(relay)
        # In the view's own world, in every frame (a nested frame is a fresh window with
        # its own constructors), before any of the view's scripts.
        no_webrtc = QWebEngineScript()
        no_webrtc.setName("hostapp-no-webrtc")
        no_webrtc.setWorldId(QWebEngineScript.ScriptWorldId.MainWorld)
        no_webrtc.setInjectionPoint(QWebEngineScript.InjectionPoint.DocumentCreation)
        no_webrtc.setRunsOnSubFrames(True)
        no_webrtc.setSourceCode(NO_WEBRTC)
        page.scripts().insert(no_webrtc)
        self.setPage(page)
        self.policy = content_security_policy(resource.csp)

    def _refuse(self, kind: str, target: str) -> None:
        if len(self.refusals) < MAX_REFUSALS:
            self.refusals.append((kind, target[:300]))
        log.info("app view %s: refused %s to %s", self.resource.uri, kind, target[:300])
        self.refused.emit(kind, target[:300])

    def load_view(self, initial_height: str = "100vh") -> None:
        """Load the host document; the view's HTML follows once the bridge is up."""
        self.page().setHtml(_HOST_DOCUMENT.format(policy=self.policy, height=initial_height), QUrl("about:blank"))

    def _bridge_ready(self) -> None:
        if self._ready:
            return  # once per view: a reloaded host document gets nothing more
        self._ready = True
        self._bridge.loadView.emit(with_policy(self.resource.html, self.policy))
        self.bridgeReady.emit()

    def post(self, message: dict) -> None:
        self._bridge.toView.emit(json.dumps(message, ensure_ascii=False))

    def set_view_height(self, height: int) -> None:
        self._bridge.resize.emit(int(height))
