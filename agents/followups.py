"""Deterministic answers to follow-up questions, computed from a thread's results.

"Which one first?", "are you sure?", "I think 2 looks better", "compare 1 and 3", "explain HBM-bound":
each is a function of the numbers already in the :class:`~agents.workspace.Workspace` (the analysis and
the Critic-checked proposals), so they are fast, reproducible and never invent a figure. The tools
return these dicts to the model; the renderer prints them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agents.workspace import Workspace
from bot.errors import AsapError
from bot.resources import playbooks_dir

PLAYBOOKS_DIR = playbooks_dir()


def _pct(p: dict[str, Any]) -> float | None:
    return (p.get("change") or {}).get("step_time_percent")


def _step(p: dict[str, Any]) -> float | None:
    return (p.get("predicted") or {}).get("step_time_ms")


def _gain(p: dict[str, Any]) -> float:
    """Predicted step-time reduction in percent (positive = faster); 0 when unknown."""
    pct = _pct(p)
    return -pct if pct is not None else 0.0


def _addresses(p: dict[str, Any]) -> bool:
    return not any("does not address" in lab for lab in p.get("labels") or [])


def score(p: dict[str, Any]) -> float:
    """Expected gain weighted by confidence; a gain inside the prediction's noise counts half."""
    gain = _gain(p)
    if (p.get("change") or {}).get("within_noise"):
        gain *= 0.5
    if not _addresses(p):
        gain *= 0.5
    return gain * float(p.get("confidence") or 0.0)


def _need(ws: Workspace) -> list[dict[str, Any]]:
    props = ws.proposal_list()
    if not props:
        raise AsapError(
            "there are no checked proposals in this thread yet",
            field="proposals",
            hint="ask for the analysis first (e.g. 'why is this run slow?'), or the run may have no valid alternative mesh",
        )
    return props


def _number(ws: Workspace, n: int) -> dict[str, Any]:
    props = _need(ws)
    if not 1 <= n <= len(props):
        raise AsapError(f"there is no proposal {n}; this thread has proposals 1..{len(props)}", field="proposal")
    return props[n - 1]


def _brief(n: int, p: dict[str, Any]) -> dict[str, Any]:
    pred = p.get("predicted") or {}
    ch = p.get("change") or {}
    return {
        "number": n,
        "mesh": p.get("mesh_short"),
        "step_time_ms": pred.get("step_time_ms"),
        "step_time_band_ms": [pred.get("step_time_low_ms"), pred.get("step_time_high_ms")] if pred else None,
        "step_time_change_percent": ch.get("step_time_percent"),
        "speedup": ch.get("speedup"),
        "within_noise": ch.get("within_noise"),
        "memory_per_chip_gb": round(pred["memory_per_chip_bytes"] / 1e9, 2) if pred.get("memory_per_chip_bytes") else None,
        "memory_capacity_gb": round(pred["memory_capacity_bytes"] / 1e9, 2) if pred.get("memory_capacity_bytes") else None,
        "confidence": p.get("confidence"),
        "labels": p.get("labels") or [],
        "addresses_bottleneck": _addresses(p),
        "score": round(score(p), 3),
    }


def recommend_first(ws: Workspace) -> dict[str, Any]:
    """The proposal to try first: the engine's own ranking and verdict, never a different order.

    The engine ranks by predicted time, or, when the band is too wide to tell, by the playbook move that
    matches the diagnosis first (``bot.proposals.verdict``); a push-back that revised the recommendation on
    the numbers is kept. A ``near_optimal`` verdict recommends no change: proposal 1 is only the nearest
    alternative, and the answer says so.
    """
    props = _need(ws)
    verdict = (ws.proposals or {}).get("verdict")
    summary = (ws.proposals or {}).get("summary") or ""
    revised = ws.stance.get("recommended") if ws.stance.get("pushbacks") else None
    choice = int(revised) if revised and 1 <= int(revised) <= len(props) else 1
    p = props[choice - 1]
    reasons = []
    if revised and choice != 1:
        reasons.append("revised from proposal 1 after your push-back, on the numbers")
    elif verdict == "uncertain":
        reasons.append("ranked first: the prediction band is too wide to rank on time alone, so the playbook move that "
                       "matches the diagnosis comes first")
    else:
        reasons.append("ranked first by predicted time per token among the proposals that pass every check")
    if _pct(p) is not None:
        reasons.append(f"predicted step time {_pct(p):+.1f}% vs the current mesh")
    reasons.append(f"confidence {p.get('confidence', 0):.2f}")
    if (p.get("change") or {}).get("within_noise"):
        reasons.append("the predicted gain is inside the prediction's uncertainty")
    if _addresses(p):
        reasons.append(f"it targets the diagnosed bottleneck ({(ws.report or {}).get('diagnosis', {}).get('bottleneck', 'unknown')})")
    for i, q in enumerate(props, start=1):
        if i == choice:
            continue
        reasons.append(
            f"proposal {i} ({q.get('mesh_short')})"
            + (f": step time {_pct(q):+.1f}%" if _pct(q) is not None else "")
            + f", confidence {q.get('confidence', 0):.2f}"
        )
    change = verdict not in ("near_optimal",)
    headline = (f"Start with proposal {choice}: {p.get('mesh_short')}." if change else
                f"No change recommended: the run looks near-optimal. If you try one, proposal {choice} "
                f"({p.get('mesh_short')}) is the nearest alternative.")
    if verdict == "uncertain":
        headline = f"Start with proposal {choice}: {p.get('mesh_short')} (improvement likely, size uncertain: measure it)."
    ws.stance["recommended"] = choice
    return {"choice": choice, "proposal": _brief(choice, p), "reasons": reasons, "tradeoffs": p.get("tradeoffs") or [],
            "ranking": [choice] + [i for i in range(1, len(props) + 1) if i != choice], "verdict": verdict,
            "recommend_change": change, "headline": headline, "summary": summary}


def assess_confidence(ws: Workspace) -> dict[str, Any]:
    """How sure the answer is, and why: diagnosis confidence, prediction bands, missing inputs."""
    report = ws.report or {}
    diag = report.get("diagnosis") or {}
    out: dict[str, Any] = {
        "diagnosis": diag.get("bottleneck"),
        "diagnosis_confidence": diag.get("confidence"),
        "diagnosis_reasons": diag.get("confidence_reasons") or [],
        "conflicts": diag.get("conflicts") or [],
        "would_raise_confidence": list(report.get("unavailable") or []) + list((ws.proposals or {}).get("missing_info") or []),
    }
    props = ws.proposal_list()
    if props:
        n = ws.stance.get("recommended") or recommend_first(ws)["choice"]
        p = props[n - 1]
        pred = p.get("predicted") or {}
        out["proposal"] = n
        out["proposal_confidence"] = p.get("confidence")
        out["proposal_reasons"] = p.get("confidence_reasons") or []
        if pred:
            out["prediction_uncertainty_percent"] = round(100 * float(pred.get("uncertainty") or 0), 1)
        out["gain_within_noise"] = bool((p.get("change") or {}).get("within_noise"))
        confs = [c for c in (diag.get("confidence"), p.get("confidence")) if c is not None]
        out["overall"] = round(min(confs), 2) if confs else None
    else:
        out["overall"] = diag.get("confidence")
    o = out["overall"]
    out["level"] = None if o is None else ("high" if o >= 0.75 else "moderate" if o >= 0.5 else "low")
    return out


def weigh_pushback_others(ws: Workspace) -> dict[str, Any]:
    """Push-back without a number ("the other two look better", "I disagree", "why not the others?").

    Every other proposal is weighed against the recommendation on the same numbers as a numbered push-back;
    the recommendation is revised to the best of them when one scores higher, else defended point by point.
    """
    props = _need(ws)
    ours_n = ws.stance.get("recommended") or recommend_first(ws)["choice"]
    ours = props[ours_n - 1]
    b = _brief(ours_n, ours)
    others = [i for i in range(1, len(props) + 1) if i != ours_n]
    if not others:
        return {"verdict": "defend", "preferred": None, "recommended": ours_n, "others": [],
                "evidence": [f"proposal {ours_n} is the only checked proposal; no other passed every check"],
                "compared": [b]}
    evidence: list[str] = []
    compared = [b]
    for n in others:
        a = _brief(n, props[n - 1])
        compared.append(a)
        parts = []
        if a["step_time_change_percent"] is not None and b["step_time_change_percent"] is not None:
            parts.append(f"step time {a['step_time_change_percent']:+.1f}% vs {b['step_time_change_percent']:+.1f}%")
        parts.append(f"confidence {a['confidence']:.2f} vs {b['confidence']:.2f}")
        if a["memory_per_chip_gb"] is not None and b["memory_per_chip_gb"] is not None:
            parts.append(f"memory {a['memory_per_chip_gb']} vs {b['memory_per_chip_gb']} GB per chip")
        if a["within_noise"]:
            parts.append("its gain is inside the prediction's noise")
        if not a["addresses_bottleneck"]:
            parts.append("it does not address the diagnosed bottleneck")
        parts.append(f"expected gain x confidence {a['score']} vs {b['score']}")
        evidence.append(f"proposal {n} ({a['mesh']}) vs proposal {ours_n}: " + "; ".join(parts))
    best_other = max(others, key=lambda n: (score(props[n - 1]), -n))
    if score(props[best_other - 1]) > score(ours) + 1e-9:
        verdict = "revise"
        ws.stance["recommended"] = best_other
        evidence.append(f"proposal {best_other} scores higher on the numbers: revising to it")
    else:
        verdict = "defend"
        evidence.append(f"none of the others scores higher than proposal {ours_n}: keeping it")
    ws.stance.setdefault("pushbacks", []).append({"preferred": None, "verdict": verdict})
    return {"verdict": verdict, "preferred": None, "recommended": ws.stance["recommended"], "others": others,
            "evidence": evidence, "compared": compared}


def weigh_pushback(ws: Workspace, preferred: int | None) -> dict[str, Any]:
    """Defend the recommendation or revise it, from the numbers -- never by agreeing for its own sake.

    ``preferred`` None: the person pushed back without naming a proposal (:func:`weigh_pushback_others`).
    """
    if preferred is None:
        return weigh_pushback_others(ws)
    props = _need(ws)
    pick = _number(ws, preferred)
    ours_n = ws.stance.get("recommended") or recommend_first(ws)["choice"]
    ours = props[ours_n - 1]
    a, b = _brief(preferred, pick), _brief(ours_n, ours)
    evidence: list[str] = []
    if preferred == ours_n:
        return {"verdict": "agree", "preferred": preferred, "recommended": ours_n,
                "evidence": [f"proposal {preferred} is already the recommendation (score {a['score']})"], "compared": [a, b]}
    if a["step_time_change_percent"] is not None and b["step_time_change_percent"] is not None:
        evidence.append(f"predicted step time: proposal {preferred} {a['step_time_change_percent']:+.1f}% vs "
                        f"proposal {ours_n} {b['step_time_change_percent']:+.1f}%")
    evidence.append(f"confidence: {a['confidence']:.2f} vs {b['confidence']:.2f}")
    if a["memory_per_chip_gb"] is not None and b["memory_per_chip_gb"] is not None:
        evidence.append(f"memory per chip: {a['memory_per_chip_gb']} GB vs {b['memory_per_chip_gb']} GB")
    if not a["addresses_bottleneck"] and b["addresses_bottleneck"]:
        evidence.append(f"proposal {preferred} does not address the diagnosed bottleneck")
    if a["within_noise"] and not b["within_noise"]:
        evidence.append(f"proposal {preferred}'s gain is inside the prediction's noise")
    if score(pick) > score(ours) + 1e-9:
        verdict = "revise"
        ws.stance["recommended"] = preferred
        evidence.append(f"on expected gain x confidence proposal {preferred} scores {a['score']} vs {b['score']}: revising")
    elif abs(score(pick) - score(ours)) <= 1e-9:
        verdict = "tie"
        evidence.append(f"both score {a['score']}; either is a reasonable first try, keeping proposal {ours_n} for its lower rank")
    else:
        verdict = "defend"
        evidence.append(f"on expected gain x confidence proposal {ours_n} scores {b['score']} vs {a['score']}")
    ws.stance.setdefault("pushbacks", []).append({"preferred": preferred, "verdict": verdict})
    return {"verdict": verdict, "preferred": preferred, "recommended": ws.stance["recommended"],
            "evidence": evidence, "compared": [a, b]}


def compare(ws: Workspace, a: int, b: int) -> dict[str, Any]:
    """Side-by-side numbers of two proposals and which is ahead on each."""
    pa, pb = _number(ws, a), _number(ws, b)
    ba, bb = _brief(a, pa), _brief(b, pb)
    rows = []
    for key, better in (("step_time_ms", "lower"), ("memory_per_chip_gb", "lower"), ("confidence", "higher")):
        va, vb = ba[key], bb[key]
        ahead = None
        if va is not None and vb is not None and va != vb:
            ahead = a if (va < vb) == (better == "lower") else b
        rows.append({"metric": key, a: va, b: vb, "ahead": ahead})
    return {"a": ba, "b": bb, "rows": rows, "tradeoffs": {a: pa.get("tradeoffs") or [], b: pb.get("tradeoffs") or []},
            "rationale": {a: pa.get("rationale"), b: pb.get("rationale")},
            "overall": a if score(pa) > score(pb) else b if score(pb) > score(pa) else None}


BUILTIN_TOPICS: dict[str, str] = {
    "hbm": "HBM-bound means the chip spends its time moving data between HBM and the compute units rather than "
    "computing: the operations' arithmetic intensity (FLOPs per byte) is below the chip's ridge point (peak FLOP/s "
    "divided by HBM bandwidth), so they run at memory speed. Typical causes are small per-chip matmuls, elementwise "
    "and normalization ops, optimizer updates, and rematerialization that re-reads activations. Remedies raise the "
    "work per byte: larger per-chip batch or sequence, fewer but larger shards (less tensor parallelism), fusion.",
    "compute": "Compute-bound means the matrix units are the limit: operations sit above the ridge point and run near "
    "peak FLOP/s. This is the healthy state; remaining gains come from removing overhead (remat, padding) or from "
    "more chips, not from a different mesh.",
    "communication": "Communication-bound means collectives (all-gather, reduce-scatter, all-reduce, all-to-all) take a "
    "large share of the step without being hidden behind compute. Each parallelism axis has a collective cost: "
    "tensor parallelism exchanges activations every layer, FSDP gathers weights, data parallelism reduces gradients. "
    "Remedies move traffic to cheaper axes, keep heavy axes inside the fast interconnect (ICI/NVLink), or give each "
    "chip more tokens so collectives overlap with compute.",
    "host": "Host- or input-bound means the accelerators wait for the host: the input pipeline, data loading or "
    "host-side work does not keep up, visible as idle device time between steps. Meshes do not fix it; prefetching, "
    "more loader workers and moving preprocessing off the critical path do.",
    "roofline": "The roofline model bounds an operation's speed by min(peak FLOP/s, arithmetic intensity x memory "
    "bandwidth). Operations left of the ridge point are memory-bound, right of it compute-bound; roofline efficiency "
    "is the achieved rate over that bound.",
    "mfu": "MFU (model FLOPs utilization) is the model's useful FLOPs per second (about 6 x parameters x tokens per "
    "step, divided by step time) over the chips' peak FLOP/s. Rematerialization and padding do not count as useful.",
    "fsdp": "FSDP shards weights, gradients and optimizer state across the axis and all-gathers each layer's weights "
    "before use; it stays compute-bound while each chip holds enough tokens to hide the gathers.",
    "tensor": "Tensor parallelism splits each matmul across chips and exchanges activations every layer; it saves "
    "memory but its communication does not shrink with the batch, so it belongs inside the fastest links.",
    "data": "Data parallelism replicates the weights and splits the batch; gradients are all-reduced once per step.",
    "sequence": "Sequence (context) parallelism splits the sequence; attention keys/values are exchanged between chips.",
    "pipeline": "Pipeline parallelism splits the layers into stages; micro-batches flow through them and the "
    "bubble (idle stages) shrinks as the number of micro-batches grows.",
    "expert": "Expert parallelism places MoE experts on different chips and routes tokens with all-to-all.",
}

_ALIASES = {"memory": "hbm", "memory-bound": "hbm", "bandwidth": "hbm", "comm": "communication", "collective": "communication",
            "collectives": "communication", "ici": "communication", "dcn": "communication", "network": "communication",
            "input": "host", "data loading": "host", "flops": "compute", "mxu": "compute", "model parallel": "tensor"}


def normalize_topic(topic: str) -> str | None:
    t = topic.lower().replace("_", " ").strip()
    t = re.sub(r"[-\s]*(bound|bottleneck|parallelism|parallel)\b", "", t).strip(" -?.!")
    if t in BUILTIN_TOPICS:
        return t
    if t in _ALIASES:
        return _ALIASES[t]
    for key in list(BUILTIN_TOPICS) + list(_ALIASES):
        if re.search(rf"\b{re.escape(key)}\b", t):
            return _ALIASES.get(key, key)
    return None


def explain(topic: str, ws: Workspace | None = None, playbooks: Path = PLAYBOOKS_DIR) -> dict[str, Any]:
    """An explanation of a term, from the playbooks' own text when they cover it, else built in."""
    key = normalize_topic(topic)
    if key is None:
        raise AsapError(f"no explanation for {topic!r}", field="topic",
                        hint=f"known topics: {', '.join(sorted(BUILTIN_TOPICS))}")
    passages: list[dict[str, str]] = []
    if playbooks.is_dir():
        passages = _playbook_passages(key, playbooks)
    out: dict[str, Any] = {"topic": key, "text": BUILTIN_TOPICS[key], "passages": passages[:3],
                           "source": "playbooks" if passages else "built-in"}
    if ws and ws.report:
        diag = ws.report.get("diagnosis") or {}
        out["this_run"] = {"bottleneck": diag.get("bottleneck"), "scores": diag.get("scores"),
                           "applies": diag.get("bottleneck") == key or key in (diag.get("secondary") or []),
                           "role": "primary" if diag.get("bottleneck") == key else
                           "secondary" if key in (diag.get("secondary") or []) else None}
    return out


def _playbook_passages(key: str, root: Path) -> list[dict[str, str]]:
    """Rationale passages of playbook moves for this bottleneck, then paragraphs naming it, each with its citation.

    ``source`` is what a person opens: ``playbooks/<file>.md#<heading-anchor>`` of the section the passage is in.
    """
    from knowledge.playbooks import load_moves_from_playbooks, load_playbooks

    found: list[dict[str, str]] = []
    try:
        moves = load_moves_from_playbooks(root)
        sections = load_playbooks(root)
    except AsapError:
        return found
    for rule in moves:
        when = (rule.get("when") or {}).get("bottleneck") or []
        if key in when and rule.get("rationale"):
            found.append({"id": str(rule.get("id")), "text": " ".join(str(rule["rationale"]).split()),
                          "source": rule["citation"].ref})
    for sec in sections:
        for para in sec.text.split("\n\n"):
            if para.lstrip().startswith(("#", "```", "|", "Move ")):
                continue
            if re.search(rf"\b{re.escape(key)}[- ]bound\b", para, re.IGNORECASE):
                found.append({"id": sec.anchor, "text": " ".join(para.split())[:600], "source": sec.ref})
    return found
