"""Sampling: a server asks the person's language model for a message.

A ``sampling/createMessage`` travels like a question (:mod:`hostapp.engine.questions`):
the :class:`SamplingGate` admits it (bounded in size and rate per server) and shows it to
the person, who writes the reply, or has the configured model draft one
(:meth:`SamplingGate.draft`) and reviews it; a server the person set to "approve
automatically" is answered by the model without asking. Every step is a timeline event.

The model endpoint is configured once per home: an OpenAI-compatible chat-completions
endpoint (OpenAI, Ollama, llama.cpp's server, vLLM, LM Studio), its base URL and model
names in ``<home>/model.json`` (0600, no secret), its API key in the OS keyring under a
fixed reference. The key is sent as a bearer token and nowhere else: never to the journal,
the logs, or an error's text.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hostapp.engine import api
from hostapp.protocol import sampling as S
from hostapp.protocol.jsonrpc import INTERNAL_ERROR, RpcError

if TYPE_CHECKING:
    from hostapp.store.secrets import SecretStore

log = logging.getLogger(__name__)

#: The keyring reference kind of the model endpoint's API key.
KEY_KIND = "model_key"
#: Sampling policies of a server: ask the person every time, or let the model answer.
ASK, AUTO = "ask", "auto"
#: How long the model may take to answer one request.
MODEL_TIMEOUT = 120.0
#: The most of the model's answer read (a reply of ``max_tokens`` tokens is far smaller).
MAX_ANSWER_BYTES = 4 * 1024 * 1024


class ModelError(api.EngineError):
    """The model endpoint is not configured, or did not answer with a message."""


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """The model endpoint and the sampling policy, as kept in ``model.json``."""

    base_url: str = ""
    models: tuple[str, ...] = ()
    #: Whether an API key is kept in the keyring (the key itself never is here): a local
    #: model needs none, and then the keyring is not read at all.
    keyed: bool = False
    auto_approve: tuple[str, ...] = ()  # servers whose sampling requests the model answers unasked
    limits: S.Limits = field(default_factory=S.Limits)

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.models)

    def view(self) -> api.JsonObject:
        return {"base_url": self.base_url or None, "models": list(self.models), "api_key": self.keyed,
                "auto_approve": list(self.auto_approve), "limits": asdict(self.limits)}


def settings_path(home: Path) -> Path:
    return Path(home) / "model.json"


def read_settings(home: Path) -> ModelSettings:
    path = settings_path(home)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return ModelSettings()
    except (OSError, ValueError) as exc:
        log.warning("%s cannot be read (%s); sampling has no model", path, exc)
        return ModelSettings()
    limits = data.get("limits") if isinstance(data.get("limits"), dict) else {}
    return ModelSettings(
        base_url=str(data.get("base_url") or ""),
        models=tuple(str(m) for m in data.get("models") or () if isinstance(m, str)),
        keyed=data.get("keyed") is True,
        auto_approve=tuple(str(s) for s in data.get("auto_approve") or () if isinstance(s, str)),
        limits=S.Limits(**{k: int(v) for k, v in limits.items()
                           if k in S.Limits.__dataclass_fields__ and isinstance(v, int) and v > 0}))


def write_settings(home: Path, settings: ModelSettings) -> None:
    from hostapp.store.paths import private_file

    path = private_file(settings_path(home))
    data = {"base_url": settings.base_url, "models": list(settings.models), "keyed": settings.keyed,
            "auto_approve": list(settings.auto_approve), "limits": asdict(settings.limits)}
    tmp = path.with_suffix(".tmp")
    private_file(tmp).write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def check_base_url(url: str) -> str:
    """The base URL without a trailing slash; InvalidRequest unless it is http(s)."""
    import httpx

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise api.InvalidRequest(f"the model's base URL cannot be read: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise api.InvalidRequest("the model's base URL must be an http or https address, such as "
                                 "https://api.openai.com/v1 or http://127.0.0.1:11434/v1")
    if parsed.userinfo:
        raise api.InvalidRequest("the model's base URL must not carry a user name or password: "
                                 "give the key with --api-key-stdin")
    return url.rstrip("/")


class RateWindow:
    """How many requests each server made in the last minute."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._seen: dict[str, deque[float]] = {}

    def admit(self, server: str, per_minute: int) -> bool:
        now = self._clock()
        seen = self._seen.setdefault(server, deque())
        while seen and seen[0] <= now - 60.0:
            seen.popleft()
        if len(seen) >= per_minute:
            return False
        seen.append(now)
        return True


class SamplingGate:
    """The sampling side of the question desk: admits a request, answers it with the model
    when the server's policy says so, drafts a reply for the person, and builds the result.

    ``secrets`` is read at each use (the engine's store may be replaced in tests)."""

    def __init__(self, home: Path, secrets: Callable[[], SecretStore]):
        self.home = Path(home)
        self._secrets = secrets
        self.rate = RateWindow()

    # -- settings --------------------------------------------------------------------

    def settings(self) -> ModelSettings:
        return read_settings(self.home)

    def _key_ref(self) -> str:
        return self._secrets().fixed_ref(KEY_KIND)

    async def _key(self) -> str:
        from hostapp.store.secret_refs import SecretMissing

        store = self._secrets()
        try:
            return await asyncio.get_running_loop().run_in_executor(None, store.get, self._key_ref())
        except SecretMissing:
            raise ModelError("the model's API key is no longer in the keyring: set it again with "
                             "'hostapp model set ... --api-key-stdin'") from None

    async def view(self) -> api.JsonObject:
        return self.settings().view()

    async def configure(self, base_url: str, models: list[str], api_key: str | None) -> api.JsonObject:
        """Set the endpoint (``api_key`` None keeps the kept one, "" removes it)."""
        models = [m.strip() for m in models if m.strip()]
        if not models:
            raise api.InvalidRequest("name at least one model (--model NAME)")
        base = check_base_url(base_url)
        store = self._secrets()
        loop = asyncio.get_running_loop()
        if api_key:
            await loop.run_in_executor(None, store.put_at, self._key_ref(), api_key)
        elif api_key == "":
            await loop.run_in_executor(None, store.delete, self._key_ref())
        settings = self.settings()
        keyed = settings.keyed if api_key is None else bool(api_key)
        write_settings(self.home, replace(settings, base_url=base, models=tuple(models), keyed=keyed))
        return await self.view()

    async def clear(self) -> None:
        """Forget the endpoint and its key; the per-server policies go with it."""
        if self.settings().keyed:
            store = self._secrets()
            await asyncio.get_running_loop().run_in_executor(None, store.delete, self._key_ref())
        with contextlib.suppress(FileNotFoundError):
            settings_path(self.home).unlink()

    def set_policy(self, server: str, policy: str) -> None:
        if policy not in (ASK, AUTO):
            raise api.InvalidRequest(f"a sampling policy is {ASK!r} or {AUTO!r}, not {policy!r}")
        settings = self.settings()
        others = tuple(s for s in settings.auto_approve if s != server)
        write_settings(self.home, replace(settings, auto_approve=(*others, server) if policy == AUTO else others))

    # -- requests --------------------------------------------------------------------

    def admit(self, server: str, params: dict[str, Any]) -> S.SamplingRequest:
        """The request if it may be shown: well-formed, within the size bound, and within
        the server's rate; RpcError (with a message for the server) otherwise."""
        limits = self.settings().limits
        request = S.check_request(params, limits)
        if not self.rate.admit(server, limits.per_minute):
            raise RpcError(INTERNAL_ERROR, f"{server} asked for sampling more than {limits.per_minute} "
                                           "times in a minute; hostapp refuses the rest until the minute is over")
        return request

    def auto_approved(self, server: str) -> bool:
        settings = self.settings()
        return settings.configured and server in settings.auto_approve

    async def draft(self, params: dict[str, Any]) -> dict[str, str]:
        """The configured model's reply to the request: ``{"text", "model", "stopReason"}``
        for the person to review. ModelError when there is no model or it failed."""
        settings = self.settings()
        if not settings.configured:
            raise ModelError("no model is configured: set one with 'hostapp model set --base-url URL --model NAME'")
        request = S.describe_request(params)
        model = S.choose_model(request.model_hints, settings.models)
        try:
            body = S.chat_completion_body(request, model, settings.limits)
        except ValueError as exc:
            raise ModelError(str(exc)) from None
        key = await self._key() if settings.keyed else None
        answer = await _post(settings.base_url, body, key)
        try:
            return S.read_chat_completion(answer, model)
        except ValueError as exc:
            raise ModelError(f"{settings.base_url}: {exc}") from None


async def _post(base_url: str, body: dict[str, Any], key: str | None) -> Any:
    import httpx

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = f"{base_url}/chat/completions"
    try:
        async with httpx.AsyncClient(timeout=MODEL_TIMEOUT, follow_redirects=False) as client, \
                client.stream("POST", url, json=body, headers=headers) as response:
            data = bytearray()
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > MAX_ANSWER_BYTES:
                    raise ModelError(f"{url} answered with more than {MAX_ANSWER_BYTES} bytes")
    except httpx.HTTPError as exc:
        raise ModelError(_scrubbed(f"the model at {url} cannot be reached: {type(exc).__name__}: {exc}", key)) \
            from None
    if response.status_code >= 400:
        said = bytes(data[:300]).decode("utf-8", "replace")
        raise ModelError(_scrubbed(f"the model at {url} answered HTTP {response.status_code}: {said}", key))
    try:
        return json.loads(data)
    except ValueError:
        raise ModelError(f"the model at {url} answered with something that is not JSON") from None


def _scrubbed(text: str, key: str | None) -> str:
    """``text`` without the key (an endpoint may echo the Authorization header back)."""
    return text.replace(key, "[the API key]") if key else text
