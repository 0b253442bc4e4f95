"""What every stage of the proposal engine reads: the run, its baseline mesh and prediction, the diagnosis.

:func:`prepare` builds it once per request (read the config and its training settings, calibrate the cost
model on the baseline's measurement, predict the baseline, critique it); the stages
(:mod:`~bot.proposals.candidates` -> :mod:`~bot.proposals.predict` -> :mod:`~bot.proposals.critique` ->
:mod:`~bot.proposals.select` -> :mod:`~bot.proposals.explain`) only read it, except for the ``notes`` and
``counts`` they append to, which end up in the answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.configs.mesh import Mesh
from bot.errors import AsapError, ConfigError
from bot.proposals.critic import baseline_from_report, critique
from bot.proposals.failures import FailureHistory, load_failures
from bot.proposals.models import CriticResult

if TYPE_CHECKING:
    from bot.analysis.report import AnalysisReport
    from bot.runs.record import RunRecord
    from bot.runs.store import Run


@dataclass
class Context:
    """One proposal request, as the stages see it."""

    run: Run
    report: AnalysisReport
    chip: Any  # knowledge.hardware.Chip
    base: Mesh
    cfg: Any | None  # bot.configs.sharding.ShardingConfig
    settings0: Any | None  # knowledge.cost_settings.TrainingSettings of the baseline
    known: bool  # the model is known: absolute predictions, memory checks, a full search
    measured_ms: float | None
    calibration: Any | None
    base_pred: Any | None  # knowledge.costmodel.Prediction of the baseline
    history: FailureHistory | None
    baseline_critic: CriticResult
    unknowns: list[Any] = field(default_factory=list)  # knowledge.cost_settings.UnknownSetting
    lean0: Any | None = None  # settings0 with every unknown at its least memory-hungry option
    expressible: dict[Any, bool] = field(default_factory=dict)  # axis signature -> the config can carry it
    notes: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(
        default_factory=lambda: {"enumerated": 0, "scored": 0, "move_candidates": 0, "critiqued": 0, "rejected": 0}
    )

    @property
    def record(self) -> RunRecord:
        return self.run.record

    @property
    def bottleneck(self) -> str | None:
        return self.report.diagnosis.bottleneck

    @property
    def diag_conf(self) -> float:
        return float(self.report.diagnosis.confidence)

    @property
    def time_calibrated(self) -> bool:
        """The cost model's step time is calibrated on a measured step (not only on a memory peak)."""
        return self.calibration is not None and bool(getattr(self.calibration, "time_measured", True))

    @property
    def remat(self) -> Any:
        """The run's resolved remat policy and whether it recomputes anything (knowledge.remat_state.RematState)."""
        from knowledge.remat_state import remat_state

        t = self.record.training
        return remat_state(self.settings0, self.record.framework, t.remat if t else None)

    @property
    def fp8_recipe(self) -> str | None:
        """The fp8 scaling recipe of an fp8 run as ``when.fp8_recipe`` reads it: the config's, else run.yaml's; None
        when the run is not fp8 or does not say (knowledge.cost_fp8_recipe)."""
        from knowledge.cost_shapes import fp8_recipe_of

        return fp8_recipe_of(self.record, self.settings0)

    @property
    def memory(self) -> str | None:
        """The baseline's predicted memory per chip as ``when.memory`` reads it: tight | room | None (not predicted)."""
        from bot.proposals.moves import memory_state

        if self.base_pred is None:
            return None
        return memory_state(float(self.base_pred.memory_per_chip_bytes), float(self.chip.hbm_bytes))

    @property
    def base_ms(self) -> float | None:
        """The step time proposals are compared with: the calibrated baseline prediction, else the measurement."""
        return self.base_pred.step_time_ms if self.base_pred is not None else self.measured_ms


def baseline_mesh(run: Run, report: AnalysisReport | None) -> tuple[Mesh, Any | None]:
    """The run's current mesh (from its config file, else the report) and the parsed config, if any."""
    record = run.record
    if record.config:
        from bot.configs.detect import load_run_config  # config: plus run.yaml's command: (issue 13)

        cfg = load_run_config(run)
        return cfg.mesh(record.num_chips, record.num_slices), cfg
    mesh = baseline_from_report(report)
    if mesh is None:
        raise ConfigError(
            "the run names no sharding config, so there is no current mesh to improve on",
            source=str(run.folder / "run.yaml"),
            field="config",
            hint="add 'config: <file>' with the MaxText, ici_mesh or Megatron settings the job used",
        )
    return mesh, None


def with_recorded_oom(record: RunRecord, base: Mesh, history: FailureHistory | None) -> FailureHistory | None:
    """A run.yaml ``measured.oom: true`` is a recorded failure of the run's own configuration (a Critic fact).

    It is added for the baseline mesh only: a candidate that changes the mesh or a setting is judged by the
    memory model (calibrated so the baseline does not fit), not by this record.
    """
    if not (record.measured and record.measured.oom):
        return history
    from bot.proposals.failures import FailedConfig

    failed = FailedConfig(mesh=base, outcome="oom", detail="run.yaml measured.oom: the job ran out of memory",
                          source="run.yaml")
    return FailureHistory(failures=[*(history.failures if history else []), failed])


def _ran_upper_bound(record: RunRecord, base: Mesh, chip: Any, settings0: Any, calibration: Any, base_pred: Any,
                     notes: list[str]) -> tuple[Any, Any]:
    """A run that ran (a profile or a measured step) needed at most the chip's HBM: when the memory model says more,
    with every memory-moving setting stated, scale its activation term down to that upper bound (candidates are
    then judged against the fact, and the baseline is not called out of memory)."""
    if base_pred is None or (record.measured and record.measured.oom) or (calibration and calibration.activation_measured):
        return calibration, base_pred
    cap = float(chip.hbm_bytes)
    used = float(base_pred.memory_per_chip_bytes)
    acts = float(base_pred.memory_breakdown_bytes.get("activations", 0.0))
    if used <= cap:
        return calibration, base_pred
    if acts <= 0 or used - acts >= cap:
        notes.append(f"the run ran, but the memory model predicts {used / 1e9:.1f} GB per chip of {cap / 1e9:.1f} GB "
                     "even without its activations: a setting it was read with (optimizer sharding, precision) likely "
                     "differs from what ran; memory checks on other candidates are pessimistic")
        return calibration, base_pred
    factor = (cap - (used - acts)) / acts
    notes.append(f"the run ran, but the memory model predicted {used / 1e9:.1f} GB per chip of {cap / 1e9:.1f} GB: its "
                 f"activation term is scaled x{factor:.2f} to that upper bound (an over-count the answer should not "
                 "present as out of memory)")
    return _scale_activations(record, base, chip, settings0, calibration, used, factor,
                              f"the run ran: activations scaled x{factor:.2f} so the baseline needs at most the "
                              f"{cap / 1e9:.1f} GB of HBM")


def _oom_lower_bound(record: RunRecord, base: Mesh, chip: Any, settings0: Any, calibration: Any, base_pred: Any,
                     notes: list[str]) -> tuple[Any, Any]:
    """A recorded OOM means the baseline needed more than the chip's HBM: when the memory model says it fits,
    scale its activation term up to that lower bound (so candidates are judged against the fact)."""
    if not (record.measured and record.measured.oom) or base_pred is None:
        return calibration, base_pred
    cap = float(chip.hbm_bytes)
    used = float(base_pred.memory_per_chip_bytes)
    if used > cap * (1 - _headroom()):
        notes.append(f"the job ran out of memory (measured.oom) and the memory model agrees ({used / 1e9:.1f} GB per "
                     f"chip of {cap / 1e9:.1f} GB)")
        return calibration, base_pred
    acts = float(base_pred.memory_breakdown_bytes.get("activations", 0.0))
    if acts <= 0:
        notes.append(f"the job ran out of memory (measured.oom) but the memory model predicts {used / 1e9:.1f} GB per "
                     f"chip of {cap / 1e9:.1f} GB with no activation term to scale: its memory checks on other "
                     "candidates are optimistic")
        return calibration, base_pred
    factor = (1.001 * cap - (used - acts)) / acts  # just above the capacity: it did not fit
    notes.append(f"the job ran out of memory (measured.oom); the memory model predicted {used / 1e9:.1f} GB, so its "
                 f"activation term is scaled x{factor:.2f} to the {cap / 1e9:.1f} GB lower bound")
    return _scale_activations(record, base, chip, settings0, calibration, used, factor,
                              f"measured.oom: activations scaled x{factor:.2f} so the baseline needs at least the "
                              f"{cap / 1e9:.1f} GB it ran out of")


def _scale_activations(record: RunRecord, base: Mesh, chip: Any, settings0: Any, calibration: Any, used: float,
                       factor: float, why: str) -> tuple[Any, Any]:
    """The calibration with its activation term scaled by ``factor`` (a bound the baseline's memory is known to
    meet: it ran, or it ran out of memory), and the baseline predicted with it. With nothing measured, a
    memory-only calibration carries the bound."""
    from knowledge import costmodel

    if calibration is None:
        calibration = costmodel.calibrate_memory(record, base, used, settings=settings0)
    calibration = calibration.model_copy(update={
        "activation_scale": calibration.activation_scale * factor, "activation_measured": True,
        "notes": [*calibration.notes, why]})
    return calibration, costmodel.predict(record, base, calibration=calibration, chip=chip, settings=settings0)


def _headroom() -> float:
    from knowledge.costmodel import DEFAULT_HEADROOM

    return float(DEFAULT_HEADROOM)


def _with_config_model(run: Run, settings0: Any, notes: list[str]) -> tuple[Run, RunRecord]:
    """The run with the model its config states filled in where run.yaml leaves it out (run.yaml wins), so the
    search, the Critic and the predictions all work from the same model; the notes say where it came from."""
    from dataclasses import replace

    from knowledge.cost_model_source import config_model

    cm = config_model(run.record, settings0)
    notes.extend(cm.notes)
    if not cm.filled:
        return run, run.record
    return replace(run, record=cm.record), cm.record


def prepare(run: Run, report: AnalysisReport, *, history: FailureHistory | None = None) -> Context:
    """Read the baseline, calibrate the cost model on its measurement, predict and critique it."""
    from knowledge import costmodel
    from knowledge.cost_model_source import config_model
    from knowledge.cost_settings import settings_from_config
    from knowledge.hardware import get_chip

    record = run.record
    chip = get_chip(record.chip)
    notes: list[str] = []
    history = history if history is not None else load_failures(run.folder)
    base, cfg = baseline_mesh(run, report)
    settings0 = settings_from_config(cfg) if cfg is not None else None
    if cfg is not None:  # issue 13: what the framework refuses, a launch for another device count
        from bot.configs.checks import startup_problems

        model = config_model(record, settings0).record.model
        notes.extend(p.render() for p in startup_problems(cfg, record.num_chips, record.num_slices, model)
                     if p.rule != "note")
    run, record = _with_config_model(run, settings0, notes)
    known = costmodel.model_known(record, settings0)
    measured_ms = report.kpis.step_time_ms or (record.measured.step_time_ms if record.measured else None)
    from knowledge.cost_settings import torchtitan_run, unknown_settings, with_options

    unknowns = unknown_settings(settings0, record.framework, record.training.remat if record.training else None,
                               record.training.activation_offload_layers if record.training else 0,
                               torchtitan=torchtitan_run(record.tags, settings0))
    calibration = None
    base_pred = None
    if known:
        if report.basis == "predicted" and not measured_ms:
            notes.append("pre-flight: no step time measured, so step-time predictions are absolute from public chip "
                         "figures (uncalibrated); measured.step_time_ms, tokens_per_second or mfu_percent would "
                         "calibrate them")
            if report.kpis.hbm_used_bytes:
                calibration = costmodel.calibrate_memory(record, base, report.kpis.hbm_used_bytes, settings=settings0)
                notes.append("memory calibrated on measured.hbm_peak_bytes: " + calibration.notes[0])
        else:
            try:
                calibration = costmodel.calibrate(record, base, report, settings=settings0)
            except AsapError as exc:
                notes.append(f"calibration failed, predictions are uncalibrated: {exc.message}")
        base_pred = costmodel.predict(record, base, calibration=calibration, chip=chip, settings=settings0)
        if calibration is None or not calibration.time_measured:  # a measured step pins the baseline's time
            from bot.proposals.predict import widen_for_unknowns

            base_pred = widen_for_unknowns(record, chip, calibration, unknowns, base, settings0, base_pred)
        calibration, base_pred = _oom_lower_bound(record, base, chip, settings0, calibration, base_pred, notes)
        ran = report.basis != "predicted" or bool(measured_ms)
        if ran and not unknowns:
            calibration, base_pred = _ran_upper_bound(record, base, chip, settings0, calibration, base_pred, notes)
    baseline_critic = critique(
        run, base, report=report, prediction=base_pred, history=with_recorded_oom(record, base, history),
        baseline=base, settings=settings0, calibration=calibration, base_settings=settings0,
    )
    if unknowns and known:
        notes.append("not stated, so the memory check spans their options: " + "; ".join(
            f"{u.words} ({u.fix.removeprefix('set ')} is the lean option)" for u in unknowns))
    return Context(
        run=run, report=report, chip=chip, base=base, cfg=cfg, settings0=settings0, known=known,
        measured_ms=measured_ms, calibration=calibration, base_pred=base_pred, history=history,
        baseline_critic=baseline_critic, notes=notes, unknowns=unknowns,
        lean0=with_options(settings0, unknowns, "lean") if unknowns else None,
    )
