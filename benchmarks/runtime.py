"""Benchmark: the runtime's front and queue on a real Redis (loopback).

* Front acknowledgement: HTTP ``POST /v1/jobs`` to a running ``asap serve`` until its 202 (dedupe, rate
  limits, cap, enqueue into the Redis stream), sequential and with concurrent clients; goal p99 < 50 ms
  (Slack wants an answer within 3 s, GitHub retries slow webhooks).
* Throughput: jobs per second through the queue to ``--workers`` worker processes running a scripted
  handler (no model: it records its reply in Redis), and the enqueue-to-reply latency of each job.

    .venv/bin/python benchmarks/runtime.py [--redis-url redis://127.0.0.1:6379/0] [--requests 2000]
                                           [--jobs 5000] [--workers 4] [--concurrency 8]

Keys live under a fresh prefix and are deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Run as a script, this folder would come first on sys.path; keep sibling scripts from shadowing packages.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

from bot.runtime.handlers import register_handler  # noqa: E402
from bot.runtime.jobs import Job, Requester  # noqa: E402

GOAL_P99_MS = 50.0
TOKEN = "bench-" + uuid.uuid4().hex


async def scripted(job: Job, ctx) -> None:  # type: ignore[no-untyped-def]
    """The scripted model: no thinking, one reply recorded in Redis with the time it was posted."""
    p = ctx.settings.queue.prefix
    await ctx.queue.client.hset(f"{p}bench:replies", job.id, f"{time.time() - job.created_at:.6f}")


register_handler("cli", "review", scripted)  # when imported by a worker via --handlers runtime


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def asap(*args: str) -> list[str]:
    code = "import sys; import bot.cli.runtime; from bot.cli import main; main(sys.argv[1:])"
    return [sys.executable, "-c", code, *args]


def child_env(base: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, **base}
    env["PYTHONPATH"] = f"{HERE}{os.pathsep}{env.get('PYTHONPATH', '')}"
    return env


async def front_latency(env: dict[str, str], n: int, clients: int) -> dict[str, float]:
    import aiohttp

    port = free_port()
    log = open(os.devnull, "wb")  # noqa: SIM115
    proc = subprocess.Popen(asap("serve", "--host", "127.0.0.1", "--port", str(port)), env=child_env(env),
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(400):
                try:
                    async with http.get(f"{base}/readyz") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)
            else:
                raise SystemExit("asap serve did not become ready")
            headers = {"Authorization": f"Bearer {TOKEN}"}
            for i in range(50):  # warm-up
                async with http.post(f"{base}/v1/jobs", json={"text": "warm", "user": f"w{i}"}, headers=headers) as r:
                    await r.read()

            async def one(i: int) -> float:
                t0 = time.perf_counter()
                async with http.post(f"{base}/v1/jobs", json={"text": f"why is job {i} slow", "user": f"u{i % 97}"},
                                     headers=headers) as r:
                    await r.read()
                    if r.status != 202:
                        raise SystemExit(f"front answered {r.status}: {await r.text()}")
                return (time.perf_counter() - t0) * 1000

            seq = [await one(i) for i in range(n // 2)]
            sem = asyncio.Semaphore(clients)

            async def limited(i: int) -> float:
                async with sem:
                    return await one(i)

            t0 = time.perf_counter()
            conc = await asyncio.gather(*(limited(i) for i in range(n // 2, n)))
            wall = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
    return {"seq_p50": statistics.median(seq), "seq_p99": pct(seq, 99), "conc_p50": statistics.median(conc),
            "conc_p99": pct(conc, 99), "conc_rps": len(conc) / wall}


async def throughput(env: dict[str, str], n: int, workers: int, concurrency: int) -> dict[str, float]:
    from bot.runtime.queue import open_queue

    procs = [subprocess.Popen(asap("worker", "--concurrency", str(concurrency), "--consumer", f"bench{i}"),
                              env=child_env({**env, "ASAP_HANDLER_MODULES": "runtime"}),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(workers)]
    q = open_queue(env)
    p = env["ASAP_QUEUE_PREFIX"]
    try:
        warm = [Job(id=f"cli:warm-{i}", source="cli", kind="review", thread="bench", requester=Requester(
            source="cli", user_id="bench")) for i in range(workers * concurrency)]
        await asyncio.gather(*(q.submit(j) for j in warm))
        while await q.client.hlen(f"{p}bench:replies") < len(warm):
            await asyncio.sleep(0.05)
        await q.client.delete(f"{p}bench:replies")
        idle = []  # one job at a time: the latency a person sees on an idle system, minus the model
        for i in range(200):
            j = Job(id=f"cli:idle-{i}", source="cli", kind="review", thread="bench", requester=Requester(
                source="cli", user_id="bench"))
            await q.submit(j)
            while (v := await q.client.hget(f"{p}bench:replies", j.id)) is None:
                await asyncio.sleep(0.0005)
            idle.append(float(v) * 1000)
        await q.client.delete(f"{p}bench:replies")
        jobs = [Job(id=f"cli:bench-{i}", source="cli", kind="review", thread=f"bench:{i}",
                    requester=Requester(source="cli", user_id=f"u{i}")) for i in range(n)]
        t0 = time.perf_counter()
        sem = asyncio.Semaphore(64)

        async def submit(j: Job) -> bool:
            async with sem:
                return await q.submit(j.model_copy(update={"created_at": time.time()}))

        accepted = await asyncio.gather(*(submit(j) for j in jobs))
        submit_s = time.perf_counter() - t0
        while await q.client.hlen(f"{p}bench:replies") < n:
            if time.perf_counter() - t0 > 300:
                raise SystemExit("throughput run did not finish in 300 s")
            await asyncio.sleep(0.02)
        wall = time.perf_counter() - t0
        lat = [float(v) * 1000 for v in (await q.client.hgetall(f"{p}bench:replies")).values()]
        depth = await q.depth()
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=20)
        await q.close()
    return {"idle_p50": statistics.median(idle), "idle_p99": pct(idle, 99), "accepted": sum(accepted), "submit_s": submit_s, "wall_s": wall, "jobs_per_s": n / wall,
            "e2e_p50": statistics.median(lat), "e2e_p99": pct(lat, 99), "depth_after": depth, "replies": len(lat)}


def cleanup(url: str, prefix: str) -> None:
    import redis

    r = redis.Redis.from_url(url)
    keys = list(r.scan_iter(match=f"{prefix}*", count=1000))
    for i in range(0, len(keys), 500):
        r.delete(*keys[i:i + 500])
    r.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    ap.add_argument("--requests", type=int, default=2000, help="HTTP submissions to time at the front")
    ap.add_argument("--clients", type=int, default=16, help="concurrent HTTP clients in the second half")
    ap.add_argument("--jobs", type=int, default=5000, help="jobs pushed through the queue")
    ap.add_argument("--workers", type=int, default=4, help="worker processes")
    ap.add_argument("--concurrency", type=int, default=8, help="jobs per worker at once")
    args = ap.parse_args()
    prefix = f"asapbench:{uuid.uuid4().hex[:8]}:"
    env = {"REDIS_URL": args.redis_url, "ASAP_QUEUE_PREFIX": prefix, "ASAP_API_TOKEN": TOKEN,
           "ASAP_USER_RATE": "off", "ASAP_CHANNEL_RATE": "off", "ASAP_MAX_PENDING": "1000000",
           "ASAP_LOG_LEVEL": "WARNING", "ASAP_QUEUE_BLOCK_MS": "200"}
    print(f"Redis {args.redis_url.split('@')[-1]}, {os.cpu_count()} CPUs, prefix {prefix}")
    try:
        f = asyncio.run(front_latency(env, args.requests, args.clients))
        print(f"front ack (POST /v1/jobs -> 202), {args.requests // 2} sequential: p50 {f['seq_p50']:.2f} ms, "
              f"p99 {f['seq_p99']:.2f} ms")
        print(f"front ack, {args.requests // 2} with {args.clients} concurrent clients: p50 {f['conc_p50']:.2f} ms, "
              f"p99 {f['conc_p99']:.2f} ms, {f['conc_rps']:.0f} requests/s")
        worst = max(f["seq_p99"], f["conc_p99"])
        print(f"goal p99 < {GOAL_P99_MS:.0f} ms: {'met' if worst < GOAL_P99_MS else 'MISSED'} (worst p99 {worst:.2f} ms)")
        cleanup(args.redis_url, prefix)
        t = asyncio.run(throughput(env, args.jobs, args.workers, args.concurrency))
        print(f"enqueue->reply through the queue, one job at a time (200): p50 {t['idle_p50']:.2f} ms, "
              f"p99 {t['idle_p99']:.2f} ms")
        print(f"throughput: {args.jobs} jobs, {args.workers} workers x {args.concurrency}: {t['jobs_per_s']:.0f} jobs/s "
              f"(submitted in {t['submit_s']:.2f} s, all replied after {t['wall_s']:.2f} s); "
              f"enqueue->reply p50 {t['e2e_p50']:.1f} ms, p99 {t['e2e_p99']:.1f} ms (under a full backlog); "
              f"replies {t['replies']}, depth after {t['depth_after']}")
    finally:
        cleanup(args.redis_url, prefix)


if __name__ == "__main__":
    main()
