"""A stand-in integration for the route-hook tests: adds GET /hook/ping when enabled."""

from __future__ import annotations

from aiohttp import web


def setup_routes(app: web.Application, ctx) -> None:  # type: ignore[no-untyped-def]
    async def ping(request: web.Request) -> web.Response:
        return web.json_response({"integration": "test", "prefix": ctx.settings.queue.prefix})

    app.router.add_get("/hook/ping", ping)
