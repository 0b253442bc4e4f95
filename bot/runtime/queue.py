"""The work queue between the front ends and the workers.

``open_queue(env)`` gives :class:`RedisStreamsQueue` when ``REDIS_URL`` is set, else :class:`InProcessQueue`;
both have the same interface (:class:`JobQueue`):

- ``submit(job) -> bool``: False when a job with that id was already accepted (dedupe in Redis with
  ``SET NX`` + TTL, or in the shared memory store for the embedded queue; never in process memory alone).
- ``run_worker(dispatcher, consumer=, stop=, concurrency=)``: take jobs until ``stop`` is set. A job is
  acknowledged only after its handler returns (its reply stored). A failing handler is retried (bounded by
  ``max_attempts``); then the job goes to the dead-letter stream and the front end's failure reply is posted.
  A Redis/store outage is not the job's failure: the worker keeps the job, waits with backoff and runs it
  again once Redis answers (up to ``infra_retry_s``; after that it stays unacknowledged and is redelivered). On shutdown,
  in-flight jobs get ``grace_s`` to finish; the rest are returned to the queue at once for another worker.
- ``depth()``: jobs queued or running.

Redis layout (prefix ``asap:``): stream ``jobs`` with consumer group ``workers``; ``jobs:dead`` (dead
letters); ``job:seen:<id>`` (dedupe), ``job:attempts:<id>`` (deliveries), ``job:result:<id>``.
Acknowledged entries are deleted from the stream, so its length is the number of jobs queued or running.
A worker refreshes the idle time of the jobs it runs (``XCLAIM ... JUSTID``) every ``visibility_s / 3``;
a job whose worker died stops being refreshed and is taken over by another worker (``XAUTOCLAIM``) once it
has been idle ``visibility_s``.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import orjson
from pydantic import BaseModel, ConfigDict, Field

from bot.errors import AsapError
from bot.runtime.jobs import Job
from bot.runtime.logs import job_context

if TYPE_CHECKING:
    from bot.runtime.handlers import Dispatcher
    from bot.store.base import MemoryStore

log = logging.getLogger("asap.runtime.queue")


class QueueUnavailable(AsapError):
    """The queue's backing service (Redis) cannot be reached."""

    infrastructure = True  # bot.store.base.unavailable: retried with backoff, never the job's own failure


class QueueSettings(BaseModel):
    """Tuning of the queue; defaults suit a chat bot (jobs of seconds to minutes)."""

    model_config = ConfigDict(extra="forbid")

    prefix: str = "asap:"
    visibility_s: float = Field(default=30.0, gt=0)  # a job idle this long (worker dead) is taken over
    max_attempts: int = Field(default=3, ge=1)  # handler runs before a job is dead-lettered
    dedupe_ttl_s: float = Field(default=86400.0, gt=0)  # how long a job id is remembered
    result_ttl_s: float = Field(default=86400.0, gt=0)
    block_ms: int = Field(default=1000, ge=1)  # how long an idle worker waits for new work per poll
    grace_s: float = Field(default=8.0, ge=0)  # shutdown: time in-flight jobs get to finish
    dead_maxlen: int = Field(default=10000, ge=1)
    max_connections: int = Field(default=50, ge=4)  # Redis connections per process
    infra_retry_s: float = Field(default=300.0, gt=0)  # how long a job waits out a Redis outage in its worker


@runtime_checkable
class JobQueue(Protocol):
    settings: QueueSettings

    async def submit(self, job: Job) -> bool: ...

    async def seen(self, job_id: str) -> bool: ...

    async def remember(self, job_id: str) -> bool: ...

    async def run_worker(self, handlers: Dispatcher, *, consumer: str, stop: asyncio.Event,
                         concurrency: int = 1) -> None: ...

    async def depth(self) -> int: ...

    async def ping(self) -> None: ...

    async def set_result(self, job_id: str, result: Mapping[str, Any]) -> None: ...

    async def get_result(self, job_id: str) -> dict[str, Any] | None: ...

    async def dead_letters(self, limit: int = 100) -> list[dict[str, Any]]: ...

    async def close(self) -> None: ...


@dataclass
class Delivery:
    """One job handed to this worker (``ref`` is the stream entry id, or an in-process token)."""

    ref: Any
    raw: bytes
    job: Job | None = None
    error: str | None = None
    taken_at: float = field(default_factory=time.time)


def queue_settings_from_env(env: Mapping[str, str]) -> QueueSettings:
    """``ASAP_QUEUE_PREFIX``, ``ASAP_VISIBILITY_S``, ``ASAP_MAX_ATTEMPTS``, ``ASAP_GRACE_S`` (bad values named)."""
    names = {"prefix": "ASAP_QUEUE_PREFIX", "visibility_s": "ASAP_VISIBILITY_S", "max_attempts": "ASAP_MAX_ATTEMPTS",
             "grace_s": "ASAP_GRACE_S", "dedupe_ttl_s": "ASAP_DEDUPE_TTL_S", "block_ms": "ASAP_QUEUE_BLOCK_MS",
             "max_connections": "ASAP_REDIS_MAX_CONNECTIONS", "infra_retry_s": "ASAP_INFRA_RETRY_S"}
    values = {k: env[v] for k, v in names.items() if env.get(v)}
    try:
        return QueueSettings.model_validate(values)
    except Exception as exc:
        bad = getattr(exc, "errors", lambda: [{}])()[0]
        key = names.get(str((bad.get("loc") or ["?"])[0]), "ASAP_*")
        raise AsapError(f"bad queue setting {key}={env.get(key)!r}: {bad.get('msg', exc)}", field=key) from None


def open_queue(env: Mapping[str, str] | None = None, *, store: MemoryStore | None = None) -> JobQueue:
    """Redis Streams when ``REDIS_URL`` is set, else the in-process queue (dedupe in ``store``)."""
    env = os.environ if env is None else env
    settings = queue_settings_from_env(env)
    url = env.get("REDIS_URL")
    if url:
        return RedisStreamsQueue.from_url(url, settings=settings)
    if store is None:
        from bot.store import open_store

        store = open_store(env)  # type: ignore[arg-type]
    return InProcessQueue(store, settings=settings)


# ------------------------------------------------------------------------------------------- worker core
class _WorkerCore(abc.ABC):
    """The worker loop shared by both queues; subclasses supply fetch/ack/retry/return/dead-letter."""

    settings: QueueSettings

    @abc.abstractmethod
    async def _fetch(self, consumer: str, count: int) -> list[Delivery]:
        ...

    @abc.abstractmethod
    async def _begin(self, d: Delivery) -> int:
        """Count a delivery of ``d``'s job; returns the attempt number (1 for the first)."""

    @abc.abstractmethod
    async def _ack(self, d: Delivery) -> None:
        ...

    @abc.abstractmethod
    async def _retry(self, d: Delivery) -> None:
        ...

    @abc.abstractmethod
    async def _return(self, d: Delivery) -> None:
        ...

    @abc.abstractmethod
    async def _dead(self, d: Delivery, reason: str, consumer: str) -> None:
        ...

    async def _heartbeat(self, consumer: str, refs: list[Any]) -> None:
        return None

    async def _abandon(self, d: Delivery) -> None:
        """Give a job back that could not run through a long outage (not counted as an attempt)."""
        await self._settle(self._return, d)

    async def _prepare(self) -> None:
        return None

    async def run_worker(self, handlers: Dispatcher, *, consumer: str, stop: asyncio.Event,
                         concurrency: int = 1) -> None:
        """Take and run jobs until ``stop`` is set, then finish or return the in-flight ones."""
        if concurrency < 1:
            raise AsapError(f"worker concurrency must be at least 1, got {concurrency}", field="concurrency")
        inflight: dict[asyncio.Task[None], Delivery] = {}
        hb = asyncio.create_task(self._heartbeat_loop(consumer, inflight, stop))
        outage: float | None = None
        backoff = 0.2
        log.info("worker started", extra={"consumer": consumer, "concurrency": concurrency})
        try:
            while not stop.is_set():
                free = concurrency - len(inflight)
                if free <= 0:
                    waiter = asyncio.ensure_future(stop.wait())
                    await asyncio.wait([*inflight, waiter], return_when=asyncio.FIRST_COMPLETED)
                    waiter.cancel()
                    continue
                try:
                    if outage is not None:
                        await self._prepare()
                    deliveries = await self._fetch(consumer, free)
                except QueueUnavailable as exc:
                    if outage is None:
                        outage = time.monotonic()
                        log.error("queue unavailable; retrying until it is back: %s", exc.message,
                                  extra={"consumer": consumer})
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), timeout=backoff)
                    backoff = min(backoff * 2, 5.0)
                    continue
                if outage is not None:
                    log.warning("queue reachable again after %.1f s", time.monotonic() - outage,
                                extra={"consumer": consumer})
                    outage, backoff = None, 0.2
                running = {x.ref for x in inflight.values()}
                for d in deliveries:
                    if d.ref in running:  # our own job, reclaimed after a missed heartbeat: already running
                        continue
                    task = asyncio.create_task(self._guarded(handlers, d, consumer))
                    inflight[task] = d
                    task.add_done_callback(lambda t: inflight.pop(t, None))
        finally:
            await self._drain(inflight, consumer)
            hb.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await hb
            log.info("worker stopped", extra={"consumer": consumer})

    async def _drain(self, inflight: dict[asyncio.Task[None], Delivery], consumer: str) -> None:
        if not inflight:
            return
        tasks = list(inflight)
        log.info("shutting down: %d job(s) in flight get %.0f s to finish", len(tasks), self.settings.grace_s,
                 extra={"consumer": consumer})
        _, pending = await asyncio.wait(tasks, timeout=self.settings.grace_s)
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    async def _heartbeat_loop(self, consumer: str, inflight: dict[asyncio.Task[None], Delivery],
                              stop: asyncio.Event) -> None:
        period = max(0.05, self.settings.visibility_s / 3)
        while True:
            await asyncio.sleep(period)
            refs = [d.ref for d in list(inflight.values())]
            if refs:
                try:
                    await self._heartbeat(consumer, refs)
                except QueueUnavailable as exc:
                    log.warning("could not refresh in-flight jobs: %s", exc.message, extra={"consumer": consumer})

    async def _guarded(self, handlers: Dispatcher, d: Delivery, consumer: str) -> None:
        """A bug in the runtime itself must not kill the worker: log it; the job stays unacknowledged."""
        try:
            await self._process(handlers, d, consumer)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("internal error while running a job; it stays pending and will be redelivered",
                          extra={"consumer": consumer, "job": d.job.id if d.job else None})

    async def _process(self, handlers: Dispatcher, d: Delivery, consumer: str) -> None:
        from bot.runtime.handlers import Outcome

        if d.job is None:
            log.error("dropping a malformed queue entry: %s", d.error, extra={"consumer": consumer, "ref": str(d.ref)})
            await self._settle(self._dead, d, d.error or "malformed", consumer)
            return
        job = d.job
        with job_context(job.id):
            try:
                attempt = await self._through_outage(self._begin, d)
            except QueueUnavailable as exc:
                log.error("could not start job (left for another delivery): %s", exc.message)
                return
            if attempt > self.settings.max_attempts:
                reason = (f"gave up after {self.settings.max_attempts} attempts "
                          "(the worker running it stopped each time)")
                handlers.count(job, Outcome.DEAD)
                await handlers.fail(job, reason, outcome=Outcome.DEAD)
                await self._settle(self._dead, d, reason, consumer)
                return
            try:
                result = await self._execute(handlers, job, attempt)
            except asyncio.CancelledError:
                log.warning("returning the job to the queue (worker shutting down)")
                handlers.count(job, Outcome.RETURNED)
                await asyncio.shield(self._settle(self._return, d))
                raise
            if result.outcome is Outcome.UNAVAILABLE:
                log.error("the store or queue is still unreachable after %.0f s; the job will be redelivered",
                          self.settings.infra_retry_s)
                await self._abandon(d)
            elif result.outcome is Outcome.RETRY:
                await self._settle(self._retry, d)
            elif result.outcome is Outcome.DEAD:
                await self._settle(self._dead, d, result.reason or "failed", consumer)
            else:
                await self._settle(self._ack, d)

    async def _execute(self, handlers: Dispatcher, job: Job, attempt: int) -> Any:
        """Run the handler; while Redis/the store is unreachable, wait with backoff and run it again.

        The job stays in flight meanwhile (its heartbeat keeps it ours once Redis is back), so an outage
        neither loses it nor spends one of its attempts. Gives up after ``infra_retry_s`` with the job
        still unacknowledged, so it is redelivered later rather than lost.
        """
        from bot.runtime.handlers import Outcome

        give_up = time.monotonic() + self.settings.infra_retry_s
        delay = 0.2
        while True:
            result = await handlers.execute(job, attempt=attempt, max_attempts=self.settings.max_attempts,
                                            queued_at=job.created_at)
            if result.outcome is not Outcome.UNAVAILABLE or time.monotonic() + delay > give_up:
                return result
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _through_outage(self, op: Any, *args: Any) -> Any:
        """``op(*args)``, retried with backoff while the queue is unreachable (up to ``infra_retry_s``)."""
        give_up = time.monotonic() + self.settings.infra_retry_s
        delay = 0.1
        while True:
            try:
                return await op(*args)
            except QueueUnavailable:
                if time.monotonic() + delay > give_up:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _settle(self, op: Any, *args: Any) -> None:
        """Run an ack/retry/return/dead-letter, retrying through a queue outage (up to ``infra_retry_s``).

        The job is still in flight here, so its heartbeat keeps it from being taken over meanwhile.
        """
        try:
            await self._through_outage(op, *args)
        except QueueUnavailable as exc:
            log.error("could not settle the job (%s); it will be redelivered: %s", op.__name__, exc.message)


# ------------------------------------------------------------------------------------------- in-process
class InProcessQueue(_WorkerCore):
    """The embedded default: an asyncio queue in this process; dedupe in the memory store.

    Jobs live only as long as the process (the front and the workers run together, ``asap serve --all``);
    a job returned on shutdown is lost with the process, so run Redis when that matters.
    """

    def __init__(self, store: MemoryStore, *, settings: QueueSettings | None = None) -> None:
        self.settings = settings or QueueSettings()
        self.store = store
        self._q: asyncio.Queue[Delivery] | None = None
        self._inflight = 0
        self._attempts: dict[str, int] = {}
        self._results: dict[str, dict[str, Any]] = {}
        self._dead_letters: list[dict[str, Any]] = []
        self._accepted: set[str] = set()
        self.instance = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    @property
    def q(self) -> asyncio.Queue[Delivery]:
        if self._q is None:
            self._q = asyncio.Queue()
        return self._q

    async def submit(self, job: Job) -> bool:
        if not self._claim(job.id):
            return False
        self._accepted.add(job.id)
        self.q.put_nowait(Delivery(ref=job.id, raw=job.to_bytes(), job=job))
        return True

    async def remember(self, job_id: str) -> bool:
        if not self._claim(job_id):
            return False
        self._accepted.add(job_id)
        return True

    def _state_key(self, job_id: str) -> str:
        return f"{self.settings.prefix}jobstate:{job_id}"

    def _claim(self, job_id: str) -> bool:
        """Hold ``job_id`` for this process; an id held only by a process that ended before running it is free.

        The claim lives in the shared store (it outlives the process) but the job lives in this process's
        memory: a crash loses the job, and the id must not then read as a duplicate for a day. Each accepted
        id records its state (pending -> done) and owner (host:pid:token); a pending id whose owner process
        is gone is taken over (once, atomically, by one claimant).
        """
        ttl = self.settings.dedupe_ttl_s
        key = f"{self.settings.prefix}job:{job_id}"
        if not self.store.claim(key, ttl):
            st = self.store.get_value(self._state_key(job_id)) or {}
            owner = str(st.get("owner") or "")
            if st.get("state") != "pending" or owner == self.instance or _owner_alive(owner):
                return False
            if not self.store.claim(f"{key}:after:{owner}", ttl):
                return False
            log.warning("job id %s was accepted by a process that ended before running it; running it now", job_id)
        self.store.put_value(self._state_key(job_id), {"state": "pending", "owner": self.instance}, ttl=ttl)
        return True

    def _done(self, d: Delivery) -> None:
        self.store.put_value(self._state_key(str(d.ref)), {"state": "done", "owner": self.instance},
                             ttl=self.settings.dedupe_ttl_s)

    async def seen(self, job_id: str) -> bool:
        # A fast probe for this process; ``submit``'s claim in the store stays the authority.
        return job_id in self._accepted

    async def depth(self) -> int:
        return self.q.qsize() + self._inflight

    async def ping(self) -> None:
        return None

    async def _fetch(self, consumer: str, count: int) -> list[Delivery]:
        try:
            first = await asyncio.wait_for(self.q.get(), timeout=self.settings.block_ms / 1000)
        except TimeoutError:
            return []
        out = [first]
        while len(out) < count and not self.q.empty():
            out.append(self.q.get_nowait())
        self._inflight += len(out)
        return out

    async def _begin(self, d: Delivery) -> int:
        n = self._attempts.get(str(d.ref), 0) + 1
        self._attempts[str(d.ref)] = n
        return n

    async def _ack(self, d: Delivery) -> None:
        self._done(d)
        self._inflight -= 1
        self._attempts.pop(str(d.ref), None)

    async def _retry(self, d: Delivery) -> None:
        self._inflight -= 1
        self.q.put_nowait(d)

    async def _return(self, d: Delivery) -> None:
        self._inflight -= 1
        self._attempts[str(d.ref)] = max(0, self._attempts.get(str(d.ref), 1) - 1)
        self.q.put_nowait(d)

    async def _dead(self, d: Delivery, reason: str, consumer: str) -> None:
        if d.job is not None:
            self._done(d)
        self._inflight -= 1
        self._attempts.pop(str(d.ref), None)
        self._dead_letters.append({"id": str(d.ref), "reason": reason, "consumer": consumer, "at": time.time(),
                                   "job": d.raw.decode(errors="replace")})

    async def set_result(self, job_id: str, result: Mapping[str, Any]) -> None:
        self._results[job_id] = dict(result)

    async def get_result(self, job_id: str) -> dict[str, Any] | None:
        return self._results.get(job_id)

    async def dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        return self._dead_letters[-limit:]

    async def close(self) -> None:
        return None


def _owner_alive(owner: str) -> bool:
    """Is the process named ``host:pid:token`` still running? Unknown (another host, unreadable) counts as alive."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    pid = int(pid_text)
    if pid == os.getpid():
        return True  # another queue object of this very process: its jobs are still here
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, owned by someone else
        return True
    return True


# ------------------------------------------------------------------------------------------- Redis Streams
_SUBMIT = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('XADD', KEYS[2], '*', 'job', ARGV[3])
  return 1
end
return 0
"""

# The front's whole decision in one round trip (``RedisStreamsQueue.submit_checked``): dedupe, the sliding
# windows of ``bot.runtime.limits`` (same algorithm and keys as RedisRateLimiter), the global cap, then
# SET NX + XADD. Atomic, so concurrent fronts agree. A refusal does not remember the id: dedupe holds only ids
# that were accepted (pending or done), so a request refused as busy or rate-limited can be sent again.
# KEYS: seen, stream, rate keys...  ARGV: id, dedupe_px, job, now, max_pending, member, (window, limit)...
# Returns {status, limit index (1-based, 0 = none), count, retry_after (string)}.
_SUBMIT_CHECKED = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {'duplicate', 0, 0, '0'}
end
local now = tonumber(ARGV[4])
for i = 3, #KEYS do
  local window = tonumber(ARGV[7 + (i - 3) * 2])
  local limit = tonumber(ARGV[8 + (i - 3) * 2])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window)
  local n = redis.call('ZCARD', KEYS[i])
  if n >= limit then
    local oldest = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
    return {'limited', i - 2, n, tostring(tonumber(oldest[2]) + window - now)}
  end
  redis.call('ZADD', KEYS[i], now, ARGV[6])
  redis.call('PEXPIRE', KEYS[i], math.ceil(window * 1000))
end
local depth = redis.call('XLEN', KEYS[2])
if depth >= tonumber(ARGV[5]) then
  return {'busy', 0, depth, '0'}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('XADD', KEYS[2], '*', 'job', ARGV[3])
return {'queued', 0, depth + 1, '0'}
"""

GROUP = "workers"


@contextlib.asynccontextmanager
async def redis_errors(client: Any) -> AsyncIterator[None]:
    """Turn connection failures into :class:`QueueUnavailable` naming the server (never the password)."""
    import redis.exceptions as rex

    try:
        yield
    except (rex.ConnectionError, rex.TimeoutError, OSError) as exc:
        kw = client.connection_pool.connection_kwargs
        where = f"{kw.get('host', '?')}:{kw.get('port', '?')}/{kw.get('db', 0)}"
        raise QueueUnavailable(f"cannot reach Redis at {where}: {exc}", field="REDIS_URL",
                               hint="start Redis (or fix REDIS_URL); workers retry until it is back") from None


@functools.cache
def driver_info() -> Any:
    """redis-py's client metadata (CLIENT SETINFO), resolved once.

    Left to itself, redis-py resolves its own version with ``importlib.metadata`` for every new connection
    (~3 ms, on the event loop): a burst that grows the pool to 50 connections lost ~150 ms to it.
    """
    import redis
    from redis.driver_info import DriverInfo

    return DriverInfo(name="redis-py", lib_version=redis.__version__)


class ScriptBatcher:
    """Auto-pipelining of one Lua script: calls made in the same event-loop turn go out as one pipeline.

    Under a burst, hundreds of requests each submit their job at about the same moment. One round trip per
    submit costs a pooled connection, a send, a wake-up and a parse each (~0.15 ms of the loop's time
    apiece, and new connections while the pool grows). Batched, the same scripts travel in one pipeline
    (``transaction=False``: each script stays atomic on its own; nothing else changes) and each caller
    still gets its own reply before it answers its request. An idle front sends a batch of one, one loop
    turn later. A script Redis has forgotten (restart, SCRIPT FLUSH) is loaded again and the calls that hit
    NOSCRIPT (which ran nothing) are retried once.
    """

    def __init__(self, client: Any, source: str, *, max_batch: int = 256) -> None:
        self._r = client
        self.source = source
        self.sha = client.register_script(source).sha
        self.max_batch = max_batch
        self._pending: list[tuple[list[Any], asyncio.Future[Any]]] = []
        self._scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()

    async def __call__(self, keys: list[Any], args: list[Any]) -> Any:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._pending.append(([len(keys), *keys, *args], fut))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await fut

    def _flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, []
        for i in range(0, len(pending), self.max_batch):
            task = asyncio.get_running_loop().create_task(self._send(pending[i:i + self.max_batch]))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[tuple[list[Any], asyncio.Future[Any]]]) -> None:
        import redis.exceptions as rex

        try:
            async with redis_errors(self._r):
                results = await self._execute([argv for argv, _ in batch])
                missing = [i for i, r in enumerate(results) if isinstance(r, rex.NoScriptError)]
                if missing:
                    self.sha = await self._r.script_load(self.source)
                    again = await self._execute([batch[i][0] for i in missing])
                    for i, r in zip(missing, again, strict=True):
                        results[i] = r
        except BaseException as exc:  # the whole batch failed (Redis down): every caller sees it
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, fut), r in zip(batch, results, strict=True):
            if fut.done():
                continue
            if isinstance(r, Exception):
                fut.set_exception(r)
            else:
                fut.set_result(r)

    async def _execute(self, argvs: list[list[Any]]) -> list[Any]:
        if len(argvs) == 1:  # no pipeline object for a batch of one (the idle case)
            import redis.exceptions as rex

            try:
                return [await self._r.evalsha(self.sha, *argvs[0])]
            except rex.NoScriptError as exc:
                return [exc]
        pipe = self._r.pipeline(transaction=False)
        for argv in argvs:
            pipe.evalsha(self.sha, *argv)
        return list(await pipe.execute(raise_on_error=False))


class RedisStreamsQueue(_WorkerCore):
    """Jobs in a Redis stream read by the consumer group ``workers`` (see the module docstring)."""

    def __init__(self, client: Any, *, settings: QueueSettings | None = None) -> None:
        self.settings = settings or QueueSettings()
        self._r = client
        p = self.settings.prefix
        self.stream = f"{p}jobs"
        self.dead_stream = f"{p}jobs:dead"
        self._submit = ScriptBatcher(client, _SUBMIT)
        self._submit_checked = ScriptBatcher(client, _SUBMIT_CHECKED)
        self._group_ready = False
        self._next_autoclaim = 0.0
        self._autoclaim_cursor = "0-0"
        self._lost_logged: set[Any] = set()

    @classmethod
    def from_url(cls, url: str, *, settings: QueueSettings | None = None) -> RedisStreamsQueue:
        """A client for ``url`` (connections open lazily; ``ping()`` checks reachability)."""
        import redis.asyncio as aioredis
        import redis.exceptions as rex
        from redis.asyncio.retry import Retry
        from redis.backoff import ExponentialBackoff

        settings = settings or QueueSettings()
        try:
            # A bounded pool that makes a burst wait for a free connection instead of failing
            # ("Too many connections") or opening thousands of sockets.
            # Pooled connections go stale when Redis restarts; retry a command once or twice on a fresh
            # connection before reporting the queue unavailable. Submit is idempotent (SET NX); a repeated
            # requeue could at worst deliver a job twice, which replies keyed by job id absorb.
            pool = aioredis.BlockingConnectionPool.from_url(
                url, max_connections=settings.max_connections, timeout=10, socket_connect_timeout=3,
                socket_timeout=settings.block_ms / 1000 + 10, health_check_interval=15,
                retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2),
                retry_on_error=[rex.ConnectionError, rex.TimeoutError], driver_info=driver_info())
            client = aioredis.Redis(connection_pool=pool)
        except ValueError as exc:
            raise AsapError(f"malformed REDIS_URL: {exc}", field="REDIS_URL", hint="e.g. redis://localhost:6379/0") from None
        return cls(client, settings=settings)

    @property
    def client(self) -> Any:
        return self._r

    def _key(self, kind: str, job_id: str) -> str:
        return f"{self.settings.prefix}job:{kind}:{job_id}"

    # ---------------------------------------------------------------- front side
    async def submit(self, job: Job) -> bool:
        added = await self._submit([self._key("seen", job.id), self.stream],
                                   [job.id, int(self.settings.dedupe_ttl_s * 1000), job.to_bytes()])
        return bool(added)

    async def submit_checked(self, job: Job, limits: list[tuple[str, float, int]],
                             max_pending: int) -> tuple[str, int, int, float]:
        """Dedupe, rate limits, cap and enqueue in ONE round trip (one Lua script), in that order.

        ``limits`` are ``(key, window_s, count)`` sliding windows checked and recorded in order (keys as
        :class:`~bot.runtime.limits.RedisRateLimiter` names them). Returns ``(status, limit, count,
        retry_after_s)``: status ``queued`` / ``duplicate`` / ``limited`` / ``busy``; for ``limited``,
        ``limit`` is the 1-based index of the window that refused and ``count`` its hits; for ``busy``,
        ``count`` is the depth. A refused id is not remembered: sent again, it is checked again.
        """
        keys = [self._key("seen", job.id), self.stream, *(f"{self.settings.prefix}rate:{k}" for k, _, _ in limits)]
        args: list[Any] = [job.id, int(self.settings.dedupe_ttl_s * 1000), job.to_bytes(), time.time(), max_pending,
                           uuid.uuid4().hex]
        for _, window, count in limits:
            args += [window, count]
        status, which, n, retry = await self._submit_checked(keys, args)
        status = status.decode() if isinstance(status, bytes) else str(status)
        retry_s = float(retry.decode() if isinstance(retry, bytes) else retry)
        return status, int(which), int(n), max(0.0, retry_s)

    async def seen(self, job_id: str) -> bool:
        async with redis_errors(self._r):
            return bool(await self._r.exists(self._key("seen", job_id)))

    async def remember(self, job_id: str) -> bool:
        """Mark ``job_id`` as handled without queueing it (a refused request); False if already known."""
        async with redis_errors(self._r):
            return bool(await self._r.set(self._key("seen", job_id), job_id, nx=True,
                                          px=int(self.settings.dedupe_ttl_s * 1000)))

    async def depth(self) -> int:
        async with redis_errors(self._r):
            return int(await self._r.xlen(self.stream))

    async def ping(self) -> None:
        async with redis_errors(self._r):
            await self._r.ping()

    async def set_result(self, job_id: str, result: Mapping[str, Any]) -> None:
        async with redis_errors(self._r):
            await self._r.set(self._key("result", job_id), orjson.dumps(dict(result), default=str),
                              px=int(self.settings.result_ttl_s * 1000))

    async def get_result(self, job_id: str) -> dict[str, Any] | None:
        async with redis_errors(self._r):
            raw = await self._r.get(self._key("result", job_id))
        return orjson.loads(raw) if raw else None

    async def dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        async with redis_errors(self._r):
            entries = await self._r.xrevrange(self.dead_stream, count=limit)
        out = []
        for ref, fields in reversed(entries):
            row = {k.decode(): v.decode(errors="replace") for k, v in fields.items()}
            row["entry"] = ref.decode()
            out.append(row)
        return out

    async def close(self) -> None:
        await self._r.aclose()

    # ---------------------------------------------------------------- worker side
    async def _prepare(self) -> None:
        import redis.exceptions as rex

        async with redis_errors(self._r):
            try:
                await self._r.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
            except rex.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        self._group_ready = True

    def _deliveries(self, entries: list[Any]) -> list[Delivery]:
        out = []
        for ref, fields in entries:
            if not fields:  # deleted while pending
                continue
            raw = fields.get(b"job", b"")
            try:
                out.append(Delivery(ref=ref, raw=raw, job=Job.from_bytes(raw)))
            except AsapError as exc:
                out.append(Delivery(ref=ref, raw=raw, error=exc.message))
        return out

    async def _fetch(self, consumer: str, count: int) -> list[Delivery]:
        import redis.exceptions as rex

        if not self._group_ready:
            await self._prepare()
        try:
            async with redis_errors(self._r):
                now = time.monotonic()
                if now >= self._next_autoclaim:
                    self._next_autoclaim = now + max(0.05, self.settings.visibility_s / 4)
                    res = await self._r.xautoclaim(self.stream, GROUP, consumer,
                                                   min_idle_time=int(self.settings.visibility_s * 1000),
                                                   start_id=self._autoclaim_cursor, count=count)
                    self._autoclaim_cursor = res[0].decode() if isinstance(res[0], bytes) else str(res[0])
                    claimed = self._deliveries(res[1])
                    if claimed:
                        log.warning("took over %d job(s) idle for over %g s (their worker stopped)", len(claimed),
                                    self.settings.visibility_s, extra={"consumer": consumer,
                                                                       "jobs": [d.job.id for d in claimed if d.job]})
                        return claimed
                res = await self._r.xreadgroup(GROUP, consumer, {self.stream: ">"}, count=count,
                                               block=self.settings.block_ms)
        except rex.ResponseError as exc:
            if "NOGROUP" in str(exc):  # Redis restarted empty, or the stream was deleted: recreate
                self._group_ready = False
                log.warning("consumer group missing (Redis restarted?); recreating it", extra={"consumer": consumer})
                return []
            raise
        if not res:
            return []
        return self._deliveries(res[0][1])

    async def _begin(self, d: Delivery) -> int:
        assert d.job is not None
        key = self._key("attempts", d.job.id)
        async with redis_errors(self._r):
            pipe = self._r.pipeline(transaction=True)
            pipe.incr(key)
            pipe.pexpire(key, int(self.settings.dedupe_ttl_s * 1000))
            n, _ = await pipe.execute()
        return int(n)

    async def _ack(self, d: Delivery) -> None:
        async with redis_errors(self._r):
            pipe = self._r.pipeline(transaction=True)
            pipe.xack(self.stream, GROUP, d.ref)
            pipe.xdel(self.stream, d.ref)
            if d.job is not None:
                pipe.delete(self._key("attempts", d.job.id))
            await pipe.execute()

    async def _requeue(self, d: Delivery, *, uncount: bool) -> None:
        async with redis_errors(self._r):
            pipe = self._r.pipeline(transaction=True)
            pipe.xadd(self.stream, {"job": d.raw})
            pipe.xack(self.stream, GROUP, d.ref)
            pipe.xdel(self.stream, d.ref)
            if uncount and d.job is not None:
                pipe.decr(self._key("attempts", d.job.id))
            await pipe.execute()

    async def _retry(self, d: Delivery) -> None:
        await self._requeue(d, uncount=False)

    async def _return(self, d: Delivery) -> None:
        await self._requeue(d, uncount=True)

    async def _dead(self, d: Delivery, reason: str, consumer: str) -> None:
        async with redis_errors(self._r):
            pipe = self._r.pipeline(transaction=True)
            pipe.xadd(self.dead_stream, {"job": d.raw, "id": d.job.id if d.job else "", "reason": reason,
                                         "consumer": consumer, "at": f"{time.time():.3f}"},
                      maxlen=self.settings.dead_maxlen, approximate=True)
            pipe.xack(self.stream, GROUP, d.ref)
            pipe.xdel(self.stream, d.ref)
            if d.job is not None:
                pipe.delete(self._key("attempts", d.job.id))
            await pipe.execute()

    async def _abandon(self, d: Delivery) -> None:
        """Leave it pending: Redis is the thing that is down, and XAUTOCLAIM redelivers it once it is back."""
        return None

    async def _heartbeat(self, consumer: str, refs: list[Any]) -> None:
        """Reset the idle time of the jobs this worker still owns, so nobody takes them over."""
        async with redis_errors(self._r):
            owned = await self._r.xpending_range(self.stream, GROUP, min="-", max="+", count=len(refs) + 100,
                                                 consumername=consumer)
            mine = {p["message_id"] for p in owned}
            keep = [r for r in refs if r in mine]
            lost = [r for r in refs if r not in mine]
            if keep:
                await self._r.xclaim(self.stream, GROUP, consumer, min_idle_time=0, message_ids=keep, justid=True)
        for r in lost:
            if r in self._lost_logged:
                continue
            self._lost_logged.add(r)
            log.warning("a job this worker runs was taken over by another worker (were we stalled?)",
                        extra={"consumer": consumer, "ref": r.decode() if isinstance(r, bytes) else str(r)})
