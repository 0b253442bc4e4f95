"""``asap serve`` (HTTP front, optionally with workers) and ``asap worker`` (workers only).

Both read the runtime settings from the environment (``REDIS_URL`` selects the Redis Streams queue;
without it the queue is in-process, so ``asap serve --all`` is the one-process setup) and log JSON lines
with secrets redacted.
"""

from __future__ import annotations

import asyncio

import click

from bot.cli import cli
from bot.errors import AsapError


def _context(handlers: tuple[str, ...]):  # type: ignore[no-untyped-def]
    import os

    from bot.runtime.context import RuntimeContext
    from bot.runtime.handlers import load_handler_modules
    from bot.runtime.logs import configure_logging

    runs = (click.get_current_context().find_root().obj or {}).get("runs")
    if runs:  # --runs: this service process and its in-process workers open these stores (bot.runs.open)
        os.environ["ASAP_RUNS"] = runs
    ctx = RuntimeContext.from_env()
    configure_logging(ctx.settings.log_level, env=os.environ)
    load_handler_modules(handlers)
    return ctx


@cli.command()
@click.option("--host", default="0.0.0.0", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, envvar="ASAP_PORT", type=click.IntRange(0, 65535),
              help="Port to listen on (env ASAP_PORT).")
@click.option("--all", "with_workers", is_flag=True, help="Also run workers in this process (small teams).")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 256),
              help="With --all: jobs run at once in this process.")
@click.option("--handlers", multiple=True, help="Extra module that registers job handlers (repeatable).")
def serve(host: str, port: int, with_workers: bool, concurrency: int, handlers: tuple[str, ...]) -> None:
    """Run the HTTP front: /healthz, /readyz, /metrics and the Slack/GitHub routes that are configured."""
    from bot.runtime.process import serve as run

    ctx = _context(handlers)
    if not with_workers and ctx.settings.redis_url is None:
        raise AsapError("without REDIS_URL the queue is in-process, so nothing would run the jobs",
                        field="REDIS_URL", hint="run `asap serve --all`, or set REDIS_URL and start `asap worker`s")
    asyncio.run(run(ctx, host=host, port=port, workers=concurrency if with_workers else 0))


@cli.command()
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 256),
              help="Jobs this worker runs at once.")
@click.option("--consumer", default=None, help="Consumer name in the Redis group (default: worker-<host>-<pid>).")
@click.option("--handlers", multiple=True, help="Extra module that registers job handlers (repeatable).")
@click.option("--host", default="0.0.0.0", show_default=True, help="Address for --port.")
@click.option("--port", default=None, envvar="ASAP_PORT", type=click.IntRange(0, 65535),
              help="Serve /healthz, /readyz and this worker's /metrics on this port (env ASAP_PORT; default off).")
def worker(concurrency: int, consumer: str | None, handlers: tuple[str, ...], host: str, port: int | None) -> None:
    """Run workers that take jobs from the Redis queue (needs REDIS_URL)."""
    from bot.runtime.process import work

    ctx = _context(handlers)
    if ctx.settings.redis_url is None:
        raise AsapError("`asap worker` needs a shared queue: REDIS_URL is not set", field="REDIS_URL",
                        hint="set REDIS_URL=redis://host:6379/0, or use `asap serve --all` for one process")
    asyncio.run(work(ctx, concurrency=concurrency, consumer=consumer, host=host, port=port))
