"""Writes the answer a person sees from the computed results -- never from model text.

The first answer is: the run, the diagnosis with its evidence, and up to three Critic-checked proposals.
Follow-ups print the result of the tool that answered them. A model's text is appended only as
explanation, after the computed part, and any mesh it mentions that the Critic has not passed is flagged.
"""

from __future__ import annotations

from typing import Any

from agents.intents import Intent
from agents.workspace import Workspace
from bot import fmt

_f = fmt.value


def _signed_pct(v: Any) -> str:
    """A change in percent with its sign, so a slower proposal (+10.5%) never reads like a faster one."""
    return f"{v:+.1f}%" if isinstance(v, (int, float)) else _f(v, "%")


def render_first(ws: Workspace) -> str:
    r = ws.report or {}
    run = r.get("run") or {}
    diag = r.get("diagnosis") or {}
    k = r.get("kpis") or {}
    lines = [f"Run {run.get('id', ws.run_id)}" + (f" ({run['name']})" if run.get("name") else "")
             + f": {run.get('num_chips', '?')} x {run.get('chip_name') or run.get('chip', '?')}, mesh {run.get('mesh_short') or 'unknown'}"]
    if diag:
        lines.append(f"Diagnosis: {diag.get('bottleneck')}-bound (confidence {_f(diag.get('confidence'), nd=2)}). {diag.get('summary', '')}".rstrip())
        kp = [f"step {_f(k.get('step_time_ms'), ' ms')}"]
        for key, label in (("device_duty_cycle_percent", "duty cycle"), ("collective_percent", "collectives"),
                           ("mfu_percent", "MFU"), ("hbm_use_percent", "HBM use"), ("host_wait_percent", "host wait")):
            if k.get(key) is not None:
                kp.append(f"{label} {_f(k[key], '%')}")
        if k.get("shape_source") not in (None, "run.yaml") and k.get("mfu_percent") is not None:
            kp.append(f"MFU's batch x sequence length from {k['shape_source']}")
        if k.get("model_source") not in (None, "run.yaml") and k.get("mfu_percent") is not None:
            kp.append(f"MFU's model dimensions from {k['model_source']}")
        lines.append("KPIs: " + ", ".join(kp))
        if p := r.get("predicted"):
            lines.append(fmt.predicted_step(p))
        lines.append("Evidence:")
        for e in diag.get("evidence") or []:
            lines.append(f"  - {e.get('statement')}")
    else:
        errs = [r.error or {} for r in ws.results("analyze_run") if r.status == "error"]
        why = errs[-1].get("error") if errs else "the analysis did not run"
        hint = f" ({errs[-1]['hint']})" if errs and errs[-1].get("hint") else ""
        lines.append(f"Diagnosis: not available: {why}{hint}")
    lines.append(render_proposals(ws))
    return "\n".join(lines)


def render_proposals(ws: Workspace) -> str:
    ps = ws.proposals
    if ps is None:
        errs = [r.error or {} for r in ws.results("propose_meshes") if r.status == "error"]
        return "Proposals: not available" + (f": {errs[-1].get('error')}" if errs else ".")
    props = ws.proposal_list()
    lines = [f"Proposals ({ps.get('verdict')}): {ps.get('summary', '')}".rstrip()]
    for i, p in enumerate(props[:3], 1):
        pred = p.get("predicted") or {}
        ch = p.get("change") or {}
        impact = f"step {_f(pred.get('step_time_ms'), ' ms')} ({_signed_pct(ch.get('step_time_percent'))} vs now)" if pred else "no absolute prediction (model unknown)"
        mem = f", {pred['memory_per_chip_bytes'] / 1e9:.1f} GB/chip" if pred.get("memory_per_chip_bytes") else ""
        labels = f" [{', '.join(p['labels'])}]" if p.get("labels") else ""
        lines.append(f"  {i}. {p.get('mesh_short')}: {impact}{mem}, confidence {_f(p.get('confidence'), nd=2)}{labels}")
        if p.get("rationale"):
            lines.append(f"     why: {' '.join(str(p['rationale']).split())}")
        if p.get("tradeoffs"):
            lines.append(f"     trade-offs: {'; '.join(p['tradeoffs'])}")
        lines.extend(_citation_lines(p.get("citations") or []))
    dropped = [(m, v) for m, v in ws.verdicts.items() if not v.get("ok")]
    for mesh, v in dropped:
        reasons = "; ".join(c["reason"] for c in v.get("checks", []) if not c["passed"] and c.get("hard", True))
        lines.append(f"  dropped by the Critic: {mesh}: {reasons}")
    for s in ws.suggested:
        lines.append(_suggestion_line(s))
    if not props:
        lines.append("  No mesh change passed the Critic's checks.")
    for a in ps.get("advice") or []:
        lines.append(f"  advice: {a.get('text')}" + (f" (playbook {a['citation']})" if a.get("citation") else ""))
    return "\n".join(lines)


def _citation_lines(citations: list[dict[str, Any]]) -> list[str]:
    """The playbook sections and past changes a proposal rests on, each with why, so a person can check them."""
    if not citations:
        return []
    out = ["     rests on:"]
    for c in citations:
        label = {"playbook": "playbook", "pr": "past PR", "commit": "past commit", "history": "past outcome"}.get(
            c.get("kind", ""), c.get("kind", ""))
        out.append(f"       - {label} {c.get('ref')}: {c.get('why')}")
    return out


def _suggestion_line(s: dict[str, Any]) -> str:
    name = s["verdict"].get("mesh_short")
    if s.get("fixed"):
        return (f"  suggested {name}: {'; '.join(s.get('reasons', []))} -> fixed to {s['fixed_verdict'].get('mesh_short')}, "
                f"which passes every check")
    if s["accepted"]:
        return f"  suggested {name}: passes every Critic check"
    return f"  suggested {name}: dropped: {'; '.join(s.get('reasons', []))}"


def render_followup(ws: Workspace, intent: Intent) -> str:
    tool = {"which_first": "recommend_first", "are_you_sure": "assess_confidence", "pushback": "weigh_pushback",
            "compare": "compare_proposals", "explain": "explain_topic", "what_if": "what_if_chips",
            "suggest": "suggest_mesh"}.get(intent.kind)
    if tool is None:
        return ""
    errors = [r for r in ws.results(tool) if r.status == "error"]
    res = ws.last_ok(tool)
    if res is None:
        if errors:
            e = errors[-1].error or {}
            return f"I could not answer that: {e.get('error')}" + (f" ({e['hint']})" if e.get("hint") else "")
        return "I could not answer that from the computed results."
    return RENDERERS[intent.kind](res, ws)


def _which_first(r: dict[str, Any], ws: Workspace) -> str:
    p = r["proposal"]
    lines = [r.get("headline") or f"Start with proposal {r['choice']}: {p['mesh']}."]
    lines += [f"  - {x}" for x in r["reasons"]]
    if r.get("tradeoffs"):
        lines.append(f"  trade-offs: {'; '.join(r['tradeoffs'])}")
    return "\n".join(lines)


def _sure(r: dict[str, Any], ws: Workspace) -> str:
    lines = [f"Confidence: {r.get('level') or 'unknown'} ({_f(r.get('overall'), nd=2)})."]
    lines.append(f"  diagnosis {r.get('diagnosis')}-bound at {_f(r.get('diagnosis_confidence'), nd=2)}:")
    lines += [f"    - {x}" for x in r.get("diagnosis_reasons") or []]
    if r.get("proposal"):
        lines.append(f"  proposal {r['proposal']} at {_f(r.get('proposal_confidence'), nd=2)}:")
        lines += [f"    - {x}" for x in r.get("proposal_reasons") or []]
        if r.get("prediction_uncertainty_percent") is not None:
            lines.append(f"  the step-time prediction carries +-{r['prediction_uncertainty_percent']}%"
                         + ("; the predicted gain is inside that band" if r.get("gain_within_noise") else ""))
    for c in r.get("conflicts") or []:
        lines.append(f"  conflict: {c}")
    if r.get("would_raise_confidence"):
        lines.append("  what would raise it: " + "; ".join(r["would_raise_confidence"]))
    return "\n".join(lines)


def _pushback(r: dict[str, Any], ws: Workspace) -> str:
    if r.get("preferred") is None:
        head = (f"Weighing the others against proposal {r['recommended']}, on the numbers:" if r["verdict"] == "defend"
                else f"You have a point: revised to proposal {r['recommended']}, on the numbers:")
        return "\n".join([head] + [f"  - {e}" for e in r["evidence"]])
    head = {"defend": f"I would still start with proposal {r['recommended']}, not {r['preferred']}:",
            "revise": f"You are right: proposal {r['preferred']} is the better first try. Revised:",
            "tie": f"Proposals {r['preferred']} and {r['recommended']} are even on the numbers:",
            "agree": f"Proposal {r['preferred']} is already my recommendation:"}[r["verdict"]]
    return "\n".join([head] + [f"  - {e}" for e in r["evidence"]])


def _compare(r: dict[str, Any], ws: Workspace) -> str:
    a, b = r["a"], r["b"]
    lines = [f"Proposal {a['number']} ({a['mesh']}) vs proposal {b['number']} ({b['mesh']}):"]
    for row in r["rows"]:
        ahead = f" -> {row['ahead']} ahead" if row["ahead"] else ""
        va = row[a["number"]] if a["number"] in row else row.get(str(a["number"]))
        vb = row[b["number"]] if b["number"] in row else row.get(str(b["number"]))
        lines.append(f"  {row['metric']}: {_f(va, nd=3)} vs {_f(vb, nd=3)}{ahead}")
    for n in (a["number"], b["number"]):
        t = r["tradeoffs"].get(n) or r["tradeoffs"].get(str(n))
        if t:
            lines.append(f"  {n} trade-offs: {'; '.join(t)}")
    lines.append(f"  overall: proposal {r['overall']} (expected gain x confidence)" if r["overall"] else "  overall: even")
    return "\n".join(lines)


def _explain(r: dict[str, Any], ws: Workspace) -> str:
    lines = [f"{r['topic']}: {r['text']}"]
    for p in r.get("passages") or []:
        lines.append(f"  playbook ({p['id']}): {p['text']} [{p['source']}]")
    run = r.get("this_run")
    if run:
        role = {"primary": "this is its bottleneck", "secondary": "this is a secondary bottleneck"}.get(run.get("role") or "", "this is not its bottleneck")
        lines.append(f"  this run: diagnosed {run['bottleneck']}-bound; {role}.")
    return "\n".join(lines)


def _whatif(r: dict[str, Any], ws: Workspace) -> str:
    lines = [f"With {r['chips']} chips ({r['num_slices']} slice(s)), {r['enumerated']} meshes enumerated, "
             f"best that pass the Critic ({r['rejected']} rejected on the way):"]
    cur = r.get("current_step_time_ms")
    for i, c in enumerate(r["candidates"], 1):
        pred = c["predicted"]
        mem = f", {pred['memory_per_chip_bytes'] / 1e9:.1f} GB/chip" if pred.get("memory_per_chip_bytes") else ""
        lines.append(f"  {i}. {c['mesh_short']}: predicted step {_f(pred.get('step_time_ms'), ' ms')}{mem}")
    if cur is not None:
        lines.append(f"  today: {r['current_chips']} chips at {_f(cur, ' ms')} per step")
    if (b := r.get("baseline")) and b.get("step_time_ms") is not None:
        mem = f", {b['memory_per_chip_bytes'] / 1e9:.1f} GB/chip" if b.get("memory_per_chip_bytes") else ""
        lines.append(f"  baseline (as `asap propose` has it): {b['mesh_short']} on {b['chips']} chips, "
                     f"{b['basis']} step {_f(b['step_time_ms'], ' ms')}{mem}")
    if r.get("kept"):
        lines.append("  kept from the config: " + ", ".join(r["kept"]))
    lines.append("  assumptions: " + "; ".join(r["assumptions"]))
    return "\n".join(lines)


def _suggest(r: dict[str, Any], ws: Workspace) -> str:
    return _suggestion_line(r).strip()


RENDERERS = {"which_first": _which_first, "are_you_sure": _sure, "pushback": _pushback, "compare": _compare,
             "explain": _explain, "what_if": _whatif, "suggest": _suggest}
