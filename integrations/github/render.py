"""The answer to ``@asap why is run 123 slow?`` written for GitHub markdown.

A PR comment is read top-down, so its first screen carries what a person acts on:

1. the verdict: the run, its bottleneck with confidence, and the best proposal with its predicted change;
2. a proposals table: mesh, predicted step time (and change), memory per chip, confidence;
3. one line on how to go on (``explain N``, ``apply N``);

then ONE folded ``<details>`` with everything else (KPIs, evidence, each proposal's rationale, trade-offs,
band and citations, meshes the Critic dropped, the model's explanation), none of it repeated from above.
Every number comes from the computed workspace (:mod:`agents.workspace`), never from model text, and every
string that is not ASAP's own words goes through :mod:`integrations.github.markdown`.
"""

from __future__ import annotations

from typing import Any

from bot import fmt
from integrations.github import markdown as md

MAX_DETAILS = 40000


def _num(v: Any, unit: str = "", nd: int = 1) -> str:
    return "n/a" if not isinstance(v, (int, float)) else f"{v:,.{nd}f}{unit}"


def _verdict(report: dict[str, Any], pset: dict[str, Any] | None, run_id: str) -> list[str]:
    run = report.get("run") or {}
    diag = report.get("diagnosis") or {}
    name = f" ({md.text(run['name'], limit=120)})" if run.get("name") else ""
    chips = f"{run.get('num_chips', '?')} × {md.text(run.get('chip_name') or run.get('chip') or '?')}"
    mesh = md.code(run.get("mesh_short") or "unknown")
    head = f"**Run {md.code(run.get('id', run_id))}**{name} — {chips}, mesh {mesh}"
    if diag:
        head += (f": **{md.text(diag.get('bottleneck'))}-bound** (confidence {_num(diag.get('confidence'), nd=2)}). "
                 f"{md.text(_after_colon(diag.get('summary') or ''))}")
    else:
        head += ": diagnosis not available."
    out = [head.rstrip()]
    if pset and pset.get("summary"):
        out += ["", f"**Verdict:** {md.text(pset['summary'])}"]
    return out


def _after_colon(summary: str) -> str:
    """``communication-bound: 46% of ...`` -> ``46% of ...`` (the bottleneck is already said in bold)."""
    head, sep, rest = summary.partition(": ")
    return rest if sep and head.endswith("-bound") else summary


def _step_cell(p: dict[str, Any]) -> str:
    pred = p.get("predicted") or {}
    ch = p.get("change") or {}
    if not pred:
        return "no prediction (model unknown)"
    pct = ch.get("time_per_token_percent") if (ch.get("tokens_per_step_factor") or 1.0) != 1.0 else ch.get("step_time_percent")
    cell = fmt.ms(pred.get("step_time_ms"))
    if pct is not None:
        cell += f" ({fmt.signed_pct(pct)}{' per token' if (ch.get('tokens_per_step_factor') or 1.0) != 1.0 else ''})"
    if ch.get("within_noise"):
        cell += ", within noise"
    return cell


def _memory_cell(p: dict[str, Any]) -> str:
    pred = p.get("predicted") or {}
    if not pred.get("memory_per_chip_bytes"):
        return "not computed"
    used = pred["memory_per_chip_bytes"]
    shown = f"{used / 1e6:,.0f} MB" if used < 1e9 else fmt.gb(used)  # a small model is not "0.0 GB"
    cell = f"{shown} of {fmt.gb(pred.get('memory_capacity_bytes'))}"
    return cell + (" ⚠️ does not fit" if pred.get("fits_memory") is False else "")


def proposals_table(props: list[dict[str, Any]]) -> list[str]:
    """The three checked proposals as a markdown table (mesh, predicted step, memory per chip, confidence)."""
    rows = ["| # | mesh | predicted step | memory / chip | confidence |", "|---|---|---|---|---|"]
    for i, p in enumerate(props, 1):
        what = md.code(p.get("mesh_short") or "?", cell=True)
        if p.get("settings_changes"):
            what += " + " + ", ".join(md.code(s, limit=80, cell=True) for s in p["settings_changes"][:2])
        rows.append(f"| {i} | {what} | {_step_cell(p)} | {_memory_cell(p)} | {_num(p.get('confidence'), nd=2)} |")
    return rows


def _proposal_details(i: int, p: dict[str, Any]) -> list[str]:
    pred = p.get("predicted") or {}
    out = [f"**{i}. {md.code(p.get('mesh_short') or '?')}** ({md.text(p.get('kind') or '')})"]
    if p.get("rationale"):
        out.append(f"- why: {md.text(p['rationale'])}")
    if pred.get("step_time_low_ms") is not None:
        out.append(f"- step-time band {fmt.ms(pred['step_time_low_ms'])} – {fmt.ms(pred.get('step_time_high_ms'))}")
    for t in p.get("tradeoffs") or []:
        out.append(f"- trade-off: {md.text(t)}")
    if p.get("confidence_reasons"):
        out.append(f"- confidence {_num(p.get('confidence'), nd=2)}: " + "; ".join(md.text(r) for r in p["confidence_reasons"]))
    for c in (p.get("citations") or [])[:4]:
        out.append(f"- rests on {md.code(c.get('ref') or '')}: {md.text(c.get('why') or c.get('title') or '')}")
    return out + [""]


def _shape_note(k: dict[str, Any]) -> str:
    """Where MFU's batch and sequence length came from, when not (only) run.yaml (the source as inert code)."""
    src = k.get("shape_source")
    return "" if src in (None, "run.yaml") else f" (batch × sequence length from {md.code(src)})"


def _details(report: dict[str, Any], props: list[dict[str, Any]], dropped: list[tuple[str, dict[str, Any]]],
             note: str | None, footer: str) -> list[str]:
    k = report.get("kpis") or {}
    diag = report.get("diagnosis") or {}
    out: list[str] = []
    kp = [f"step {fmt.ms(k.get('step_time_ms'))}"]
    for key, label in (("device_duty_cycle_percent", "duty cycle"), ("collective_percent", "collectives"),
                       ("mfu_percent", "MFU"), ("hbm_use_percent", "HBM use"), ("host_wait_percent", "host wait")):
        if k.get(key) is not None:
            kp.append(f"{label} {_num(k[key], '%')}" + (_shape_note(k) if key == "mfu_percent" else ""))
    out += ["**Measured**: " + ", ".join(kp), ""]
    if report.get("predicted"):
        out += [md.text(fmt.predicted_step(report["predicted"])), ""]
    if diag.get("evidence"):
        out += ["**Evidence**"] + [f"- {md.text(e.get('statement') or '')}" for e in diag["evidence"]] + [""]
    if diag.get("conflicts"):
        out += ["**Signals that disagree**"] + [f"- {md.text(c)}" for c in diag["conflicts"]] + [""]
    if props:
        out += ["**The proposals in detail**", ""]
        for i, p in enumerate(props, 1):
            out += _proposal_details(i, p)
    if dropped:
        out += ["**Dropped by the Critic**"]
        for mesh, v in dropped:
            why = "; ".join(md.text(c.get("reason") or "") for c in v.get("checks", []) if not c.get("passed"))
            out.append(f"- {md.code(mesh)}: {why or 'failed a check'}")
        out.append("")
    if note:
        out += ["**Explanation** (model text; every number above is computed)", "", md.lines(note), ""]
    out.append(f"<sub>{footer}</sub>")
    return out


def footer(answer: Any) -> str:
    """Who wrote the words: analyst mode (no model) or the model, with tokens only when some were used."""
    mode = getattr(answer, "mode", "analyst")
    if mode == "analyst":
        why = f" ({md.text(answer.fallback, limit=160)})" if getattr(answer, "fallback", None) else ""
        return f"Computed by ASAP's analysis, no language model{why}."
    used = (getattr(answer, "usage", None) or {}).get("total_tokens") or 0
    return f"Numbers computed by ASAP; words by {md.text(getattr(answer, 'model', '') or mode)}" + \
        (f", {used:,} tokens." if used else ".")


def render_first(ws: Any, answer: Any, mention: str = "asap") -> str:
    """The first answer about a run (module docstring): verdict, table, next steps, then one fold."""
    report = ws.report or {}
    pset = ws.proposals
    props = ws.proposal_list()[:3] if pset else []
    lines = _verdict(report, pset, ws.run_id)
    lines.append("")
    if props:
        lines += proposals_table(props)
        lines += ["", f"Reply `@{mention} explain N` for the full case of proposal N, or `@{mention} apply N` to open "
                      "a pull request with it (needs write permission)."]
    elif pset is None:
        errs = [r.error or {} for r in ws.results("propose_meshes") if r.status == "error"]
        lines.append("Proposals: not available" + (f": {md.text(errs[-1].get('error'))}" if errs else "."))
    else:
        lines.append("No proposal passed every Critic check.")
    dropped = [(m, v) for m, v in ws.verdicts.items() if not v.get("ok")]
    details = "\n".join(_details(report, props, dropped, answer.model_note, footer(answer)))[:MAX_DETAILS]
    lines += ["", "<details><summary>Evidence, rationale and checks</summary>", "", details, "", "</details>"]
    return "\n".join(lines)


def render_followup(answer: Any) -> str:
    """A follow-up's computed answer (and the model's words), escaped, with the footer."""
    parts = [md.lines(answer.computed or answer.text)]
    if answer.model_note:
        parts.append(md.lines(answer.model_note))
    parts.append(f"<sub>{footer(answer)}</sub>")
    return "\n\n".join(parts)


def reference(run_id: str = "311") -> str:
    """The answer to ``@asap why is run <run_id> slow?`` in analyst mode, as posted (without the marker line):
    ``python -m integrations.github.render 311 > docs/github-answer.md`` regenerates the reference rendering."""
    import asyncio
    import tempfile
    from pathlib import Path

    from agents.conversation import Conversation
    from agents.workspace import Workspace
    from bot.store.sqlite_store import SQLiteStore

    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "state.db")
        try:
            conv = Conversation(store=store)  # no model: analyst mode
            answer = asyncio.run(conv.ask(f"why is run {run_id} slow?", thread_id="reference", run_id=run_id))
            ws = Workspace.from_dict((store.get_thread("reference") or {})["workspace"])
            return render_first(ws, answer)
        finally:
            store.close()


if __name__ == "__main__":
    import sys

    print(reference(sys.argv[1] if len(sys.argv) > 1 else "311"))
