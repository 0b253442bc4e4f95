"""Benchmark: the agent team's answer latency in analyst mode, and tokens per answer with a scripted model.

* First answer (cold thread, fresh process state for the run: analysis + proposals + Critic through the
  whole AutoGen team), per sample run; goal < 2 s.
* Follow-ups in the same thread ("which first", "are you sure", push-back, compare, explain): each
  reloads the thread from SQLite, restores the team state and answers; goal < 200 ms.
* Tokens per answer with a scripted model (autogen's ReplayChatCompletionClient driving the same
  tool calls a model would make): prompt/completion tokens as counted by the client, and model calls.
* With that scripted model, the first answer's time: the analyst pass (computed first, so a slow model
  never means no answer) plus the model pass, which reuses the analyst pass's tool results; and the
  time the model-text check (agents/verify.py) takes on the answer.

    .venv/bin/python benchmarks/agents.py [--runs ID ...] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

# This file is named agents.py: run as a script, its folder would shadow the `agents` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from autogen_core import FunctionCall  # noqa: E402
from autogen_core.models import CreateResult, RequestUsage  # noqa: E402
from autogen_ext.models.replay import ReplayChatCompletionClient  # noqa: E402

from agents.backend import RealBackend  # noqa: E402
from agents.conversation import Conversation  # noqa: E402
from agents.models import ModelSetup, build_model  # noqa: E402
from bot.runs.store import LocalRunStore  # noqa: E402
from bot.store.sqlite_store import SQLiteStore  # noqa: E402

GOAL_FIRST_S = 2.0
GOAL_FOLLOWUP_MS = 200.0
FOLLOWUPS = ["which one would you start with?", "are you sure?", "I think proposal 2 looks better",
             "compare 1 and 3", "explain HBM-bound"]
INFO = {"vision": False, "function_calling": True, "json_output": False, "family": "unknown", "structured_output": False}


class ScriptedModel(ReplayChatCompletionClient):
    """Replays the script; usage is estimated as OpenAI's rule of thumb, 4 characters per token, over
    everything a real request would carry (system prompt, history, tool results and tool schemas)."""

    async def create(self, messages, *, tools=(), **kwargs):  # type: ignore[no-untyped-def, override]
        import dataclasses
        import json

        result = await super().create(messages, tools=tools, **kwargs)
        sent = sum(len(json.dumps(m.model_dump(), default=str)) for m in messages)
        sent += sum(len(json.dumps(t.schema if hasattr(t, "schema") else t, default=str)) for t in tools)
        out = result.content if isinstance(result.content, str) else json.dumps([dataclasses.asdict(c) for c in result.content])
        return result.model_copy(update={"usage": RequestUsage(prompt_tokens=sent // 4, completion_tokens=len(out) // 4)})


def _script(run_id: str) -> list[CreateResult]:
    """What a tool-calling model does for a first question: each agent calls its tool, then replies."""

    def fc(name: str) -> CreateResult:
        return CreateResult(finish_reason="function_calls", cached=False, usage=RequestUsage(0, 0),
                            content=[FunctionCall(id=name, name=name, arguments=f'{{"run_id": "{run_id}"}}')])

    def txt(t: str) -> CreateResult:
        return CreateResult(finish_reason="stop", content=t, cached=False, usage=RequestUsage(0, 0))

    return [fc("analyze_run"), txt("Diagnosed."), fc("propose_meshes"), txt("Three candidates."),
            fc("critique_candidates"), txt("All checked."), txt("Start with proposal 1; it targets the bottleneck.")]


async def bench_run(run_id: str, state: Path, repeat: int) -> dict[str, float]:
    firsts, follows = [], []
    for i in range(repeat):
        conv = Conversation(store=SQLiteStore(state / f"{run_id}-{i}.db"), model=build_model({}), backend=RealBackend())
        t0 = time.perf_counter()
        await conv.ask(f"why is run {run_id} slow?", thread_id="b")
        firsts.append(time.perf_counter() - t0)
        for q in FOLLOWUPS:
            t0 = time.perf_counter()
            await conv.ask(q, thread_id="b")
            follows.append((time.perf_counter() - t0) * 1000)
    replay = ScriptedModel(_script(run_id), model_info=INFO)
    setup = ModelSetup(client=replay, mode="compatible", model="scripted", token_budget=10**9, price=None, timeout_s=30)
    conv = Conversation(store=SQLiteStore(state / f"{run_id}-replay.db"), model=setup, backend=RealBackend())
    t0 = time.perf_counter()
    ans = await conv.ask(f"why is run {run_id} slow?", thread_id="r")
    model_first = time.perf_counter() - t0
    from agents.verify import check_reply
    from agents.workspace import Workspace

    ws = Workspace.from_dict((conv.store.get_thread("r") or {})["workspace"])
    t0 = time.perf_counter()
    for _ in range(20):
        check_reply(ans.computed, ws, ans.computed)  # the whole computed answer as if a model had written it
    check_ms = (time.perf_counter() - t0) / 20 * 1000
    return {"model_first_s": model_first, "check_ms": check_ms,"first_s": statistics.median(firsts), "first_max_s": max(firsts),
            "follow_ms": statistics.median(follows), "follow_max_ms": max(follows),
            "tokens": ans.usage["total_tokens"], "prompt": ans.usage["prompt_tokens"],
            "completion": ans.usage["completion_tokens"], "calls": ans.usage["model_calls"],
            "fallback": 1.0 if ans.fallback else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="*", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    runs = args.runs or LocalRunStore().list_ids()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'run':28} {'first (s)':>10} {'max':>6} {'follow-up (ms)':>15} {'max':>7} {'tokens/answer':>14} {'calls':>6}"
              f" {'model first (s)':>16} {'text check (ms)':>16}")
        worst_first, worst_follow = 0.0, 0.0
        for run_id in runs:
            r = asyncio.run(bench_run(run_id, Path(tmp), args.repeat))
            worst_first, worst_follow = max(worst_first, r["first_s"]), max(worst_follow, r["follow_ms"])
            flag = " (scripted model fell back!)" if r["fallback"] else ""
            print(f"{run_id:28} {r['first_s']:10.3f} {r['first_max_s']:6.2f} {r['follow_ms']:15.1f} {r['follow_max_ms']:7.1f} "
                  f"{r['tokens']:>8.0f} ({r['prompt']:.0f}+{r['completion']:.0f}) {r['calls']:>3.0f}"
                  f" {r['model_first_s']:16.3f} {r['check_ms']:16.1f}{flag}")
    print(f"worst median first answer {worst_first:.3f} s (goal < {GOAL_FIRST_S} s): {'OK' if worst_first < GOAL_FIRST_S else 'MISSED'}")
    print(f"worst median follow-up {worst_follow:.1f} ms (goal < {GOAL_FOLLOWUP_MS:.0f} ms): "
          f"{'OK' if worst_follow < GOAL_FOLLOWUP_MS else 'MISSED'}")


if __name__ == "__main__":
    main()
