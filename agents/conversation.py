"""A conversation about one run: the first answer, then follow-ups, with memory across restarts.

:class:`Conversation` is the engine the CLI, Slack and GitHub front ends call::

    conv = Conversation.from_env()              # model from config/env, store from env
    answer = await conv.ask("why is job 123 slow", thread_id="slack:C1:1700000000.1")
    answer = await conv.ask("which one would you start with?", thread_id="slack:C1:1700000000.1")

Each request runs the AutoGen team (:mod:`agents.team`) with the configured model, or in analyst mode
with the deterministic client. If the model fails (timeout, HTTP 5xx, malformed or wrong tool calls,
token budget), the same team is re-run in analyst mode and the answer says so. The answer text is
rendered from the tool results (:mod:`agents.render`); model text only adds explanation. The thread
record (workspace + ``team.save_state()``) and the worklog go to the memory store.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import TextMessage, ToolCallRequestEvent

from agents.analyst import NEEDS_A_MODEL, AnalystClient
from agents.backend import AnalysisBackend, RealBackend
from agents.intents import Intent, classify, find_run_id, parse_mesh, task_header
from agents.metered import Meter, MeteredClient, ModelFailure
from agents.models import ModelSetup, build_model
from agents.render import render_first, render_followup
from agents.team import AGENTS, Plan, build_team
from agents.tools import ToolBox
from agents.workspace import Workspace
from bot.errors import AsapError, RunNotFound
from bot.store import MemoryStore, open_store

# autogen logs each agent error with a traceback before re-raising it; the worklog records model errors and
# fallbacks, so keep those tracebacks off the person's terminal (handlers configured by an app still apply).
for _name in ("autogen_core", "autogen_agentchat", "autogen_ext"):
    logging.getLogger(_name).addHandler(logging.NullHandler())

THREAD_VERSION = 1
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
                 runs_root: str | None = None) -> None:
        self.store = store
        self.model = model or build_model({})
        self.backend = backend or RealBackend(runs_root)
        self.analyst = AnalystClient()

    @classmethod
    def from_env(cls, *, runs_root: str | None = None, check: bool = True) -> Conversation:
        """Model client and memory store from configuration; misconfiguration raises AsapError now."""
        return cls(store=open_store(), model=build_model(check=check), runs_root=runs_root)

    # ---------------------------------------------------------------- public
    async def ask(self, text: str, *, thread_id: str | None = None, run_id: str | None = None,
                  progress: Progress | None = None) -> Answer:
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

        task = f"{task_header(rid, intent)}\nQuestion: {text}"
        fallback: str | None = None
        meter = Meter(self.model.token_budget, log)
        state = record.get("team_state")
        model_note: str | None = None
        try:
            model_note, state_out = await self._run(self.model.client_for_loop(), ws, intent, task, state, meter, say,
                                                    analyst=self.model.analyst)
            missing = self._missing(ws, intent)
            if missing and not self.model.analyst:
                raise ModelFailure(f"the model's team run did not produce {', '.join(missing)}")
        except ModelFailure as exc:
            fallback = exc.message
        except Exception as exc:  # autogen wraps agent errors in RuntimeError; a person still gets an answer
            if self.model.analyst:
                raise
            first = (str(exc).strip().splitlines() or [""])[0]
            # autogen re-raises agent errors as RuntimeError("<Type>: <message>\nTraceback ..."): keep the message
            first = re.sub(r"^(?:\w+Error|ModelFailure|TokenBudgetExceeded): ", "", first)
            fallback = first[:300] or type(exc).__name__
        if fallback is not None:
            log({"kind": "fallback", "reason": fallback})
            say(f"model failed ({fallback}); answering in analyst mode")
            ws.turn = []
            model_note, state_out = await self._run(self.analyst, ws, intent, task, state, Meter(1 << 30, log), say,
                                                    analyst=True)
        computed = render_first(ws) if intent.kind == "first" else render_followup(ws, intent)
        notes = []
        if fallback:
            notes.append(f"Note: the model was not used for this answer ({fallback}); this is the analyst answer.")
        if model_note and not self.model.analyst and not fallback:
            model_note = self._check_model_meshes(model_note, ws, log)
        else:
            model_note = NEEDS_A_MODEL if intent.kind == "other" else None
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

    async def _run(self, client: Any, ws: Workspace, intent: Intent, task: str, state: dict[str, Any] | None,
                   meter: Meter, say: Progress, *, analyst: bool) -> tuple[str | None, dict[str, Any]]:
        toolbox = ToolBox(ws, self.backend, meter.log)
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
        async for msg in team.run_stream(task=task):
            if isinstance(msg, ToolCallRequestEvent):
                say(f"{msg.source}: " + ", ".join(f"{c.name}({c.arguments})" for c in msg.content))
            elif isinstance(msg, TaskResult):
                for m in reversed(msg.messages):
                    if m.source == "Coordinator" and isinstance(m, TextMessage):
                        note = m.content
                        break
            elif isinstance(msg, TextMessage) and msg.source != "user":
                say(f"{msg.source}: {msg.content[:160]}")
        return (None if analyst else note), await team.save_state()

    def _check_model_meshes(self, note: str, ws: Workspace, log: Callable[[dict[str, Any]], None]) -> str:
        """Meshes named in model text must have passed the Critic; others are checked now and flagged."""
        passed = {s for s, v in ws.verdicts.items() if v.get("ok")}
        extra = []
        for sentence in re.split(r"(?<=[.!?\n])\s+", note):
            mesh = parse_mesh(sentence)
            if not mesh:
                continue
            try:
                run = self.backend.load_run(ws.run_id)
                v = self.backend.critique(run, mesh)
            except AsapError as exc:
                extra.append(f"(a mesh in the text above could not be checked: {exc.message})")
                continue
            if v.get("mesh_short") in passed:
                continue
            log({"kind": "model_mesh_check", "mesh": mesh, "ok": v.get("ok")})
            if not v.get("ok"):
                reasons = "; ".join(c["reason"] for c in v.get("checks", []) if not c["passed"] and c.get("hard", True))
                extra.append(f"(Critic: the mesh {v.get('mesh_short')} mentioned above fails its checks and is not a proposal: {reasons})")
            else:
                extra.append(f"(Critic: the mesh {v.get('mesh_short')} mentioned above passes the checks but has no computed ranking; ask 'what about {v.get('mesh_short')}'.)")
        return note + ("\n" + "\n".join(extra) if extra else "")


def _known_ids(backend: AnalysisBackend) -> list[str]:
    lister = getattr(backend, "list_ids", None)
    if callable(lister):
        try:
            return list(lister())
        except AsapError:
            return []
    return []
