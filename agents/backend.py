"""The deterministic functions the agents' tools call: analysis, proposals, Critic, cost model, mesh search.

:class:`AnalysisBackend` is the interface; :class:`RealBackend` calls the project's tested code
(``bot.analysis``, ``bot.proposals``, ``knowledge``), imported lazily so the agent package loads fast
and a missing piece is reported as a tool error rather than an import crash. Results cross this boundary
as JSON-compatible dicts (``model_dump()``), which is what the tools return to the model and what the
thread record stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.errors import AsapError
from bot.runs.open import open_runs
from bot.runs.store import Run


class AnalysisBackend(Protocol):
    def load_run(self, query: str) -> Run: ...

    def analyze(self, run: Run) -> dict[str, Any]: ...

    def propose(self, run: Run, k: int = 3) -> dict[str, Any]: ...

    def critique(self, run: Run, mesh: dict[str, dict[str, int]]) -> dict[str, Any]: ...

    def rank_meshes(self, run: Run, limit: int = 40) -> tuple[int, list[tuple[dict[str, dict[str, int]], dict[str, Any]]]]:
        """(meshes enumerated, the fastest ``limit`` as (mesh, prediction) pairs, fastest first)."""
        ...


def with_chips(run: Run, chips: int) -> Run:
    """The same run on ``chips`` chips (same chips per slice when that divides, else one slice)."""
    if chips < 1:
        raise AsapError(f"chip count must be positive, got {chips}", field="chips")
    per_slice = run.record.chips_per_slice
    slices = chips // per_slice if chips % per_slice == 0 and chips >= per_slice else 1
    record = run.record.model_copy(update={"num_chips": chips, "num_slices": slices, "measured": None})
    return Run(record=record, folder=run.folder)


def _mesh(mesh: dict[str, dict[str, int]]) -> Any:
    from bot.configs.mesh import Mesh

    try:
        return Mesh(ici=mesh.get("ici") or {}, dcn=mesh.get("dcn") or {})
    except Exception as exc:  # pydantic ValidationError: unknown axis names, non-integers
        raise AsapError(
            f"not a mesh: {exc.errors()[0]['msg'] if hasattr(exc, 'errors') else exc}",  # type: ignore[union-attr]
            field="mesh",
            hint="axes are data, fsdp, tensor, sequence, expert, pipeline; e.g. {'ici': {'fsdp': 16, 'tensor': 4}}",
        ) from None


@dataclass
class RealBackend:
    """The project's own analysis, proposal and Critic code behind :class:`AnalysisBackend`."""

    runs_root: str | None = None
    runs: str | None = None  # store URLs (--runs); None = ASAP_RUNS, then runs_root
    _reports: dict[str, Any] = field(default_factory=dict)
    _originals: dict[str, Run] = field(default_factory=dict)
    _contexts: dict[str, Any] = field(default_factory=dict)

    def load_run(self, query: str) -> Run:
        run = open_runs(self.runs, runs_dir=self.runs_root).get(query)
        self._originals.setdefault(run.id, run)
        return run

    def list_ids(self) -> list[str]:
        return open_runs(self.runs, runs_dir=self.runs_root).list_ids()

    def _original(self, run: Run) -> Run:
        return self._originals.get(run.id) or self.load_run(run.id)

    def _report(self, run: Run) -> Any:
        """The analysis of the run as recorded (a what-if copy reuses its original's diagnosis)."""
        if run.id not in self._reports:
            from bot.analysis.analyze import analyze_run

            self._reports[run.id] = analyze_run(self._original(run))
        return self._reports[run.id]

    def analyze(self, run: Run) -> dict[str, Any]:
        return self._report(run).model_dump(mode="json")

    def propose(self, run: Run, k: int = 3) -> dict[str, Any]:
        from bot.proposals.engine import propose

        return propose(run, self._report(run), k=k).model_dump(mode="json")

    def _context(self, run: Run) -> Any:
        """``asap propose``'s own reading of the original run: config settings, calibration, baseline prediction
        (None when it cannot be read; the what-if then predicts from run.yaml alone)."""
        if run.id not in self._contexts:
            from bot.proposals.context import prepare

            try:
                self._contexts[run.id] = prepare(self._original(run), self._report(run))
            except AsapError:
                self._contexts[run.id] = None
        return self._contexts[run.id]

    def _scaled(self, run: Run) -> Any:
        """The original run's settings carried to ``run``'s chip count (same global batch)."""
        from knowledge.cost_scaling import settings_at_chips

        ctx = self._context(run)
        record = ctx.record if ctx is not None else self._original(run).record
        return settings_at_chips(record, ctx.settings0 if ctx is not None else None, run.record.num_chips)

    def whatif_basis(self, run: Run) -> dict[str, Any]:
        """What a what-if on ``run`` keeps from the original (settings), what scales, and propose's baseline."""
        ctx = self._context(run)
        scaled = self._scaled(run)
        out: dict[str, Any] = {"kept": scaled.kept, "scaling": scaled.scaling, "baseline": None}
        if ctx is not None and ctx.base_ms is not None:
            pred = ctx.base_pred
            out["baseline"] = {"mesh_short": ctx.base.short(), "chips": ctx.record.num_chips,
                               "step_time_ms": float(ctx.base_ms),
                               "memory_per_chip_bytes": float(pred.memory_per_chip_bytes) if pred is not None else None,
                               "basis": "predicted" if pred is not None else "measured"}
        return out

    def critique(self, run: Run, mesh: dict[str, dict[str, int]]) -> dict[str, Any]:
        from bot.proposals.critic import critique

        ctx = self._context(run)
        settings = self._scaled(run).settings
        result = critique(run, _mesh(mesh), report=self._report(run), settings=settings, base_settings=settings,
                          calibration=ctx.calibration if ctx is not None else None)
        out = result.model_dump(mode="json")
        out["ok"] = bool(result.ok)
        return out

    def _calibration(self, run: Run) -> Any:
        """The cost model's scales fitted to the original run's measured step, as ``asap propose`` fits them
        (None when they cannot be)."""
        ctx = self._context(run)
        if ctx is not None:
            return ctx.calibration
        from bot.proposals.engine import baseline_mesh
        from knowledge.costmodel import calibrate

        original = self._original(run)
        report = self._report(run)
        try:
            base, _ = baseline_mesh(original, report)
            return calibrate(original.record, base, report)
        except AsapError:
            return None

    def rank_meshes(self, run: Run, limit: int = 40) -> tuple[int, list[tuple[dict[str, dict[str, int]], dict[str, Any]]]]:
        """Every valid mesh for ``run`` scored by the cost model with the original's config settings (as
        ``asap propose`` predicts its baseline); the ``limit`` fastest with full predictions."""
        from bot.proposals.kinds import mesh_dict
        from bot.proposals.predict import widen_for_unknowns
        from knowledge.costmodel import predict
        from knowledge.meshsearch import enumerate_meshes, score_meshes

        meshes = enumerate_meshes(run.record)
        if not meshes:
            return 0, []
        ctx = self._context(run)
        cal = self._calibration(run)
        settings = self._scaled(run).settings
        steps = score_meshes(run.record, meshes, cal, settings=settings)
        order = sorted(range(len(meshes)), key=lambda i: float(steps[i]))[:limit]
        out = []
        for i in order:
            pred = predict(run.record, meshes[i], calibration=cal, settings=settings)
            if ctx is not None and not ctx.time_calibrated:  # as propose: unstated settings widen the band
                pred = widen_for_unknowns(run.record, ctx.chip, cal, ctx.unknowns, meshes[i], settings, pred)
            out.append((mesh_dict(meshes[i]), pred.model_dump(mode="json", exclude={"mesh"})))
        return len(meshes), out
