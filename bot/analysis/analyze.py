"""One entry point from a run to its :class:`AnalysisReport`.

:func:`analyze` is pure (record, profile, mesh in; report out) so tests and agents can call it on
constructed inputs; :func:`analyze_run` loads the profile and sharding config of a stored run first.
"""

from __future__ import annotations

import statistics

from bot.analysis.diagnosis import DiagnosisInputs, diagnose, op_leaders
from bot.analysis.kpis import compute_kpis, step_basis
from bot.analysis.report import AnalysisReport, Diagnosis, RunSummary
from bot.analysis.roofline import NetworkContext, attribute, top_ops
from bot.analysis.shape_source import KpiShape, kpi_shape
from bot.configs.mesh import Mesh
from bot.errors import AsapError, UnknownChip
from bot.profiles.model import Profile
from bot.runs.record import RunRecord
from bot.runs.store import RUN_FILE, Run
from knowledge.hardware import Chip, get_chip

DEFAULT_TOP_N = 10


def _device_check(profile: Profile, chip: Chip, record: RunRecord) -> tuple[list[str], bool]:
    warnings: list[str] = []
    mismatch = False
    if profile.device_kind:
        try:
            seen = get_chip(profile.device_kind)
        except UnknownChip:
            # Generic kinds ("Nvidia GPU (Hopper)", "TPU") only name the family; flag a different family.
            text = profile.device_kind.lower()
            family = "gpu" if ("gpu" in text or "nvidia" in text) else "tpu" if "tpu" in text else (
                "cpu" if "cpu" in text else None)
            if family is not None and family != chip.family:
                mismatch = True
                warnings.append(
                    f"the profile was recorded on {profile.device_kind!r} but run.yaml says {chip.display_name}"
                )
        else:
            if seen.key != chip.key:
                mismatch = True
                warnings.append(
                    f"the profile was recorded on {seen.display_name} but run.yaml says {chip.display_name}; "
                    f"the roofline uses {chip.display_name}'s peaks"
                )
    if profile.num_devices and profile.num_devices != record.num_chips:
        warnings.append(
            f"the profile covers {profile.num_devices} devices but run.yaml has num_chips {record.num_chips}"
        )
    return warnings, mismatch


def _summary(record: RunRecord, chip: Chip, profile: Profile, mesh: Mesh | None, config_format: str | None) -> RunSummary:
    model = record.model
    return RunSummary(
        id=record.id,
        name=record.name,
        chip=chip.key,
        chip_name=chip.display_name,
        num_chips=record.num_chips,
        num_slices=record.num_slices,
        mesh={"ici": dict(mesh.ici), "dcn": dict(mesh.dcn)} if mesh is not None else None,
        mesh_short=mesh.short() if mesh is not None else None,
        config_format=config_format,
        model=model.name if model else None,
        params=model.derived_params() if model else None,
        profile_sources=list(profile.sources),
    )


def analyze(
    record: RunRecord,
    profile: Profile,
    mesh: Mesh | None,
    config_format: str | None,
    *,
    top_n: int = DEFAULT_TOP_N,
    warnings: list[str] | None = None,
    remat: tuple[str | None, bool | None] | None = None,
) -> AnalysisReport:
    """KPIs, top ops with their roofline position, and the diagnosis for one run.

    Pure: no file access. ``warnings`` are carried into the report (e.g. a config that could not be read).
    ``remat``: (stated policy, whether it recomputes activations) as the run's config resolves it
    (:func:`remat_of`); omitted, run.yaml's ``training.remat``.
    Raises :class:`UnknownChip` when ``record.chip`` is not in the catalog.
    """
    chip = get_chip(record.chip)
    notes: list[str] = list(profile.warnings) + list(warnings or [])
    if mesh is not None and mesh.num_devices != record.num_chips:
        notes.append(
            f"the sharding config's mesh covers {mesh.num_devices} devices but the run has {record.num_chips}; "
            "the mesh is not used to place collectives"
        )
        mesh = None
    net = NetworkContext.for_run(chip, record.num_chips, record.num_slices, mesh)
    att, verdicts = attribute(profile, chip, net)
    basis = step_basis(record, profile, att.total_us)
    kres = compute_kpis(record, profile, chip, att, basis)
    notes.extend(kres.warnings)

    device_notes, mismatch = _device_check(profile, chip, record)
    notes.extend(device_notes)
    if att.efficiency_clamped:
        notes.append(
            f"{len(att.efficiency_clamped)} op(s) ran faster than the {chip.display_name} roofline allows "
            f"(e.g. {att.efficiency_clamped[0]}); their efficiency is capped at 1 — check the chip or the op counts"
        )
    if att.ambiguous_network:
        notes.append(
            "collectives whose replica-group size matches both an ICI and a DCN mesh axis were counted as ICI: "
            + ", ".join(att.ambiguous_network)
        )
    if att.inferred_net_us > 0:
        notes.append(
            "some collectives have no replica-group size; ICI vs DCN was inferred from their type and the mesh "
            "axes that issue it (all-reduce: data/tensor, all-gather and reduce-scatter: fsdp/tensor, all-to-all: "
            "expert); include the compiled HLO to state it"
        )
    if att.collective_unknown_net_us > 0:
        notes.append(
            "some collectives have no replica-group size on a run spanning several slices/nodes, so ICI vs DCN "
            "is unknown for them (include the compiled HLO to resolve it)"
        )

    good_steps = [t for t in profile.step_times_us if t > 0]
    cv = statistics.pstdev(good_steps) / statistics.fmean(good_steps) if len(good_steps) >= 2 else None
    window = basis.num_steps * basis.step_time_us if basis.step_time_us else None
    overlap = bool(window and att.total_us > 1.05 * window)

    ratio = None
    k = kres.kpis
    if att.total_flops > 0 and k.mfu_percent and k.mfu_source == "computed" and basis.share_denominator_us > 0:
        hardware_rate = att.total_flops / (basis.share_denominator_us * 1e-6)
        ratio = hardware_rate / (k.mfu_percent / 100.0 * chip.peak_bf16_flops)

    leaders = op_leaders(profile, verdicts, basis.share_denominator_us)
    diagnosis = diagnose(
        DiagnosisInputs(
            kpis=kres.kpis,
            att=att,
            basis=basis,
            chip=chip,
            leaders=leaders,
            shares=kres.shares,
            profile_communication_percent=profile.communication_time_percent,
            step_time_cv=cv,
            chip_mismatch=mismatch,
            ops_overlap=overlap,
            remat=remat[0] if remat is not None else (record.training.remat if record.training else None),
            recomputes=remat[1] if remat is not None else None,
            hardware_to_model_flops=ratio,
        )
    )
    return AnalysisReport(
        run=_summary(record, chip, profile, mesh, config_format),
        kpis=kres.kpis,
        top_ops=top_ops(
            profile.ops,
            verdicts,
            n=top_n,
            num_steps=basis.num_steps,
            share_denominator_us=basis.share_denominator_us,
        ),
        diagnosis=discount_for_damage(diagnosis, profile.unreadable),
        unavailable=kres.unavailable,
        warnings=list(dict.fromkeys(notes)),
        damaged_inputs=list(profile.unreadable),
    )


DAMAGE_STEP = 0.15
"""Confidence given up per profile file that could not be read (down to half of it at most)."""


def discount_for_damage(diagnosis: Diagnosis, unreadable: list[str]) -> Diagnosis:
    """Lower the diagnosis confidence when some profile files were skipped, and say so first among the reasons."""
    if not unreadable:
        return diagnosis
    before = diagnosis.confidence
    after = round(before * max(0.5, 1.0 - DAMAGE_STEP * len(unreadable)), 2)
    names = ", ".join(u.split(":", 1)[0] for u in unreadable[:3]) + (" ..." if len(unreadable) > 3 else "")
    reason = (f"lowered from {before:.2f}: {len(unreadable)} profile file(s) could not be read ({names}); "
              "the diagnosis rests on the others")
    return diagnosis.model_copy(update={"confidence": after, "confidence_reasons": [reason, *diagnosis.confidence_reasons]})


def load_mesh(run: Run) -> tuple[Mesh | None, str | None, list[str]]:
    """The run's sharding config as a mesh, its format, and problems (a broken config is reported, not fatal)."""
    if not run.record.config:
        return None, None, []
    from bot.configs.detect import load_run_config  # lazy: the config readers are optional for analysis

    try:
        config = load_run_config(run)
        return config.mesh(run.record.num_chips, run.record.num_slices), config.format, []
    except AsapError as exc:
        return None, None, [f"sharding config not used: {exc.render()}"]


def config_warnings(run: Run) -> list[str]:
    """What the framework would refuse at start-up, a launch for another device count, and how the launch was
    read (which place wins when a value is set twice): shown with the diagnosis (issue 13)."""
    if not run.record.config:
        return []
    from bot.configs.checks import startup_problems
    from bot.configs.detect import load_run_config

    try:
        config = load_run_config(run)
        return [p.render() for p in startup_problems(config, run.record.num_chips, run.record.num_slices,
                                                     run.record.model) if p.rule != "note"]
    except AsapError:
        return []  # load_mesh already reports an unreadable config


def analyze_run(run: Run, profile: Profile | None = None, *, top_n: int = DEFAULT_TOP_N) -> AnalysisReport:
    """Load a stored run's profile (unless given) and config, then :func:`analyze` it.

    Reading never writes: a run with ``derived_from`` (it applied an ASAP proposal) is only told how to
    record its outcome (``asap record-outcome``, :func:`bot.proposals.outcomes.record_run_outcome`).
    """
    mesh, config_format, notes = load_mesh(run)
    notes = notes + (config_warnings(run) if mesh is not None else []) + slice_warnings(run.record)
    shape = kpi_shape(run)
    if shape.note:
        notes.append(shape.note)
    notes.extend(shape.model_notes)
    if profile is None:
        from bot.profiles.loader import NoProfileData, load_profile  # lazy: keeps `asap runs` fast

        try:
            profile = load_profile(run)
        except NoProfileData as exc:
            if exc.read_sources or exc.warnings:
                raise  # profile files exist but are broken or missing: say so rather than answer without them
            from bot.analysis.preflight import preflight_report

            report = preflight_report(run, mesh, config_format, warnings=notes, kpi_record=shape.record)
            return _with_outcome_hint(run, _with_shape_source(report, shape))
    try:
        report = analyze(shape.record, profile, mesh, config_format, top_n=top_n, warnings=notes, remat=remat_of(run))
    except UnknownChip as exc:
        if exc.source is None:
            exc.source = str(run.folder / RUN_FILE)
            exc.args = (exc.render(),)
        raise
    return _with_outcome_hint(run, _with_shape_source(report, shape))


def slice_warnings(record: RunRecord) -> list[str]:
    """A slice count that looks like hosts, on a chip whose fast network spans many hosts (GB200 / GB300 NVL72: 4-GPU
    trays, one 72-GPU NVLink domain per rack): ASAP prices every slice as its own fast domain, so counting trays as
    slices would move NVLink traffic onto the node network."""
    try:
        chip = get_chip(record.chip)
    except UnknownChip:
        return []
    per_slice = record.num_chips // max(record.num_slices, 1)
    host, domain = chip.intra.chips_per_host, chip.intra.max_domain_chips
    if record.num_slices > 1 and host and domain and domain > host and per_slice <= host:
        return [f"num_slices {record.num_slices} gives {per_slice} {chip.display_name} chips per slice, one host's worth, "
                f"but their fast network ({chip.intra.name}) spans up to {domain} chips: ASAP prices each slice as one "
                f"{chip.intra.name} domain, so if the slices are hosts (trays) and not {chip.intra.name} domains, set "
                "num_slices to the number of domains (racks)"]
    return []


def remat_of(run: Run) -> tuple[str | None, bool | None]:
    """(the remat policy the config or run.yaml states, whether it recomputes activations); (None, None) when
    neither states it (a documented framework default counts as stated for recomputing, not as the policy)."""
    # lazy: the cost-model readers sit above analysis; only their config reading is needed here
    from knowledge.cost_settings import settings_for_run
    from knowledge.remat_state import remat_state

    t = run.record.training
    state = remat_state(settings_for_run(run), run.record.framework, t.remat if t else None)
    stated = state.source.startswith(("config", "run.yaml"))
    return (state.policy if stated else None), state.recomputes


def _with_shape_source(report: AnalysisReport, shape: KpiShape) -> AnalysisReport:
    """Name where the batch, sequence length and model behind MFU / tokens/s came from, when a KPI used them."""
    k = report.kpis
    update: dict[str, str] = {}
    if shape.source is not None and (k.mfu_percent is not None or k.tokens_per_second is not None
                                     or k.achieved_tflops_per_chip is not None):
        update["shape_source"] = shape.source
    if shape.model_source is not None and (shape.model_source != "run.yaml" or k.mfu_percent is not None
                                           or k.achieved_tflops_per_chip is not None):
        update["model_source"] = shape.model_source
    if not update:
        return report
    return report.model_copy(update={"kpis": k.model_copy(update=update)})


def _with_outcome_hint(run: Run, report: AnalysisReport) -> AnalysisReport:
    """A run that applied a proposal is told how to record its outcome (reading never writes it)."""
    d = run.record.derived_from
    if d is not None:
        report.warnings.append(
            f"derived_from: this run applied proposal {d.proposal} of run {d.run}; `asap record-outcome "
            f"{run.record.id}` records its measured outcome in the history (reading a run never writes it)"
        )
    return report
