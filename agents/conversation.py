"""A conversation about one run: the first answer, then follow-ups, with memory across restarts.

:class:`Conversation` is the engine the CLI, Slack and GitHub front ends call::

    conv = Conversation.from_env()              # model from config/env, store from env
    answer = await conv.ask("why is job 123 slow", thread_id="slack:C1:1700000000.1")
    answer = await conv.ask("which one would you start with?", thread_id="slack:C1:1700000000.1")

Each request runs the AutoGen team (:mod:`agents.team`) in analyst mode with the deterministic client
first; with a model configured, the team then runs again with the model in the time left before the
request's deadline (:mod:`agents.deadline`). If the model fails (down, timeout, HTTP 5xx, malformed or
wrong tool calls, token budget, out of time), the analyst answer already computed is given and the answer
says so. The answer text is rendered from the tool results (:mod:`agents.render`); model text only adds
explanation, and only after :mod:`agents.verify` has removed every figure, mesh and claimed action the
tools did not compute. The thread record (workspace + ``team.save_state()``) and the worklog go to the
memory store.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import TextMessage, ToolCallRequestEvent
from autogen_core import CancellationToken

from agents.analyst import NEEDS_A_MODEL, AnalystClient
from agents.backend import AnalysisBackend, RealBackend
from agents.deadline import reply_by
from agents.intents import Intent, classify, find_run_id, task_header
from agents.metered import Meter, MeteredClient, ModelFailure
from agents.models import ModelSetup, build_model
from agents.render import render_first, render_followup
from agents.team import AGENTS, Plan, build_team
from agents.tools import ToolBox
from agents.verify import check_reply
from agents.workspace import Workspace
from bot.errors import AsapError, RunNotFound
from bot.store import MemoryStore, open_store
from bot.store.base import unavailable

# autogen logs each agent error with a traceback before re-raising it; the worklog records model errors and
# fallbacks, so keep those tracebacks off the person's terminal (handlers configured by an app still apply).
for _name in ("autogen_core", "autogen_agentchat", "autogen_ext"):
    logging.getLogger(_name).addHandler(logging.NullHandler())

THREAD_VERSION = 1
MIN_MODEL_S = 1.0  # below this much time left before the deadline the model is not asked at all
FINISH_S = 0.25  # kept back from the model for checking its text, rendering and saving the thread
REQUIRED = {
    "first": ["analyze_run", "propose_meshes", "critique_candidates"],
    "which_first": ["recommend_first"], "are_you_sure": ["assess_confidence"], "pushback": ["weigh_pushback"],
    "compare": ["compare_proposals"], "explain": ["explain_topic"], "what_if": ["what_if_chips"],
    "suggest": ["suggest_mesh"], "other": [],
}

Progress = Callable[[str], None]


@dataclass
class Answer:
    thread_id: str
    run_id: str
    intent: str
    text: str  # what the person sees: computed part + model explanation + notes
    computed: str
    model_note: str | None
    mode: str  # analyst | openai | compatible
    model: str
    fallback: str | None  # why the analyst answer was used instead of the model, if it was
    usage: dict[str, int]
    cost_usd: float | None
    elapsed_ms: float
    results: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Conversation:
    def __init__(self, *, store: MemoryStore, model: ModelSetup | None = None, backend: AnalysisBackend | None = None,
                 runs_root: str | None = None, runs: str | None = None) -> None:
        self.store = store
        self.model = model or build_model({})
        self.backend = backend or RealBackend(runs_root, runs)
        self.analyst = AnalystClient()

    @classmethod
    def from_env(cls, *, runs_root: str | None = None, runs: str | None = None, check: bool = True) -> Conversation:
        """Model client and memory store from configuration; misconfiguration raises AsapError now."""
        return cls(store=open_store(), model=build_model(check=check), runs_root=runs_root, runs=runs)

    # ---------------------------------------------------------------- public
    async def ask(self, text: str, *, thread_id: str | None = None, run_id: str | None = None,
                  progress: Progress | None = None, deadline: float | None = None) -> Answer:
        """Answer ``text`` in the thread; ``deadline`` (``time.monotonic()``; default: the runtime's
        :func:`agents.deadline.reply_by`) bounds the model: the analyst answer is computed first and the
        model only gets the time left, so a slow model never means no answer."""
        t0 = time.perf_counter()
        say = progress or (lambda s: None)
        thread_id = thread_id or f"cli-{uuid.uuid4().hex[:12]}"
        record = self.store.get_thread(thread_id) or {}
        log = self._logger(thread_id)
        rid = self._resolve_run(record, text, run_id)
        ws = Workspace.from_dict(record["workspace"]) if record.get("workspace") else Workspace(run_id=rid)
        intent = classify(text, first=ws.report is None or ws.proposals is None)
        log({"kind": "request", "text": text, "run_id": rid, "intent": intent.kind, "args": intent.args,
             "mode": self.model.mode})
        say(f"run {rid}: {intent.kind.replace('_', ' ')} ({' -> '.join(intent.plan)})")
        turn = _Turn(task=f"{task_header(rid, intent)}\nQuestion: {text}", intent=intent, state=record.get("team_state"),
                     meter=Meter(self.model.token_budget, log), log=log, say=say,
                     deadline=deadline if deadline is not None else reply_by(),
                     backend=_Memo(self.backend))  # the analyst and model passes share each computed result
        ws, model_note, state_out, fallback = await self._answer(ws, turn)
        computed = render_first(ws) if intent.kind == "first" else render_followup(ws, intent)
        notes = []
        if fallback:
            notes.append(f"Note: the model was not used for this answer ({fallback}); this is the analyst answer.")
        if model_note and not self.model.analyst and not fallback:
            checked = check_reply(model_note, ws, computed)
            if checked.removed:
                log({"kind": "model_text_check", "removed": [{"why": r.why, "items": r.items, "sentence": r.sentence}
                                                             for r in checked.removed]})
            # the note travels inside model_note, so every front end that shows the model's text shows it too
            model_note = "\n\n".join(p for p in (checked.text, checked.note) if p) or None
        else:
            model_note = NEEDS_A_MODEL if intent.kind == "other" else None
        meter = turn.meter
        usage = {"prompt_tokens": meter.prompt_tokens, "completion_tokens": meter.completion_tokens,
                 "total_tokens": meter.used, "model_calls": meter.calls}
        cost = self.model.cost_usd(meter.prompt_tokens, meter.completion_tokens)
        parts = [computed] if computed else []
        if model_note:
            parts.append(model_note)
        parts += notes
        mode = "analyst" if (self.model.analyst or fallback) else self.model.mode
        cost_s = "no price configured" if cost is None else f"${cost:.4f}"
        parts.append(f"[{mode} mode; {meter.used} tokens, {cost_s}; thread {thread_id}]")
        answer = Answer(
            thread_id=thread_id, run_id=rid, intent=intent.kind, text="\n\n".join(parts), computed=computed,
            model_note=model_note, mode=mode, model=self.model.model, fallback=fallback, usage=usage, cost_usd=cost,
            elapsed_ms=round((time.perf_counter() - t0) * 1000, 1),
            results={r.tool: (r.result if r.status == "ok" else {"error": r.error}) for r in ws.turn},
        )
        log({"kind": "answer", "text": answer.text, "usage": usage, "cost_usd": cost, "mode": mode,
             "fallback": fallback, "elapsed_ms": answer.elapsed_ms})
        turns = list(record.get("turns") or [])
        turns.append({"text": text, "intent": intent.kind, "mode": mode, "at": time.time()})
        self.store.put_thread(thread_id, {"version": THREAD_VERSION, "run_id": rid, "workspace": ws.to_dict(),
                                          "team_state": state_out, "turns": turns})
        return answer

    def log(self, thread_id: str) -> list[dict[str, Any]]:
        return self.store.read_log(thread_id)

    # ---------------------------------------------------------------- internals
    def _logger(self, thread_id: str) -> Callable[[dict[str, Any]], None]:
        def log(entry: dict[str, Any]) -> None:
            self.store.append_log(thread_id, {"at": round(time.time(), 3), **entry})

        return log

    def _resolve_run(self, record: dict[str, Any], text: str, run_id: str | None) -> str:
        if record.get("run_id"):
            if run_id and run_id != record["run_id"]:
                raise AsapError(f"thread is about run {record['run_id']!r}, not {run_id!r}", field="run",
                                hint="start a new thread for another run")
            return str(record["run_id"])
        if run_id is None:
            known = _known_ids(self.backend)
            run_id = find_run_id(text, known)
            if run_id is None:
                raise RunNotFound("no run ID in the question", field="run",
                                  hint=f"name a run, e.g. 'why is job {known[0] if known else '123'} slow'")
        return self.backend.load_run(run_id).id

    @staticmethod
    def _missing(ws: Workspace, intent: Intent) -> list[str]:
        return [t for t in REQUIRED[intent.kind] if not any(r.tool == t and r.status == "ok" for r in ws.turn)]

    def _unreachable(self, meter: Meter) -> None:
        """A call could not connect: the model is down for the next requests until a probe finds it back."""
        if meter.unreachable and self.model.health is not None:
            self.model.health.mark_down(meter.unreachable)

    async def _run(self, client: Any, ws: Workspace, intent: Intent, task: str, state: dict[str, Any] | None,
                   meter: Meter, say: Progress, *, analyst: bool, cancellation: CancellationToken | None = None,
                   backend: AnalysisBackend | None = None) -> tuple[str | None, dict[str, Any]]:
        toolbox = ToolBox(ws, backend or self.backend, meter.log)
        ws.turn = []
        plan = Plan(toolbox)
        plan.set(intent.plan)
        clients = {a: MeteredClient(client, meter, timeout_s=self.model.timeout_s, agent=a) for a in AGENTS}
        team = build_team(clients, toolbox, plan)  # type: ignore[arg-type]
        if state:
            try:
                await team.load_state(state)
            except Exception as exc:  # an old or foreign state: start the team fresh, keep the workspace
                meter.log({"kind": "state_reset", "error": f"{type(exc).__name__}: {exc}"})
        note: str | None = None
        async for msg in team.run_stream(task=task, cancellation_token=cancellation):
            if isinstance(msg, ToolCallRequestEvent):
                say(f"{msg.source}: " + ", ".join(f"{c.name}({c.arguments})" for c in msg.content))
            elif isinstance(msg, TaskResult):
                for m in reversed(msg.messages):
                    if m.source == "Coordinator" and isinstance(m, TextMessage):
                        note = m.content
                        break
            elif isinstance(msg, TextMessage) and msg.source != "user":
                shown = msg.content if analyst else check_reply(msg.content, ws).text  # progress is shown too
                if shown:
                    say(f"{msg.source}: {shown[:160]}")
        return (None if analyst else note), await team.save_state()

    async def _answer(self, ws: Workspace, turn: _Turn) -> tuple[Workspace, str | None, dict[str, Any], str | None]:
        """(workspace, model text, team state, fallback reason): the analyst pass, then the model in the time left."""
        if self.model.analyst:
            note, state = await self._run(self.analyst, ws, turn.intent, turn.task, turn.state, turn.meter, turn.say,
                                          analyst=True, backend=turn.backend)
            return ws, note, state, None
        quiet = Meter(1 << 30, _tagged(turn.log, "analyst_"))
        ws_a = Workspace.from_dict(ws.to_dict())
        turn.say("computing the analysis")
        _, state_a = await self._run(self.analyst, ws_a, turn.intent, turn.task, turn.state, quiet, lambda s: None,
                                     analyst=True, backend=turn.backend)
        fallback, note, state = await self._model_pass(ws, turn)
        if fallback is None:
            return ws, note, state, None
        turn.log({"kind": "fallback", "reason": fallback})
        turn.say(f"model not used ({fallback}); answering in analyst mode")
        return ws_a, None, state_a, fallback

    async def _model_pass(self, ws: Workspace, turn: _Turn) -> tuple[str | None, str | None, dict[str, Any]]:
        """Run the team with the model within the time left; (fallback reason or None, model text, team state)."""
        health = self.model.health
        down = await asyncio.to_thread(health.down_reason) if health is not None else None
        if down:  # the reason (with the endpoint's address) is for the worklog and /readyz, not the chat
            turn.log({"kind": "model_down", "reason": down})
            return "the model endpoint is down; it is re-checked and used again once it answers", None, {}
        left = None if turn.deadline is None else turn.deadline - time.monotonic() - FINISH_S
        if left is not None and left < MIN_MODEL_S:
            return f"no time was left for the model before this request's deadline ({max(left, 0):.1f} s)", None, {}
        token = CancellationToken()
        task = asyncio.ensure_future(self._run(self.model.client_for_loop(), ws, turn.intent, turn.task, turn.state,
                                               turn.meter, turn.say, analyst=False, cancellation=token,
                                               backend=turn.backend))
        try:
            note, state = await _within(task, token, left)
        except TimeoutError:
            turn.log({"kind": "model_error", "error": f"deadline: {left:.1f} s left for the model were not enough"})
            return (f"the model did not finish in the {left:.1f} s left before this request's deadline", None, {})
        except ModelFailure as exc:
            self._unreachable(turn.meter)
            return exc.message, None, {}
        except Exception as exc:  # autogen wraps agent errors in RuntimeError; a person still gets an answer
            if unavailable(exc):
                raise  # the store or queue is down: the job is retried, not answered without its memory
            self._unreachable(turn.meter)
            first = (str(exc).strip().splitlines() or [""])[0]
            # autogen re-raises agent errors as RuntimeError("<Type>: <message>\nTraceback ..."): keep the message
            first = re.sub(r"^(?:\w+Error|ModelFailure|TokenBudgetExceeded): ", "", first)
            return first[:300] or type(exc).__name__, None, {}
        missing = self._missing(ws, turn.intent)
        if missing:
            return f"the model's team run did not produce {', '.join(missing)}", None, {}
        return None, note, state


async def _within(task: asyncio.Future[Any], token: CancellationToken, seconds: float | None) -> Any:
    """The team run's result, or TimeoutError after ``seconds``: its model calls are cancelled through the
    token first (an in-flight HTTP request ends at once) and the run itself is given one second to unwind."""
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if done:
        return task.result()
    token.cancel()
    task.cancel()
    await asyncio.wait({task}, timeout=1.0)
    if task.done() and not task.cancelled():
        task.exception()  # retrieved: the run's own error after cancellation is not the answer's concern
    raise TimeoutError


@dataclass
class _Turn:
    """One request's inputs to the team passes."""

    task: str
    intent: Intent
    state: dict[str, Any] | None
    meter: Meter
    log: Callable[[dict[str, Any]], None]
    say: Progress
    deadline: float | None
    backend: AnalysisBackend


def _tagged(log: Callable[[dict[str, Any]], None], prefix: str) -> Callable[[dict[str, Any]], None]:
    """The worklog of the analyst pass that precedes a model: same entries, kinds prefixed (``analyst_tool_call``)."""
    def tagged(entry: dict[str, Any]) -> None:
        log({**entry, "kind": prefix + str(entry.get("kind", ""))})

    return tagged


class _Memo:
    """One request's view of the backend: each analysis, proposal set and verdict is computed once.

    The analyst pass runs before the model pass and both call the same tools; the second call gets a copy
    of the first's result instead of recomputing it (the model's answer costs the model's time only).
    """

    def __init__(self, inner: AnalysisBackend) -> None:
        self.inner = inner
        self._cache: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _once(self, name: str, run: Any, *args: Any) -> Any:
        key = json.dumps([name, run.id, run.record.num_chips, args], sort_keys=True, default=str)
        if key not in self._cache:
            self._cache[key] = getattr(self.inner, name)(run, *args)
        return copy.deepcopy(self._cache[key])

    def load_run(self, query: str) -> Any:
        return self.inner.load_run(query)

    def analyze(self, run: Any) -> Any:
        return self._once("analyze", run)

    def propose(self, run: Any, k: int = 3) -> Any:
        return self._once("propose", run, k)

    def critique(self, run: Any, mesh: dict[str, dict[str, int]]) -> Any:
        return self._once("critique", run, mesh)

    def rank_meshes(self, run: Any, limit: int = 40) -> Any:
        return self._once("rank_meshes", run, limit)


def _known_ids(backend: AnalysisBackend) -> list[str]:
    lister = getattr(backend, "list_ids", None)
    if callable(lister):
        try:
            return list(lister())
        except AsapError:
            return []
    return []
