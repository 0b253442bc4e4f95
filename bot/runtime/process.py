"""The long-running processes: the HTTP front, the workers, or both (``asap serve [--all]``, ``asap worker``).

SIGTERM / SIGINT set a stop event: the front stops accepting connections, workers stop taking jobs, give
in-flight jobs ``ASAP_GRACE_S`` seconds (default 8, under Docker's 10 s stop timeout) and return the rest
to the queue for another worker. A second signal stops at once (unacked jobs are reclaimed later).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket

from aiohttp import web

from bot.runtime.context import RuntimeContext
from bot.runtime.handlers import Dispatcher

log = logging.getLogger("asap.runtime")

# Listen backlog: a burst of Slack events or webhooks opens hundreds of connections at once. With the
# default (128, capped by net.core.somaxconn) the kernel drops SYNs beyond the accept queue and the client
# retries after 1 s, far past Slack's 3 s budget once it repeats. 1024 holds a 200-request burst.
BACKLOG = 1024


def freeze_heap() -> None:
    """Collect once, then ``gc.freeze()`` everything alive after start-up (modules, settings, clients).

    The bot imports a lot (agents, slack-bolt, redis, pydantic models): ~100k long-lived objects. A full
    collection walks all of them and took 100-160 ms, on the event loop, whenever one happened to fall
    inside a burst of requests. Frozen objects are skipped by the collector, so collections stay ~1 ms.
    Objects alive now are never freed by the cyclic collector (reference counting still frees them): that
    is start-up state meant to live as long as the process.
    """
    gc.collect()
    gc.freeze()


def consumer_name(prefix: str = "worker") -> str:
    """A worker name unique across hosts and restarts (host, pid) so a dead worker's jobs are reclaimable."""
    return f"{prefix}-{socket.gethostname()}-{os.getpid()}"


def install_signal_handlers(stop: asyncio.Event) -> None:
    """First SIGTERM/SIGINT: graceful stop. Second: exit now."""
    loop = asyncio.get_running_loop()

    def on_signal(signame: str) -> None:
        if stop.is_set():
            log.warning("second %s: exiting now", signame)
            os._exit(1)
        log.info("%s received: stopping (in-flight jobs finish or return to the queue)", signame)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal, sig.name)


async def run_workers(ctx: RuntimeContext, *, concurrency: int, consumer: str | None, stop: asyncio.Event) -> None:
    """One worker loop taking up to ``concurrency`` jobs at a time until ``stop``."""
    await ctx.queue.run_worker(Dispatcher(ctx), consumer=consumer or consumer_name(), stop=stop,
                               concurrency=concurrency)


async def run_front(ctx: RuntimeContext, *, host: str, port: int, stop: asyncio.Event,
                    started: asyncio.Event | None = None, front: bool = True) -> None:
    """Serve the HTTP front (or a worker's health/metrics app when ``front=False``) until ``stop``."""
    from bot.runtime.server import build_app

    runner = web.AppRunner(build_app(ctx, front=front), access_log=None, handle_signals=False, shutdown_timeout=5.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=BACKLOG)
    await site.start()
    freeze_heap()
    log.info("http listening", extra={"host": host, "port": port, "front": front})
    if started is not None:
        started.set()
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


async def serve(ctx: RuntimeContext, *, host: str, port: int, workers: int = 0, consumer: str | None = None,
                stop: asyncio.Event | None = None) -> None:
    """The front, plus ``workers`` concurrent job slots in this process when ``workers > 0`` (``--all``)."""
    stop = stop or asyncio.Event()
    install_signal_handlers(stop)
    await ctx.check_model(stop)
    tasks = [asyncio.create_task(run_front(ctx, host=host, port=port, stop=stop))]
    if workers > 0:
        tasks.append(asyncio.create_task(run_workers(ctx, concurrency=workers, consumer=consumer, stop=stop)))
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for t in done:
            if t.exception() is not None:
                stop.set()
                raise t.exception()  # type: ignore[misc]
        await asyncio.gather(*tasks)
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await ctx.close()


async def work(ctx: RuntimeContext, *, concurrency: int, consumer: str | None = None,
               stop: asyncio.Event | None = None, host: str = "0.0.0.0", port: int | None = None) -> None:
    """Workers only (``asap worker``), with /healthz, /readyz and /metrics on ``port`` when given."""
    stop = stop or asyncio.Event()
    install_signal_handlers(stop)
    await ctx.check_model(stop)
    http = (asyncio.create_task(run_front(ctx, host=host, port=port, stop=stop, front=False))
            if port is not None else None)
    if http is None:
        freeze_heap()
    try:
        await run_workers(ctx, concurrency=concurrency, consumer=consumer, stop=stop)
    finally:
        stop.set()
        if http is not None:
            await asyncio.gather(http, return_exceptions=True)
        await ctx.close()
