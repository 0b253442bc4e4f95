"""Benchmark: GitHub webhook latency under a burst, and time to a posted review / answer.

Everything runs for real on 127.0.0.1: the runtime's aiohttp server with the GitHub route
(``bot.runtime.server.build_app``), the in-process queue on a SQLite store, and the GitHub REST double
that PyGithub talks to (``tests/doubles/github_rest_double.py``).

* **Webhook-to-2xx**: ``--rounds`` (3) bursts of ``--burst`` (200) signed ``issue_comment`` deliveries
  sent at once; the client-side latency of each POST until its 202, every round reported (a shared 2-core
  machine is noisy). Goal: p99 < 100 ms. A burst redelivered must answer ``duplicate`` for every one.
  ``--redis-url redis://127.0.0.1:6379/<db>`` puts the front on Redis (queue, limits, store) as
  ``REDIS_URL`` does, and measures the bursts only.
* **Time to a posted review**: push a sharding-config change, deliver ``pull_request`` while a worker runs,
  and time until the review comment and the commit status are on the double (no model involved: the
  review is computed). Median of ``--repeat`` pushes to one PR (the same comment, edited).
* **Time to a posted answer with a scripted model**: ``@asap why is run 311 slow?`` answered by the agents'
  Conversation driven by autogen's ReplayChatCompletionClient (the same tool calls a model makes).

    .venv/bin/python benchmarks/github.py [--burst 200] [--repeat 5] [--rounds 3] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

# This file is named github.py: run as a script, its folder would shadow PyGithub's `github` package.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

from integrations.github.review import REVIEW_MARKER  # noqa: E402
from integrations.github.webhook import sign  # noqa: E402
from tests.doubles.github_rest_double import GitHubRestDouble, WebhookHarness  # noqa: E402
from tests.doubles.github_rest_double import example_comment_event as comment_event  # noqa: E402  (octokit/webhooks)
from tests.doubles.github_rest_double import example_pull_event as pull_event  # noqa: E402

GOAL_P99_MS = 100.0
REPO = "acme/llm"
CFG = (ROOT / "examples" / "runs" / "311" / "maxtext.yml").read_text()


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


CLIENT = r"""
import asyncio, json, sys, time
import aiohttp

async def main():
    spec = json.load(open(sys.argv[1]))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        async def one(req):
            t0 = time.perf_counter()
            async with s.post(spec["url"], data=req["body"].encode(), headers=req["headers"]) as r:
                data = await r.json()
                return (time.perf_counter() - t0) * 1000, f"{r.status}:{data.get('status')}"
        got = await asyncio.gather(*(one(r) for r in spec["requests"]))
    print(json.dumps(got))

asyncio.run(main())
"""


async def burst(h: WebhookHarness, n: int, prefix: str) -> tuple[list[float], list[str]]:
    """Fire ``n`` signed deliveries at once from a separate client process; per-request latency in ms."""
    reqs = []
    for i in range(n):
        body = json.dumps(comment_event(REPO, 1, f"@asap why is run 311 slow? ({i})", login=f"user{i % 50}",
                                        comment_id=i))
        reqs.append({"body": body, "headers": {
            "X-GitHub-Event": "issue_comment", "X-GitHub-Delivery": f"{prefix}-{i}", "Content-Type": "application/json",
            "X-Hub-Signature-256": sign(h.secret, body.encode())}})
    spec = Path(tempfile.mkstemp(suffix=".json")[1])
    spec.write_text(json.dumps({"url": h.url, "requests": reqs}))
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", CLIENT, str(spec),
                                                stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    spec.unlink()
    got = json.loads(out)
    return [g[0] for g in got], [g[1] for g in got]


async def until(pred, timeout: float = 60.0) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    while not pred():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError("nothing posted in time")
        await asyncio.sleep(0.005)
    return time.perf_counter() - t0


def scripted_conversation(store):  # type: ignore[no-untyped-def]
    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, RequestUsage
    from autogen_ext.models.replay import ReplayChatCompletionClient

    from agents.conversation import Conversation
    from agents.models import ModelSetup

    def fc(name: str) -> CreateResult:
        return CreateResult(finish_reason="function_calls", cached=False, usage=RequestUsage(0, 0),
                            content=[FunctionCall(id=name, name=name, arguments='{"run_id": "311"}')])

    def txt(t: str) -> CreateResult:
        return CreateResult(finish_reason="stop", content=t, cached=False, usage=RequestUsage(0, 0))

    script = [fc("analyze_run"), txt("Diagnosed."), fc("propose_meshes"), txt("Three candidates."),
              fc("critique_candidates"), txt("All checked."), txt("Start with proposal 1.")]
    info = {"vision": False, "function_calling": True, "json_output": False, "family": "unknown",
            "structured_output": False}
    client = ReplayChatCompletionClient(script, model_info=info)
    setup = ModelSetup(client=client, mode="compatible", model="scripted", token_budget=10**9, price=None, timeout_s=30)
    return Conversation(store=store, model=setup)


def use_redis(h: WebhookHarness, url: str):  # type: ignore[no-untyped-def]
    """Put the harness's front on Redis (queue, limits, store) like ``REDIS_URL`` does; returns the cleanup."""
    import os

    from bot.runtime.limits import RedisRateLimiter
    from bot.runtime.queue import QueueSettings, RedisStreamsQueue
    from bot.store.redis_store import RedisStore

    prefix = f"benchgh{os.getpid()}:"
    queue = RedisStreamsQueue.from_url(url, settings=QueueSettings(prefix=prefix))
    old_store = h.ctx.store
    h.ctx.queue, h.ctx.store = queue, RedisStore.from_url(url, prefix=prefix)
    h.ctx.limiter = RedisRateLimiter(queue.client, prefix=prefix)

    async def cleanup() -> None:
        keys = [k async for k in queue.client.scan_iter(match=f"{prefix}*", count=1000)]
        for i in range(0, len(keys), 500):
            await queue.client.delete(*keys[i:i + 500])
        await queue.close()
        h.ctx.store.close()
        h.ctx.store = old_store  # the harness closes its own store on exit

    return cleanup


async def main_async(n: int, repeat: int, rounds: int = 3, redis_url: str = "") -> int:
    from bot.runtime.handlers import Dispatcher
    from bot.runtime.process import freeze_heap

    tmp = Path(tempfile.mkdtemp(prefix="asap-bench-gh-"))
    with GitHubRestDouble() as d:
        d.add_repo(REPO, {"configs/llama.yml": CFG, ".asap.yml": 'runs:\n  configs/llama.yml: "311"\n'},
                   collaborators={"alice": "write"})
        d.commit(REPO, "change", {"README.md": "x\n"}, parent_branch="main")
        pr = d.open_pull(REPO, "change", title="mesh")
        async with WebhookHarness(d, tmp) as h:
            if redis_url:
                cleanup = use_redis(h, redis_url)
            freeze_heap()  # as `asap serve` does once it listens
            # 1. bursts (no worker: the front only verifies, dedupes and queues)
            await burst(h, 5, "warm")
            p99s = []
            for r in range(rounds):
                t_burst = time.perf_counter()
                lat, statuses = await burst(h, n, f"burst{r}")
                t_burst = time.perf_counter() - t_burst
                p99s.append(pct(lat, 99))
                queued = sum(s == "202:queued" for s in statuses)
                print(f"webhook burst of {n} ({'REDIS_URL' if redis_url else 'SQLite store, in-process queue'}), "
                      f"round {r + 1}: p50 {pct(lat, 50):.1f} ms, p99 {pct(lat, 99):.1f} ms, max {max(lat):.1f} ms "
                      f"(goal p99 < {GOAL_P99_MS:.0f} ms: {'met' if pct(lat, 99) < GOAL_P99_MS else 'NOT met'}); "
                      f"{queued}/{n} queued; {n / max(lat) * 1000:.0f} deliveries/s "
                      f"(client in a separate process; {t_burst:.2f} s including its start-up)")
            dup_lat, dup_statuses = await burst(h, n, "burst0")
            dups = sum(s == "200:duplicate" for s in dup_statuses)
            print(f"redelivered burst: p99 {pct(dup_lat, 99):.1f} ms; {dups}/{n} answered duplicate")
            print(f"p99 over {rounds} rounds: median {statistics.median(p99s):.1f} ms, worst {max(p99s):.1f} ms; "
                  f"goal met in {sum(p < GOAL_P99_MS for p in p99s)} of {rounds}")
            if redis_url:
                await cleanup()
                return 0 if max(p99s) < GOAL_P99_MS else 1
            # drop the queued burst: this benchmark is about the front's latency, not answering 200 questions
            h.ctx.queue.q._queue.clear()  # type: ignore[attr-defined]

            # 2. time to a posted review, worker running
            stop = asyncio.Event()
            worker = asyncio.create_task(h.ctx.queue.run_worker(Dispatcher(h.ctx), consumer="bench", stop=stop))
            times = []
            for i in range(repeat):
                fsdp, tensor = (32, 8) if i % 2 == 0 else (8, 32)
                text = CFG.replace("ici_fsdp_parallelism: 16", f"ici_fsdp_parallelism: {fsdp}").replace(
                    "ici_tensor_parallelism: 16", f"ici_tensor_parallelism: {tensor}")
                sha = d.commit(REPO, "change", {"configs/llama.yml": text})
                t0 = time.perf_counter()
                await h.deliver("pull_request", pull_event(REPO, pr, sha, "opened" if i == 0 else "synchronize"))
                await until(lambda sha=sha: any(s["sha"] == sha for s in d.repos[REPO].statuses))
                times.append(time.perf_counter() - t0)
            comments = [c for c in d.comments_on(REPO, pr) if REVIEW_MARKER in c["body"]]
            print(f"time to a posted review (comment + status): median {statistics.median(times) * 1000:.0f} ms, "
                  f"max {max(times) * 1000:.0f} ms over {repeat} pushes; review comments on the PR: {len(comments)}")

            # 3. time to a posted answer with a scripted model
            h.ctx.conversation_factory = lambda: scripted_conversation(h.ctx.store)
            h.ctx._conversation = None
            before = len(d.comments_on(REPO, pr))
            t0 = time.perf_counter()
            await h.deliver("issue_comment", comment_event(REPO, pr, "@asap why is run 311 slow?", login="alice"),
                            delivery="answer-1")
            await until(lambda: any("looking into it" not in c["body"] for c in d.comments_on(REPO, pr)[before:]))
            answer_s = time.perf_counter() - t0
            stop.set()
            await worker
            body = d.comments_on(REPO, pr)[-1]["body"]
            mode = "model" if "words by" in body else "analyst (fallback)" if "no language model" in body else "?"
            print(f"time to a posted answer with a scripted model: {answer_s * 1000:.0f} ms ({mode} mode)")
            screen = body.split("<details>", 1)[0]
            rows = [line for line in screen.splitlines() if line.startswith("| ") and line[2].isdigit()]
            print(f"the answer's first screen: {len(screen.splitlines())} lines, {len(screen)} chars, "
                  f"{len(rows)} proposal rows; details folded {body.count('<details>')}x, {len(body)} chars in all")
    return 0 if max(p99s) < GOAL_P99_MS else 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--burst", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, help="bursts of distinct deliveries (each reported)")
    ap.add_argument("--redis-url", default="", help="front on this Redis (queue, limits, store); bursts only")
    args = ap.parse_args()
    sys.exit(asyncio.run(main_async(args.burst, args.repeat, args.rounds, args.redis_url)))


if __name__ == "__main__":
    main()
