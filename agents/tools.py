"""The agents' tools: the deterministic backend wrapped so errors come back as data.

Every tool returns ``{"status": "ok", "result": {...}}`` or ``{"status": "error", "error": {...}}`` (the
error is :meth:`AsapError.to_dict`, naming the field and a hint), so a model can read what went wrong
and call again. Each call is recorded in the thread's worklog with its arguments, result and duration,
and full results are kept in the :class:`~agents.workspace.Workspace`; what goes back to the model is a
compact summary (fewer tokens, same numbers).

A thread is about one run: a call naming another run ID (a model inventing one) is refused as an error.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from autogen_core.tools import FunctionTool

from agents import followups
from agents.backend import AnalysisBackend, with_chips
from agents.workspace import ToolResult, Workspace
from bot.analysis.shape_source import kpi_shape
from bot.errors import AsapError
from bot.runs.store import Run, normalize_run_query

MAX_WHATIF_CANDIDATES = 40


class JsonTool(FunctionTool):
    """A FunctionTool whose results reach the model as JSON.

    AutoGen's default stringifies a dict with ``str()`` (a Python repr: single quotes, ``None``), which
    neither a model nor the analyst client should have to parse.
    """

    def return_value_as_string(self, value: Any) -> str:
        if isinstance(value, (dict, list)):
            return json.dumps(value, default=str)
        return super().return_value_as_string(value)


class ToolBox:
    """The tools of one thread, bound to its workspace, backend and worklog."""

    def __init__(self, ws: Workspace, backend: AnalysisBackend, log: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.ws = ws
        self.backend = backend
        self._log = log or (lambda entry: None)
        self._run: Run | None = None
        self.agent: str | None = None  # set by the team as each agent takes its turn

    # ---------------------------------------------------------------- plumbing
    def run(self, run_id: str) -> Run:
        wanted = normalize_run_query(str(run_id))
        if wanted.lower() != self.ws.run_id.lower() and normalize_run_query(self.ws.run_id).lower() != wanted.lower():
            raise AsapError(
                f"this thread is about run {self.ws.run_id!r}, not {run_id!r}",
                field="run_id",
                hint=f"call again with run_id={self.ws.run_id!r}",
            )
        if self._run is None:
            self._run = self.backend.load_run(self.ws.run_id)
        return self._run

    def _call(self, name: str, args: dict[str, Any], fn: Callable[[], Any], summarize: Callable[[Any], Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        try:
            result = fn()
            out: dict[str, Any] = {"status": "ok", "result": summarize(result)}
            rec = ToolResult(tool=name, args=args, status="ok", result=result, agent=self.agent)
        except AsapError as exc:
            out = {"status": "error", "error": exc.to_dict()}
            rec = ToolResult(tool=name, args=args, status="error", error=exc.to_dict(), agent=self.agent)
        except (ImportError, AttributeError, TypeError, ValueError, KeyError) as exc:
            err = {"error": f"{type(exc).__name__}: {exc}", "source": name, "field": None,
                   "hint": "internal error in a deterministic tool; the analyst answer reports what is available"}
            out = {"status": "error", "error": err}
            rec = ToolResult(tool=name, args=args, status="error", error=err, agent=self.agent)
        rec.ms = round((time.perf_counter() - t0) * 1000, 2)
        self.ws.turn.append(rec)
        self._log({"kind": "tool_call", "agent": self.agent, "tool": name, "args": args, "status": out["status"],
                   "result": out.get("result"), "error": out.get("error"), "ms": rec.ms})
        return out

    # ---------------------------------------------------------------- Analyzer
    def analyze_run(self, run_id: str) -> dict[str, Any]:
        """Load the run and its profile; KPIs, top ops with roofline position, diagnosis with evidence."""

        def go() -> dict[str, Any]:
            run = self.run(run_id)
            try:
                report = self.backend.analyze(run)
            except AsapError:
                self.ws.report = {"run": _run_facts(run)}  # chips and mesh are known even when analysis is not
                raise
            self.ws.report = report
            return report

        return self._call("analyze_run", {"run_id": run_id}, go, _summarize_report)

    # ---------------------------------------------------------------- Proposal
    def propose_meshes(self, run_id: str, k: int = 3) -> dict[str, Any]:
        """Ranked candidate meshes with predicted step time, rationale, trade-offs and confidence."""

        def go() -> dict[str, Any]:
            if not 1 <= k <= 5:
                raise AsapError(f"k must be between 1 and 5, got {k}", field="k")
            ps = self.backend.propose(self.run(run_id), k=k)
            self.ws.proposals = ps
            self.ws.verdicts = {}
            self.ws.stance = {}
            return ps

        return self._call("propose_meshes", {"run_id": run_id, "k": k}, go, _summarize_proposals)

    def suggest_mesh(self, run_id: str, ici: dict[str, int], dcn: dict[str, int] | None = None) -> dict[str, Any]:
        """Check a mesh the model thought of with the Critic; a wrong device count is fixed when possible."""
        mesh = {"ici": dict(ici or {}), "dcn": dict(dcn or {})}

        def go() -> dict[str, Any]:
            run = self.run(run_id)
            verdict = self.backend.critique(run, mesh)
            entry: dict[str, Any] = {"mesh": mesh, "verdict": verdict, "accepted": bool(verdict.get("ok"))}
            if not verdict.get("ok"):
                entry["reasons"] = [c["reason"] for c in verdict.get("checks", []) if not c["passed"] and c.get("hard", True)]
                fixed = _fix_product(mesh, run.record.num_chips)
                if fixed and fixed != mesh:
                    v2 = self.backend.critique(run, fixed)
                    if v2.get("ok"):
                        entry.update(fixed=fixed, fixed_verdict=v2, accepted=True)
            self.ws.suggested.append(entry)
            return entry

        return self._call("suggest_mesh", {"run_id": run_id, "ici": ici, "dcn": dcn}, go, _summarize_suggestion)

    def what_if_chips(self, run_id: str, chips: int) -> dict[str, Any]:
        """Enumerate meshes for a different chip count, predict each, keep the best three that pass the Critic."""

        def go() -> dict[str, Any]:
            base = self.run(run_id)
            # "same global batch and sequence length": the ones run.yaml or, where it is silent, the config states
            shaped = Run(record=kpi_shape(base).record, folder=base.folder, origin=base.origin)
            run = with_chips(shaped, int(chips))
            enumerated, ranked = self.backend.rank_meshes(run, MAX_WHATIF_CANDIDATES)
            if not ranked:
                raise AsapError(f"no valid mesh for {chips} chips of this model", field="chips",
                                hint="the chip count must divide the model's heads, layers and batch in some way")
            kept, dropped = [], []
            for m, pred in ranked:
                v = self.backend.critique(run, m)
                (kept if v.get("ok") else dropped).append({"mesh": m, "mesh_short": v.get("mesh_short"), "predicted": pred,
                                                            "critic": v})
                if len(kept) == 3:
                    break
            current = self.ws.report and (self.ws.report.get("kpis") or {}).get("step_time_ms")
            basis_of = getattr(self.backend, "whatif_basis", None)  # test doubles may not hold it
            basis = basis_of(run) if callable(basis_of) else {}
            out = {"chips": int(chips), "num_slices": run.record.num_slices, "candidates": kept,
                   "rejected": len(dropped), "enumerated": enumerated,
                   "current_chips": base.record.num_chips, "current_step_time_ms": current,
                   "baseline": basis.get("baseline"), "kept": basis.get("kept") or [],
                   "assumptions": [*(basis.get("scaling") or ["same global batch and sequence length"]),
                                   "same chip type and interconnect"]}
            self.ws.whatif = out
            for c in kept:
                self.ws.verdicts[c["mesh_short"]] = c["critic"]
            return out

        return self._call("what_if_chips", {"run_id": run_id, "chips": chips}, go, _summarize_whatif)

    # ---------------------------------------------------------------- Critic
    def critique_candidates(self, run_id: str) -> dict[str, Any]:
        """Run every Critic check on every candidate in this thread before anyone sees it."""

        def go() -> dict[str, Any]:
            run = self.run(run_id)
            props = (self.ws.proposals or {}).get("proposals") or []
            if self.ws.proposals is None and not self.ws.suggested:
                raise AsapError("no candidates to check yet", field="proposals", hint="the Proposal agent calls propose_meshes first")
            out = []
            for p in props:
                v = self.backend.critique(run, p["mesh"])
                self.ws.verdicts[p["mesh_short"]] = v
                out.append({"rank": p["rank"], "mesh": p["mesh_short"], "ok": v.get("ok"),
                            "failed": [c["reason"] for c in v.get("checks", []) if not c["passed"]]})
            for s in self.ws.suggested:
                out.append({"suggested": True, "mesh": s["verdict"].get("mesh_short"), "ok": s["accepted"],
                            "failed": s.get("reasons", [])})
            return {"checked": out, "passed": sum(1 for o in out if o["ok"]), "dropped": sum(1 for o in out if not o["ok"])}

        return self._call("critique_candidates", {"run_id": run_id}, go, lambda r: r)

    def assess_confidence(self, run_id: str) -> dict[str, Any]:
        """How sure the diagnosis and the recommended proposal are, with reasons and what would raise it."""
        return self._call("assess_confidence", {"run_id": run_id}, lambda: (self.run(run_id), followups.assess_confidence(self.ws))[1], lambda r: r)

    def weigh_pushback(self, run_id: str, preferred: int | None = None) -> dict[str, Any]:
        """Compare the proposal the person prefers (omit it for "the others" / "I disagree") with the
        recommendation; defend or revise from the numbers."""
        return self._call("weigh_pushback", {"run_id": run_id, "preferred": preferred},
                          lambda: (self.run(run_id), followups.weigh_pushback(
                              self.ws, int(preferred) if preferred is not None else None))[1], lambda r: r)

    # ---------------------------------------------------------------- Coordinator
    def recommend_first(self, run_id: str) -> dict[str, Any]:
        """Which proposal to try first, and why (expected gain x confidence)."""
        return self._call("recommend_first", {"run_id": run_id},
                          lambda: (self.run(run_id), followups.recommend_first(self.ws))[1], lambda r: r)

    def compare_proposals(self, run_id: str, a: int, b: int) -> dict[str, Any]:
        """Side-by-side predicted step time, memory and confidence of two proposals (numbered from 1)."""
        return self._call("compare_proposals", {"run_id": run_id, "a": a, "b": b},
                          lambda: (self.run(run_id), followups.compare(self.ws, int(a), int(b)))[1], lambda r: r)

    def explain_topic(self, topic: str) -> dict[str, Any]:
        """Explain a term (HBM-bound, communication-bound, FSDP, roofline, MFU...) from the playbooks."""
        return self._call("explain_topic", {"topic": topic}, lambda: followups.explain(topic, self.ws), lambda r: r)

    # ---------------------------------------------------------------- wiring
    def tools_for(self, agent: str) -> list[FunctionTool]:
        names = AGENT_TOOLS[agent]
        return [JsonTool(getattr(self, n), description=(getattr(self, n).__doc__ or n).strip(), name=n) for n in names]


AGENT_TOOLS: dict[str, list[str]] = {
    "Analyzer": ["analyze_run"],
    "Proposal": ["propose_meshes", "suggest_mesh", "what_if_chips"],
    "Critic": ["critique_candidates", "assess_confidence", "weigh_pushback"],
    "Coordinator": ["recommend_first", "compare_proposals", "explain_topic"],
}


def _fix_product(mesh: dict[str, dict[str, int]], chips: int) -> dict[str, dict[str, int]] | None:
    """Scale the largest batch-like ICI axis so the mesh multiplies to ``chips`` (None when impossible)."""
    total = 1
    for group in ("ici", "dcn"):
        for v in mesh[group].values():
            total *= max(int(v), 1)
    if total == chips or total <= 0:
        return None
    for axis in ("fsdp", "data"):
        size = mesh["ici"].get(axis, 1)
        rest = total // max(size, 1)
        if chips % rest == 0:
            fixed = {"ici": dict(mesh["ici"]), "dcn": dict(mesh["dcn"])}
            fixed["ici"][axis] = chips // rest
            fixed["ici"] = {a: v for a, v in fixed["ici"].items() if v != 1}
            return fixed
    return None


def _summarize_report(r: dict[str, Any]) -> dict[str, Any]:
    diag = r.get("diagnosis") or {}
    k = r.get("kpis") or {}
    return {
        "run": (r.get("run") or {}).get("id"),
        "mesh": (r.get("run") or {}).get("mesh_short"),
        "bottleneck": diag.get("bottleneck"),
        "confidence": diag.get("confidence"),
        "summary": diag.get("summary"),
        "evidence": [e.get("statement") for e in diag.get("evidence") or []][:5],
        "kpis": {key: k.get(key) for key in ("step_time_ms", "device_duty_cycle_percent", "collective_percent",
                                             "mfu_percent", "hbm_use_percent", "host_wait_percent", "shape_source",
                                             "model_source")
                 if k.get(key) is not None},
        "top_ops": [{"name": o.get("name"), "time_percent": o.get("time_percent"), "bound_by": o.get("bound_by")}
                    for o in (r.get("top_ops") or [])[:5]],
        **({"predicted": {key: r["predicted"].get(key) for key in ("step_time_ms", "step_time_low_ms",
                                                                   "step_time_high_ms", "calibrated", "mfu_percent",
                                                                   "memory_per_chip_bytes", "fits_memory",
                                                                   "memory_fit", "memory_low_bytes",
                                                                   "memory_high_bytes")}}
           if r.get("predicted") else {}),
    }


def _summarize_proposals(ps: dict[str, Any]) -> dict[str, Any]:
    return {
        "verdict": ps.get("verdict"),
        "summary": ps.get("summary"),
        "baseline": (ps.get("baseline") or {}).get("mesh_short"),
        "proposals": [
            {"rank": p.get("rank"), "mesh": p.get("mesh_short"),
             "step_time_ms": (p.get("predicted") or {}).get("step_time_ms"),
             "step_time_percent": (p.get("change") or {}).get("step_time_percent"),
             "confidence": p.get("confidence"), "labels": p.get("labels")}
            for p in ps.get("proposals") or []
        ],
        "notes": ps.get("notes"),
    }


def _summarize_suggestion(e: dict[str, Any]) -> dict[str, Any]:
    out = {"mesh": e["verdict"].get("mesh_short"), "accepted": e["accepted"], "reasons": e.get("reasons", [])}
    if e.get("fixed"):
        out["fixed_to"] = e["fixed_verdict"].get("mesh_short")
    return out


def _summarize_whatif(w: dict[str, Any]) -> dict[str, Any]:
    return {"chips": w["chips"], "enumerated": w["enumerated"], "rejected": w["rejected"],
            "kept_from_config": w.get("kept") or [], "assumptions": w.get("assumptions") or [],
            "candidates": [{"mesh": c["mesh_short"], "step_time_ms": c["predicted"].get("step_time_ms"),
                            "memory_per_chip_bytes": c["predicted"].get("memory_per_chip_bytes")} for c in w["candidates"]]}


def _run_facts(run: Any) -> dict[str, Any]:
    """What run.yaml and the config say about a run (chips, chip, mesh), for an answer whose analysis failed."""
    record = getattr(run, "record", None)
    if record is None:
        return {}
    out: dict[str, Any] = {"id": record.id, "name": record.name, "chip": record.chip, "num_chips": record.num_chips}
    try:
        from bot.analysis.analyze import load_mesh

        mesh, _, _ = load_mesh(run)
        if mesh is not None:
            out["mesh_short"] = mesh.short()
    except (AsapError, AttributeError, TypeError):
        pass
    return out
