"""ASAP's own applied proposals as history, closed with the measured outcome of the run that used them.

``record_applied`` is called when a proposal is applied (a PR opened, or a person says which run will use
it): it stores the baseline, the proposed mesh and the prediction as a ``pending`` record keyed by the new
run's ID. ``record_outcome`` is called when that run is analysed: it stores what was measured, compares it
with the baseline (improved / regressed / neutral, or oom) and with the prediction, so the next proposal
for a similar change sees how well ASAP predicted it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.configs.mesh import Mesh
from bot.errors import AsapError
from knowledge.history import (
    NEUTRAL_BAND,
    ConfigSnapshot,
    HistoryRecord,
    HistoryStore,
    Metrics,
    Outcome,
    describe_change,
    size_band,
)

OUTCOME_MARK = " Outcome: "
"""Separates the proposal's summary from the measured-outcome notes (replaced when re-measured)."""


def applied_id(run_id: str) -> str:
    return f"applied:{run_id}"


def _as_dict(obj: Any, what: str) -> dict[str, Any]:
    if hasattr(obj, "model_dump"):
        return obj.model_dump()
    if isinstance(obj, Mapping):
        return dict(obj)
    raise AsapError(f"expected a {what} (pydantic model or mapping), got {type(obj).__name__}", field=what)


def _mesh(value: Any, field: str) -> Mesh:
    if isinstance(value, Mesh):
        return value
    if isinstance(value, Mapping):
        try:
            return Mesh(ici=dict(value.get("ici") or {}), dcn=dict(value.get("dcn") or {}))
        except ValueError as exc:
            raise AsapError(f"not a mesh: {exc}", field=field) from None
    raise AsapError("expected a mesh {'ici': {axis: size}, 'dcn': {...}}", field=field)


def record_applied(
    run_id: str,
    proposal: Any,
    *,
    baseline_mesh: Mesh | Mapping[str, Any],
    baseline_run_id: str | None = None,
    baseline_step_time_ms: float | None = None,
    chip: str | None = None,
    chip_count: int | None = None,
    params: float | None = None,
    bottleneck: str | None = None,
    config_path: str = "(applied)",
    link: str | None = None,
    store: HistoryStore | None = None,
) -> HistoryRecord:
    """Store that ``proposal`` (a ``bot.proposals.models.Proposal`` or its dict) is used by run ``run_id``."""
    if not run_id or not str(run_id).strip():
        raise AsapError("the run that uses the proposal needs an ID", field="run_id")
    p = _as_dict(proposal, "proposal")
    after = _mesh(p.get("mesh"), "proposal.mesh")
    before = _mesh(baseline_mesh, "baseline_mesh")
    predicted = p.get("predicted") or {}
    family = None
    if chip:
        from knowledge.hardware import get_chip

        c = get_chip(chip)
        chip, family = c.key, c.family
    from bot.proposals.kinds import kind_of

    kind = p.get("kind") if isinstance(p.get("kind"), str) else kind_of(before, after)
    move = p.get("move") or {}
    pred_ms = predicted.get("step_time_ms")
    title = f"ASAP proposal applied to run {run_id}: {before.short()} -> {after.short()}"
    summary = (p.get("rationale") or "").strip()
    if pred_ms and baseline_step_time_ms:
        summary += f" Predicted step {baseline_step_time_ms:g} ms -> {pred_ms:g} ms."
    rec = HistoryRecord(
        id=applied_id(str(run_id)),
        source="applied",
        title=title,
        summary=summary.strip(),
        link=link,
        run_ids=[r for r in (baseline_run_id, str(run_id)) if r],
        before=ConfigSnapshot(path=config_path, format="mesh", mesh=before.normalized()),
        after=ConfigSnapshot(path=config_path, format="mesh", mesh=after.normalized()),
        mesh_change=describe_change(
            ConfigSnapshot(path=config_path, mesh=before.normalized()), ConfigSnapshot(path=config_path, mesh=after.normalized())
        )[0],
        kind=kind,
        before_metrics=Metrics(step_time_ms=baseline_step_time_ms) if baseline_step_time_ms else None,
        predicted=Metrics(
            step_time_ms=pred_ms, memory_per_chip_bytes=predicted.get("memory_per_chip_bytes") or None
        ) if pred_ms else None,
        outcome="pending",
        chip=chip,
        chip_family=family,
        chip_count=chip_count or after.num_devices,
        size_band=size_band(params) if params else None,
        bottleneck=bottleneck,  # type: ignore[arg-type]
        proposal_id=str(p.get("rank")) if p.get("rank") is not None else None,
        rule_id=move.get("id") if isinstance(move, Mapping) else None,
    )
    (store or HistoryStore()).upsert([rec])
    return rec


def record_outcome(
    run_id: str, measured: Any, *, oom: bool = False, store: HistoryStore | None = None
) -> HistoryRecord | None:
    """Close the applied record of ``run_id`` with what the run measured; None when no proposal was applied to it.

    Idempotent: the same measurement recorded again returns the record unchanged and writes nothing.

    ``measured``: ``bot.runs.record.Measured``, :class:`Metrics` or a mapping with ``step_time_ms`` (and
    optionally ``tokens_per_second``, ``mfu_percent``). ``oom=True`` records an out-of-memory failure.
    """
    store = store or HistoryStore()
    rec = store.get(applied_id(str(run_id)))
    if rec is None:
        return None
    m = _as_dict(measured, "measured") if measured is not None else {}
    after = Metrics(
        step_time_ms=m.get("step_time_ms"),
        tokens_per_second=m.get("tokens_per_second"),
        mfu_percent=m.get("mfu_percent"),
        memory_per_chip_bytes=m.get("memory_per_chip_bytes") or m.get("hbm_peak_bytes"),
        oom=True if oom else None,
    )
    if rec.outcome != "pending" and rec.after_metrics == after:
        return rec  # already closed with this very measurement: recording it again changes nothing
    outcome: Outcome = "unknown"
    notes = []
    base = rec.before_metrics.step_time_ms if rec.before_metrics else None
    if oom:
        outcome = "oom"
        notes.append("Measured: the run ran out of memory.")
    elif after.step_time_ms and base:
        rel = after.step_time_ms / base - 1.0
        outcome = "neutral" if abs(rel) <= NEUTRAL_BAND else ("improved" if rel < 0 else "regressed")
        notes.append(f"Measured step {base:g} ms -> {after.step_time_ms:g} ms ({rel * 100:+.1f}%).")
    pred = rec.predicted.step_time_ms if rec.predicted else None
    if pred and after.step_time_ms:
        notes.append(
            f"Predicted {pred:g} ms, measured {after.step_time_ms:g} ms "
            f"({(after.step_time_ms / pred - 1.0) * 100:+.1f}% vs prediction)."
        )
    base_summary = rec.summary.split(OUTCOME_MARK, 1)[0].rstrip()  # a re-measurement replaces the old notes
    summary = f"{base_summary}{OUTCOME_MARK}{' '.join(notes)}" if notes else base_summary
    updated = rec.model_copy(update={"after_metrics": after, "outcome": outcome, "summary": summary.strip()})
    store.upsert([updated])
    return updated


def prediction_error(record: HistoryRecord) -> float | None:
    """measured / predicted step time - 1 for a closed applied record (positive = slower than predicted)."""
    if record.predicted and record.after_metrics and record.predicted.step_time_ms and record.after_metrics.step_time_ms:
        return record.after_metrics.step_time_ms / record.predicted.step_time_ms - 1.0
    return None
