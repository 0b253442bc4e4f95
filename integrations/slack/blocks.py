"""Block Kit for ASAP's Slack replies: the progress message, the answer with proposal cards, and splitting.

Everything here is a pure function of computed results (the thread's workspace and the agents' Answer),
so what a person sees in Slack is the same numbers ``asap why`` prints. Text from profiles and configs
(op names, run names, config values) is escaped before it reaches mrkdwn, so it can never mention
``@channel`` or a person, or forge a link.

Slack's limits are enforced here (and checked again by the test double): at most 50 blocks per
message, 3000 characters per section text, 2000 per section field, 150 per header, 75 per button
label, 2000 per button value. Long content is split over several messages instead of being cut.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from bot import fmt
from bot.errors import AsapError, hide_paths

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_FIELD_TEXT = 2000
MAX_HEADER_TEXT = 150
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_CONTEXT_ELEMENTS = 10
MAX_FALLBACK_TEXT = 3000  # the notification text; Slack truncates at 40,000 but previews show far less

APPLY_ACTION = "asap_apply"
EXPLAIN_ACTION = "asap_explain"
ACTION_ID_RE = re.compile(rf"^({APPLY_ACTION}|{EXPLAIN_ACTION}):([1-9])$")
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_PROPOSALS = 3


@dataclass
class SlackMessage:
    """One chat message: the notification/fallback ``text`` and its ``blocks``."""

    text: str
    blocks: list[dict[str, Any]]


# ---------------------------------------------------------------- text helpers
def escape(text: Any) -> str:
    """Slack's three control characters escaped, so untrusted text cannot mention or link."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis (for labels and headers only, never data)."""
    text = " ".join(str(text).split()) if "\n" not in str(text) else str(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def split_text(text: str, limit: int = MAX_SECTION_TEXT) -> list[str]:
    """Pieces of at most ``limit`` characters, broken at line ends (a too-long line at a space)."""
    pieces: list[str] = []
    cur = ""
    for line in text.split("\n"):
        while len(line) > limit:
            cut = line.rfind(" ", 0, limit)
            cut = cut if cut > limit // 2 else limit
            head, line = line[:cut], line[cut:].lstrip(" ")
            if cur:
                pieces.append(cur)
                cur = ""
            pieces.append(head)
        candidate = f"{cur}\n{line}" if cur else line
        if len(candidate) > limit:
            pieces.append(cur)
            cur = line
        else:
            cur = candidate
    if cur.strip():
        pieces.append(cur)
    return [p for p in pieces if p.strip()] or ([text[:limit]] if text.strip() else [])


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def sections(text: str) -> list[dict[str, Any]]:
    """As many section blocks as ``text`` needs (each within the 3000-character limit)."""
    return [section(p) for p in split_text(text, MAX_SECTION_TEXT)]


def context(*parts: str) -> dict[str, Any]:
    els = [{"type": "mrkdwn", "text": clip(p, MAX_SECTION_TEXT)} for p in parts if p][:MAX_CONTEXT_ELEMENTS]
    return {"type": "context", "elements": els or [{"type": "mrkdwn", "text": " "}]}


def header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": clip(text, MAX_HEADER_TEXT), "emoji": False}}


_f = fmt.value
_gb = fmt.gb


# ---------------------------------------------------------------- action values
def action_value(run_id: str, index: int) -> str:
    """The value an Apply/Explain button carries: the run and the 1-based proposal number, nothing else."""
    return json.dumps({"run": run_id, "i": int(index)}, separators=(",", ":"))


def parse_action(action_id: str, value: str) -> tuple[str, str, int]:
    """``(kind, run_id, index)`` from a button click, or AsapError when anything is off.

    The value comes back from Slack inside a signed request, but it is still text a client sent: it
    must be exactly ``{"run": <run id>, "i": <1..3>}``, and the index must agree with the action id.
    The caller then checks the run against the thread the button sits in.
    """
    m = ACTION_ID_RE.match(action_id or "")
    if not m:
        raise AsapError(f"unknown action {action_id!r}", field="action_id")
    kind = "apply" if m.group(1) == APPLY_ACTION else "explain"
    try:
        data = json.loads(value or "")
    except (json.JSONDecodeError, TypeError):
        raise AsapError("the button value is not ASAP's", field="value") from None
    if not isinstance(data, dict) or set(data) != {"run", "i"}:
        raise AsapError("the button value is not ASAP's", field="value")
    run, idx = data["run"], data["i"]
    if not isinstance(run, str) or not RUN_ID_RE.match(run):
        raise AsapError("the button names no valid run", field="value.run")
    if not isinstance(idx, int) or isinstance(idx, bool) or not 1 <= idx <= MAX_PROPOSALS or idx != int(m.group(2)):
        raise AsapError("the button names no valid proposal", field="value.i")
    return kind, run, idx


# ---------------------------------------------------------------- progress
def progress_message(lines: list[str], *, run: str | None, done: bool = False, marker: str | None = None) -> SlackMessage:
    """The one progress message: what the agents are doing, newest last (kept within one section).

    ``marker`` (the first post only) is a block id derived from the job id, by which a later delivery of
    the same job finds this message if the worker died before recording it (see ``replies``).
    """
    title = f"Looking at run {run}…" if run else "Looking into it…"
    body = "\n".join(f"• {escape(clip(line, 300))}" for line in lines[-12:]) or "• queued"
    body = body[-MAX_SECTION_TEXT:]
    head = section(f":hourglass_flowing_sand: *{escape(title)}*")
    if marker:
        head["block_id"] = marker
    return SlackMessage(text=title, blocks=[head, section(body)])


def still_working_message() -> SlackMessage:
    """The answer to a reply that came before the thread's first answer and waited too long for it."""
    text = ("I'm still working on the first question in this thread, so I can't answer this yet. "
            "Ask again once its answer is here.")
    return SlackMessage(text=text, blocks=sections(f":hourglass_flowing_sand: {text}"))


MAX_FILE_NAMES = 3


def empty_question_message(run: str | None, files: list[str]) -> SlackMessage:
    """The answer to a message with nothing to ask (a file shared without text, a bare mention): what ASAP
    can answer, for this thread's run when there is one. Attachments are not read (no ``files:read``)."""
    shown = ", ".join(f"`{escape(clip(f, 80))}`" for f in files[:MAX_FILE_NAMES])
    more = f" and {len(files) - MAX_FILE_NAMES} more" if len(files) > MAX_FILE_NAMES else ""
    seen = (f"I see the file{'s' if len(files) > 1 else ''} you shared ({shown}{more}), but no question, and I "
            "don't read attachments: I analyse the runs in my runs directory. ") if files else "I didn't get a question. "
    if run:
        ask = (f"What would you like to know about run {escape(run)}? For example: \"which one first?\", "
               "\"compare 1 and 3\", \"what if we had 512 chips?\"")
    else:
        ask = "What would you like to know? Name a run, e.g. \"why is job 123 slow?\""
    text = seen + ask
    return SlackMessage(text=text, blocks=sections(f":speech_balloon: {text}"))


# ---------------------------------------------------------------- answers
EVIDENCE_BULLETS = 3
WHY_CHARS = 240  # a card's one-line "why": whole sentences up to this length, never cut with "…"
_SENTENCE = re.compile(r"(?<=[.!?;])\s+(?=[A-Z(])")


def _unbound(summary: str, bottleneck: str | None) -> str:
    """The diagnosis summary without its leading "X-bound:" (the verdict already says it)."""
    text = str(summary or "").strip()
    if bottleneck and text.lower().startswith(f"{bottleneck}-bound"):
        text = text[len(bottleneck) + 6:].lstrip(" :—-")
    return text


def _change_words(p: dict[str, Any], current_mesh: str) -> str:
    """What a proposal changes: its settings and/or its mesh, e.g. ``remat_policy full -> minimal_with_context``."""
    mesh = str(p.get("mesh_short") or "?")
    settings = [str(c) for c in p.get("settings_changes") or []]
    if not settings:
        return f"`{escape(mesh)}`"
    words = "; ".join(escape(c.replace(" -> ", " → ")) for c in settings)
    return f"`{words}`" + (f" on `{escape(mesh)}`" if mesh != current_mesh else "")


def _prediction_words(p: dict[str, Any], k: dict[str, Any]) -> str:
    """``3287 → 2634 ms per step (-19.9%)`` from the computed prediction, or why there is none."""
    pred = p.get("predicted") or {}
    ch = p.get("change") or {}
    if not pred:
        return "no absolute prediction (model unknown)"
    now = k.get("step_time_ms")
    step = (f"{_f(now, ' ms')} → {_f(pred.get('step_time_ms'), ' ms')} per step" if now is not None
            else f"{_f(pred.get('step_time_ms'), ' ms')} per step")
    return f"{step} ({_signed(ch.get('step_time_percent'))})"


def verdict_blocks(report: dict[str, Any], passed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first screen's head: verdict, the best proposal with its predicted change, one line of context,
    and three evidence bullets."""
    run = report.get("run") or {}
    diag = report.get("diagnosis") or {}
    k = report.get("kpis") or {}
    bottleneck = diag.get("bottleneck")
    head = f"*Run {escape(run.get('id', '?'))} is {escape(bottleneck)}-bound*" if bottleneck else \
        f"*Run {escape(run.get('id', '?'))}*"
    if diag.get("confidence") is not None:
        head += f" (confidence {_f(diag.get('confidence'), nd=2)})"
    why = _unbound(diag.get("summary", ""), bottleneck)
    lines = [head + (f": {escape(why)}" if why else ".")]
    if passed:
        best = passed[0]
        lines.append(f"*Best:* proposal 1, {_change_words(best, str(run.get('mesh_short') or ''))}: "
                     f"{_prediction_words(best, k)}, confidence {_f(best.get('confidence'), nd=2)}.")
    else:
        lines.append("*No change passed the Critic's checks*: keep the current setup (details below).")
    out = sections("\n".join(lines))
    facts = [f"{run.get('num_chips', '?')} × {escape(run.get('chip_name') or run.get('chip') or '?')}",
             f"mesh `{escape(run.get('mesh_short') or 'unknown')}`", f"step {_f(k.get('step_time_ms'), ' ms')}"]
    for key, label in (("mfu_percent", "MFU"), ("device_duty_cycle_percent", "duty cycle"),
                       ("collective_percent", "collectives"), ("hbm_use_percent", "HBM used"),
                       ("host_wait_percent", "host wait")):
        if k.get(key) is not None:
            facts.append(f"{label} {_f(k[key], '%')}" + (shape_note(k) if key == "mfu_percent" else ""))
    name = f"{escape(run['name'])} · " if run.get("name") else ""
    out.append(context(name + " · ".join(facts)))
    if report.get("predicted"):
        out.append(context(escape(fmt.predicted_step(report["predicted"]))))
    evidence = [f"• {escape(e.get('statement'))}" for e in diag.get("evidence") or [] if e.get("statement")]
    if evidence:
        out += sections("*Evidence*\n" + "\n".join(evidence[:EVIDENCE_BULLETS]))
    return out


def shape_note(k: dict[str, Any]) -> str:
    """Where MFU's batch and sequence length came from, when not (only) run.yaml: " (batch × seq from `config x`)".

    The source names a file: inside a code span (backticks removed from it) so mrkdwn does not read its
    ``_`` / ``*`` as formatting; Slack's control characters escaped.
    """
    src = k.get("shape_source")
    if src in (None, "run.yaml"):
        return ""
    return f" (batch × sequence length from `{escape(str(src).replace('`', ''))}`)"


def one_line_why(p: dict[str, Any]) -> str:
    """A card's "why" in whole sentences (at most ``WHY_CHARS``): the playbook move's reason when there is
    one, else the computed rationale without its opening "The run is X-bound." Details are behind Explain."""
    move = p.get("move") or {}
    source = str(move.get("rationale") or "") if isinstance(move, dict) else ""
    sentences = _SENTENCE.split(" ".join(source.split())) if source else []
    if not sentences:
        rationale = " ".join(str(p.get("rationale") or "").split())
        sentences = [x for x in _SENTENCE.split(rationale) if x and not re.match(r"^The run is [\w-]+-bound\.?$", x)]
    out = ""
    for sentence in sentences:
        candidate = f"{out} {sentence}".strip()
        if len(candidate) > WHY_CHARS and out:
            break
        out = candidate
    return out if len(out) <= WHY_CHARS + 200 else sentences[0]


def proposal_card(p: dict[str, Any], index: int, run_id: str, current_mesh: str = "") -> list[dict[str, Any]]:
    """One proposal: what it changes, a one-line why, predicted step time and memory, confidence, two buttons."""
    pred = p.get("predicted") or {}
    ch = p.get("change") or {}
    labels = f"  _{escape(', '.join(p['labels']))}_" if p.get("labels") else ""
    title = f"*{index}. {_change_words(p, current_mesh)}*{labels}"
    why = one_line_why(p)
    text = title + (f"\n{escape(why)}" if why else "")
    if pred:
        step = f"{_f(pred.get('step_time_ms'), ' ms')} ({_signed(ch.get('step_time_percent'))} vs now)"
    else:
        step = "no absolute prediction (model unknown)"
    mem = _gb(pred.get("memory_per_chip_bytes"))
    if isinstance(pred.get("memory_capacity_bytes"), (int, float)) and pred.get("memory_per_chip_bytes") is not None:
        mem += f" of {_gb(pred['memory_capacity_bytes'])}"
    fields = [f"*Predicted step*\n{step}", f"*Memory per chip*\n{mem}", f"*Confidence*\n{_f(p.get('confidence'), nd=2)}"]
    value = action_value(run_id, index)
    mesh = clip(str(p.get("mesh_short", "")), 40)
    return [
        {"type": "section", "block_id": f"proposal:{index}", "text": {"type": "mrkdwn", "text": clip(text, MAX_SECTION_TEXT)},
         "fields": [{"type": "mrkdwn", "text": clip(f, MAX_FIELD_TEXT)} for f in fields]},
        {"type": "actions", "block_id": f"proposal_actions:{index}", "elements": [
            {"type": "button", "action_id": f"{APPLY_ACTION}:{index}", "style": "primary", "value": value,
             "text": {"type": "plain_text", "text": clip(f"Apply {index}: {mesh}", MAX_BUTTON_TEXT)},
             "confirm": {"title": {"type": "plain_text", "text": "Open a pull request?"},
                         "text": {"type": "mrkdwn", "text": clip(f"ASAP will open a pull request for run {escape(run_id)} that changes {_change_words(p, current_mesh)}.", 300)},
                         "confirm": {"type": "plain_text", "text": "Open PR"},
                         "deny": {"type": "plain_text", "text": "Cancel"}}},
            {"type": "button", "action_id": f"{EXPLAIN_ACTION}:{index}", "value": value,
             "text": {"type": "plain_text", "text": clip(f"Explain {index}", MAX_BUTTON_TEXT)}},
        ]},
    ]


def _signed(v: Any) -> str:
    return "n/a" if not isinstance(v, (int, float)) else f"{v:+.1f}%".replace("-", "−")


def _proposal_blocks(proposals: dict[str, Any] | None, passed: list[dict[str, Any]], verdicts: dict[str, Any],
                     run_id: str, current_mesh: str = "") -> list[dict[str, Any]]:
    if proposals is None:
        return [section("*Proposals:* not available.")]
    out: list[dict[str, Any]] = [{"type": "divider"}]
    for i, p in enumerate(passed[:MAX_PROPOSALS], 1):
        out += proposal_card(p, i, run_id, current_mesh)
    notes = [escape(proposals.get("summary"))] if proposals.get("summary") else []
    for mesh, v in verdicts.items():
        if not v.get("ok"):
            reasons = "; ".join(c["reason"] for c in v.get("checks", []) if not c.get("passed") and c.get("hard", True))
            notes.append(f"dropped by the Critic: `{escape(mesh)}`: {escape(reasons)}")
    notes += [f"advice: {escape(a.get('text'))}" for a in proposals.get("advice") or [] if a.get("text")]
    for line in notes:
        out += [{"type": "context", "elements": [{"type": "mrkdwn", "text": piece}]} for piece in split_text(line)]
    return out


def footer(answer: dict[str, Any], report: dict[str, Any] | None) -> dict[str, Any]:
    """The context line: run, profile files, and the model (its token count only when one was used)."""
    run = (report or {}).get("run") or {}
    sources = run.get("profile_sources") or []
    profile = ", ".join(sources[:4]) + (f" +{len(sources) - 4}" if len(sources) > 4 else "") if sources else "none"
    usage = answer.get("usage") or {}
    model = "analyst mode (computed, no language model)" if answer.get("mode") == "analyst" else \
        f"model: {escape(answer.get('model'))}"
    parts = [f"run `{escape(answer.get('run_id'))}`", f"profile: {escape(profile)}", model]
    if usage.get("total_tokens"):
        parts.append(f"{usage['total_tokens']} tokens")
    return context(*parts)


FIRST_SCREEN_LINES = 30  # about what a Slack thread pane shows before scrolling (desktop, default font size)


def screen_lines(block: dict[str, Any]) -> int:
    """Roughly how many lines ``block`` takes on screen: its text lines, two fields per line, one line for a
    divider, a context line or a row of buttons."""
    if block.get("type") in ("divider", "actions", "context", "header"):
        return 1
    n = len(str((block.get("text") or {}).get("text") or "").splitlines())
    fields = block.get("fields") or []
    return n + sum(len(str(f.get("text", "")).splitlines()) for f in fields[::2])


def first_screen(blocks: list[dict[str, Any]], lines: int = FIRST_SCREEN_LINES) -> list[dict[str, Any]]:
    """The blocks a person sees before scrolling (the answer's promise: verdict, best proposal, three cards)."""
    out, used = [], 0
    for b in blocks:
        used += screen_lines(b)
        if used > lines:
            break
        out.append(b)
    return out


def answer_blocks(answer: dict[str, Any], workspace: dict[str, Any] | None) -> list[dict[str, Any]]:
    """All blocks of an answer (before splitting into messages).

    A first answer is built from the thread's workspace (diagnosis, evidence, Critic-passed proposals as
    cards with buttons); a follow-up is the computed text the agents rendered. A model's note and any
    fallback notice follow the computed part; the footer closes it.
    """
    ws = workspace or {}
    report = ws.get("report")
    blocks: list[dict[str, Any]] = []
    if answer.get("intent") == "first" and report:
        from agents.workspace import Workspace

        w = Workspace.from_dict(ws)
        passed = w.proposal_list()
        blocks += verdict_blocks(report, passed)
        blocks += _proposal_blocks(w.proposals, passed, w.verdicts, str(answer.get("run_id")),
                                   str((report.get("run") or {}).get("mesh_short") or ""))
        if answer.get("model_note"):
            blocks += sections(escape(answer["model_note"]))
        if answer.get("fallback"):
            blocks += sections(f"_Note: the model was not used for this answer ({escape(answer['fallback'])}); "
                               "this is the analyst answer._")
    else:
        body = str(answer.get("text") or "")
        body = re.sub(r"\n*\[[a-z]+ mode; [^\]]*\]\s*$", "", body)  # the CLI's footer; Slack has its own
        blocks += sections(followup_mrkdwn(body)) if body.strip() else []
    blocks.append(footer(answer, report))
    return blocks


METRIC_LABELS = {"step_time_ms": ("Predicted step", " ms"), "memory_per_chip_gb": ("Memory per chip", " GB"),
                 "confidence": ("Confidence", "")}
_COMPARE_ROW = re.compile(r"^\s+(?P<key>[a-z_]+): (?P<a>\S+) vs (?P<b>\S+)(?: -> (?P<ahead>\S+) ahead)?$")
_LONG_NUMBER = re.compile(r"(?<![\w.])(\d+\.\d{3,})(?![\w.])")


def _tidy_number(m: re.Match[str]) -> str:
    return f"{float(m.group(1)):.4g}"


def followup_mrkdwn(text: str) -> str:
    """A follow-up's computed text as Slack mrkdwn: the first line bold, indented lines as bullets, metric
    keys (``step_time_ms``) as words with units, long decimals rounded. Escaped; never a code block."""
    out: list[str] = []
    for n, line in enumerate(text.splitlines()):
        if not line.strip():
            out.append("")
            continue
        m = _COMPARE_ROW.match(line)
        if m and m.group("key") in METRIC_LABELS:
            label, unit = METRIC_LABELS[m.group("key")]
            a, b = (_LONG_NUMBER.sub(_tidy_number, m.group(x)) for x in ("a", "b"))
            ahead = f" (proposal {escape(m.group('ahead'))} ahead)" if m.group("ahead") else ""
            out.append(f"• *{label}:* {escape(a)}{unit} vs {escape(b)}{unit}{ahead}")
            continue
        depth = len(line) - len(line.lstrip(" "))
        body = _LONG_NUMBER.sub(_tidy_number, line.strip()).replace(" -> ", " → ")
        body = re.sub(r"^(\d) trade-offs:", r"Proposal \1 trade-offs:", re.sub(r"^- ", "", body))
        body = escape(body)
        if depth == 0:
            out.append(f"*{body}*" if n == 0 else body)
        else:
            out.append(("    ◦ " if depth > 2 else "• ") + body)
    return "\n".join(out).strip()


def fallback_text(answer: dict[str, Any], workspace: dict[str, Any] | None) -> str:
    """The message's plain ``text`` (notifications, screen readers): the first line of the answer."""
    report = (workspace or {}).get("report") or {}
    diag = report.get("diagnosis") or {}
    if answer.get("intent") == "first" and diag:
        from agents.workspace import Workspace

        passed = Workspace.from_dict(workspace or {}).proposal_list() if workspace else []
        text = f"Run {answer.get('run_id')} is {diag.get('bottleneck')}-bound"
        if passed:
            best = passed[0]
            mesh = str((report.get("run") or {}).get("mesh_short") or "")
            text += (f"; best: proposal 1, {_change_words(best, mesh).replace('`', '')} "
                     f"({_signed((best.get('change') or {}).get('step_time_percent'))})")
        return clip(text, MAX_FALLBACK_TEXT)
    first = next((ln for ln in str(answer.get("text") or "").splitlines() if ln.strip()), "ASAP answer")
    return clip(first, MAX_FALLBACK_TEXT)


def paginate(blocks: list[dict[str, Any]], text: str) -> list[SlackMessage]:
    """Blocks over as many messages as needed (at most 50 each), never splitting a card from its buttons."""
    pages: list[list[dict[str, Any]]] = [[]]
    i = 0
    while i < len(blocks):
        unit = [blocks[i]]
        if blocks[i].get("type") == "section" and i + 1 < len(blocks) and blocks[i + 1].get("type") == "actions":
            unit.append(blocks[i + 1])
        if len(pages[-1]) + len(unit) > MAX_BLOCKS:
            pages.append([])
        pages[-1] += unit
        i += len(unit)
    return [SlackMessage(text=text if n == 0 else f"{clip(text, 200)} (continued {n + 1}/{len(pages)})", blocks=page)
            for n, page in enumerate(pages) if page]


def error_message(exc: AsapError) -> SlackMessage:
    """A problem a person can fix, as one clear message (never a traceback)."""
    message, hint = hide_paths(exc.message), hide_paths(exc.hint or "")  # name files, not the server's folders
    text = f":warning: {escape(message)}"
    if hint:
        text += f"\n_hint: {escape(hint)}_"
    return SlackMessage(text=clip(message, MAX_FALLBACK_TEXT), blocks=sections(text))


def explain_blocks(run_id: str, index: int, p: dict[str, Any]) -> list[dict[str, Any]]:
    """Everything behind one proposal card: rationale, trade-offs, the prediction and the Critic's checks."""
    pred = p.get("predicted") or {}
    lines = [f"*Proposal {index} for run {escape(run_id)}: `{escape(p.get('mesh_short'))}`*"]
    if p.get("rationale"):
        lines.append(escape(" ".join(str(p["rationale"]).split())))
    if p.get("tradeoffs"):
        lines.append("*Trade-offs*\n" + "\n".join(f"• {escape(t)}" for t in p["tradeoffs"]))
    if pred:
        lo, hi = pred.get("step_time_low_ms"), pred.get("step_time_high_ms")
        band = f" (range {_f(lo, ' ms')} – {_f(hi, ' ms')})" if lo is not None and hi is not None else ""
        lines.append(f"*Predicted step:* {_f(pred.get('step_time_ms'), ' ms')}{band}")
        if pred.get("breakdown_ms"):
            lines.append("\n".join(f"• {escape(k)}: {_f(float(v), ' ms')}" for k, v in pred["breakdown_ms"].items()
                                   if isinstance(v, (int, float))))
        if pred.get("memory_breakdown_bytes"):
            lines.append("*Memory per chip:* " + _gb(pred.get("memory_per_chip_bytes")) + "\n" +
                         "\n".join(f"• {escape(k)}: {_gb(v)}" for k, v in pred["memory_breakdown_bytes"].items()))
        if pred.get("assumptions"):
            lines.append("*Assumptions*\n" + "\n".join(f"• {escape(a)}" for a in pred["assumptions"]))
    if p.get("confidence_reasons"):
        lines.append(f"*Confidence {_f(p.get('confidence'), nd=2)}*\n" +
                     "\n".join(f"• {escape(r)}" for r in p["confidence_reasons"]))
    checks = p.get("critic") or []
    if checks:
        lines.append("*Critic checks*\n" + "\n".join(
            f"• {'✅' if c.get('passed') else '❌'} {escape(c.get('name'))}: {escape(c.get('reason'))}" for c in checks))
    return sections("\n\n".join(lines))
