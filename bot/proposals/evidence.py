"""What each proposal rests on: playbook sections and similar past changes, and how history moves confidence.

For every request the engine calls :func:`load_knowledge` once (the persisted BM25 index under the state
dir, built or updated lazily by :func:`knowledge.index.ensure_index`; the history records; the playbook
sections) and :func:`cite` per proposal. A proposal cites, in order:

1. the playbook section its move is written under (``rule.citation``), when a playbook move produced it;
2. the section on its diagnosed bottleneck (the shallowest section tagged with that bottleneck);
3. the section of each mesh axis it grows (tagged ``axis=<axis>``);
4. one more playbook section retrieved for this change, chip family and bottleneck
   (:func:`knowledge.cite.evidence_for`), so a proposal the search found (no rule) is cited as well;
5. similar past changes (same kind of change on the same chip family, or this very mesh): the ones that
   moved confidence (:func:`knowledge.cite.confidence_adjustment`: helped +, regressed / OOM / invalid -),
   with the effect and, for ASAP's own applied proposals, predicted vs measured; then similar ones still
   pending, neutral or unknown.

Every playbook citation names a section that exists in the playbooks the engine read; when the index
cannot be opened (read-only state dir, corrupt files) the proposals still cite their move and bottleneck
sections and a note says what is missing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.configs.mesh import AXES, Mesh
from bot.errors import AsapError
from bot.proposals.models import Citation
from bot.proposals.moves import PLAYBOOKS_PATH, Rule
from knowledge.cite import ConfidenceAdjustment, MeshChange, RunFacts, confidence_adjustment, evidence_for
from knowledge.history import HISTORY_FILE, HistoryRecord, HistoryStore, state_dir
from knowledge.index import KnowledgeIndex, ensure_index, sources_fingerprint
from knowledge.playbooks import PlaybookSection, load_playbooks

MAX_RETRIEVED_PLAYBOOK = 1
"""Retrieved playbook sections cited per proposal besides its move's, bottleneck's and axes'."""
MAX_SIMILAR_CONSIDERED = 200
"""Newest similar past changes (besides this very mesh's) weighed for confidence: far more than its limits need."""
MAX_SIMILAR_UNCOUNTED = 2
"""Similar past changes cited that did not move confidence (pending, neutral, unknown)."""


class _HistoryView:
    """History records indexed by id, kind of change and target mesh (built once per history file version)."""

    def __init__(self, records: list[HistoryRecord]) -> None:
        self.records = records
        self.by_id: dict[str, HistoryRecord] = {}
        self.by_kind: dict[str, list[HistoryRecord]] = {}
        self.by_mesh: dict[Any, list[HistoryRecord]] = {}
        self.mesh_of: dict[str, Any] = {}
        for rec in sorted(records, key=lambda r: r.date or "", reverse=True):  # newest first
            self.by_id[rec.id] = rec
            if rec.kind:
                self.by_kind.setdefault(rec.kind, []).append(rec)
            if rec.after is not None and rec.after.mesh is not None:
                key = _mesh_key(rec.after.mesh)
                self.mesh_of[rec.id] = key
                self.by_mesh.setdefault(key, []).append(rec)


@dataclass
class Knowledge:
    """What one request retrieves from: the index, the history records and the playbook sections."""

    index: KnowledgeIndex | None
    records: list[HistoryRecord] = field(default_factory=list)
    sections: dict[str, PlaybookSection] = field(default_factory=dict)  # ref -> section
    problem: str | None = None  # why the index is not available, shown as a note
    view: _HistoryView | None = None

    def __post_init__(self) -> None:
        if self.view is None:
            self.view = _HistoryView(self.records)

    def record(self, record_id: str) -> HistoryRecord | None:
        return self.view.by_id.get(record_id)  # type: ignore[union-attr]

    def similar(self, kind: str, mesh: Mesh) -> tuple[list[HistoryRecord], list[HistoryRecord]]:
        """Past changes to this very mesh, and of the same kind (each newest first)."""
        v = self.view
        same_mesh = v.by_mesh.get(_mesh_key(mesh), [])  # type: ignore[union-attr]
        ids = {r.id for r in same_mesh}
        return list(same_mesh), [r for r in v.by_kind.get(kind, []) if r.id not in ids]  # type: ignore[union-attr]


def _mesh_key(mesh: Mesh) -> Any:
    m = mesh.normalized()
    return (tuple(sorted(m.ici.items())), tuple(sorted(m.dcn.items())))


_CACHE: dict[str, tuple[Any, Any]] = {}
_CACHE_LOCK = threading.Lock()


def _cached(key: str, stamp: Any, build: Any) -> Any:
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
    value = build()
    with _CACHE_LOCK:
        _CACHE[key] = (stamp, value)
    return value


def load_knowledge(state: Path | None = None, *, playbooks_dir: Path = PLAYBOOKS_PATH) -> Knowledge:
    """The index (built/updated lazily when missing or stale), history and playbook sections of ``state``.

    ``state`` defaults to ``$ASAP_STATE_DIR`` or ``.asap``. Playbook sections and history records are
    cached per process until their files change. A failure to open or build the index is not fatal: it
    is returned as ``problem`` and the proposals cite what the playbooks alone give.
    """
    state = Path(state) if state is not None else state_dir()
    fp = sources_fingerprint(playbooks_dir, state / HISTORY_FILE)
    sections = playbook_sections(playbooks_dir)
    problem = None
    try:
        view = _cached(f"history:{state.resolve()}", fp["history"], lambda: _HistoryView(HistoryStore(state).load()))
    except AsapError as exc:
        view, problem = _HistoryView([]), f"history not used: {exc.render()}"
    index: KnowledgeIndex | None = None
    try:
        index = ensure_index(state, playbooks_dir=playbooks_dir)
    except (AsapError, OSError) as exc:
        msg = exc.render() if isinstance(exc, AsapError) else f"{type(exc).__name__}: {exc}"
        problem = f"knowledge index under {state / 'index'} not available ({msg}); citations come from the playbooks only"
    return Knowledge(index=index, records=view.records, sections=sections, problem=problem, view=view)


def playbook_sections(playbooks_dir: Path = PLAYBOOKS_PATH) -> dict[str, PlaybookSection]:
    """Every playbook section by ``file#anchor`` (cached until a playbook file changes)."""
    fp = sources_fingerprint(playbooks_dir, None)
    return _cached(f"sections:{Path(playbooks_dir).resolve()}", fp["playbooks"],
                   lambda: {s.ref: s for s in load_playbooks(playbooks_dir)})


def bottleneck_section(sections: dict[str, PlaybookSection], bottleneck: str | None) -> PlaybookSection | None:
    """The shallowest section tagged with this bottleneck (e.g. ``bottlenecks.md#communication-bound``)."""
    if not bottleneck:
        return None
    tagged = [s for s in sections.values() if s.metadata.get("bottleneck") == bottleneck]
    return min(tagged, key=lambda s: s.level) if tagged else None


def axis_section(sections: dict[str, PlaybookSection], axis: str) -> PlaybookSection | None:
    """The section tagged ``axis=<axis>`` (``axes.md``), the shallowest when several are."""
    tagged = [s for s in sections.values() if s.metadata.get("axis") == axis]
    return min(tagged, key=lambda s: s.level) if tagged else None


def _title(sec: PlaybookSection) -> str:
    return " > ".join(sec.heading_path)


def _history_kind(rec: HistoryRecord) -> str:
    if rec.source == "applied":
        return "history"
    if rec.pr_url:
        return "pr"
    if rec.commit:
        return "commit"
    return "history"


def _outcome_words(rec: HistoryRecord) -> str:
    words = f"outcome {rec.outcome}"
    rel = rec.step_change()
    if rel is not None:
        words += f" (step {rec.before_metrics.step_time_ms:g} -> {rec.after_metrics.step_time_ms:g} ms, {rel * 100:+.0f}%)"  # type: ignore[union-attr]
    pred = rec.predicted.step_time_ms if rec.predicted else None
    if pred and rec.after_metrics and rec.after_metrics.step_time_ms:
        meas = rec.after_metrics.step_time_ms
        words += f"; predicted {pred:g} ms, measured {meas:g} ms ({(meas / pred - 1.0) * 100:+.1f}% vs prediction)"
    elif pred and rec.outcome == "pending":
        words += f"; predicted {pred:g} ms, not measured yet"
    return words


def _retrieved_sections(hits: list[Any], sections: dict[str, PlaybookSection], seen: set[str], *, num_slices: int,
                        fp8_recipe: str | None) -> list[str]:
    """The retrieved playbook sections a proposal may cite, best first: not cited already, and written for this run's
    scale (``slices``) and fp8 recipe (``fp8_recipe``) where the section says which."""
    out: list[str] = []
    for h in hits:
        if h.kind != "playbook" or len(out) >= MAX_RETRIEVED_PLAYBOOK or h.citation not in sections \
                or h.citation in seen or h.citation in out:
            continue
        meta = sections[h.citation].metadata
        scope = meta.get("slices", "any")
        if scope != "any" and scope != ("multi" if num_slices > 1 else "single"):
            continue  # e.g. the DCN section for a run on one slice
        if meta.get("fp8_recipe", "any") not in ("any", fp8_recipe):
            continue  # e.g. the MXFP8 section for a run in per-tensor fp8 or bf16
        out.append(h.citation)
    return out


def cite(
    knowledge: Knowledge,
    *,
    facts: RunFacts,
    bottleneck: str | None,
    base: Mesh,
    mesh: Mesh,
    kind: str,
    rule: Rule | None,
    settings_words: list[str],
    num_slices: int = 1,
    fp8_recipe: str | None = None,
) -> tuple[list[Citation], ConfidenceAdjustment | None]:
    """The citations of one proposal, and how similar past changes move its confidence (None: mesh unchanged).
    ``fp8_recipe``: the run's stated fp8 scaling recipe; a section written for one recipe is cited only for it."""
    out: list[Citation] = []
    seen: set[str] = set()

    def add(c: Citation) -> None:
        if c.ref not in seen:
            seen.add(c.ref)
            out.append(c)

    sections = knowledge.sections
    if rule is not None and rule.citation and rule.citation in sections:
        add(Citation(ref=rule.citation, title=_title(sections[rule.citation]), kind="playbook",
                     why=f"the playbook move {rule.id} this proposal applies, and why it helps"))
    bsec = bottleneck_section(sections, bottleneck)
    if bsec is not None:
        add(Citation(ref=bsec.ref, title=_title(bsec), kind="playbook",
                     why=f"the run is {bottleneck}-bound: what that costs and which fixes the playbook prescribes"))

    for axis in AXES:
        if mesh.size(axis) > base.size(axis) and (asec := axis_section(sections, axis)) is not None:
            add(Citation(ref=asec.ref, title=_title(asec), kind="playbook",
                         why=f"this proposal grows the {axis} axis ({base.size(axis)} -> {mesh.size(axis)}): "
                             "what it splits, what it sends and what it costs"))

    mesh_changed = _mesh_key(mesh) != _mesh_key(base)
    change = MeshChange(base, mesh, rule_id=rule.id if rule else None) if mesh_changed else None
    hits = []
    if knowledge.index is not None:
        extra = " ".join(w.replace("_", " ") for w in settings_words)
        try:
            hits = evidence_for(facts, bottleneck, change, index=knowledge.index, k_playbook=2 + len(out),
                                k_history=5, extra=extra)
        except AsapError:
            hits = []
    what = f"{kind} on a {bottleneck}-bound run" if bottleneck else kind
    for ref in _retrieved_sections(hits, sections, seen, num_slices=num_slices, fp8_recipe=fp8_recipe):
        add(Citation(ref=ref, title=_title(sections[ref]), kind="playbook",
                     why=f"retrieved for this change ({what}): related guidance"))

    if not mesh_changed:
        return out, None
    history, adj = _history_citations(knowledge, facts, change, mesh, hits)  # type: ignore[arg-type]
    for c in history:
        add(c)
    return out, adj


def _history_citations(knowledge: Knowledge, facts: RunFacts, change: MeshChange, mesh: Mesh,
                       hits: list[Any]) -> tuple[list[Citation], ConfidenceAdjustment]:
    """Past changes like this one: those that move the proposal's confidence (this very mesh's first), then a few
    more of the same kind on the same chip family that do not."""
    out: list[Citation] = []
    retrieved = [r for h in hits if h.kind == "history" and (r := knowledge.record(str(h.metadata.get("record_id"))))]
    same_mesh, same_kind = knowledge.similar(change.kind, mesh)
    ordered: list[HistoryRecord] = []
    ids: set[str] = set()
    for r in [*same_mesh, *retrieved, *same_kind]:
        if r.id not in ids:
            ids.add(r.id)
            ordered.append(r)
    # Enough to reach confidence_adjustment's limits; this very mesh's records always come first.
    ordered = ordered[: len(same_mesh) + MAX_SIMILAR_CONSIDERED]
    adj = confidence_adjustment(change, facts, ordered)  # type: ignore[arg-type]
    for rec, step in zip(adj.records, adj.steps, strict=True):
        out.append(Citation(ref=rec.ref, title=rec.title, kind=_history_kind(rec),  # type: ignore[arg-type]
                            why=f"similar past change ({rec.kind or 'same mesh'}"
                                f"{', ' + rec.chip if rec.chip else ''}): {_outcome_words(rec)}; confidence {step:+.2f}"))
    counted = {r.id for r in adj.records}
    same_ids = {r.id for r in same_mesh}
    extra_n = 0
    for rec in ordered:
        if extra_n >= MAX_SIMILAR_UNCOUNTED or rec.id in counted:
            continue
        if facts.chip_family and rec.chip_family and rec.chip_family != facts.chip_family:
            continue
        if rec.kind != change.kind and rec.id not in same_ids:
            continue
        extra_n += 1
        out.append(Citation(ref=rec.ref, title=rec.title, kind=_history_kind(rec),  # type: ignore[arg-type]
                            why=f"similar past change ({rec.kind or 'same mesh'}): {_outcome_words(rec)}; "
                                "no effect on confidence"))
    return out, adj
