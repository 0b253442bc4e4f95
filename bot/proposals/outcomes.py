"""Outcomes flow back: a run that applied an ASAP proposal closes that proposal's history record.

A run whose ``run.yaml`` says ``derived_from: {run: "311", proposal: 1}`` used proposal 1 of
``asap propose 311``. When it is analysed (``bot.analysis.analyze.analyze_run`` calls
:func:`record_run_outcome`), its measured step time is stored against the prediction
(:func:`knowledge.history_sources.applied.record_outcome`), so the next proposal of a similar change
cites it and its confidence moves with it. If nobody recorded the application (``record_applied``) the
record is created here from the original run's proposal, recomputed deterministically. Recording is
idempotent: analysing the same run again writes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.errors import AsapError
from knowledge.history import HistoryRecord, HistoryStore
from knowledge.history_sources.applied import applied_id, record_applied, record_outcome

if TYPE_CHECKING:
    from bot.analysis.report import AnalysisReport
    from bot.runs.store import Run


MAX_PROPOSALS = 10  # the most `asap propose -k` shows


def _find_origin(run: Run, origin_id: str, runs: Any = None) -> Run:
    """The run a proposal came from: beside this one in its runs folder, else in the configured stores
    (an MLflow or S3 run's ``asap.derived_from`` names a run wherever the team keeps it)."""
    from bot.errors import RunNotFound
    from bot.runs.open import open_runs
    from bot.runs.store import LocalRunStore

    if run.origin is None:
        try:
            return LocalRunStore(run.folder.parent).get(origin_id)
        except RunNotFound:
            pass
    return (runs or open_runs()).get(origin_id)


def _applied_from_origin(run: Run, store: HistoryStore, runs: Any = None) -> tuple[HistoryRecord | None, list[str]]:
    """Create the applied record of ``run`` from the proposal its ``derived_from`` names."""
    from bot.analysis.analyze import analyze, load_mesh
    from bot.profiles.loader import load_profile
    from bot.proposals.engine import propose
    d = run.record.derived_from
    assert d is not None
    origin = _find_origin(run, d.run, runs)
    # analyze(), not analyze_run(): the origin's own derived_from must not recurse back here.
    mesh, fmt, notes = load_mesh(origin)
    report = analyze(origin.record, load_profile(origin), mesh, fmt, warnings=notes)
    # People see at most MAX_PROPOSALS (asap propose -k); a higher number cannot have been applied.
    answer = propose(origin, report, k=max(3, min(d.proposal, MAX_PROPOSALS)), knowledge=False)
    chosen = next((p for p in answer.proposals if p.rank == d.proposal), None)
    if chosen is None:
        return None, [
            f"derived_from: run {d.run} has {len(answer.proposals)} proposal(s), not a proposal {d.proposal}; "
            "the outcome was not recorded"
        ]
    warnings = []
    own = run.record
    if mesh is not None and own.config:
        own_mesh, _, _ = load_mesh(run)
        if own_mesh is not None and own_mesh.normalized().short() != chosen.mesh_short:
            warnings.append(
                f"derived_from: this run's mesh {own_mesh.short()} is not proposal {d.proposal} of run {d.run} "
                f"({chosen.mesh_short}); the outcome is recorded against that proposal"
            )
    params = origin.record.model.derived_params() if origin.record.model else None
    rec = record_applied(
        own.id, chosen, baseline_mesh=answer.baseline.mesh, baseline_run_id=origin.record.id,
        baseline_step_time_ms=answer.baseline.measured_step_ms, chip=origin.record.chip,
        chip_count=origin.record.num_chips, params=params, bottleneck=answer.bottleneck,
        config_path=origin.record.config or "(applied)", link=own.links.get("pr") or own.links.get("PR"),
        store=store,
    )
    return rec, warnings


def record_run_outcome(run: Run, report: AnalysisReport, *, store: HistoryStore | None = None,
                       runs: Any = None) -> list[str]:
    """Record predicted vs measured for a run with ``derived_from``; returns warnings (empty when recorded).

    Never raises for a problem with the history or the original run: analysis must still answer, and the
    warning says why the outcome was not recorded.
    """
    d = run.record.derived_from
    if d is None:
        return []
    measured = run.record.measured
    step = report.kpis.step_time_ms or (measured.step_time_ms if measured else None)
    if not step:
        return ["derived_from: no measured step time, so the proposal's outcome was not recorded"]
    store = store or HistoryStore()
    warnings: list[str] = []
    try:
        if store.get(applied_id(run.record.id)) is None:
            rec, warnings = _applied_from_origin(run, store, runs)
            if rec is None:
                return warnings
        record_outcome(
            run.record.id,
            {
                "step_time_ms": step,
                "tokens_per_second": report.kpis.tokens_per_second
                or (measured.tokens_per_second if measured else None),
                "mfu_percent": measured.mfu_percent if measured else None,
                "hbm_peak_bytes": measured.hbm_peak_bytes if measured else None,
            },
            store=store,
        )
    except (AsapError, OSError) as exc:
        why = exc.render() if isinstance(exc, AsapError) else f"{type(exc).__name__}: {exc}"
        return [*warnings, f"derived_from: the outcome of proposal {d.proposal} of run {d.run} was not recorded: {why}"]
    return warnings
