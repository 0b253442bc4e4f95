"""What a person is asking, and about which run: deterministic parsing of chat text.

The intent picks which agents take a turn (the plan) and, in analyst mode, which tool calls the
deterministic client makes. With a real model the same plan is used and the model chooses its own calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_WORDNUM = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "first": 1, "second": 2, "third": 3}
_NUM = r"(\d+|one|two|three|four|five|first|second|third)"


def _n(text: str) -> int:
    return int(text) if text.isdigit() else _WORDNUM[text.lower()]


@dataclass
class Intent:
    kind: str  # first | which_first | are_you_sure | pushback | compare | explain | what_if | suggest | other
    args: dict[str, Any] = field(default_factory=dict)

    @property
    def plan(self) -> list[str]:
        return PLANS[self.kind]


PLANS: dict[str, list[str]] = {
    "first": ["Analyzer", "Proposal", "Critic", "Coordinator"],
    "which_first": ["Coordinator"],
    "are_you_sure": ["Critic", "Coordinator"],
    "pushback": ["Critic", "Coordinator"],
    "compare": ["Coordinator"],
    "explain": ["Coordinator"],
    "what_if": ["Proposal", "Coordinator"],
    "suggest": ["Proposal", "Critic", "Coordinator"],
    "other": ["Coordinator"],
}

# Tool calls the analyst client makes for each intent (tools it does not hold are skipped).
CALLS: dict[str, list[tuple[str, list[str]]]] = {
    "first": [("analyze_run", ["run_id"]), ("propose_meshes", ["run_id"]), ("critique_candidates", ["run_id"])],
    "which_first": [("recommend_first", ["run_id"])],
    "are_you_sure": [("assess_confidence", ["run_id"])],
    "pushback": [("weigh_pushback", ["run_id", "preferred"])],
    "compare": [("compare_proposals", ["run_id", "a", "b"])],
    "explain": [("explain_topic", ["topic"])],
    "what_if": [("what_if_chips", ["run_id", "chips"])],
    "suggest": [("suggest_mesh", ["run_id", "ici", "dcn"]), ("critique_candidates", ["run_id"])],
    "other": [],
}

_MESH_AXIS = re.compile(r"\b(dcn[_ ])?(data|fsdp|tensor|sequence|expert|pipeline)\s*[=:]\s*(\d+)", re.IGNORECASE)
_RUN_IN_TEXT = re.compile(
    r"\b(?:job|run|training run|experiment)\s*[-_:#]?\s*([A-Za-z0-9][A-Za-z0-9._-]*)|#([A-Za-z0-9][A-Za-z0-9._-]*)",
    re.IGNORECASE,
)
_STOP = {"is", "was", "the", "a", "slow", "so", "this", "that", "it", "and", "with", "of", "on"}


def find_run_id(text: str, known: list[str]) -> str | None:
    """A run ID named in free text ("why is job 123 slow") -- a known ID wins over a pattern guess."""
    lowered = text.lower()
    for rid in sorted(known, key=len, reverse=True):
        if re.search(rf"(?<![A-Za-z0-9_-]){re.escape(rid.lower())}(?![A-Za-z0-9_-])", lowered):
            return rid
    for m in _RUN_IN_TEXT.finditer(text):
        cand = (m.group(1) or m.group(2) or "").rstrip(".?!,")
        if cand and cand.lower() not in _STOP:
            return cand
    return None


def parse_mesh(text: str) -> dict[str, dict[str, int]] | None:
    found = _MESH_AXIS.findall(text)
    if not found:
        return None
    mesh: dict[str, dict[str, int]] = {"ici": {}, "dcn": {}}
    for dcn, axis, size in found:
        mesh["dcn" if dcn else "ici"][axis.lower()] = int(size)
    return mesh


_PUSHBACK_NO_NUMBER = re.compile(
    r"\b(the (?:other|remaining) (?:two|ones?|proposals?|options?)|the others|the rest|other ones|others look"
    r"|why not the others?|i (?:don't|do not|dont) (?:buy|agree|believe)|i disagree|not convinced|unconvinced"
    r"|i'm not sure about (?:that|this|it)|doesn't convince|does not convince|disagree)\b"
)
"""Push-back that names no proposal: answered by weighing every other proposal against the recommendation."""


def classify(text: str, *, first: bool) -> Intent:
    """The intent of one message; the first message of a thread is always the full analysis."""
    t = text.lower().strip()
    if first:
        return Intent("first")
    if m := re.search(r"(\d[\d,_]*)\s*(?:chips|devices|gpus|tpus|accelerators)\b", t):
        return Intent("what_if", {"chips": int(re.sub(r"[,_]", "", m.group(1)))})
    if m := re.search(rf"compare\s+(?:proposals?\s+)?#?{_NUM}\s*(?:and|with|vs\.?|to|&)\s*#?{_NUM}", t):
        return Intent("compare", {"a": _n(m.group(1)), "b": _n(m.group(2))})
    if m := re.search(rf"#?{_NUM}\s*(?:vs\.?|versus)\s*#?{_NUM}", t):
        return Intent("compare", {"a": _n(m.group(1)), "b": _n(m.group(2))})
    if mesh := parse_mesh(text):
        return Intent("suggest", {"ici": mesh["ici"], "dcn": mesh["dcn"]})
    if m := re.search(rf"(?:proposal|option|number|#)\s*{_NUM}\b.*\b(better|prefer|instead|rather|go with|looks good)"
                      rf"|\b(?:prefer|like|go with|rather)\b.*(?:proposal|option|number|#)\s*{_NUM}"
                      rf"|why not\s+(?:proposal\s+|#)?{_NUM}", t):
        num = next(g for g in m.groups() if g and g not in ("better", "prefer", "instead", "rather", "go with", "looks good"))
        return Intent("pushback", {"preferred": _n(num)})
    if _PUSHBACK_NO_NUMBER.search(t):
        return Intent("pushback", {})
    if re.search(r"\b(explain|what does|what is|what's|meaning of|mean)\b", t):
        topic = re.sub(r"^.*?\b(explain|what does|what is|what's|meaning of)\b", "", t).strip(" ?.!")
        topic = re.sub(r"\b(mean|means)\b", "", topic).strip(" ?.!") or t
        return Intent("explain", {"topic": topic})
    if re.search(r"\b(are you sure|how sure|confident|confidence|certain|really)\b", t):
        return Intent("are_you_sure")
    if re.search(r"\b(which|what)\b.*\b(first|start|begin|try)\b|\bstart with\b|\brecommend", t):
        return Intent("which_first")
    if re.search(r"\b(why is|why's|slow|diagnos|analy[sz]e|again|from scratch)\b", t):
        return Intent("first")
    return Intent("other")


def task_header(run_id: str, intent: Intent) -> str:
    """The machine-readable line every task starts with (the analyst client reads it; models see it too)."""
    import json

    return f"[asap] run={run_id} intent={intent.kind} args={json.dumps(intent.args, sort_keys=True)}"


def parse_header(text: str) -> tuple[str, Intent] | None:
    import json

    m = re.search(r"^\[asap\] run=(\S+) intent=(\w+) args=(\{.*\})$", text, re.MULTILINE)
    if not m:
        return None
    return m.group(1), Intent(m.group(2), json.loads(m.group(3)))
