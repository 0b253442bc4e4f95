"""A slow model never means no answer: the analyst answer is computed first and arrives within the deadline.

The scripted model answers every call well inside its own timeout (0.6 s of 2 s) but a first answer needs
about eight calls, more than the request's deadline allows; the model gets only the time that is left.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

from doubles.agents_backend import FakeBackend
from doubles.openai_double import OpenAIDouble, Reply
from test_agents_openai import env_for, tool_policy

from agents.conversation import Conversation
from agents.deadline import answer_within
from agents.models import build_model
from bot.runtime.context import RuntimeContext
from bot.runtime.handlers import Dispatcher, Outcome
from bot.runtime.jobs import Job, Requester
from bot.store.sqlite_store import SQLiteStore


def slow_policy(body: dict[str, Any]) -> Reply:
    return Reply.slow(0.6, tool_policy(body))


def test_slow_model_the_analyst_answer_arrives_within_the_deadline(tmp_path: Path) -> None:
    with OpenAIDouble(slow_policy) as d:
        conv = Conversation(store=SQLiteStore(tmp_path / "s.db"), model=build_model(env_for(d, tmp_path)),
                            backend=FakeBackend(tmp_path))
        t0 = time.monotonic()
        with answer_within(3.0):
            a = asyncio.run(conv.ask("why is job 123 slow?", thread_id="t1"))
        took = time.monotonic() - t0
        assert d.requests  # the model was asked, and given the time that was left
    assert took < 3.5, took
    assert a.mode == "analyst" and a.fallback and "did not finish in the" in a.fallback
    assert "left before this request's deadline" in a.fallback
    assert "this is the analyst answer" in a.text and "1. fsdp=32 tensor=2: step 108.0 ms" in a.text
    kinds = [e["kind"] for e in conv.log("t1")]
    assert kinds.count("fallback") == 1 and kinds[-1] == "answer"


def test_a_fast_model_within_the_deadline_still_answers(tmp_path: Path) -> None:
    with OpenAIDouble(tool_policy) as d:
        conv = Conversation(store=SQLiteStore(tmp_path / "s.db"), model=build_model(env_for(d, tmp_path)),
                            backend=FakeBackend(tmp_path))
        with answer_within(20.0):
            a = asyncio.run(conv.ask("why is job 123 slow?", thread_id="t1"))
    assert a.fallback is None and a.mode == "compatible"
    assert "The collectives dominate; start with proposal 1." in a.text


def test_a_job_with_a_slow_model_is_answered_not_timed_out(tmp_path: Path) -> None:
    """Through the runtime: the job's deadline reaches the conversation; the reply is the analyst answer."""
    async def main(d: OpenAIDouble) -> None:
        ctx = RuntimeContext.from_env({"ASAP_STATE_DIR": str(tmp_path / "state")})
        ctx.conversation_factory = lambda: Conversation(store=ctx.store, model=build_model(env_for(d, tmp_path)),
                                                        backend=FakeBackend(tmp_path))
        job = Job(id=f"cli:{uuid.uuid4().hex}", source="cli", kind="ask", thread="cli:slow", run="123",
                  text="why is job 123 slow?", requester=Requester(source="cli", user_id="ann"), deadline_s=4.0)
        t0 = time.monotonic()
        result = await Dispatcher(ctx).execute(job)
        # the job's 4 s deadline, plus slack for rendering the analyst answer on a busy CI machine; without the
        # deadline the slow model's eight 0.6 s calls alone would take about 5 s
        assert time.monotonic() - t0 < 4.8
        assert result.outcome is Outcome.OK, result.reason
        stored = await ctx.queue.get_result(job.id)
        assert stored is not None and stored["status"] == "ok"
        answer = stored["answer"]
        assert answer["mode"] == "analyst" and "deadline" in answer["fallback"]
        assert "1. fsdp=32 tensor=2" in answer["text"]
        await ctx.close()

    with OpenAIDouble(slow_policy) as d:
        asyncio.run(main(d))
