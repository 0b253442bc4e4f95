"""Built-in handlers for jobs from the CLI / HTTP jobs route (source ``cli``).

``cli``/``ask`` and ``cli``/``explain`` run the agents' :class:`~agents.conversation.Conversation` on the
job's thread and store the answer as the job's result (``GET /v1/jobs/<id>``). The result is written
under the job id, so a redelivered job overwrites the same result instead of answering twice.
The conversation runs in a worker thread with its own event loop: analysis is CPU work and must not
stall the HTTP front when front and workers share a process (``asap serve --all``). When the deadline
passes, the handler is cancelled and the failure result is written; the thread cannot be cancelled and
finishes its analysis in the background, but its answer is dropped. The deadline bounds the reply, not CPU.
"""

from __future__ import annotations

import asyncio
import time

from bot.runtime.context import RuntimeContext
from bot.runtime.handlers import register_failure_reply, register_handler
from bot.runtime.jobs import Job


async def cli_ask(job: Job, ctx: RuntimeContext) -> None:
    """Answer the question with the agents' Conversation; the result is the Answer as a dict."""
    conv = ctx.conversation()
    answer = await asyncio.to_thread(
        lambda: asyncio.run(conv.ask(job.text, thread_id=job.thread, run_id=job.run)))
    ctx.metrics.record_usage(job.source, job.kind, answer.usage, answer.cost_usd)
    await ctx.queue.set_result(job.id, {"status": "ok", "finished_at": time.time(), "answer": answer.to_dict()})


async def cli_failure(job: Job, reason: str, ctx: RuntimeContext) -> None:
    """The failure reply for CLI jobs: the job's result says it failed and why."""
    await ctx.queue.set_result(job.id, {"status": "failed", "finished_at": time.time(), "error": reason})


register_handler("cli", "ask", cli_ask)
register_handler("cli", "explain", cli_ask)
register_failure_reply("cli", cli_failure)
