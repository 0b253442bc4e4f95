"""Predict step time and memory per chip for any mesh, calibrated on the run's own measurement.

Public interface (fixed; the proposals code builds on it): :class:`Calibration`, :class:`Prediction`,
:func:`model_known`, :func:`predict`, :func:`calibrate`. The formulas live in
:mod:`knowledge.cost_core` (vectorized, with their sources), the shape defaults in
:mod:`knowledge.cost_shapes`, the per-axis networks in :mod:`knowledge.cost_network`.

How a prediction is made: the model computes compute, HBM, exposed-collective and pipeline-bubble time
for the mesh from public chip figures. ``calibrate`` fits two scales on the baseline mesh: device work
(``compute_scale`` = measured device time / modelled) and collectives (``comm_scale`` = measured
collective time / modelled exposed collectives), and keeps host/idle time the mesh does not change as
``fixed_ms``. A calibrated prediction for the baseline mesh reproduces the measurement; for another mesh
it moves the modelled terms by the modelled ratios, i.e. it is relative to what was measured.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from bot.analysis.report import AnalysisReport
from bot.configs.mesh import AXES, Mesh
from bot.errors import AsapError
from bot.runs.record import RunRecord
from knowledge.cost_act_offload import offload_note
from knowledge.cost_core import (
    AXIS_KEYS,
    BF16,
    DEFAULT_OVERLAP_MISS,
    FSDP_EXPOSED_PYTORCH,
    MEMORY_HEADROOM,
    MOE_FINE_EXPERTS,
    TPU_SPARSE_MOE_EXPERTS,
    TPU_SPARSE_MOE_EXTRA,
    XLA_FUSING,
    Terms,
    chip_efficiency,
    evaluate,
    fsdp_calls,
    logit_bytes,
    moe_layer_s,
    reduce_bytes,
    tpu_sparse_moe,
)
from knowledge.cost_cuda_graph import graph_note
from knowledge.cost_fp8_recipe import MXFP8_DENSE_GEMM_SLOWDOWN, block_scaled_chip, unstated_note
from knowledge.cost_offload import OFFLOAD_RANGE, offload_notes
from knowledge.cost_settings import TrainingSettings
from knowledge.cost_shapes import Shape, missing_for_prediction, resolve_shape
from knowledge.hardware import Chip, get_chip

DEFAULT_HEADROOM = MEMORY_HEADROOM  # keep 10% of HBM free for XLA/NCCL workspace and fragmentation

# Uncertainty budget (relative half-width), added up from what had to be assumed.
U_CALIBRATED = 0.05  # calibrated on this run: the fit reproduces the baseline; formulas still approximate
U_UNCALIBRATED = 0.30  # absolute prediction from public peaks and a default efficiency
U_GUESSED = {"remat": 0.10, "micro_batch": 0.05, "d_ff": 0.05, "vocab": 0.03}
U_PER_MOVE = 0.04  # per factor-of-2 moved between axes away from the calibrated baseline mesh
# + for a hybrid Mamba stack (model.layer_pattern): on the five published Nemotron 3 Nano rows (Megatron-Bridge
# 26.04.01: H100, B200, B300, GB200, GB300) the model predicts 0.98-1.25x the measured throughput (H100 within 3%,
# the four Blackwell systems 13-25% fast); what takes that time is not identified without a profile (examples/eval,
# docs/cost-model.md "Hybrid Mamba stacks"), so the band is widened rather than a constant fitted to one model.
U_HYBRID = 0.25
U_MAX = 0.9
# + for MaxText's dropless MoE on TPU, uncalibrated: the residual of TPU_SPARSE_MOE_EXTRA's fit (docs/cost-model.md,
# "MaxText MoE on TPU"): 0.84-1.76 measured / predicted over 13 rows, the median |log| 0.05.
U_TPU_SPARSE_MOE = 0.2
# x the share of the step that is the fixed per-MoE-layer time (cost_core.MOE_LAYER_HOST_S / MOE_LAYER_GRAPHED_S),
# uncalibrated: one constant fitted across every GPU MoE row, whose fit scan moves the median |log| little between
# 3 and 5 ms per layer and leaves rows at 0.78-1.60 measured / predicted (docs/cost-model.md, "Mixture-of-experts"):
# the time is known to about a factor of two, so a step made mostly of it is known no better.
U_MOE_FIXED = 1.0


class Calibration(BaseModel):
    """Scales fitted on the baseline mesh so predictions are relative to the run's measurement."""

    model_config = ConfigDict(extra="forbid")
    measured_step_ms: float = Field(description="what the profile/run measured for the baseline mesh")
    compute_scale: float = Field(default=1.0, description="measured / modelled device compute time")
    comm_scale: float = Field(default=1.0, description="measured / modelled exposed-collective time")
    fixed_ms: float = Field(default=0.0, description="per-step time the mesh does not change (host/input, idle)")
    residual_ms: float = Field(default=0.0, description="what the fit could not explain (kept as fixed time)")
    notes: list[str] = Field(default_factory=list)
    # Additive (optional) field: the mesh the calibration was fitted on, so uncertainty can grow with
    # the distance of a candidate from it.
    baseline_mesh: Mesh | None = Field(default=None, description="mesh the scales were fitted on")
    activation_scale: float = Field(
        default=1.0, description="measured / modelled activation memory on the baseline (peak HBM in use)"
    )
    settings: TrainingSettings | None = Field(
        default=None, description="training settings read from the baseline's config; predictions reuse them"
    )
    activation_measured: bool = Field(
        default=False, description="activation_scale was fitted on a measured peak (narrows the memory band)"
    )
    time_measured: bool = Field(
        default=True, description="false: fitted on a measured memory peak only (calibrate_memory); the step-time "
        "scales stay 1 and step-time predictions keep the uncalibrated band"
    )


class Prediction(BaseModel):
    """Predicted step time (with a band) and memory per chip for one mesh."""

    model_config = ConfigDict(extra="forbid")
    mesh: Mesh
    step_time_ms: float
    step_time_low_ms: float
    step_time_high_ms: float
    uncertainty: float = Field(description="relative half-width of the band, e.g. 0.2 = +-20%")
    breakdown_ms: dict[str, float] = Field(
        description="compute, hbm, comm.<axis> (exposed), pipeline_bubble, offload (DeepSpeed ZeRO offload), "
        "optimizer_step (Muon), fixed; sums to step_time_ms"
    )
    exposed_comm_ms: float = Field(description="collectives not hidden behind compute (overlap bounds applied)")
    memory_per_chip_bytes: float
    memory_breakdown_bytes: dict[str, float] = Field(description="weights, gradients, optimizer, activations")
    memory_capacity_bytes: float
    fits_memory: bool = Field(description="memory_per_chip <= capacity * (1 - headroom)")
    assumptions: list[str]
    memory_low_bytes: float | None = Field(
        default=None, description="low edge of the memory band (activations are the uncertain term)"
    )
    memory_high_bytes: float | None = Field(default=None, description="high edge of the memory band")


def model_known(run: RunRecord, settings: TrainingSettings | None = None) -> bool:
    """True when the run (and its config's ``settings``) give enough model and training shape."""
    return not missing_for_prediction(run, settings)


def mesh_arrays(meshes: list[Mesh]) -> tuple[np.ndarray, np.ndarray]:
    """``[M, 6]`` ICI and DCN size arrays in AXES order."""
    ici = np.array([[m.ici.get(a, 1) for a in AXES] for m in meshes], dtype=np.int64).reshape(-1, 6)
    dcn = np.array([[m.dcn.get(a, 1) for a in AXES] for m in meshes], dtype=np.int64).reshape(-1, 6)
    return ici, dcn


def _mesh_distance(mesh: Mesh, base: Mesh) -> float:
    """Factor-of-2 moves between the meshes: half the summed |log2| ratio of every ICI and DCN axis."""
    total = 0.0
    for part in ("ici", "dcn"):
        a, b = getattr(mesh, part), getattr(base, part)
        for axis in AXES:
            total += abs(math.log2(a.get(axis, 1) / b.get(axis, 1)))
    return total / 2.0


def _settings(settings: TrainingSettings | None, calibration: Calibration | None) -> TrainingSettings | None:
    """Explicit settings win; else the ones the calibration was fitted with."""
    if settings is not None:
        return settings
    return calibration.settings if calibration is not None else None


def _evaluate_one(run: RunRecord, shape: Shape, chip: Chip, mesh: Mesh) -> Terms:
    ici, dcn = mesh_arrays([mesh])
    return evaluate(shape, chip, run.num_chips // max(mesh.num_slices, 1), ici, dcn)


def _is_baseline(mesh: Mesh, calibration: Calibration | None) -> bool:
    """Whether ``mesh`` is the mesh the calibration was measured on."""
    if calibration is None or calibration.baseline_mesh is None:
        return False
    return mesh.normalized() == calibration.baseline_mesh.normalized()


def _scales(calibration: Calibration | None) -> tuple[float, float, float]:
    if calibration is None:
        return 1.0, 1.0, 0.0
    return calibration.compute_scale, calibration.comm_scale, (calibration.fixed_ms + calibration.residual_ms) / 1e3


# Relative half-width of the activation-memory band: the least certain memory term.
U_ACT_EXACT = 0.2  # the remat policy and micro-batch are known exactly (config or run.yaml)
U_ACT_INEXACT = 0.35  # a policy read from its words, or remat/micro-batch guessed
U_ACT_MEASURED = 0.1  # activation scale fitted on the run's measured peak
U_STATE = 0.05  # weights, gradients, optimizer state: exact byte counts, small allocator slack


def predict(
    run: RunRecord,
    mesh: Mesh,
    *,
    calibration: Calibration | None = None,
    chip: Chip | None = None,
    settings: TrainingSettings | None = None,
) -> Prediction:
    """Step time, band and memory per chip for ``mesh`` on this run.

    ``settings`` are the training settings of the config (remat, micro-batch, optimizer sharding ...; see
    :mod:`knowledge.cost_settings`); when omitted, the calibration's are used. A proposal that changes a
    setting passes a changed copy. Raises :class:`AsapError` when the model/training shape is unknown
    (see :func:`model_known`) and :class:`~bot.errors.ConfigError` when the mesh does not cover the chips.
    """
    measured_here = (_is_baseline(mesh, calibration) and calibration is not None and calibration.time_measured
                     and (settings is None or settings == calibration.settings))
    settings = _settings(settings, calibration)
    shape = resolve_shape(run, settings)
    chip = chip or get_chip(run.chip)
    mesh.validate_against(run.num_chips, source=f"mesh {mesh.short()}")
    terms = _evaluate_one(run, shape, chip, mesh)
    cs, ks, fixed_s = _scales(calibration)

    device = cs * (terms.compute_s[0] + terms.hbm_s[0])
    exposed_axes = {k: ks * float(v[0]) for k, v in terms.exposed_s.items()}
    exposed = sum(exposed_axes.values())
    bubble = float(terms.bubble_frac[0]) * (device + ks * float(terms.nonoverlap_s[0]))
    offload = _offload(terms)
    optimizer = cs * float(terms.optimizer_s[0]) if terms.optimizer_s is not None else 0.0  # Muon's orthogonalization
    step = float(device + exposed + bubble + offload + optimizer + fixed_s)
    # the offload time rests on an assumed host link and CPU (knowledge.cost_offload): the band spans it
    band_low = step - (exposed - ks * float(terms.exposed_low_s[0])) - offload * (1.0 - 1.0 / OFFLOAD_RANGE)
    band_high = step + (ks * float(terms.exposed_high_s[0]) - exposed) + offload * (OFFLOAD_RANGE - 1.0)
    band_low = band_low - cs * _packed_attention_s(run, shape, chip, mesh, terms)
    native = _native_attention_s(run, shape, chip, mesh, terms)
    band_low = band_low - cs * native
    if measured_here:
        # the calibration's own mesh and settings: the step was measured, so how much of the overlappable traffic
        # shows (and the offload / packing ranges) is inside that measurement, not a range around it
        band_low = band_high = step

    assumptions = _assumptions(shape, terms, chip, mesh)
    if shape.attention_fa2 and chip.attention_rate_fa2 is not None:
        assumptions.append(
            f"attention core at FlashAttention-2's rate on {chip.display_name} (a PyTorch trainer: SDPA's flash backend "
            f"or flash-attn 2, x{chip.attention_rate_fa2:g} of cuDNN's / FlashAttention-3's)"
            + ("" if shape.attention_kernel_stated else
               f"; a cuDNN or FlashAttention-3 kernel would take {cs * native * 1e3:.0f} ms off the step, the band's "
               "low edge (state attention_kernel: cudnn or flash3 to price it)"))
    u = _step_uncertainty(run, shape, mesh, chip, calibration, assumptions)
    if not (calibration is not None and calibration.time_measured):
        u = min(u + _moe_fixed_uncertainty(shape, cs * _moe_fixed_s(terms), step, assumptions), U_MAX)
    low = max(band_low * (1 - u), fixed_s) * 1e3
    high = band_high * (1 + u) * 1e3
    step_ms = step * 1e3
    half_width = (high - low) / 2.0 / step_ms if step_ms > 0 else u
    breakdown = _breakdown(terms, mesh, cs, exposed_axes, bubble, offload, optimizer, fixed_s,
                           moe_layer_s(shape) * 1e3, assumptions)
    if shape.is_moe and shape.full_iteration_graph:
        assumptions.append(graph_note(moe_layer_s(shape) * 1e3))
    memory, mem_low, mem_high, fits = _memory(shape, terms, chip, mesh, calibration, assumptions)
    return Prediction(
        mesh=mesh,
        step_time_ms=step_ms,
        step_time_low_ms=low,
        step_time_high_ms=high,
        uncertainty=half_width,
        breakdown_ms=breakdown,
        exposed_comm_ms=exposed * 1e3,
        memory_per_chip_bytes=sum(memory.values()),
        memory_breakdown_bytes=memory,
        memory_capacity_bytes=chip.hbm_bytes,
        fits_memory=fits,
        assumptions=assumptions,
        memory_low_bytes=mem_low,
        memory_high_bytes=mem_high,
    )


def _moe_fixed_s(terms: Terms) -> float:
    """Seconds of the step that are the fixed per-MoE-layer time (zero without MoE layers)."""
    return float(terms.moe_host_s[0]) if terms.moe_host_s is not None else 0.0


def _moe_fixed_uncertainty(shape: Shape, moe_s: float, step_s: float, assumptions: list[str]) -> float:
    """Band half-width added for the fixed per-MoE-layer time (``U_MOE_FIXED`` x its share of the step), named in
    the assumptions; zero when it is under 2% of the step."""
    share = moe_s / step_s if step_s > 0 else 0.0
    if share < 0.02:
        return 0.0
    widen = U_MOE_FIXED * share
    assumptions.append(
        f"MoE layers' fixed time per micro-batch (routing, token-count sync, permutation, small kernels: "
        f"{moe_layer_s(shape) * 1e3:g} ms per layer, fitted across the published MoE rows, known to about a factor "
        f"of two) is {share:.0%} of the step: band widened by +-{widen:.0%}")
    return widen


def _native_attention_s(run: RunRecord, shape: Shape, chip: Chip, mesh: Mesh, terms: Terms) -> float:
    """Device seconds a Hopper-native attention kernel (cuDNN, FlashAttention-3) would take off a PyTorch trainer's
    step priced at FlashAttention-2's rate, when its config does not name the kernel (0 otherwise)."""
    if not shape.attention_fa2 or shape.attention_kernel_stated or chip.attention_rate_fa2 is None:
        return 0.0
    return _device_saving(run, replace(shape, attention_fa2=False), chip, mesh, terms)


def _device_saving(run: RunRecord, other: Shape, chip: Chip, mesh: Mesh, terms: Terms) -> float:
    """Device seconds (compute + HBM) the run would take less priced as ``other`` than as ``terms`` price it."""
    alt = _evaluate_one(run, other, chip, mesh)
    full = float(terms.compute_s[0] + terms.hbm_s[0])
    return max(full - float(alt.compute_s[0] + alt.hbm_s[0]), 0.0)


def _packed_attention_s(run: RunRecord, shape: Shape, chip: Chip, mesh: Mesh, terms: Terms) -> float:
    """Device seconds the attention core could take less when samples are packed (0 when they are not).

    Packed samples attend only within themselves and their lengths are not in the config (knowledge.cost_packing):
    the point prices attention over the whole sequence; the band's low edge prices it over a single key per query.
    """
    if not shape.packed or not shape.n_attn:
        return 0.0
    return _device_saving(run, replace(shape, attention_keys=1.0), chip, mesh, terms)


def _assumptions(shape: Shape, terms: Terms, chip: Chip, mesh: Mesh) -> list[str]:
    """What the prediction assumes: the shape's, the network's, offload, overlap and pipeline layout."""
    assumptions = list(shape.assumptions)
    assumptions.extend(terms.notes)
    assumptions.extend(offload_notes(shape, chip))
    if shape.activation_offload_layers:
        assumptions.append(offload_note(shape.activation_offload_layers, chip.host_link_bandwidth))
    if shape.reduce_fp32:
        reduced = "fp32 (torchtitan's FSDP2 reduce_dtype float32)"
    elif reduce_bytes(shape) == 4.0:
        reduced = "fp32 (MaxText grad_dtype float32)"
    elif shape.framework == "megatron" and shape.grad_bytes == 4.0:
        # Megatron-LM accumulates and reduces bf16 runs' gradients in fp32 unless --grad-reduce-in-bf16
        # (arguments.py); pricing those bytes fits its published tables worse (docs/cost-model.md)
        reduced = ("fp32 (Megatron's default for bf16: grad_reduce_in_fp32), priced as bf16 traffic, the fit "
                   "across the published Megatron tables")
    else:
        reduced = "bf16"
    assumptions.append("fused/flash attention assumed (attention scores not stored); gradients reduced in " + reduced)
    exposed_sync = terms.stages is not None and terms.stages["data_sync_exposed"][0] > 0
    assumptions.extend(_overlap_notes(shape, mesh, exposed_sync))
    if terms.stages is not None and terms.stages["fsdp_prefetch_blocked"][0] > 0:
        assumptions.append(
            "FSDP prefetch: two gathered layers do not fit the usable HBM beside the rest, so XLA gathers each layer's "
            "weights only once the previous ones are freed: the FSDP all-gathers are priced on the critical path "
            "(comm.fsdp); a mesh with more memory headroom hides them")
    assumptions.extend(_ring_latency_notes(shape, terms, mesh))
    if mesh.size("pipeline") > 1 and terms.stages is not None:
        st = {k: float(v[0]) for k, v in terms.stages.items()}
        assumptions.append(
            f"pipeline stages: slowest stage {100 * (st['slowest_over_mean_stage'] - 1):.0f}% over the mean; memory "
            f"first stage {st['first_stage_memory'] / 1e9:.1f} GB, last stage {st['last_stage_memory'] / 1e9:.1f} GB "
            "(the larger is checked against HBM)"
        )
    return assumptions


# The share of the step's device time above which FSDP's ring latency is named in the answer.
RING_LATENCY_NOTE_SHARE = 0.01


def _ring_latency_notes(shape: Shape, terms: Terms, mesh: Mesh) -> list[str]:
    """Name NCCL's ring latency in FSDP's collectives when it is a visible part of the step (FSDP over many GPUs)."""
    if terms.stages is None:
        return []
    latency = float(terms.stages["fsdp_ring_latency_s"][0])
    device = float(terms.compute_s[0] + terms.hbm_s[0])
    if latency <= RING_LATENCY_NOTE_SHARE * device:
        return []
    calls = fsdp_calls(shape) * shape.layers / max(mesh.size("pipeline"), 1)
    per_call = latency / max(calls * float(terms.micro_batches[0]), 1e-12)
    return [
        f"FSDP over {mesh.size('fsdp')} GPUs: its {calls:.0f} all-gathers and reduce-scatters per micro-batch "
        f"({fsdp_calls(shape):.0f} per layer) each pay NCCL's ring latency, {1e6 * per_call:,.0f} us over that many "
        "ranks (NCCL's own model: 8.4 "
        f"us + 3.4 us per NVLink step + 14 us per step between nodes), {1e3 * latency:,.0f} ms per step before "
        "overlap; sharding inside the node with replicas across (HSDP) keeps the rings short"
    ]


def _step_uncertainty(run: RunRecord, shape: Shape, mesh: Mesh, chip: Chip, calibration: Calibration | None,
                      assumptions: list[str]) -> float:
    """Relative half-width of the step-time band: calibration, distance from the measured mesh, guessed settings."""
    u = 0.0
    if calibration is None or not calibration.time_measured:
        u += U_UNCALIBRATED
        assumptions.append(
            f"not calibrated on a measured step: absolute prediction at {100 * chip_efficiency(chip):.0f}% of peak "
            "FLOP/s for large matmuls (less for the run's per-chip shapes) from public chip figures"
        )
    else:
        u += U_CALIBRATED + min(0.3, abs(calibration.residual_ms) / max(calibration.measured_step_ms, 1e-9))
        if calibration.baseline_mesh is not None:
            u += min(0.4, U_PER_MOVE * _mesh_distance(mesh, calibration.baseline_mesh))
        else:
            u += 0.1
            assumptions.append("calibration does not name its baseline mesh: distance from it not counted")
    for key, cost in U_GUESSED.items():
        if key in shape.guessed:
            u += cost
    if "fp8_recipe" in shape.guessed and block_scaled_chip(chip.peak_fp4_flops, chip.family):
        u += MXFP8_DENSE_GEMM_SLOWDOWN - 1.0
        assumptions.append(unstated_note(MXFP8_DENSE_GEMM_SLOWDOWN - 1.0))
    if (calibration is None or not calibration.time_measured) and tpu_sparse_moe(shape, chip):
        u += U_TPU_SPARSE_MOE
        assumptions.append(
            f"MoE on TPU: band widened by +-{100 * U_TPU_SPARSE_MOE:.0f}%: the routed path's fitted cost leaves the 13 "
            "published TPU MoE rows at 0.84-1.76x measured / predicted (GPT-OSS 120B on Ironwood the 1.76: its "
            "missing time is not identified without a profile)")
    if shape.mamba_layers:
        u += U_HYBRID
        assumptions.append(
            f"hybrid Mamba stack: band widened by +-{100 * U_HYBRID:.0f}%: on the five published Nemotron 3 Nano rows "
            "(Megatron-Bridge 26.04.01) this model predicts 0.98-1.25x the measured throughput (H100 within 3%, the "
            "Blackwell systems 13-25% fast); the time it misses is not identified without a profile")
    if mesh.num_slices != run.num_slices:
        assumptions.append(
            f"mesh spans {mesh.num_slices} DCN groups but the run has num_slices={run.num_slices}: "
            "costed with the mesh's own ICI/DCN split"
        )
        u += 0.1
    return min(u, U_MAX)


def _breakdown(terms: Terms, mesh: Mesh, cs: float, exposed_axes: dict[str, float], bubble: float, offload: float,
               optimizer: float, fixed_s: float, moe_ms: float, assumptions: list[str]) -> dict[str, float]:
    """The predicted step split into its terms, in milliseconds."""
    moe_host = float(terms.moe_host_s[0]) if terms.moe_host_s is not None else 0.0
    dispatch = float(terms.moe_dispatch_s[0]) if terms.moe_dispatch_s is not None else 0.0
    breakdown = {
        "compute": cs * (float(terms.compute_s[0]) - moe_host - dispatch) * 1e3,
        "hbm": cs * float(terms.hbm_s[0]) * 1e3,
    }
    if dispatch > 0:
        breakdown["moe_dispatch"] = cs * dispatch * 1e3
        assumptions.append(
            f"MoE on TPU (MaxText's dropless path): the routed experts' sort, grouped matmuls and unsort cost "
            f"{TPU_SPARSE_MOE_EXTRA:g} x their GEMM time at the bf16 rate beyond it (fitted across the published "
            f"TPU MoE rows; scaled by experts / {TPU_SPARSE_MOE_EXPERTS:g} below that many): "
            f"{cs * dispatch * 1e3:.0f} ms of this step")
    if moe_host > 0:
        breakdown["moe_layer_overhead"] = cs * moe_host * 1e3
        assumptions.append(
            f"MoE layers: {moe_ms:.2g} ms per layer per micro-batch beyond their FLOPs (routing, the "
            f"token-count exchange, permutation, small kernels; fitted across the published MoE rows; scaled by "
            f"experts / {MOE_FINE_EXPERTS:g} below that many): "
            f"{cs * moe_host * 1e3:.0f} ms of this step"
        )
    for k in AXIS_KEYS:
        if terms.comm_s[k][0] > 0:
            breakdown[f"comm.{k}"] = exposed_axes[k] * 1e3
    if mesh.size("pipeline") > 1:
        breakdown["pipeline_bubble"] = bubble * 1e3
    if offload > 0:
        breakdown["offload"] = offload * 1e3
    if optimizer > 0:
        breakdown["optimizer_step"] = optimizer * 1e3
        assumptions.append(f"Muon's Newton–Schulz orthogonalizations: {optimizer * 1e3:.0f} ms of this step "
                           "(knowledge.cost_muon)")
    breakdown["fixed"] = fixed_s * 1e3
    return breakdown


def _memory(shape: Shape, terms: Terms, chip: Chip, mesh: Mesh, calibration: Calibration | None,
            assumptions: list[str]) -> tuple[dict[str, float], float, float, bool]:
    """Memory per chip by part, its band (low, high) and whether it fits the HBM with headroom."""
    memory = {k: float(v[0]) for k, v in terms.memory.items()}
    if calibration is not None:
        memory["activations"] *= calibration.activation_scale
    else:
        assumptions.append("activation memory not calibrated on a measured peak (formula from Korthikanti et al.)")
    total_mem = sum(memory.values())
    if calibration is not None and calibration.activation_measured:
        u_act = U_ACT_MEASURED
    elif shape.spec.exact and not ({"remat", "micro_batch"} & shape.guessed):
        u_act = U_ACT_EXACT
    else:
        u_act = U_ACT_INEXACT
    state_mem = total_mem - memory["activations"]
    act_scale = calibration.activation_scale if calibration is not None else 1.0
    mem_low = state_mem * (1 - U_STATE) + memory["activations"] * (1 - u_act)
    # the loss buffers are activations (scaled like them); the prefetched layer is part of the weights
    mem_low -= min(_fused_loss_saving(shape, terms, assumptions) * act_scale, memory["activations"]) * (1 - u_act)
    mem_low -= min(_prefetch_saving(shape, terms, assumptions), memory.get("weights", 0.0)) * (1 - U_STATE)
    mem_high = state_mem * (1 + U_STATE) + memory["activations"] * (1 + u_act)
    mem_high += _materialized_loss_excess(shape, terms, assumptions) * act_scale * (1 + u_act)
    capacity = chip.hbm_bytes
    fits = total_mem <= capacity * (1 - DEFAULT_HEADROOM)
    if not fits and _is_baseline(mesh, calibration) and total_mem <= capacity:
        # The baseline ran with this peak: the measurement is proof it fits, headroom or not.
        fits = True
        assumptions.append(
            f"memory {total_mem / 1e9:.1f} GB is within {100 * DEFAULT_HEADROOM:.0f}% of capacity, but the baseline "
            "ran at this measured peak"
        )
    return memory, mem_low, mem_high, fits


def _offload(terms: Terms) -> float:
    """Seconds per step of DeepSpeed ZeRO offload (host link and CPU optimizer) for the one mesh in ``terms``."""
    return float(terms.offload_s[0]) if terms.offload_s is not None else 0.0


def _fused_loss_saving(shape: Shape, terms: Terms, assumptions: list[str]) -> float:
    """How much lower the loss buffers may be than priced when XLA fuses the softmax cross-entropy.

    XLA (MaxText, plain JAX) may fuse the fp32 softmax into the loss reduction and keep only the bf16 logits
    live, or materialize it: whether it does depends on the compiler's fusion decisions, which the config does
    not show. The point estimate keeps the materialized softmax (6 bytes per logit); the band's low edge takes
    the fused 2 bytes, so a large-vocabulary run (Gemma's 256k) is called out of memory only if even that fails.
    """
    if shape.framework not in XLA_FUSING or shape.fused_cross_entropy or terms.stages is None:
        return 0.0
    logits = float(terms.stages["logits_bytes"][0])
    per = logit_bytes(shape)
    if logits <= 0 or per <= BF16:
        return 0.0
    saving = logits * (1.0 - BF16 / per)
    if saving > 0.02 * float(sum(v[0] for v in terms.memory.values())):
        assumptions.append(
            f"loss buffers {logits / 1e9:.1f} GB at {per:.0f} bytes per logit (bf16 logits + fp32 softmax); if XLA "
            f"fuses the softmax into the loss only the bf16 logits stay live ({logits * BF16 / per / 1e9:.1f} GB): "
            "the memory band's low edge takes that"
        )
    return saving


def _materialized_loss_excess(shape: Shape, terms: Terms, assumptions: list[str]) -> float:
    """How much higher the loss buffers may be than priced where XLA's fused loss is the point (MaxText / JAX on
    TPU, ``cost_shapes._xla_tpu_loss_fused``): the fp32 softmax materialized beside the bf16 logits, 6 bytes per
    logit instead of 2."""
    if shape.framework not in XLA_FUSING or not shape.fused_cross_entropy or terms.stages is None:
        return 0.0
    logits = float(terms.stages["logits_bytes"][0])
    excess = logits * (6.0 / BF16 - 1.0)
    if excess > 0.02 * float(sum(v[0] for v in terms.memory.values())):
        assumptions.append(
            f"loss buffers {logits / 1e9:.1f} GB at 2 bytes per logit: XLA on TPU fuses the fp32 softmax into the "
            f"cross-entropy, so only the bf16 logits stay live (published TPU recipes that ran could not have held it); "
            f"materialized it would be {(logits + excess) / 1e9:.1f} GB: the memory band's high edge takes that")
    return excess


def _prefetch_saving(shape: Shape, terms: Terms, assumptions: list[str]) -> float:
    """How much lower the gathered weights may be than priced when XLA does not prefetch the next layer.

    PyTorch FSDP documents its prefetch (the next layer's all-gather is issued while the current one computes:
    two gathered layers live). Under XLA (MaxText, plain JAX) the compiler's latency-hiding scheduler decides
    how far ahead an all-gather starts, and its async collective fusion may stream a gather into the matmul
    that uses it; the config does not show which. The point estimate keeps two gathered layers; the band's low
    edge takes one, so a large-layer FSDP run (GPT-3 175B: 3.6 GB per layer) is called out of memory only if
    even that fails.
    """
    if shape.framework not in XLA_FUSING or terms.stages is None:
        return 0.0
    layer = float(terms.stages["prefetched_layer_bytes"][0])
    if layer > 0.02 * float(sum(v[0] for v in terms.memory.values())):
        assumptions.append(
            f"gathered weights: two layers priced ({2 * layer / 1e9:.1f} GB, the one in use and the prefetched next); "
            "XLA's scheduler decides how far ahead it gathers, so the memory band's low edge takes one "
            f"({layer / 1e9:.1f} GB)"
        )
    return layer


def _overlap_notes(shape: Shape, mesh: Mesh, data_sync_exposed: bool = False) -> list[str]:
    """What is hidden behind compute and what is exposed, and the pipeline layout, for this mesh."""
    hidden = ["data", "fsdp", "sequence"]
    exposed: list[str] = []
    if data_sync_exposed:
        hidden.remove("data")
        exposed.append("the data-parallel gradient reduction across slices / hosts (XLA: measured at or above the "
                       "whole ring at the NIC's rate on MaxText's multi-slice tables)")
    (hidden if shape.ep_comm_overlap else exposed).append(
        "expert all-to-all" + (" (overlap_moe_expert_parallel_comm)" if shape.ep_comm_overlap else ""))
    if shape.tp_comm_overlap:
        hidden.append("tensor-parallel collectives (TP comm overlap on)")
    elif shape.framework in XLA_FUSING:
        hidden.append("backward and rematerialized tensor-parallel collectives (XLA async scheduling)")
        exposed.append("forward tensor-parallel collectives")
    else:
        exposed.append("tensor-parallel collectives (no TP comm overlap in the config, e.g. Megatron --tp-comm-overlap)")
    if mesh.size("pipeline") > 1:
        (hidden if shape.p2p_overlap else exposed).append("pipeline sends")
    axes = [a for a in ("fsdp", "data") if a in hidden and mesh.size(a) > 1] if shape.framework == "other" else []
    if axes:
        for a in axes:
            hidden.remove(a)
        exposed.append(f"{100 * FSDP_EXPOSED_PYTORCH:.0f}% of PyTorch's FSDP all-gathers and reduce-scatters and "
                       "gradient all-reduces (fitted across the llm-foundry and torchtitan tables: docs/cost-model.md)")
        hidden.append(f"the other {100 * (1 - FSDP_EXPOSED_PYTORCH):.0f}% of {' and '.join(axes)}")
    notes = [
        f"overlap: {', '.join(hidden)} hidden behind compute up to {100 * (1 - DEFAULT_OVERLAP_MISS):.0f}% of what "
        f"the compute time allows; exposed: {', '.join(exposed)}; collectives at achieved (nccl-tests-like), not "
        "datasheet, bandwidth",
        "per-chip matmul efficiency follows the per-chip shapes (tokens per micro-batch, d_model, d_ff and heads "
        "over tensor); elementwise work streams HBM (docs/cost-model.md)",
    ]
    p = mesh.size("pipeline")
    if p > 1:
        where = ("embedding on the first stage, output layer + loss on the last (Megatron layout): the last "
                 "stage sets the step" if shape.pipeline_output_on_last else
                 "embedding and output layer outside the pipeline (spread over every stage)")
        notes.append(
            f"pipeline {p} stages x {shape.virtual_stages} virtual: {where}; bubble (p-1)/(v x micro-batches); "
            "memory is the fullest stage's (the first: 1F1B keeps up to p micro-batches in flight)"
        )
    return notes


def _measured_step_ms(run: RunRecord, report: AnalysisReport) -> float:
    step = report.kpis.step_time_ms
    if step is None and run.measured is not None:
        step = run.measured.step_time_ms
    if step is None or step <= 0:
        raise AsapError(
            "cannot calibrate the cost model: no measured step time",
            source="run.yaml",
            field="measured.step_time_ms",
            hint="a profile with step markers or measured.step_time_ms in run.yaml gives one",
        )
    return float(step)


# Collective shares below this fraction of the step are "hidden" in both the profile and the model:
# there is nothing to fit, and a ratio of two tiny numbers would distort every other mesh's comm.
MIN_FIT_SHARE = 0.02
COMPUTE_SCALE_RANGE = (0.2, 20.0)
COMM_SCALE_RANGE = (0.1, 10.0)
ACTIVATION_SCALE_RANGE = (0.05, 5.0)


def _measured_memory(run: RunRecord, report: AnalysisReport) -> float | None:
    used = report.kpis.hbm_used_bytes
    if used is None and run.measured is not None:
        used = run.measured.hbm_peak_bytes
    return float(used) if used else None


def calibrate(
    run: RunRecord, mesh: Mesh, report: AnalysisReport, *, settings: TrainingSettings | None = None
) -> Calibration:
    """Fit the model's scales to the baseline mesh's measured step time and collective share.

    device time measured = step x (1 - collective% - host_wait% - idle%) -> compute_scale;
    collectives measured = step x collective% -> comm_scale (against modelled exposed collectives),
    fitted only where either side is at least 2% of the step;
    host wait + idle (minus the modelled pipeline bubble, which idles the device too) -> fixed_ms;
    peak HBM in use (profile or run.yaml measured.hbm_peak_bytes) -> activation_scale, the factor on the
    least certain memory term (activations depend on remat details and XLA's buffer reuse).
    Whatever the scales cannot reproduce (clamping, unmodelled terms) is ``residual_ms``, carried as
    fixed time so the baseline prediction equals the measurement.
    """
    shape = resolve_shape(run, settings)
    chip = get_chip(run.chip)
    mesh.validate_against(run.num_chips, source=f"mesh {mesh.short()}")
    step_ms = _measured_step_ms(run, report)
    terms = _evaluate_one(run, shape, chip, mesh)
    k = report.kpis
    notes: list[str] = []
    T = step_ms / 1e3
    host = (k.host_wait_percent or 0.0) / 100.0 * T
    idle = (k.idle_percent or 0.0) / 100.0 * T
    dev_model = float(terms.compute_s[0] + terms.hbm_s[0])
    exp_model = float(sum(v[0] for v in terms.exposed_s.values()))
    bf = float(terms.bubble_frac[0])

    comm_scale = 1.0
    if k.collective_percent is None:
        notes.append("profile gives no collective share: collectives kept at the model's estimate, compute fitted")
        comm_meas = exp_model
    else:
        comm_meas = k.collective_percent / 100.0 * T
        if comm_meas < MIN_FIT_SHARE * T and exp_model < MIN_FIT_SHARE * T:
            notes.append(
                f"collectives are hidden in both the profile ({comm_meas * 1e3:.1f} ms) and the model "
                f"({exp_model * 1e3:.1f} ms): comm scale left at 1"
            )
        elif exp_model > 1e-9:
            comm_scale = comm_meas / exp_model
        elif comm_meas > 0:
            notes.append(
                f"profile shows {comm_meas * 1e3:.1f} ms of collectives the model does not predict for "
                f"{mesh.short()}; kept as fixed time"
            )
    device_meas = max(T - comm_meas - host - idle, 0.0)
    # Pipeline bubble shows as device idle; take it out of the idle that counts as fixed.
    bubble_meas = min(idle, bf * device_meas) if bf > 0 else 0.0
    fixed = host + idle - bubble_meas
    if device_meas <= 0 or dev_model <= 0:
        compute_scale = 1.0
        notes.append("profile leaves no device compute time to fit: compute kept at the model's estimate")
    else:
        compute_scale = device_meas / dev_model
        if chip_efficiency(chip) / compute_scale > 1.0:
            notes.append(
                f"measured device time ({device_meas * 1e3:.1f} ms) is shorter than the modelled FLOPs need even "
                "at 100% of peak: check the model dimensions, global_batch and seq_len in run.yaml"
            )
    for name, value, (lo, hi) in (
        ("compute_scale", compute_scale, COMPUTE_SCALE_RANGE),
        ("comm_scale", comm_scale, COMM_SCALE_RANGE),
    ):
        if not lo <= value <= hi:
            notes.append(
                f"{name} {value:.3g} is outside [{lo}, {hi}]: the model and the profile disagree on this "
                "term; clamped, the rest carried as residual"
            )
    compute_scale = min(max(compute_scale, COMPUTE_SCALE_RANGE[0]), COMPUTE_SCALE_RANGE[1])
    comm_scale = min(max(comm_scale, COMM_SCALE_RANGE[0]), COMM_SCALE_RANGE[1])
    notes.append(
        f"baseline runs at ~{100 * chip_efficiency(chip) / compute_scale:.0f}% of peak on modelled device work; "
        f"collectives at {comm_scale:.2f}x the modelled exposed time"
    )
    predicted = (
        compute_scale * dev_model
        + comm_scale * exp_model
        + bf * (compute_scale * dev_model + comm_scale * float(terms.nonoverlap_s[0]))
        + _offload(terms)
        + fixed
    )
    residual = T - predicted

    activation_scale = 1.0
    used = _measured_memory(run, report)
    acts = float(terms.memory["activations"][0])
    state = float(sum(v[0] for key, v in terms.memory.items() if key != "activations"))
    if used is not None and acts > 0:
        raw = (used - state) / acts
        activation_scale = min(max(raw, ACTIVATION_SCALE_RANGE[0]), ACTIVATION_SCALE_RANGE[1])
        notes.append(
            f"memory: measured {used / 1e9:.1f} GB per chip vs modelled {(state + acts) / 1e9:.1f} GB; activations "
            f"scaled x{activation_scale:.2f}"
            + ("" if raw == activation_scale else f" (fit {raw:.2f} clamped: model state alone disagrees)")
        )
    return Calibration(
        measured_step_ms=step_ms,
        compute_scale=compute_scale,
        comm_scale=comm_scale,
        fixed_ms=fixed * 1e3,
        residual_ms=residual * 1e3,
        notes=notes,
        baseline_mesh=mesh,
        activation_scale=activation_scale,
        settings=settings,
        activation_measured=used is not None and acts > 0,
    )


def calibrate_memory(
    run: RunRecord, mesh: Mesh, used_bytes: float, *, settings: TrainingSettings | None = None
) -> Calibration:
    """Fit only the activation-memory scale to a measured peak (a run with no step time measured yet).

    Step-time scales stay 1 and ``time_measured`` is false, so step-time predictions keep the uncalibrated
    band; memory predictions use the measured peak like :func:`calibrate`'s.
    """
    shape = resolve_shape(run, settings)
    chip = get_chip(run.chip)
    mesh.validate_against(run.num_chips, source=f"mesh {mesh.short()}")
    terms = _evaluate_one(run, shape, chip, mesh)
    acts = float(terms.memory["activations"][0])
    state = float(sum(v[0] for key, v in terms.memory.items() if key != "activations"))
    raw = (used_bytes - state) / acts if acts > 0 else 1.0
    scale = min(max(raw, ACTIVATION_SCALE_RANGE[0]), ACTIVATION_SCALE_RANGE[1])
    note = (f"memory: measured {used_bytes / 1e9:.1f} GB per chip vs modelled {(state + acts) / 1e9:.1f} GB; "
            f"activations scaled x{scale:.2f}" + ("" if raw == scale else f" (fit {raw:.2f} clamped)"))
    step_ms = float(predict(run, mesh, chip=chip, settings=settings).step_time_ms)
    return Calibration(measured_step_ms=step_ms, notes=[note, "no step time measured: step-time scales left at 1"],
                       baseline_mesh=mesh, activation_scale=scale, settings=settings,
                       activation_measured=acts > 0, time_measured=False)
