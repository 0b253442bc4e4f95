"""The HTTP front: health, readiness, metrics, the jobs route, and the integrations' routes.

- ``GET /healthz``: the process is up (no dependencies checked; for liveness probes and Docker).
- ``GET /readyz``: the memory store and the queue answer (503 with the failing part otherwise); ``model``
  says whether the language model endpoint answers (``ok`` / ``down: <reason>``). A model that is down
  does not make the service unready: jobs are answered in analyst mode with a note until it is back.
- ``GET /metrics``: Prometheus text (see :mod:`bot.runtime.metrics`).
- ``POST /v1/jobs`` and ``GET /v1/jobs/{id}``: submit a ``cli`` job and read its result; enabled only when
  ``ASAP_API_TOKEN`` is set (``Authorization: Bearer <token>``).
- Integrations: each entry of :data:`ROUTE_SETUPS` names a module with
  ``setup_routes(app: web.Application, ctx: RuntimeContext) -> None`` and the environment variables that
  enable it (Slack: ``SLACK_SIGNING_SECRET`` or ``SLACK_APP_TOKEN``; GitHub: ``GITHUB_WEBHOOK_SECRET``).
"""

from __future__ import annotations

import asyncio
import hmac
import importlib
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

import orjson
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.errors import AsapError, hide_paths
from bot.runtime.context import RuntimeContext
from bot.runtime.jobs import Job, Requester, new_job_id
from bot.runtime.metrics import CONTENT_TYPE

log = logging.getLogger("asap.runtime.server")

CTX_KEY: web.AppKey[RuntimeContext] = web.AppKey("asap_ctx", RuntimeContext)


@dataclass(frozen=True)
class RouteSetup:
    """An integration: its routes (``module:function``, on the front) and the module that registers its job
    handlers (imported in every process, workers included), enabled when any of ``env_any`` is set."""

    name: str
    target: str
    env_any: tuple[str, ...]
    handlers: str | None = None

    def enabled(self, env: Mapping[str, str]) -> bool:
        return any(env.get(v) for v in self.env_any)


ROUTE_SETUPS: list[RouteSetup] = [
    RouteSetup("slack", "integrations.slack.app:setup_routes", ("SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"),
               "integrations.slack.handlers"),
    RouteSetup("github", "integrations.github.webhook:setup_routes", ("GITHUB_WEBHOOK_SECRET",),
               "integrations.github.handlers"),
]


def register_route_setup(name: str, target: str, env_any: tuple[str, ...], handlers: str | None = None) -> None:
    """Add or replace an integration's route hook (by name)."""
    ROUTE_SETUPS[:] = [r for r in ROUTE_SETUPS if r.name != name] + [RouteSetup(name, target, env_any, handlers)]


def load_integration_handlers(env: Mapping[str, str] | None = None) -> list[str]:
    """Import the handler modules of every configured integration (a worker has no routes to pull them in).

    Returns the integrations loaded; one that is configured but cannot load is a clear :class:`AsapError`.
    """
    env = os.environ if env is None else env
    loaded = []
    for setup in ROUTE_SETUPS:
        if setup.handlers and setup.enabled(env):
            try:
                importlib.import_module(setup.handlers)
            except ImportError as exc:
                raise AsapError(f"{setup.name} is configured ({' or '.join(setup.env_any)} set) but its job "
                                f"handlers cannot be loaded from {setup.handlers}: {exc}", field=setup.env_any[0],
                                hint=f"unset {' and '.join(setup.env_any)} or install the {setup.name} integration") from None
            loaded.append(setup.name)
    return loaded


class JobRequest(BaseModel):
    """The body of ``POST /v1/jobs``."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=4000)
    kind: str = "ask"
    run: str | None = None
    thread: str | None = Field(default=None, max_length=256)
    user: str = Field(default="api", min_length=1, max_length=128)
    id: str | None = Field(default=None, min_length=1, max_length=200)
    deadline_s: float | None = Field(default=None, gt=0, le=3600)

    @field_validator("kind", "run", "thread", "user", "id")
    @classmethod
    def _printable(cls, v: str | None) -> str | None:
        if v is not None and not _printable_id(v):
            raise ValueError("must be printable text (no control characters such as NUL or newlines)")
        return v


def _printable_id(value: str) -> bool:
    """Ids, threads and users are short printable strings (what the stores accept)."""
    return 0 < len(value) <= 512 and value.isprintable()


def _json(data: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


async def healthz(request: web.Request) -> web.Response:
    return _json({"ok": True})


async def readyz(request: web.Request) -> web.Response:
    ctx = request.app[CTX_KEY]
    checks: dict[str, str] = {}
    try:
        # check(): the store's own health probe (SQLite: integrity), else a cheap read
        probe = getattr(ctx.store, "check", None) or (lambda: ctx.store.list_threads(1))
        await asyncio.wait_for(asyncio.to_thread(probe), timeout=3)
        checks["store"] = "ok"
    except Exception as exc:
        checks["store"] = hide_paths(f"failed: {exc.message if isinstance(exc, AsapError) else type(exc).__name__ + ': ' + str(exc)}")
    try:
        await asyncio.wait_for(ctx.queue.ping(), timeout=3)
        checks["queue"] = "ok"
    except Exception as exc:
        checks["queue"] = hide_paths(f"failed: {exc.message if isinstance(exc, AsapError) else type(exc).__name__ + ': ' + str(exc)}")
    ok = all(v == "ok" for v in checks.values())
    checks["model"] = ctx.model_status()
    return _json({"ready": ok, "checks": checks}, status=200 if ok else 503)


async def metrics(request: web.Request) -> web.Response:
    ctx = request.app[CTX_KEY]
    try:
        ctx.metrics.queue_depth.set(await asyncio.wait_for(ctx.queue.depth(), timeout=2))
    except Exception as exc:  # still serve the other figures when the queue is down
        log.warning("queue depth unavailable for /metrics: %s", exc)
    return web.Response(body=ctx.metrics.render(), headers={"Content-Type": CONTENT_TYPE})


def _authorized(request: web.Request, ctx: RuntimeContext) -> bool:
    token = ctx.settings.api_token.get_secret_value() if ctx.settings.api_token else ""
    got = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(got.encode(), f"Bearer {token}".encode())


async def post_job(request: web.Request) -> web.Response:
    ctx = request.app[CTX_KEY]
    if not _authorized(request, ctx):
        return _json({"error": "missing or wrong bearer token"}, status=401)
    try:
        body = JobRequest.model_validate_json(await request.read())
        if body.kind not in ("ask", "explain"):
            return _json({"error": f"kind must be 'ask' or 'explain', got {body.kind!r}"}, status=400)
        job = Job(id=f"cli:{body.id}" if body.id else new_job_id("cli"), source="cli", kind=body.kind,  # type: ignore[arg-type]
                  thread=body.thread or f"cli:{body.user}:{time.time_ns()}", run=body.run, text=body.text,
                  requester=Requester(source="cli", user_id=body.user),
                  deadline_s=body.deadline_s or ctx.settings.deadline_s)
    except ValidationError as exc:
        err = exc.errors()[0]
        return _json({"error": f"bad job request: {'.'.join(map(str, err['loc'])) or 'body'}: {err['msg']}"}, status=400)
    try:
        sub = await ctx.submit(job)
    except AsapError as exc:
        log.error("could not queue a job: %s", exc.message)
        return _json({"error": exc.public()}, status=503)
    status = {"queued": 202, "duplicate": 200, "limited": 429, "busy": 503}[sub.status]
    return _json({"id": job.id, "status": sub.status, "message": sub.message, "thread": job.thread}, status=status)


async def get_job(request: web.Request) -> web.Response:
    ctx = request.app[CTX_KEY]
    if not _authorized(request, ctx):
        return _json({"error": "missing or wrong bearer token"}, status=401)
    job_id = request.match_info["job_id"]
    if not _printable_id(job_id):
        return _json({"error": "bad job id: expected printable text of 1..512 characters (no control characters "
                               "such as NUL)"}, status=400)
    try:
        result = await ctx.queue.get_result(job_id)
    except AsapError as exc:
        return _json({"error": exc.public()}, status=503)
    if result is None:
        return _json({"id": job_id, "status": "pending"}, status=202)
    return _json({"id": job_id, **result})


def build_app(ctx: RuntimeContext, *, env: Mapping[str, str] | None = None, front: bool = True) -> web.Application:
    """The front's aiohttp application: core routes plus every enabled integration's routes.

    ``front=False`` gives a worker's own small app (health, readiness and the worker's metrics: job
    latency and outcomes are counted in the process that runs the jobs).
    """
    env = os.environ if env is None else env
    app = web.Application(client_max_size=1 << 20)
    app[CTX_KEY] = ctx
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    if not front:
        return app
    if ctx.settings.api_token:
        app.router.add_post("/v1/jobs", post_job)
        app.router.add_get("/v1/jobs/{job_id}", get_job)
    for setup in ROUTE_SETUPS:
        if not setup.enabled(env):
            continue
        module, _, func = setup.target.partition(":")
        try:
            hook = getattr(importlib.import_module(module), func)
        except (ImportError, AttributeError) as exc:
            raise AsapError(f"{setup.name} is configured ({' or '.join(setup.env_any)} set) but its routes cannot "
                            f"be loaded from {setup.target}: {exc}", field=setup.env_any[0],
                            hint=f"unset {' and '.join(setup.env_any)} or install the {setup.name} integration") from None
        hook(app, ctx)
        log.info("routes enabled", extra={"integration": setup.name})
    return app
