"""The Critic: deterministic checks on any mesh before a person sees it.

``critique(run, mesh)`` works on a mesh from anywhere — the search, a playbook move, a person's PR, a
language model's suggestion — and returns every check with a reason that names the numbers:

* ``product``       — ICI axes multiply to the chips per slice/node, DCN axes to the number of slices;
* ``divisibility``  — axis sizes divide heads, KV heads, batch, sequence, layers, experts
                      (:func:`knowledge.meshsearch.divisibility_problems`), and the mesh with the config's
                      settings is one Megatron-Core starts (offloading, expert overlap, bf16 edge layers,
                      the MXFP8 LM head);
* ``memory``        — the predicted memory per chip fits the chip's HBM with headroom
                      (:class:`knowledge.costmodel.Prediction`); skipped, with the reason, when the model
                      is unknown;
* ``diagnosis``     — a rule of thumb, so a *warning*, never a veto: the change raises the model-parallel
                      degree (tensor x sequence, judged jointly) or puts a per-layer axis on DCN for a
                      communication-bound run, raises it or the predicted HBM traffic for an HBM-bound run,
                      or changes the mesh of a host-bound run; stated with the predicted step time it is
                      weighed against;
* ``known_failure`` — the mesh is not recorded as failed (OOM, invalid, crash) for this model and chip;
* ``aot_compile``   — only with ``aot=True`` (the jax extra): the sharded train step lowers and compiles at
                      reduced scale on virtual CPU devices (:func:`bot.proposals.aot.aot_check`); a compile
                      error is a hard failure, a missing jax or a timeout a skip.

Hard failures are facts (arithmetic, memory beyond even the optimistic band of every unstated setting, a
recorded failure, a compile error) and keep a mesh from ever being proposed; soft ones are warnings that
weigh the proposal's confidence down.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from bot.configs.mesh import AXES, Mesh, device_count
from bot.errors import AsapError
from bot.proposals.failures import HARD_OUTCOMES, FailureHistory, load_failures
from bot.proposals.kinds import describe_change, mesh_dict
from bot.proposals.models import Check, CriticResult
from bot.runs.record import RunRecord

if TYPE_CHECKING:
    from bot.analysis.report import AnalysisReport
    from bot.runs.store import Run

HEAVY_ON_DCN = ("tensor", "sequence", "fsdp", "expert")
"""Axes whose collectives run every layer; on the slow DCN they stall the step (MaxText's Sharding guide
recommends only data, and pipeline, across slices)."""

EVEN_PIPELINE_FRAMEWORKS = ("maxtext",)
"""Frameworks that refuse to start when pipeline stages do not divide the layers (MaxText). Megatron-Core starts
with unequal stages when its uneven-stage settings are set (account_for_embedding/loss_in_pipeline_split,
num_layers_in_first/last_pipeline_stage: Megatron-Bridge runs Llama 3.1 405B, 126 layers, on PP8 that way), so
unstated they are a warning naming the fix; torchtitan splits stages unevenly by itself."""

HBM_TERM_TOLERANCE = 0.10
"""A predicted rise of the HBM term beyond this share counts as working against an HBM-bound run."""


def record_of(run: Run | RunRecord) -> RunRecord:
    """The run record of a :class:`Run` or a bare :class:`RunRecord`."""
    return run if isinstance(run, RunRecord) else run.record


def gb(x: float) -> str:
    return f"{x / 1e9:.1f} GB"


def baseline_from_report(report: AnalysisReport | None) -> Mesh | None:
    """The mesh the analysed run used, from the report's run summary."""
    if report is None or not report.run.mesh:
        return None
    return Mesh(ici=dict(report.run.mesh.get("ici", {})), dcn=dict(report.run.mesh.get("dcn", {})))  # type: ignore[arg-type]


def check_product(record: RunRecord, mesh: Mesh) -> Check:
    bad = [f"{net}.{a}={v}" for net, d in (("ici", mesh.ici), ("dcn", mesh.dcn)) for a, v in d.items() if v < 1]
    if bad:
        return Check(name="product", passed=False, reason=f"axis sizes must be positive integers: {', '.join(bad)}")
    ici = math.prod(mesh.ici.values(), start=1)
    dcn = math.prod(mesh.dcn.values(), start=1)
    per_slice, slices = record.chips_per_slice, record.num_slices
    ici_txt = " x ".join(f"{a}={mesh.ici[a]}" for a in AXES if a in mesh.ici) or "1"
    dcn_txt = " x ".join(f"{a}={mesh.dcn[a]}" for a in AXES if a in mesh.dcn) or "1"
    problems = []
    if ici != per_slice:
        problems.append(f"ICI axes {ici_txt} = {ici}, but each slice/node has {per_slice} chips")
    if dcn != slices:
        problems.append(f"DCN axes {dcn_txt} = {dcn}, but the run has {slices} slice(s)")
    if problems:
        return Check(name="product", passed=False, reason="; ".join(problems))
    return Check(
        name="product",
        passed=True,
        reason=f"ICI {ici_txt} = {per_slice} chips per slice, DCN {dcn_txt} = {slices} slice(s): {record.num_chips} chips",
    )


def batch_split_problems(record: RunRecord, mesh: Mesh, settings: Any | None) -> list[str]:
    """The global batch must split into whole micro-batches per data-parallel rank.

    Megatron: global_batch_size % (micro_batch_size x data-parallel size) == 0 (Megatron-LM refuses to start
    otherwise; its data-parallel size is our data x expert). MaxText: per_device_batch_size x devices must
    be a whole number of sequences.
    """
    if settings is None:
        return []
    from knowledge.cost_shapes import effective_global_batch

    out: list[str] = []
    gb = effective_global_batch(record, settings)
    s = mesh.sizes()
    dp = s["data"] * s["fsdp"] * s["expert"]
    if settings.micro_batch and gb:
        if gb % (settings.micro_batch * dp):
            out.append(
                f"global batch {gb} is not a multiple of micro_batch {settings.micro_batch} x data-parallel size {dp} "
                f"= {settings.micro_batch * dp}"
            )
    if settings.per_device_batch:
        per_chip = record.jax_devices_per_chip  # MaxText counts JAX devices: two per TPU7x chip
        total = settings.per_device_batch * record.num_chips * per_chip
        if total < 1 or not float(total).is_integer():
            devices = device_count(record.num_chips, per_chip)
            out.append(
                f"per_device_batch_size {settings.per_device_batch:g} x {devices} = {total:g} is not a "
                "whole number of sequences"
            )
    return out


def offload_problems(record: RunRecord, mesh: Mesh, settings: Any | None) -> list[str]:
    """Megatron activation offloading (``cpu_offloading``) with what Megatron-Core refuses beside it.

    megatron/core/transformer/transformer_config.py (Megatron-LM @ d98e8a64dd, ``__post_init__``) raises ValueError
    for cpu_offloading with pipeline parallelism ("Currently there is no support for Pipeline parallelism with CPU
    offloading"), with activation recomputation, and for ``cpu_offloading_num_layers >= num_layers``.
    """
    from knowledge.cost_act_offload import offload_layers

    layers = offload_layers(settings, record.training.activation_offload_layers if record.training else 0)
    if not layers:
        return []
    out: list[str] = []
    if mesh.size("pipeline") > 1:
        out.append(f"pipeline={mesh.size('pipeline')} with activation offloading (cpu_offloading_num_layers={layers}): "
                   "Megatron-Core refuses CPU offloading with pipeline parallelism")
    remat = getattr(settings, "remat_policy", None) if settings is not None else None
    if remat not in (None, "none", "null"):
        out.append(f"activation recomputation ({remat}) with activation offloading: Megatron-Core refuses the pair")
    total = record.model.layers if record.model else None
    if total and layers >= total:
        out.append(f"cpu_offloading_num_layers={layers} is not below the model's {total} layers (Megatron-Core "
                   "refuses it)")
    return out


def expert_group(mesh: Mesh, settings: Any | None) -> int:
    """Expert-parallel ranks of the MoE layers on ``mesh``: the config's folded expert_model_parallel_size where
    Megatron-Core folds it over this mesh (bot.configs.megatron.kept_expert_size), else the mesh's expert axis."""
    from bot.configs.megatron import expert_size_on

    configured = getattr(settings, "expert_parallel", None) if settings is not None else None
    return expert_size_on(configured, mesh) if configured else mesh.size("expert")


def expert_grid_problems(record: RunRecord, mesh: Mesh, settings: Any | None) -> list[str]:
    """A folded expert group the model's experts do not divide over (Megatron-Core asserts num_moe_experts %
    expert_model_parallel_size == 0); the mesh's own expert axis is checked with the other sizes."""
    m = record.model
    ep = expert_group(mesh, settings)
    if m is None or not m.is_moe or ep == mesh.size("expert") or not m.experts or m.experts % ep == 0:
        return []
    return [f"expert_model_parallel_size={ep} (folded over tensor / context ranks) does not divide "
            f"experts={m.experts}"]


def ep_overlap_problems(mesh: Mesh, settings: Any | None) -> list[str]:
    """Megatron's expert all-to-all overlap (``overlap_moe_expert_parallel_comm``) on a mesh Megatron-Core refuses it
    on (transformer_config.py @ d98e8a64dd): no expert parallelism, or pipelining without interleaved stages. Expert
    parallelism folded over tensor ranks counts (the mesh's expert axis alone may be 1)."""
    if settings is None or not getattr(settings, "ep_comm_overlap", False):
        return []
    out: list[str] = []
    if expert_group(mesh, settings) <= 1:
        out.append("overlap_moe_expert_parallel_comm without expert parallelism: Megatron-Core refuses it")
    pp = mesh.size("pipeline")
    if pp > 1:
        layout = getattr(settings, "pipeline_layout", None) or ()
        virtual = len(layout) // pp if layout else (getattr(settings, "virtual_pipeline", None) or 1)
        if virtual <= 1:
            out.append(f"pipeline={pp} without interleaved (virtual) stages under overlap_moe_expert_parallel_comm: "
                       "Megatron-Core requires virtual_pipeline_model_parallel_size with it")
    return out


def precision_problems(record: RunRecord, mesh: Mesh, settings: Any | None) -> list[str]:
    """Low-precision settings Megatron-Core refuses to start with (transformer_config.py ``__post_init__`` @
    d98e8a64dd, under fp8): bf16 edge layers (``first_last_layers_bf16``) with delayed scaling or more of them than
    one pipeline stage holds (num_layers // pipeline size, so a pipeline change can break a config that ran), and
    ``fp8_output_proj`` without fp8 or without the MXFP8 recipe. An unstated recipe decides nothing."""
    if settings is None or record.framework != "megatron":
        return []
    t = record.training
    fp8 = bool(getattr(settings, "fp8", None)) or (t is not None and t.dtype == "fp8")
    recipe = getattr(settings, "fp8_recipe", None) or (t.fp8_recipe if t is not None else None)
    out: list[str] = []
    edges = getattr(settings, "bf16_layers", None)
    if fp8 and edges and any(edges):
        if recipe == "delayed":
            out.append("first_last_layers_bf16 with delayed fp8 scaling: Megatron-Core refuses the pair")
        layers, pp = (record.model.layers if record.model else 0), mesh.size("pipeline")
        per_stage = layers // pp if layers else 0
        for where, n in zip(("start", "end"), edges, strict=True):
            if layers and n > per_stage:
                out.append(f"num_layers_at_{where}_in_bf16={n} is more than the {per_stage} layers of a pipeline stage "
                           f"at pipeline={pp}: Megatron-Core refuses it")
    if getattr(settings, "fp8_output_proj", None):
        if not fp8:
            out.append("fp8_output_proj without fp8: Megatron-Core refuses it")
        elif recipe is not None and recipe != "mxfp8":
            out.append(f"fp8_output_proj with fp8_recipe {recipe}: Megatron-Core requires mxfp8")
    return out

def _uneven_pipeline_allowed(record: RunRecord, mesh: Mesh, settings: Any | None) -> str | None:
    """Why pipeline stages that do not divide the layers may still start, or None when the framework refuses."""
    pp = mesh.size("pipeline")
    layers = record.model.layers if record.model else None
    if record.framework == "megatron" or getattr(settings, "format", None) == "megatron":
        stated = getattr(settings, "uneven_pipeline", None)
        fix = ""
        if layers and (layers + 2) % pp == 0:
            fix = (f" ({layers} layers + embedding + loss = {layers + 2} = {pp} x {(layers + 2) // pp}: set "
                   "account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split)")
        if stated:
            return (f"stages get unequal layer counts, as the config's {', '.join(sorted(stated))} allow; the slowest "
                    "stage sets the step")
        return ("Megatron-LM refuses to start with unequal stages unless the uneven-stage settings are set, which this "
                f"config does not state{fix}: starts only with them")
    if record.framework not in EVEN_PIPELINE_FRAMEWORKS:
        return (f"stages get unequal layer counts; MaxText refuses to start, but a {record.framework!r} trainer may "
                "split them unevenly (torchtitan does), so the slowest stage sets the step")
    return None


def check_divisibility(record: RunRecord, mesh: Mesh, settings: Any | None = None) -> Check:
    from knowledge.meshsearch import divisibility_problems

    problems = (divisibility_problems(record, mesh) + batch_split_problems(record, mesh, settings)
                + offload_problems(record, mesh, settings) + ep_overlap_problems(mesh, settings)
                + expert_grid_problems(record, mesh, settings) + precision_problems(record, mesh, settings))
    uneven = [p for p in problems if p.startswith("pipeline=") and "does not divide layers" in p]
    why = _uneven_pipeline_allowed(record, mesh, settings) if uneven else None
    if why is not None:
        problems = [p for p in problems if p not in uneven]
        if not problems:  # not a fact for this framework/config: stages may hold unequal layer counts
            return Check(name="divisibility", passed=False, hard=False, reason=f"{'; '.join(uneven)}: {why}")
    if problems:
        return Check(name="divisibility", passed=False, reason="; ".join(problems))
    known = []
    m, t = record.model, record.training
    if m and m.heads:
        known.append("heads")
    if m and (m.kv_heads or m.heads):
        known.append("KV heads")
    if t and t.global_batch:
        known.append("batch")
    if t and t.seq_len:
        known.append("sequence")
    if m and m.layers:
        known.append("layers")
    if m and m.is_moe:
        known.append("experts")
    what = ", ".join(known) if known else "nothing known to divide (model and training shape unknown)"
    return Check(name="divisibility", passed=True, reason=f"axis sizes divide {what}")


def check_memory(record: RunRecord, mesh: Mesh, prediction: Any | None, options: Any | None = None) -> Check:
    """Memory per chip against HBM with headroom, across the settings the run leaves unstated.

    Fails hard only on a fact: even the least memory-hungry option of every unstated setting
    (``options.lean``, :mod:`bot.proposals.memory`) needs more than the chip's whole HBM and its band's
    optimistic edge more than the usable part. When the options straddle the usable line the check is a
    warning that names the setting that decides it ("fits only with the distributed optimizer: set
    use_distributed_optimizer: true"). Between the headroom line and the HBM the mesh is *tight*: a warning,
    because published expert configurations run there (e.g. Megatron-Bridge's 70B recipes on 80 GB H100s).
    """
    if prediction is not None and getattr(prediction, "memory_per_chip_bytes", 0.0) is None:
        return Check(
            name="memory",
            passed=True,
            skipped=True,
            reason="skipped: the model is unknown, so memory per chip cannot be computed (the prediction is "
            "relative to the profile); give model layers, d_model, d_ff, heads, vocab in run.yaml",
        )
    if prediction is None:
        return Check(
            name="memory",
            passed=True,
            skipped=True,
            reason="skipped: the model is unknown, so memory per chip cannot be computed "
            "(give model layers, d_model, d_ff, heads, vocab and training global_batch, seq_len in run.yaml)",
        )
    cap = prediction.memory_capacity_bytes
    headroom = _headroom()
    usable = cap * (1 - headroom)
    if options is None:
        return _memory_one(prediction, usable, cap, headroom)
    return _memory_options(prediction, options, usable, cap, headroom)


def _parts(p: Any) -> str:
    return ", ".join(f"{k} {gb(v)}" for k, v in p.memory_breakdown_bytes.items() if v > 0)


def _memory_one(prediction: Any, usable: float, cap: float, headroom: float) -> Check:
    """Every memory-moving setting is stated: the prediction and its own band decide."""
    used = prediction.memory_per_chip_bytes
    low = getattr(prediction, "memory_low_bytes", None)
    high = getattr(prediction, "memory_high_bytes", None)
    band = f" (band {gb(low)}-{gb(high)})" if low is not None and high is not None else ""
    if not prediction.fits_memory:
        if used <= cap or (low is not None and low <= usable):
            return Check(
                name="memory", passed=False, hard=False,
                reason=f"tight: needs {gb(used)} per chip{band} ({_parts(prediction)}), above the {gb(usable)} usable "
                f"with {headroom:.0%} headroom but within the prediction's band / the {gb(cap)} HBM; measure the peak "
                "before relying on it",
            )
        return Check(
            name="memory", passed=False,
            reason=f"out of memory: needs {gb(used)} per chip{band} ({_parts(prediction)}), but only {gb(usable)} of "
            f"{gb(cap)} HBM is usable with {headroom:.0%} headroom",
        )
    return Check(
        name="memory", passed=True,
        reason=f"fits: {gb(used)} per chip{band} ({_parts(prediction)}) of {gb(usable)} usable ({gb(cap)} HBM, "
        f"{_headroom_why(headroom)})",
    )


def _headroom_why(headroom: float) -> str:
    from bot.proposals.memory import headroom_words

    return headroom_words(headroom)


def _memory_options(prediction: Any, options: Any, usable: float, cap: float, headroom: float) -> Check:
    """Some memory-moving settings are unstated: the band spans their options (lean .. hungry)."""
    lean, hungry = options.lean, options.hungry
    lean_mem, hungry_mem = float(lean.memory_per_chip_bytes), float(hungry.memory_per_chip_bytes)
    lean_low = float(getattr(lean, "memory_low_bytes", None) or lean_mem)
    span = (f"{gb(lean_mem)} to {gb(hungry_mem)} per chip across the options of {options.names} (not stated in "
            "the config or run.yaml)")
    of = f"of {gb(usable)} usable ({gb(cap)} HBM, {_headroom_why(headroom)})"
    if lean_mem > cap and lean_low > usable:
        return Check(name="memory", passed=False,
                     reason=f"out of memory whatever the unstated settings: needs {span}; even the optimistic edge "
                     f"{gb(lean_low)} exceeds the {gb(usable)} usable ({gb(cap)} HBM)")
    if hungry_mem <= usable:
        return Check(name="memory", passed=True, reason=f"fits whatever the unstated settings: {span}, {of}")
    if lean_mem > usable:
        return Check(name="memory", passed=False, hard=False,
                     reason=f"tight: needs {span}, above the {gb(usable)} usable even at the leanest but within the "
                     f"band / the {gb(cap)} HBM; measure the peak before relying on it")
    if options.deciding:
        fix = " or ".join(f"{u.words} ({u.fix})" for u in options.deciding)
        what = f"fits only with {fix}"
    else:
        what = "fits only with all of: " + "; ".join(f"{u.words} ({u.fix})" for u in options.unknowns)
    return Check(name="memory", passed=False, hard=False, reason=f"{what}: needs {span}, {of}")


def _headroom() -> float:
    try:
        from knowledge import costmodel

        return float(getattr(costmodel, "DEFAULT_HEADROOM", 0.1))
    except ImportError:  # pragma: no cover - the cost model ships with the package
        return 0.1


def _weighed(prediction: Any | None, baseline_prediction: Any | None) -> str:
    """The predicted step-time change a rule of thumb is weighed against, in words."""
    if prediction is None or baseline_prediction is None or not baseline_prediction.step_time_ms:
        return "no prediction to weigh it against"
    pct = 100.0 * (prediction.step_time_ms - baseline_prediction.step_time_ms) / baseline_prediction.step_time_ms
    u = float(getattr(prediction, "uncertainty", 0.0) or 0.0)
    return f"weighed against the prediction: {pct:+.1f}% step time (band +-{u:.0%})"


def model_parallel_degree(mesh: Mesh) -> int:
    """Tensor x sequence (context) parallelism: the axes whose collectives run inside every layer."""
    return mesh.size("tensor") * mesh.size("sequence")


def _rules_of_thumb(bottleneck: str, baseline: Mesh, mesh: Mesh, prediction: Any | None,
                    baseline_prediction: Any | None) -> list[str]:
    """The playbook's rules of thumb this change goes against, judging model parallelism jointly."""
    out: list[str] = []
    mp0, mp1 = model_parallel_degree(baseline), model_parallel_degree(mesh)
    if bottleneck in ("communication", "hbm") and mp1 > mp0:
        what = ("adds per-layer activation collectives to a communication-bound run" if bottleneck == "communication"
                else "replicates activation traffic over more chips and thins each matmul on an HBM-bound run")
        out.append(f"raises the model-parallel degree (tensor x sequence) {mp0}->{mp1}: {what}")
    if bottleneck == "communication":
        for axis in HEAVY_ON_DCN:
            if mesh.dcn.get(axis, 1) > baseline.dcn.get(axis, 1):  # type: ignore[call-overload]
                out.append(
                    f"moves {axis} onto DCN ({baseline.dcn.get(axis, 1)}->{mesh.dcn.get(axis, 1)}): its per-layer "  # type: ignore[call-overload]
                    "collectives would cross the slowest network of a communication-bound run"
                )
    if bottleneck == "hbm" and prediction is not None and baseline_prediction is not None:
        new_hbm = prediction.breakdown_ms.get("hbm", 0.0)
        old_hbm = baseline_prediction.breakdown_ms.get("hbm", 0.0)
        if old_hbm > 0 and new_hbm > old_hbm * (1 + HBM_TERM_TOLERANCE):
            out.append(f"predicted HBM time per step rises {old_hbm:.1f} -> {new_hbm:.1f} ms on an HBM-bound run")
    return out


def check_diagnosis(
    bottleneck: str | None,
    baseline: Mesh | None,
    mesh: Mesh,
    *,
    prediction: Any | None = None,
    baseline_prediction: Any | None = None,
) -> Check:
    """Does the change from ``baseline`` to ``mesh`` go against the playbook's rules for the diagnosed bottleneck?

    These are rules of thumb, not facts: a change that goes against one is a *warning* (soft), stated with the
    predicted step-time change it is weighed against, never a veto. Model parallelism is judged jointly
    (tensor x sequence/context): trading one model-parallel axis for another at the same degree does not
    add per-layer collectives.
    """
    if bottleneck is None:
        return Check(name="diagnosis", passed=True, skipped=True, reason="skipped: no diagnosis (no profile analysed)")
    if baseline is None:
        return Check(
            name="diagnosis", passed=True, skipped=True, reason="skipped: the run's current mesh is unknown (no config)"
        )
    change = describe_change(baseline, mesh)
    if bottleneck == "host":
        if change == "no change":
            return Check(name="diagnosis", passed=True, reason="host-bound run, mesh unchanged")
        return Check(
            name="diagnosis",
            passed=False,
            hard=False,
            reason=f"the run is host/input-bound: a mesh change ({change}) cannot fix that; at most it shortens the "
            "device part of the step. Look at the input pipeline instead",
        )
    against = _rules_of_thumb(bottleneck, baseline, mesh, prediction, baseline_prediction)
    if against:
        return Check(name="diagnosis", passed=False, hard=False,
                     reason="; ".join(against) + f" ({_weighed(prediction, baseline_prediction)})")
    if change == "no change":
        return Check(name="diagnosis", passed=True, reason=f"{bottleneck}-bound run, mesh unchanged")
    mp0, mp1 = model_parallel_degree(baseline), model_parallel_degree(mesh)
    traded = (mp0 == mp1 and mp0 > 1 and (baseline.size("tensor"), baseline.size("sequence"))
              != (mesh.size("tensor"), mesh.size("sequence")))
    why = {
        "communication": "does not raise the model-parallel degree (tensor x sequence) or put a per-layer axis on DCN",
        "hbm": "does not raise the model-parallel degree or predicted HBM traffic",
        "compute": "a compute-bound run is judged by predicted step time; the mesh mostly moves communication",
    }.get(bottleneck, "")
    if traded:
        why = (f"trades one model-parallel axis for another at the same degree ({mp0}: tensor "
               f"{baseline.size('tensor')}->{mesh.size('tensor')}, sequence {baseline.size('sequence')}->"
               f"{mesh.size('sequence')}), so it adds no per-layer collectives; " + why)
    return Check(name="diagnosis", passed=True, reason=f"{bottleneck}-bound run: {change} {why}".strip())


def check_known_failure(record: RunRecord, mesh: Mesh, history: FailureHistory | None) -> Check:
    if history is None or not history.failures:
        return Check(name="known_failure", passed=True, reason="no failed configurations recorded for this run")
    hits = history.matching(record, mesh)
    hard = [f for f in hits if f.outcome in HARD_OUTCOMES]
    if hard:
        f = hard[0]
        extra = f" ({f.detail})" if f.detail else ""
        src = f", recorded in {f.source}" if f.source else ""
        return Check(
            name="known_failure",
            passed=False,
            reason=f"this mesh failed before for this model and chip: {f.outcome}{extra}{src}",
        )
    if hits:
        f = hits[0]
        return Check(
            name="known_failure",
            passed=False,
            hard=False,
            reason=f"this mesh was tried before and was slower{': ' + f.detail if f.detail else ''}",
        )
    return Check(
        name="known_failure",
        passed=True,
        reason=f"not among the {len(history.failures)} failed configuration(s) recorded",
    )


def critique(
    run: Run | RunRecord,
    mesh: Mesh,
    *,
    report: AnalysisReport | None = None,
    prediction: Any | None = None,
    history: FailureHistory | None = None,
    baseline: Mesh | None = None,
    baseline_prediction: Any | None = None,
    calibration: Any | None = None,
    settings: Any | None = None,
    aot: bool = False,
    aot_timeout_s: float | None = None,
    base_settings: Any | None = None,
) -> CriticResult:
    """Run every check on ``mesh`` for ``run``.

    ``report`` supplies the diagnosis and the baseline mesh (``baseline`` overrides it); ``prediction`` is
    the cost model's prediction for ``mesh`` (computed here when omitted and the model is known,
    calibrated on the report's measurement like the engine's, so both reach the same verdict);
    ``history`` the failed configurations (read from the run folder's ``failures.yaml`` when omitted).
    ``settings`` are the training settings the mesh runs with (read from the run's config when omitted;
    a proposal that changes the micro-batch or remat policy passes its changed copy), so memory and the
    batch split are checked with them. Checks that cannot run say why and count as passed-but-skipped.
    ``aot=True`` adds the ``aot_compile`` check (a subprocess compile, seconds; off by default).
    ``base_settings``: the run config's own settings when the caller has read them already (else re-read).
    """
    record = record_of(run)
    if history is None and not isinstance(run, RunRecord):
        history = load_failures(run.folder)
    if base_settings is None and not isinstance(run, RunRecord):  # the engine passes the baseline's settings
        from knowledge.cost_settings import settings_for_run

        base_settings = settings_for_run(run)
    if settings is None:
        settings = base_settings
    checks = [check_product(record, mesh)]
    product_ok = checks[0].passed
    if product_ok:
        checks.append(check_divisibility(record, mesh, settings))
    else:
        checks.append(
            Check(name="divisibility", passed=True, skipped=True, reason="skipped: the axes do not multiply to the chips")
        )
    base = baseline or baseline_from_report(report)
    if prediction is None and product_ok:
        prediction, baseline_prediction, calibration = _predict_or_none(
            record, mesh, base, report, calibration, baseline_prediction, settings, base_settings
        )
    if product_ok:
        options = None
        if prediction is not None and getattr(prediction, "memory_per_chip_bytes", None) is not None:
            from bot.proposals.memory import memory_options

            options = memory_options(record, mesh, settings=settings, calibration=calibration,
                                     usable=float(prediction.memory_capacity_bytes) * (1 - _headroom()))
        checks.append(check_memory(record, mesh, prediction, options))
    else:
        checks.append(Check(name="memory", passed=True, skipped=True, reason="skipped: the axes do not multiply to the chips"))
    bottleneck = report.diagnosis.bottleneck if report is not None else None
    checks.append(
        check_diagnosis(bottleneck, base, mesh, prediction=prediction, baseline_prediction=baseline_prediction)
    )
    checks.append(check_known_failure(record, mesh, history))
    if aot:
        checks.append(_aot_check(run, mesh, settings, product_ok, aot_timeout_s))
    return CriticResult(mesh=mesh_dict(mesh), mesh_short=mesh.short(), checks=checks)


def check_aot(report: Any) -> Check:
    """The ``aot_compile`` check from a :class:`bot.proposals.aot.AotReport`.

    Hard failure only when XLA rejected the sharded step; passed with the collective counts when it
    compiled; skipped (with the reason) when jax is missing, the compile timed out, the mesh uses an axis
    the AOT model cannot express, or it was refused before compiling.
    """
    from bot.proposals.aot import summarize

    if report.status == "compiled":
        return Check(name="aot_compile", passed=True, reason=summarize(report))
    if report.status == "compile_error":
        return Check(name="aot_compile", passed=False, reason=f"XLA rejected the sharded train step: {report.message}")
    return Check(name="aot_compile", passed=True, skipped=True, reason=f"skipped ({report.status}): {report.message}")


def _aot_check(run: Run | RunRecord, mesh: Mesh, settings: Any | None, product_ok: bool, timeout_s: float | None) -> Check:
    if not product_ok:
        return Check(name="aot_compile", passed=True, skipped=True, reason="skipped: the axes do not multiply to the chips")
    from bot.proposals.aot import DEFAULT_TIMEOUT_S, aot_check

    return check_aot(aot_check(run, mesh, settings=settings, timeout_s=timeout_s or DEFAULT_TIMEOUT_S))


def _predict_or_none(
    record: RunRecord,
    mesh: Mesh,
    base: Mesh | None,
    report: AnalysisReport | None,
    calibration: Any | None,
    baseline_prediction: Any | None,
    settings: Any | None = None,
    base_settings: Any | None = None,
) -> tuple[Any | None, Any | None, Any | None]:
    """Prediction for ``mesh`` (and the baseline), calibrated on the report when there is one; and the calibration."""
    from knowledge import costmodel

    if not costmodel.model_known(record, settings):
        return None, baseline_prediction, calibration
    if calibration is None and report is not None and base is not None:
        try:
            calibration = costmodel.calibrate(record, base, report, settings=base_settings)
        except AsapError:
            calibration = None
    try:
        pred = costmodel.predict(record, mesh, calibration=calibration, settings=settings)
        if baseline_prediction is None and base is not None and calibration is not None:
            baseline_prediction = costmodel.predict(record, base, calibration=calibration, settings=base_settings)
        return pred, baseline_prediction, calibration
    except AsapError:
        return None, baseline_prediction, calibration
