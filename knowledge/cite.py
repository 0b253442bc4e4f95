"""Evidence for a proposal: the playbook passages and past changes it rests on, and how history moves
its confidence.

The proposal engine calls :func:`evidence_for` for each candidate (retrieval over the BM25 index, filtered
by the run's chip family, scale and bottleneck) and :func:`confidence_adjustment` to let similar past
changes raise confidence (they helped) or lower it (they regressed, ran out of memory or were invalid),
with the reason and the citation shown to the person.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bot.configs.mesh import Mesh
from knowledge.history import HistoryRecord, size_band
from knowledge.index import Filters, Hit, KnowledgeIndex

HELPED_DELTA = 0.05
"""Confidence added per similar change that helped (same kind of move, same chip family)."""
FAILED_DELTA = -0.10
"""Confidence removed per similar change that regressed, ran out of memory or was invalid."""
SAME_MESH_FAILED_DELTA = -0.30
"""Confidence removed when this very mesh failed before at the same chip count."""
MAX_UP, MAX_DOWN = 0.15, -0.45


@dataclass(frozen=True)
class RunFacts:
    """What retrieval needs to know about the run: chip, scale, model size and diagnosis."""

    chip: str | None = None
    chip_family: str | None = None
    num_chips: int | None = None
    params: float | None = None
    bottleneck: str | None = None

    @classmethod
    def from_record(cls, record: Any, bottleneck: str | None = None) -> RunFacts:
        """From a ``bot.runs.record.RunRecord`` (chip resolved through the hardware catalog when known)."""
        from bot.errors import AsapError
        from knowledge.hardware import get_chip

        chip, family = getattr(record, "chip", None), None
        try:
            c = get_chip(chip) if chip else None
            chip, family = (c.key, c.family) if c else (chip, None)
        except AsapError:
            pass
        model = getattr(record, "model", None)
        params = model.derived_params() if model is not None and hasattr(model, "derived_params") else None
        return cls(chip=chip, chip_family=family, num_chips=getattr(record, "num_chips", None), params=params,
                   bottleneck=bottleneck)

    @property
    def size_band(self) -> str | None:
        return size_band(self.params) if self.params else None


@dataclass(frozen=True)
class MeshChange:
    before: Mesh
    after: Mesh
    rule_id: str | None = None

    @property
    def kind(self) -> str:
        from bot.proposals.kinds import kind_of

        return kind_of(self.before, self.after)


def _query(facts: RunFacts, diagnosis: str | None, change: MeshChange | None, extra: str = "") -> str:
    words = []
    if diagnosis:
        words.append(f"{diagnosis}-bound {diagnosis}")
    if change is not None:
        k = change.kind
        if k != "unchanged":
            src, _, dst = k.partition("->")
            words.append(f"{src.replace('dcn.', 'dcn ')} to {dst.replace('dcn.', 'dcn ')} {k.replace('->', ' ')}")
            words.append("parallelism")
        words.append(change.after.short().replace("=", " ").replace("|", " "))
        if change.rule_id:
            words.append(change.rule_id.replace("-", " "))
    if extra:
        words.append(extra)
    if facts.chip:
        words.append(facts.chip)
    return " ".join(words) or "sharding"


def evidence_for(
    facts: RunFacts,
    diagnosis: str | None,
    change: MeshChange | None,
    *,
    index: KnowledgeIndex,
    k_playbook: int = 3,
    k_history: int = 3,
    extra: str = "",
) -> list[Hit]:
    """Playbook sections then past changes relevant to this run, diagnosis and mesh change, best first.

    ``extra``: more words for the query, e.g. a settings change in words (``remat_policy full -> minimal``).
    """
    query = _query(facts, diagnosis, change, extra)
    fam = facts.chip_family if facts.chip_family in ("tpu", "gpu", "cpu") else None
    bn = diagnosis if diagnosis in ("compute", "hbm", "communication", "host") else None
    play = index.retrieve(query, filters=Filters(kind="playbook", chip_family=fam, bottleneck=bn), k=k_playbook)
    lo = hi = None
    if facts.num_chips:
        lo, hi = max(1, facts.num_chips // 8), facts.num_chips * 8
    hist = index.retrieve(
        query,
        filters=Filters(kind="history", chip_family=fam, chip_count_min=lo, chip_count_max=hi),
        k=k_history,
    )
    return play + hist


@dataclass(frozen=True)
class ConfidenceAdjustment:
    """How history moves a proposal's confidence, why, and which records say so."""

    delta: float
    reasons: list[str] = field(default_factory=list)
    citations: list[str] = field(default_factory=list)
    records: list[HistoryRecord] = field(default_factory=list)  # the counted records, parallel to reasons
    steps: list[float] = field(default_factory=list)  # each record's own effect, parallel to reasons


def _describe(rec: HistoryRecord) -> str:
    where = ", ".join(x for x in (rec.chip, f"{rec.chip_count} chips" if rec.chip_count else None) if x)
    rel = rec.step_change()
    effect = {
        "improved": "helped",
        "regressed": "made it slower",
        "neutral": "made no measurable difference",
        "oom": "ran out of memory",
        "invalid": "was an invalid configuration",
    }.get(rec.outcome, rec.outcome)
    if rel is not None and rec.outcome in ("improved", "regressed", "neutral"):
        b, a = rec.before_metrics.step_time_ms, rec.after_metrics.step_time_ms  # type: ignore[union-attr]
        effect += f" (step {b:g} -> {a:g} ms, {rel * 100:+.0f}%)"
    pred = rec.predicted.step_time_ms if rec.predicted else None
    meas = rec.after_metrics.step_time_ms if rec.after_metrics else None
    if pred and meas:
        effect += f"; ASAP predicted {pred:g} ms, measured {meas:g} ms ({(meas / pred - 1.0) * 100:+.1f}% vs prediction)"
    return f"{rec.title!r}{' on ' + where if where else ''} {effect} — {rec.ref}"


def confidence_adjustment(
    change: MeshChange, facts: RunFacts, records: Iterable[HistoryRecord], *, limit: int = 3
) -> ConfidenceAdjustment:
    """+ for similar changes that helped, - for ones that regressed/OOMed/were invalid; strongest for the same mesh.

    Similar = same kind of change (``tensor->fsdp``) on the same chip family (unknown family counts), or the
    very same target mesh at the same chip count. Records still pending or unknown do not count.
    """
    kind = change.kind
    target = change.after.normalized()
    delta = 0.0
    reasons: list[str] = []
    cites: list[str] = []
    counted: list[HistoryRecord] = []
    steps: list[float] = []
    helped = failed = 0
    for rec in records:
        if rec.outcome in ("pending", "unknown"):
            continue
        if facts.chip_family and rec.chip_family and rec.chip_family != facts.chip_family:
            continue
        after = rec.after.mesh if rec.after is not None else None
        same_mesh = (
            after is not None and after.normalized() == target
            and (rec.chip_count is None or facts.num_chips is None or rec.chip_count == facts.num_chips)
        )
        same_kind = rec.kind is not None and rec.kind == kind and kind != "unchanged"
        if not (same_mesh or same_kind):
            continue
        if rec.outcome in ("oom", "invalid", "regressed"):
            if same_mesh and rec.outcome in ("oom", "invalid"):
                step, label = SAME_MESH_FAILED_DELTA, "this same mesh"
            elif failed < limit:
                step, label = FAILED_DELTA, "a similar change"
            else:
                continue
            failed += 1
        elif rec.outcome == "improved":
            if helped >= limit:
                continue
            step, label = HELPED_DELTA, "a similar change"
            helped += 1
        else:
            continue
        delta += step
        reasons.append(f"{step:+.2f}: {label} {_describe(rec)}")
        cites.append(rec.ref)
        counted.append(rec)
        steps.append(step)
    delta = max(MAX_DOWN, min(MAX_UP, delta))
    return ConfidenceAdjustment(delta=round(delta, 4), reasons=reasons, citations=cites, records=counted, steps=steps)
