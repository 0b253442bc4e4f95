"""The one place that builds the language-model client the agent team talks to.

Sources, in order: a settings file (``$ASAP_MODEL_CONFIG``, default ``.asap/model.yaml`` when present),
then environment variables, which override the file:

* ``OPENAI_API_KEY`` (+ ``ASAP_MODEL``, default ``gpt-4o-mini``): OpenAI itself.
* ``ASAP_MODEL_BASE_URL`` (+ ``ASAP_MODEL``, ``ASAP_MODEL_API_KEY``): any OpenAI-compatible endpoint
  (vLLM, Ollama, a gateway). Its ``model_info`` must come from the settings file (or
  ``ASAP_MODEL_INFO`` as JSON) and must say ``function_calling: true`` -- the team works through tools.
* nothing: **analyst mode** -- the deterministic :class:`agents.analyst.AnalystClient`.

Misconfiguration (a base URL without ``/v1``, an unreachable endpoint, an unknown model, a model without
tool calling) raises :class:`~bot.errors.AsapError` here, at start-up, never later and never silently.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents.health import ModelHealth
from bot import yamlsafe
from bot.errors import AsapError

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_CONFIG_PATH = Path(".asap") / "model.yaml"
DEFAULT_TOKEN_BUDGET = 60_000

# USD per million tokens (input, output) for models whose public price is known; others need config.
KNOWN_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
}

Mode = Literal["analyst", "openai", "compatible"]


class ModelInfoSettings(BaseModel):
    """What the model can do (autogen's ``ModelInfo``); ``function_calling`` must be true."""

    model_config = ConfigDict(extra="forbid")
    function_calling: bool = Field(description="the model supports tool calls (required)")
    vision: bool = False
    json_output: bool = False
    structured_output: bool = False
    family: str = Field(default="unknown", description="autogen model family, e.g. gpt-4o, llama-3.3-70b, unknown")
    multiple_system_messages: bool | None = None


class PriceSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input_per_mtok: float = Field(ge=0, description="USD per million prompt tokens")
    output_per_mtok: float = Field(ge=0, description="USD per million completion tokens")


class ModelSettings(BaseModel):
    """The settings file (``.asap/model.yaml``)."""

    model_config = ConfigDict(extra="forbid")
    model: str | None = Field(default=None, description="model name as the endpoint knows it")
    base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint ending in /v1")
    api_key_env: str | None = Field(default=None, description="environment variable holding the API key")
    model_info: ModelInfoSettings | None = None
    timeout_s: float = Field(default=60.0, gt=0, description="per model request")
    max_retries: int = Field(default=1, ge=0)
    token_budget: int = Field(default=DEFAULT_TOKEN_BUDGET, gt=0, description="tokens allowed per request")
    price: PriceSettings | None = None
    check_endpoint: bool = Field(default=True, description="probe <base_url>/models at start-up")
    recheck_s: float = Field(default=30.0, gt=0, description="serve/worker: seconds between endpoint re-checks")


@dataclass
class ModelSetup:
    """The built client and what the rest of the team needs to know about it."""

    client: Any
    mode: Mode
    model: str
    token_budget: int
    price: PriceSettings | None
    timeout_s: float
    notes: list[str] = field(default_factory=list)
    factory: Any = None  # rebuilds the client; HTTP clients are bound to the event loop that first used them
    _loop: Any = None
    health: ModelHealth | None = None  # reachability of the endpoint (None in analyst mode)

    def client_for_loop(self) -> Any:
        """The client, rebuilt when called from a different event loop than last time (asyncio.run per event)."""
        import asyncio

        loop = asyncio.get_running_loop()
        if self.factory is not None and self._loop is not None and self._loop is not loop:
            self.client = self.factory()
        self._loop = loop
        return self.client

    @property
    def analyst(self) -> bool:
        return self.mode == "analyst"

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Cost of the given usage, or None when no price is known for this model."""
        if self.mode == "analyst":
            return 0.0
        if self.price is None:
            return None
        return (prompt_tokens * self.price.input_per_mtok + completion_tokens * self.price.output_per_mtok) / 1e6


def load_settings(env: dict[str, str] | None = None) -> tuple[ModelSettings, str | None]:
    """Read the settings file (if any) and apply environment overrides. Returns (settings, file path)."""
    env = dict(os.environ if env is None else env)
    path_text = env.get("ASAP_MODEL_CONFIG")
    path = Path(path_text) if path_text else DEFAULT_CONFIG_PATH
    raw: dict[str, Any] = {}
    source: str | None = None
    if path.is_file():
        source = str(path)
        try:
            loaded = yamlsafe.load(path.read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise AsapError(f"cannot read model settings: {exc}", source=source) from None
        if not isinstance(loaded, dict):
            raise AsapError(f"expected a mapping of model settings, got {type(loaded).__name__}", source=source)
        raw.update(loaded)
    elif path_text:
        raise AsapError("model settings file does not exist", source=path_text, field="ASAP_MODEL_CONFIG")
    if env.get("ASAP_MODEL"):
        raw["model"] = env["ASAP_MODEL"]
    if env.get("ASAP_MODEL_BASE_URL"):
        raw["base_url"] = env["ASAP_MODEL_BASE_URL"]
    if env.get("ASAP_MODEL_INFO"):
        try:
            raw["model_info"] = json.loads(env["ASAP_MODEL_INFO"])
        except json.JSONDecodeError as exc:
            raise AsapError(f"not JSON: {exc.msg}", field="ASAP_MODEL_INFO",
                            hint='e.g. {"function_calling": true, "family": "unknown"}') from None
    if env.get("ASAP_MODEL_RECHECK_S"):
        raw["recheck_s"] = env["ASAP_MODEL_RECHECK_S"]
    if env.get("ASAP_TOKEN_BUDGET"):
        try:
            raw["token_budget"] = int(env["ASAP_TOKEN_BUDGET"])
        except ValueError:
            raise AsapError(f"expected an integer, got {env['ASAP_TOKEN_BUDGET']!r}", field="ASAP_TOKEN_BUDGET") from None
    try:
        return ModelSettings.model_validate(raw), source
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise AsapError(f"{err['msg']}", source=source or "environment", field=loc) from None


def check_base_url(url: str) -> str:
    """Refuse base URLs the openai client would silently mangle; returns the URL without trailing '/'."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise AsapError(f"expected an http(s) URL, got {url!r}", field="ASAP_MODEL_BASE_URL",
                        hint="e.g. http://localhost:8000/v1 (vLLM) or http://localhost:11434/v1 (Ollama)")
    clean = url.rstrip("/")
    if not urlparse(clean).path.endswith("/v1"):
        raise AsapError(
            f"base URL {url!r} does not end in /v1; OpenAI-compatible servers serve /v1/chat/completions",
            field="ASAP_MODEL_BASE_URL",
            hint=f"try {clean}/v1",
        )
    return clean


def probe_endpoint(base_url: str, model: str, api_key: str, timeout_s: float = 5.0) -> list[str]:
    """GET ``<base_url>/models``: the endpoint must answer and (when it lists models) know ``model``."""
    import httpx

    try:
        resp = httpx.get(f"{base_url}/models", headers={"Authorization": f"Bearer {api_key}"}, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise AsapError(f"model endpoint {base_url} is unreachable: {exc}", field="ASAP_MODEL_BASE_URL",
                        hint="is the server running, and is the host/port right?") from None
    if resp.status_code in (401, 403):
        raise AsapError(f"model endpoint {base_url} refused the API key (HTTP {resp.status_code})",
                        field="ASAP_MODEL_API_KEY")
    if resp.status_code == 404:
        raise AsapError(f"no OpenAI-compatible API at {base_url} (GET /models returned 404)",
                        field="ASAP_MODEL_BASE_URL", hint="check the path; it usually ends in /v1")
    if resp.status_code >= 400:
        raise AsapError(f"model endpoint {base_url} answered HTTP {resp.status_code} to GET /models",
                        field="ASAP_MODEL_BASE_URL")
    try:
        ids = [str(m.get("id")) for m in resp.json().get("data", [])]
    except (ValueError, AttributeError):
        raise AsapError(f"model endpoint {base_url} did not return a JSON model list from /models",
                        field="ASAP_MODEL_BASE_URL") from None
    if ids and model not in ids:
        raise AsapError(f"model {model!r} is not served at {base_url}", field="ASAP_MODEL",
                        hint=f"available: {', '.join(ids[:10])}")
    return ids


def build_model(env: dict[str, str] | None = None, *, check: bool = True) -> ModelSetup:
    """Build the team's model client from settings and environment (see module docstring)."""
    env = dict(os.environ if env is None else env)
    settings, source = load_settings(env)
    where = source or "environment"
    if settings.base_url:
        return _compatible(settings, env, where, check)
    if env.get("OPENAI_API_KEY"):
        return _openai(settings, env, where)
    from agents.analyst import AnalystClient

    return ModelSetup(
        client=AnalystClient(),
        mode="analyst",
        model="asap-analyst",
        token_budget=settings.token_budget,
        price=None,
        timeout_s=settings.timeout_s,
        notes=["analyst mode: no language model configured (set OPENAI_API_KEY or ASAP_MODEL_BASE_URL)"],
    )


def _model_info(settings: ModelSettings, where: str) -> dict[str, Any]:
    info = settings.model_info
    assert info is not None
    if not info.function_calling:
        raise AsapError(
            f"model {settings.model!r} is configured without tool calling; ASAP's agents work through tools",
            source=where, field="model_info.function_calling",
            hint="use a model that supports tool/function calling and set function_calling: true",
        )
    out = info.model_dump(exclude_none=True)
    return out


def _price(settings: ModelSettings, model: str) -> PriceSettings | None:
    if settings.price:
        return settings.price
    known = KNOWN_PRICES.get(model)
    return PriceSettings(input_per_mtok=known[0], output_per_mtok=known[1]) if known else None


def _compatible(settings: ModelSettings, env: dict[str, str], where: str, check: bool) -> ModelSetup:
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    base_url = check_base_url(settings.base_url or "")
    if not settings.model:
        raise AsapError("an OpenAI-compatible endpoint needs a model name", source=where, field="model",
                        hint="set ASAP_MODEL or model: in the settings file")
    if settings.model_info is None:
        raise AsapError(
            f"model info for {settings.model!r} is missing; ASAP must know the model supports tool calling",
            source=where, field="model_info",
            hint='add model_info: {function_calling: true, family: unknown} to .asap/model.yaml or set ASAP_MODEL_INFO',
        )
    info = _model_info(settings, where)
    key_env = settings.api_key_env or "ASAP_MODEL_API_KEY"
    api_key = env.get(key_env) or env.get("OPENAI_API_KEY") or "not-needed"
    notes = []
    model = settings.model
    health = ModelHealth(lambda: probe_endpoint(base_url, model, api_key, timeout_s=min(settings.timeout_s, 5.0)),
                         recheck_s=settings.recheck_s)
    if check and settings.check_endpoint:
        probe_endpoint(base_url, settings.model, api_key, timeout_s=min(settings.timeout_s, 5.0))
        health.state, health.checked_at = "ok", time.monotonic()
    else:
        notes.append("endpoint not probed at start-up")
    def factory() -> Any:
        return OpenAIChatCompletionClient(
            model=settings.model or "", base_url=base_url, api_key=api_key, model_info=info,  # type: ignore[arg-type]
            timeout=settings.timeout_s, max_retries=settings.max_retries,
        )

    return ModelSetup(client=factory(), mode="compatible", model=settings.model, token_budget=settings.token_budget,
                      price=_price(settings, settings.model), timeout_s=settings.timeout_s, notes=notes, factory=factory,
                      health=health)


def _openai(settings: ModelSettings, env: dict[str, str], where: str) -> ModelSetup:
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    model = settings.model or DEFAULT_OPENAI_MODEL
    kwargs: dict[str, Any] = {}
    if settings.model_info is not None:
        kwargs["model_info"] = _model_info(settings, where)
    def factory() -> Any:
        return OpenAIChatCompletionClient(
            model=model, api_key=env["OPENAI_API_KEY"], timeout=settings.timeout_s,
            max_retries=settings.max_retries, **kwargs,
        )

    try:
        client = factory()
    except ValueError as exc:
        raise AsapError(f"cannot use OpenAI model {model!r}: {exc}", source=where, field="model",
                        hint="give model_info (function_calling: true, family) in .asap/model.yaml for models autogen does not know") from None
    if not client.model_info.get("function_calling"):
        raise AsapError(f"OpenAI model {model!r} does not support tool calling", source=where, field="model")
    base_url = (env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")  # the openai SDK's own variable
    api_key = env["OPENAI_API_KEY"]
    health = ModelHealth(lambda: probe_endpoint(base_url, model, api_key, timeout_s=min(settings.timeout_s, 5.0)),
                         recheck_s=settings.recheck_s)
    return ModelSetup(client=client, mode="openai", model=model, token_budget=settings.token_budget,
                      price=_price(settings, model), timeout_s=settings.timeout_s, factory=factory, health=health)
