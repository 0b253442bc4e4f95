"""Load on loopback: 1,000 jobs (plus 100 redelivered duplicates) through 4 worker processes on a real Redis.

Every job must get exactly one reply: none lost, none doubled (replies are counted in Redis by the
scripted handler with HINCRBY, so a second completion would show as 2)."""

from __future__ import annotations

import asyncio
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from redis_fixture import free_port, make_job, redis_env, redis_server_url, wait_until, worker_command, worker_env  # noqa: F401

from bot.runtime.queue import open_queue

N_JOBS = 1000
N_WORKERS = 4

pytestmark = pytest.mark.timeout(120)


def test_thousand_jobs_four_workers_none_lost_none_doubled(redis_env: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    env = {**redis_env, "ASAP_QUEUE_BLOCK_MS": "200", "ASAP_VISIBILITY_S": "30"}
    logs = [tmp_path / f"w{i}.log" for i in range(N_WORKERS)]
    metrics_port = free_port()
    procs = []
    for i, log in enumerate(logs):
        port = ["--host", "127.0.0.1", "--port", str(metrics_port)] if i == 0 else []
        with log.open("wb") as fh:
            procs.append(subprocess.Popen(worker_command("worker", "--concurrency", "8", "--consumer", f"load{i}",
                                                         *port),
                                          env=worker_env(env, f"load{i}"), stdout=fh, stderr=subprocess.STDOUT))

    async def main() -> dict[str, float]:
        q = open_queue(env)
        p = env["ASAP_QUEUE_PREFIX"]
        jobs = [make_job(i, sleep=0.002) for i in range(N_JOBS)]
        t0 = time.perf_counter()
        accepted = await asyncio.gather(*(q.submit(j) for j in jobs))
        dupes = await asyncio.gather(*(q.submit(j) for j in jobs[:100]))  # redelivered requests
        submit_s = time.perf_counter() - t0
        assert all(accepted) and not any(dupes)

        async def done() -> bool:
            return await q.client.hlen(f"{p}test:replies") >= N_JOBS  # type: ignore[attr-defined]

        finished = await wait_until(done, timeout=90, every=0.1)
        elapsed = time.perf_counter() - t0
        await asyncio.sleep(0.5)  # anything running twice would land now
        replies = {k.decode(): int(v) for k, v in (await q.client.hgetall(f"{p}test:replies")).items()}  # type: ignore[attr-defined]
        by = [v.decode() for v in (await q.client.hgetall(f"{p}test:finished_by")).values()]  # type: ignore[attr-defined]
        depth = await q.depth()
        dead = await q.dead_letters()
        await q.close()
        assert finished, f"only {len(replies)} of {N_JOBS} answered: " + logs[0].read_text()[-2000:]
        lost = [j.id for j in jobs if j.id not in replies]
        doubled = {k: v for k, v in replies.items() if v != 1}
        assert lost == [] and doubled == {} and len(replies) == N_JOBS
        assert depth == 0 and dead == []
        assert len(set(by)) == N_WORKERS  # every worker took a share
        # a worker exposes its own metrics: the jobs it ran, by outcome
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        ran = by.count("load0")
        assert f'asap_jobs_total{{kind="review",outcome="ok",source="cli"}} {float(ran)}' in text
        return {"submit_s": submit_s, "elapsed_s": elapsed}

    try:
        figures = asyncio.run(main())
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
    assert all(proc.returncode == 0 for proc in procs)
    print(f"\n{N_JOBS} jobs through {N_WORKERS} workers: submitted in {figures['submit_s']:.2f} s, "
          f"all answered after {figures['elapsed_s']:.2f} s ({N_JOBS / figures['elapsed_s']:.0f} jobs/s)")
