"""Review a sharding-config change: what the PR auto-review calls.

``review(old, new, run=None)`` parses both files, resolves their meshes, predicts step time and memory
per chip before and after (calibrated on the run's profile when a run is given), runs the Critic on the
new mesh against the old one, and turns every failed check into a finding. Problems (exit status 1) are
what the change *introduces*: a mesh that does not multiply to the chips or does not divide the model, out
of memory, a move that contradicts the run's diagnosis, a configuration recorded as failed. A hard check the
old config already fails is reported as ``pre-existing`` and does not fail the review (a PR that changes only
the learning rate of a config with a bad mesh is not the PR's problem). Warnings: predicted slower, a
mesh change on a host-bound run. Without a run, checks that need the model are reported as skipped
with the reason.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.configs.mesh import Mesh
from bot.errors import AsapError, ConfigError
from bot.proposals.critic import check_diagnosis, critique
from bot.proposals.engine import compare, predicted_of
from bot.proposals.kinds import describe_change, mesh_dict, mesh_key
from bot.proposals.models import Check, ReviewFinding, ReviewResult, ReviewSide

if TYPE_CHECKING:
    from bot.analysis.report import AnalysisReport
    from bot.configs.sharding import ShardingConfig
    from bot.runs.store import Run

BATCH_SETTINGS = ("micro_batch_size", "per_device_batch_size")


def _infer_counts(cfg: ShardingConfig) -> tuple[int, int] | None:
    """Chips and slices a config spells out by itself (every axis explicit, no -1, not Megatron)."""
    if cfg.devices:  # a launch or NeMo trainer states its device count (issue 13)
        return cfg.devices, cfg.nodes or 1
    if cfg.format in ("megatron", "torchtitan") or any(k.value == -1 for k in cfg.keys):
        return None
    chips = math.prod((k.value for k in cfg.keys), start=1)
    slices = math.prod((k.value for k in cfg.keys if k.group == "dcn"), start=1)
    return (chips, slices) if chips >= 1 and slices >= 1 else None


def review(
    old_path: str | Path,
    new_path: str | Path,
    run: Run | None = None,
    *,
    report: AnalysisReport | None = None,
    num_chips: int | None = None,
    num_slices: int | None = None,
) -> ReviewResult:
    """Review the change from ``old_path`` to ``new_path`` (see module docstring).

    Unreadable files raise :class:`~bot.errors.AsapError` (bad input); everything about the meshes
    themselves is reported as findings.
    """
    from bot.configs.detect import for_run, load_config

    command = _python_config_command(Path(old_path), Path(new_path), run)
    old_cfg = load_config(Path(old_path), command=command)
    new_cfg = load_config(Path(new_path), command=command)
    findings: list[ReviewFinding] = []
    skipped: list[str] = []

    record = run.record if run is not None else None
    if record is not None:  # MaxText's sizes count the run's JAX devices (two per TPU7x chip)
        old_cfg, new_cfg = for_run(old_cfg, record), for_run(new_cfg, record)
    if record is not None:
        chips, slices = record.num_chips, record.num_slices
    elif num_chips is not None:
        chips, slices = num_chips, num_slices or 1
    else:
        inferred = _infer_counts(old_cfg) or _infer_counts(new_cfg)
        if inferred is None:
            raise ConfigError(
                "cannot tell how many chips the configs are for (they use -1 or Megatron's implicit data parallelism)",
                source=str(old_path),
                hint="pass --run RUN (or --chips N [--slices S])",
            )
        chips, slices = inferred
        skipped.append(f"no run given: assumed {chips} chips in {slices} slice(s), as the old config spells out")

    old_mesh = old_cfg.mesh(chips, slices)  # the old config is what runs today: failing to resolve is bad input
    try:
        new_mesh: Mesh | None = new_cfg.mesh(chips, slices)
    except ConfigError as exc:
        new_mesh = None
        findings.append(ReviewFinding(severity="problem", check="product", message=exc.render()))

    bottleneck = None
    calibration = None
    old_pred = new_pred = None
    # Each side's own training settings (remat, micro-batch, ...): a PR that changes them is priced with them.
    from knowledge.cost_settings import settings_from_config

    old_settings, new_settings = settings_from_config(old_cfg), settings_from_config(new_cfg)
    if run is not None and record is not None:
        from knowledge import costmodel

        if report is None:
            try:
                from bot.analysis.analyze import analyze_run

                report = analyze_run(run)
            except AsapError as exc:
                skipped.append(f"diagnosis: the run's profile could not be analysed ({exc.message})")
        if report is not None:
            bottleneck = report.diagnosis.bottleneck
        if costmodel.model_known(record, old_settings):
            if report is not None:
                try:
                    calibration = costmodel.calibrate(record, old_mesh, report, settings=old_settings)
                except AsapError as exc:
                    skipped.append(f"calibration: {exc.message}; predictions are uncalibrated")
            old_pred = costmodel.predict(record, old_mesh, calibration=calibration, settings=old_settings)
            if new_mesh is not None:
                try:
                    new_pred = costmodel.predict(record, new_mesh, calibration=calibration, settings=new_settings)
                except AsapError as exc:
                    skipped.append(f"prediction for the new mesh: {exc.message}")
        else:
            skipped.append("memory and step-time predictions: the run's model is unknown (add the model to run.yaml)")
        run_mesh = report.run.mesh if report is not None else None
        if run_mesh is not None and mesh_key(Mesh(ici=run_mesh.get("ici", {}), dcn=run_mesh.get("dcn", {}))) != mesh_key(old_mesh):  # type: ignore[arg-type]
            findings.append(
                ReviewFinding(
                    severity="info",
                    check="baseline",
                    message=f"the old config ({old_mesh.short()}) is not the mesh run {record.id} used "
                    f"({report.run.mesh_short}); its profile still calibrates the predictions",
                )
            )
    else:
        skipped.append("divisibility, memory and diagnosis checks: need --run (model, chip and profile)")

    critic: list[Check] = []
    before: dict[str, Check] = {}  # hard checks the old config already fails
    if new_mesh is not None:
        if record is not None:
            result = critique(
                run,  # type: ignore[arg-type]
                new_mesh,
                report=report,
                prediction=new_pred,
                baseline=old_mesh,
                baseline_prediction=old_pred,
                settings=new_settings,
            )
            critic = result.checks
            old_result = critique(
                run,  # type: ignore[arg-type]
                old_mesh,
                report=report,
                prediction=old_pred,
                baseline=old_mesh,
                baseline_prediction=old_pred,
                settings=old_settings,
            )
            before = {c.name: c for c in old_result.checks if not c.passed and c.hard}
        else:
            critic = [
                Check(
                    name="product",
                    passed=True,
                    reason=f"{new_mesh.short()} multiplies to {chips} chips in {slices} slice(s)",
                ),
                check_diagnosis(None, old_mesh, new_mesh),
            ]
        for ch in critic:
            if ch.passed:
                continue
            if ch.hard and ch.name in before:
                # Present before and after: not what this change introduces, so it does not fail the review.
                findings.append(ReviewFinding(
                    severity="pre-existing", check=ch.name,
                    message=f"{ch.reason} (already so before this change: {before[ch.name].reason})"
                    if before[ch.name].reason != ch.reason else f"{ch.reason} (already so before this change)"))
                continue
            findings.append(ReviewFinding(severity="problem" if ch.hard else "warning", check=ch.name, message=ch.reason))

    _batch_findings(old_cfg, new_cfg, bottleneck, findings)
    from bot.configs.checks import startup_problems  # issue 13: what the framework refuses, device counts

    model = record.model if record is not None else None
    before = {p.message for p in startup_problems(old_cfg, chips, slices, model) if p.error}
    for p in startup_problems(new_cfg, chips, slices, model):
        if p.rule != "note" and not (p.rule == "mesh" and new_mesh is None):
            # a refusal the old config already has is not what this change introduces (pre-existing)
            severity = ("pre-existing" if p.message in before else "problem") if p.error else (
                "info" if p.rule in ("reading", "grid") else "warning")
            findings.append(ReviewFinding(severity=severity, check=f"startup_{p.rule}", message=p.message))

    change = None
    if new_mesh is not None and old_pred is not None and new_pred is not None:
        from knowledge.cost_shapes import effective_global_batch

        old_gb = effective_global_batch(record, old_settings) if record is not None else None
        new_gb = effective_global_batch(record, new_settings) if record is not None else None
        factor = new_gb / old_gb if old_gb and new_gb else 1.0
        change = compare(old_pred, new_pred, tokens_factor=factor)
        if factor != 1.0:
            findings.append(
                ReviewFinding(
                    severity="warning",
                    check="batch",
                    message=f"the global batch changes {old_gb} -> {new_gb} sequences: learning rate and convergence "
                    f"must be re-checked; step time compared per token ({change.time_per_token_percent:+.1f}%)",
                )
            )
        if (change.time_per_token_percent or 0) > 0 and not change.within_noise:
            findings.append(
                ReviewFinding(
                    severity="warning",
                    check="step_time",
                    message=f"predicted slower: {old_pred.step_time_ms:.1f} -> {new_pred.step_time_ms:.1f} ms/step "
                    f"({change.time_per_token_percent:+.1f}% per token, band +-{new_pred.uncertainty:.0%})",
                )
            )
        elif change.within_noise:
            findings.append(
                ReviewFinding(
                    severity="info",
                    check="step_time",
                    # with the batch changed the comparison is per token (a step of twice the tokens is not noise)
                    message=(f"predicted change {change.time_per_token_percent:+.1f}% per token (step "
                             f"{change.step_time_percent:+.1f}% for x{factor:g} tokens) is within the model's noise "
                             f"(+-{new_pred.uncertainty:.0%})" if factor != 1.0 and change.time_per_token_percent is not None
                             else f"predicted change {change.step_time_percent:+.1f}% is within the model's noise "
                             f"(+-{new_pred.uncertainty:.0%})"),
                )
            )
    mesh_changed = new_mesh is None or mesh_key(new_mesh) != mesh_key(old_mesh)
    from bot.configs.checks import native_change

    native = native_change(old_cfg, new_cfg, chips, slices) if new_mesh is not None and not mesh_changed else None
    if native:  # e.g. fsdp 64 x fsdp_transpose 2 -> fsdp 128: same totals, another layout in MaxText's own axes
        mesh_changed = True
        findings.append(ReviewFinding(severity="info", check="mesh", message=f"mesh change in MaxText's axes: {native}"))
    elif new_mesh is not None and not mesh_changed:
        grid = _expert_sizes_moved(old_settings, new_settings)
        findings.append(ReviewFinding(severity="info", check="mesh", message="the mesh is unchanged" + (
            f"; the MoE layers' grid changes: {grid}" if grid else "")))
    elif new_mesh is not None:
        findings.append(ReviewFinding(severity="info", check="mesh", message=f"mesh change: {describe_change(old_mesh, new_mesh)}"))

    return ReviewResult(
        old=_side(old_path, old_cfg, old_mesh, old_pred),
        new=_side(new_path, new_cfg, new_mesh, new_pred),
        run_id=record.id if record is not None else None,
        bottleneck=bottleneck,
        mesh_changed=mesh_changed,
        change=change,
        critic=critic,
        findings=findings,
        skipped=skipped,
        ok=not any(f.severity == "problem" for f in findings),
    )


def _python_config_command(old_path: Path, new_path: Path, run: Run | None) -> str | None:
    """A torchtitan config module (Python) is read through a launch that names its function: the linked run's, else
    the one function the change touches (:func:`bot.configs.torchtitan_py.review_command`). Other formats are
    compared as files, without a command."""
    from bot.configs import torchtitan_py
    from bot.configs.detect import read_config_text

    new_text = read_config_text(new_path)
    if not torchtitan_py.looks_like(new_text, str(new_path)):
        return None
    command = getattr(run.record, "command", None) if run is not None else None
    return torchtitan_py.review_command(read_config_text(old_path), new_text, str(new_path), command)


def _side(path: str | Path, cfg: ShardingConfig, mesh: Mesh | None, pred: Any | None) -> ReviewSide:
    return ReviewSide(
        path=str(path),
        config_format=cfg.format,
        mesh=mesh_dict(mesh) if mesh is not None else None,
        mesh_short=mesh.short() if mesh is not None else None,
        predicted=predicted_of(pred) if pred is not None else None,
    )


def _expert_sizes_moved(old: Any, new: Any) -> str | None:
    """Megatron's expert sizes as the change moves them when the mesh stays (a folded expert group, whole experts):
    they change what the MoE layers cost and hold without changing the mesh string."""
    parts = []
    for field, name in (("expert_parallel", "expert_model_parallel_size"),
                        ("expert_tensor_parallel", "expert_tensor_parallel_size")):
        a, b = getattr(old, field, None), getattr(new, field, None)
        if a != b:
            parts.append(f"{name} {a if a is not None else 'unset'} -> {b if b is not None else 'unset'}")
    return ", ".join(parts) or None


def _batch_findings(
    old_cfg: ShardingConfig, new_cfg: ShardingConfig, bottleneck: str | None, findings: list[ReviewFinding]
) -> None:
    """A smaller per-chip batch works against an HBM-bound run (less reuse of every weight byte read)."""
    for name in BATCH_SETTINGS:
        old, new = old_cfg.setting(name), new_cfg.setting(name)
        if not isinstance(old, int | float) or not isinstance(new, int | float) or isinstance(old, bool) or old == new:
            continue
        if new < old and bottleneck == "hbm":
            findings.append(
                ReviewFinding(
                    severity="problem",
                    check="diagnosis",
                    message=f"{name} {old} -> {new} lowers the per-chip batch of an HBM-bound run: each weight byte "
                    "read from HBM then serves fewer tokens",
                )
            )
        else:
            findings.append(ReviewFinding(severity="info", check="batch", message=f"{name} {old} -> {new}"))
