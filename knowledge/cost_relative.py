"""Profile-relative step-time predictions for when the model is unknown.

Without the model's dimensions the cost model cannot price a mesh from first principles, but the profile
measured the current one: how long the device computes, and how long each collective takes and over which
network (the analysis classifies every collective as ICI or DCN). A candidate is then predicted by moving
each measured term by the ratio the candidate changes it:

* **compute** is the same per chip for any mesh of the same chips (the step's FLOPs are split evenly); it
  scales with the tokens per step when a settings change raises the global batch;
* **each collective term** (data-parallel gradient all-reduce, FSDP weight gathers, ...) is charged to the
  mesh axes that issued it by evidence (:func:`attribute_axes`: replica-group size, calls per step, payload;
  split over the plausible axes with a wider band when they do not decide) and scaled by ``modelled(candidate) / modelled(baseline)`` from the ring
  formulas of :mod:`knowledge.cost_network` (volume per chip and the bandwidth of the axis's ICI/DCN split),
  so the measured overlap and efficiency carry over;
* **a new axis** (e.g. pipeline stages across slices) is priced absolutely with volumes inferred from the
  profile, exposed as the baseline's collectives were: a pipeline bubble of (stages-1)/micro-batches of
  the compute [Narayanan et al. 2021, eq. 1] and point-to-point activation sends.

What is inferred, and how (each named in the prediction's assumptions):

* parameters P from the data-parallel gradient all-reduces' payload bytes where the profile (op
  ``collective_bytes``) or the compiled HLO (result shapes) gives them: payload x weight shards / bytes per
  gradient; else from the profile's FLOPs per step per chip and the tokens per chip per step (6·P FLOPs
  per token, x the remat policy's recompute factor) [Kaplan et al. 2020; PaLM App. B]; failing that, from
  a DCN gradient all-reduce's time at the chip's DCN bandwidth (2·V·(n-1)/n / W);
* d_model from P with the usual aspect ratio d/L ~ 128 (Llama 2 7B/13B, GPT-3), P ~ 12·L·d²; only pipeline
  sends and tensor/sequence traffic need it, and they get the widest bands.

The band grows with every inferred quantity a candidate relies on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bot.configs.mesh import AXES, Mesh
from knowledge.cost_network import allreduce_time, axis_networks, gather_time, p2p_bandwidth
from knowledge.hardware import Chip

DATA, FSDP, TENSOR, SEQUENCE, EXPERT, PIPELINE = range(6)
ASPECT = 128.0  # d_model / layers of typical dense decoders (Llama 2 7B: 4096/32, 13B: 5120/40)
U_BASE = 0.15  # relative half-width of a profile-relative prediction: the measured terms themselves
U_INFERRED = 0.10  # + when the candidate's change rests on the inferred parameter count
U_SHAPE = 0.20  # + when it rests on the inferred width/depth (pipeline sends, tensor/sequence traffic)
U_MAX = 0.8

# Which axes can issue a collective type (cf. bot.analysis.roofline.COLLECTIVE_USERS); which of them did is
# decided by evidence (:func:`attribute_axes`), never by order.
_ISSUERS: dict[str, tuple[str, ...]] = {
    "all-reduce": ("data", "tensor", "sequence", "expert", "fsdp"),
    "all-gather": ("fsdp", "tensor", "sequence"),
    "reduce-scatter": ("fsdp", "tensor", "sequence"),
    "all-to-all": ("expert", "sequence"),
    "collective-permute": ("pipeline", "sequence"),
    "send": ("pipeline",),
    "recv": ("pipeline",),
}
# How often an axis issues its collectives: per layer (activations: tensor, sequence, expert; FSDP weight
# gathers; pipeline sends per micro-batch) or about once per step (the data-parallel gradient all-reduce,
# bucketed into a few) [MLM §3; ZeRO §7; SB "How to Parallelize a Transformer for Training"].
_PER_LAYER = frozenset({"tensor", "sequence", "expert", "fsdp", "pipeline"})
PER_LAYER_MIN = 8.0  # occurrences per step from which an op is "per layer" (the shallowest real decoders have 12+)
ONCE_MAX = 2.0  # at most this many per step: "once per step"
LARGE_PAYLOAD = 256e6  # bytes per occurrence: a weight/gradient bucket, not a [tokens, d_model] activation
MISMATCH = 0.05  # weight of an axis whose size contradicts the op's replica-group size
SPLIT_KEEP = 0.25  # axes within this factor of the best share an ambiguous op's time
SOLE = 0.85  # the best axis takes it all when it holds this share of the evidence
U_AMBIGUOUS = 0.15  # + band, times the share of collective time that had to be split
# Device order of an XLA SPMD program's partition ids, outermost first: MaxText builds its mesh from
# `mesh_axes` (data, stage, fsdp, fsdp_transpose, sequence, context, tensor, ..., expert; base.yml) and
# replica groups number the flattened mesh row-major, so an axis' members sit (product of inner axes) apart.
DEVICE_ORDER: dict[str, tuple[str, ...]] = {"maxtext": ("data", "pipeline", "fsdp", "sequence", "tensor", "expert")}
STRIDE_MISMATCH = 0.2  # weight of an axis whose member spacing contradicts the group's (device order may differ)


def attribute_axes(
    op_type: str,
    network: str,
    mesh: Mesh,
    *,
    group_size: int | None = None,
    per_step: float | None = None,
    payload: float | None = None,
    group_stride: int | None = None,
    device_order: tuple[str, ...] | None = None,
) -> tuple[dict[str, float], str]:
    """Which mesh axes issued a collective, as weights summing to 1, and the evidence in words.

    Evidence, each a likelihood factor per candidate axis (the axes > 1 that issue this type, on the op's
    network): the replica-group size (an axis whose size matches it, alone or with other candidates), how
    often it runs per step (per layer vs once per step), and the payload (weights/gradients vs activations).
    When no axis holds :data:`SOLE` of the evidence, the time is split over the plausible ones.
    """
    part = mesh.dcn if network == "dcn" else mesh.ici
    issuers = _ISSUERS.get(op_type, ())
    cands = [a for a in issuers if part.get(a, 1) > 1] or [a for a in issuers if mesh.size(a) > 1]  # type: ignore[call-overload, arg-type]
    if not cands:
        return {}, "no mesh axis issues it"
    weights = dict.fromkeys(cands, 1.0)
    said: list[str] = []
    if group_size and group_size > 1:
        sizes = {a: {part.get(a, 1), mesh.size(a)} for a in cands}  # type: ignore[call-overload, arg-type]
        combos = _group_products(cands, part, mesh)
        for a in cands:
            if group_size in sizes[a]:
                continue
            weights[a] *= 0.5 if any(a in c and p == group_size for c, p in combos) else MISMATCH
        said.append(f"replica groups of {group_size}")
    if group_stride and device_order:
        strides = _axis_strides(mesh, device_order)
        for a in cands:
            if strides.get(a) != group_stride:
                weights[a] *= STRIDE_MISMATCH
        said.append(f"members {group_stride} apart")
    if per_step is not None and per_step > 0:
        if per_step >= PER_LAYER_MIN:
            for a in cands:
                weights[a] *= 1.0 if a in _PER_LAYER else 0.15
            said.append(f"{per_step:.0f} per step (per layer)")
        elif per_step <= ONCE_MAX:
            for a in cands:
                weights[a] *= 1.0 if a in ("data", "pipeline") else 0.6 if a in ("fsdp", "expert") else 0.15
            said.append(f"{per_step:.1f} per step (once per step)")
    if payload is not None and payload >= LARGE_PAYLOAD:
        for a in cands:
            weights[a] *= 1.0 if a in ("data", "fsdp", "expert") else 0.3
        said.append(f"{payload / 1e6:.0f} MB per call (weights/gradients)")
    best = max(weights.values())
    kept = {a: w for a, w in weights.items() if w >= SPLIT_KEEP * best}
    total = sum(kept.values())
    shares = {a: w / total for a, w in kept.items()}
    top = max(shares, key=shares.__getitem__)
    if shares[top] >= SOLE:
        shares = {top: 1.0}
    evidence = ", ".join(said) if said else "its type only"
    return shares, evidence


def _axis_strides(mesh: Mesh, order: tuple[str, ...]) -> dict[str, int]:
    """Device-id spacing of each axis' members in a row-major mesh laid out in ``order`` (outermost first)."""
    strides: dict[str, int] = {}
    inner = 1
    for axis in reversed(order):
        strides[axis] = inner
        inner *= mesh.size(axis)  # type: ignore[arg-type]
    return strides


def _group_products(cands: list[str], part: dict, mesh: Mesh) -> list[tuple[tuple[str, ...], int]]:  # type: ignore[type-arg]
    """Products of 2+ candidate axes' sizes (a collective over several axes at once, e.g. data x fsdp)."""
    import itertools

    out: list[tuple[tuple[str, ...], int]] = []
    for r in range(2, len(cands) + 1):
        for combo in itertools.combinations(cands, r):
            out.append((combo, math.prod(part.get(a, 1) for a in combo)))
            out.append((combo, math.prod(mesh.size(a) for a in combo)))  # type: ignore[arg-type]
    return out


@dataclass(frozen=True)
class MeasuredCollective:
    """Exposed collective time per step the profile attributes to one axis and network."""

    axis: str
    network: str  # "ici" | "dcn"
    ms: float
    op_types: tuple[str, ...]


@dataclass(frozen=True)
class ProfileBaseline:
    """The measured step, split into terms a mesh or settings change moves differently."""

    step_ms: float
    compute_ms: float  # device time outside collectives
    fixed_ms: float  # host wait + idle: not moved by the mesh
    collectives: tuple[MeasuredCollective, ...]
    unattributed_ms: float  # collective time no axis of the mesh issues (kept as is)
    params: float | None
    params_source: str
    tokens_per_chip: float | None  # per step
    global_batch: float | None
    seq_len: float | None
    grad_bytes: float  # bytes per gradient element in the all-reduce
    notes: tuple[str, ...] = field(default_factory=tuple)
    ambiguous_ms: float = 0.0  # collective time split over several axes because the evidence did not decide
    attribution_notes: tuple[str, ...] = field(default_factory=tuple)  # which ops were split, and why

    @property
    def d_model(self) -> float | None:
        if not self.params:
            return None
        return (self.params * ASPECT / 12.0) ** (1.0 / 3.0)

    @property
    def layers(self) -> float | None:
        d = self.d_model
        return None if d is None else max(1.0, d / ASPECT)


@dataclass(frozen=True)
class RelativePrediction:
    step_time_ms: float
    step_time_low_ms: float
    step_time_high_ms: float
    uncertainty: float
    breakdown_ms: dict[str, float]
    tokens_factor: float
    assumptions: list[str]


def _collective_type(category: str, name: str) -> str | None:
    from bot.analysis.roofline import collective_type

    return collective_type(category, name)


def profile_baseline(
    *,
    report: Any,
    profile: Any | None,
    mesh: Mesh,
    chip: Chip,
    num_chips: int,
    num_slices: int,
    global_batch: float | None,
    seq_len: float | None,
    remat_flop_factor: float,
    grad_bytes: float = 2.0,
    framework: str | None = None,
) -> ProfileBaseline:
    """Split the measured step of ``mesh`` into compute, per-axis collectives and fixed time.

    ``framework`` (the run's; default: the config format the analysis read the mesh from) gives the device order
    replica groups are numbered in (:data:`DEVICE_ORDER`), so a group's member spacing can tell two axes of the
    same size apart; an unknown order leaves that evidence out.
    """
    k = report.kpis
    if framework is None:  # the analysis names the config format it read the mesh from
        framework = getattr(getattr(report, "run", None), "config_format", None)
    step = float(k.step_time_ms or 0.0)
    coll_pct = (k.collective_percent or 0.0) / 100.0
    host = (k.host_wait_percent or 0.0) / 100.0
    idle = (k.idle_percent or 0.0) / 100.0
    notes: list[str] = []
    per_axis: dict[tuple[str, str], list[Any]] = {}
    unattributed = ambiguous = 0.0
    split_notes: list[str] = []
    flops_per_step = None
    grad_payload: float | None = None  # bytes the data-parallel all-reduces carry per chip per step
    if profile is not None and profile.num_steps:
        from bot.analysis.roofline import NetworkContext, attribute

        net = NetworkContext.for_run(chip, num_chips, num_slices, mesh)
        _, verdicts = attribute(profile, chip, net)
        steps = float(profile.num_steps)
        total_flops = 0.0
        hlo_bytes = {c.name: c.result_bytes for c in profile.collectives if c.result_bytes}
        hlo_groups = {c.name: c.group_size for c in profile.collectives if c.group_size}
        hlo_strides = {c.name: c.group_stride for c in profile.collectives if c.group_stride}
        for op, v in zip(profile.ops, verdicts, strict=True):
            if op.flops:
                total_flops += op.flops
            if op.kind.value != "collective":
                continue
            ms = op.total_time_us / steps / 1e3
            op_type = _collective_type(op.category, op.name) or "all-reduce"
            network = v.bound_by if v.bound_by in ("ici", "dcn") else ("dcn" if num_slices > 1 else "ici")
            payload = op.collective_bytes or hlo_bytes.get(op.name)
            group = op.group_size or hlo_groups.get(op.name)
            stride = op.group_stride or hlo_strides.get(op.name)
            shares, why = attribute_axes(
                op_type, network, mesh, group_size=group, per_step=op.occurrences / steps if op.occurrences else None,
                payload=float(payload) if payload else None, group_stride=stride,
                device_order=DEVICE_ORDER.get(framework or ""),
            )
            if not shares:
                unattributed += ms
                continue
            if len(shares) > 1:
                ambiguous += ms
                split_notes.append(
                    f"{op.name} ({op_type}, {why}) split over "
                    + " / ".join(f"{a} {100 * w:.0f}%" for a, w in shares.items())
                )
            if op_type == "all-reduce" and payload and shares.get("data"):
                grad_payload = (grad_payload or 0.0) + shares["data"] * float(payload) * op.occurrences / steps
            for axis, w in shares.items():
                slot = per_axis.setdefault((axis, network), [0.0, set()])
                slot[0] += w * ms
                slot[1].add(op_type)
        if total_flops > 0:
            flops_per_step = total_flops / steps
    measured_coll = sum(v[0] for v in per_axis.values()) + unattributed
    target_coll = coll_pct * step
    if measured_coll > 0 and target_coll > 0:
        scale = target_coll / measured_coll  # agree with the report's collective share
        per_axis = {key: [v[0] * scale, v[1]] for key, v in per_axis.items()}
        unattributed *= scale
        ambiguous *= scale
    elif target_coll > 0:
        unattributed = target_coll
        notes.append("the profile gives a collective share but no collective ops: their time is kept as is")
    collectives = tuple(
        MeasuredCollective(axis=a, network=n, ms=v[0], op_types=tuple(sorted(v[1]))) for (a, n), v in per_axis.items()
    )
    compute = max(step * (1.0 - coll_pct - host - idle), 0.0)

    tokens_per_chip = None
    if global_batch and seq_len:
        tokens_per_chip = global_batch * seq_len / num_chips
    params = None
    source = "unknown"
    shard = math.prod(v for a, v in mesh.ici.items() if a in ("fsdp", "tensor", "pipeline", "expert"))
    shard *= math.prod(v for a, v in mesh.dcn.items() if a in ("fsdp", "tensor", "pipeline", "expert"))
    if grad_payload:
        params = grad_payload * shard / grad_bytes
        source = (
            f"inferred from the profile: the data-parallel gradient all-reduces carry {grad_payload / 1e9:.3g} GB per "
            f"chip per step (collective payload bytes), x {shard} weight shards / {grad_bytes:.0f} B per gradient "
            f"-> P ~ {params / 1e9:.2f}B"
        )
    elif flops_per_step and tokens_per_chip:
        params = flops_per_step / tokens_per_chip / (6.0 * remat_flop_factor)
        source = (
            f"inferred from the profile: {flops_per_step:.3g} FLOPs per step per chip over {tokens_per_chip:.0f} tokens "
            f"per chip = 6 x P x {remat_flop_factor:.2f} (remat) per token -> P ~ {params / 1e9:.2f}B (attention "
            "FLOPs counted in, so an upper bound)"
        )
    else:
        dcn_data = next((c for c in collectives if c.axis == "data" and c.network == "dcn"), None)
        if dcn_data is not None and mesh.dcn.get("data", 1) > 1:
            n = mesh.dcn["data"]
            volume = dcn_data.ms / 1e3 * chip.inter.bandwidth_per_chip / (2.0 * (n - 1) / n)
            params = volume * shard / grad_bytes
            source = (
                f"inferred from the profile: the DCN gradient all-reduce ({dcn_data.ms:.0f} ms) moves ~{volume / 1e9:.2f} GB "
                f"per chip at {chip.inter.bandwidth_per_chip / 1e9:.3g} GB/s -> P ~ {params / 1e9:.2f}B (assumes a "
                "bandwidth-bound ring, so a lower bound on bandwidth, upper bound on P)"
            )
    return ProfileBaseline(
        step_ms=step,
        compute_ms=compute,
        fixed_ms=(host + idle) * step,
        collectives=collectives,
        unattributed_ms=unattributed,
        params=params,
        params_source=source,
        tokens_per_chip=tokens_per_chip,
        global_batch=global_batch,
        seq_len=seq_len,
        grad_bytes=grad_bytes,
        notes=tuple(notes),
        ambiguous_ms=ambiguous,
        attribution_notes=tuple(split_notes[:5]),
    )


def _modelled(axis: str, base: ProfileBaseline, mesh: Mesh, chip: Chip, chips_per_slice: int,
              tokens_factor: float, accum_factor: float) -> tuple[float, bool]:
    """Modelled raw seconds of ``axis``'s collectives on ``mesh`` (P-proportional), and whether it needs d/L."""
    from knowledge.costmodel import mesh_arrays

    ici, dcn = mesh_arrays([mesh])
    net = axis_networks(chip, chips_per_slice, ici, dcn)
    n = (ici * dcn).astype(np.float64)[0]
    nd, nf, nt, ns, ne, npp = n
    P = base.params or 1e9
    if axis == "data":
        v = base.grad_bytes * P / (nf * nt * npp * ne)
        return float(allreduce_time(np.array([v]), net, DATA)[0]), False
    if axis == "fsdp":
        v = 2.0 * P / (nt * npp * ne)
        return float(accum_factor * 3.0 * gather_time(np.array([v]), net, FSDP)[0]), False
    if axis == "expert":
        v = base.grad_bytes * P / (nf * nt * npp * ne)
        return float(allreduce_time(np.array([v]), net, EXPERT)[0]), False
    d, layers = base.d_model or 4096.0, base.layers or 32.0
    dp = nd * nf * ne
    chips = float(n.prod())
    # tokens one data rank processes per micro-batch, split over sequence ranks: [tokens, d] bf16 per chip
    tok_rank = (base.tokens_per_chip or 2048.0) * tokens_factor * chips / dp / max(accum_factor, 1.0)
    act = 2.0 * tok_rank / ns * d
    if axis == "tensor":
        return float(accum_factor * layers / npp * 4.0 * allreduce_time(np.array([act]), net, TENSOR)[0]), True
    if axis == "sequence":
        return float(accum_factor * layers / npp * 3.0 * gather_time(np.array([act / 4.0]), net, SEQUENCE)[0]), True
    return 0.0, True


def _shape_ratio(base: ProfileBaseline, base_mesh: Mesh, mesh: Mesh, tokens_factor: float,
                 accum_factor: float) -> float:
    """Compute time on ``mesh`` / on ``base_mesh`` from the per-chip matmul shape efficiency alone.

    The FLOPs per chip are the same for the same chips; what a mesh changes is the shape each chip
    multiplies: tokens per micro-batch (data/fsdp/sequence split them, accumulation shrinks them) and the
    tensor-sharded width (d_ff / tensor). Without the model, d_model comes from the inferred parameter count.
    """
    from knowledge.cost_core import shape_factor

    d = base.d_model or 4096.0
    chips = float(base_mesh.num_devices)

    def eff(m: Mesh, tf: float, af: float) -> float:
        dp = m.size("data") * m.size("fsdp") * m.size("expert")
        tok = (base.tokens_per_chip or 2048.0) * tf * chips / dp / max(af, 1.0) / m.size("sequence")
        return float(shape_factor(tok, d, 4.0 * d / m.size("tensor")))

    return eff(base_mesh, 1.0, 1.0) / eff(mesh, tokens_factor, accum_factor)


def _pipeline_terms(base: ProfileBaseline, mesh: Mesh, chip: Chip, chips_per_slice: int, compute_ms: float,
                    tokens_factor: float) -> tuple[float, float, int, list[str]]:
    """(bubble ms, exposed send ms, micro-batches, notes) for a pipelined candidate."""
    from knowledge.costmodel import mesh_arrays

    p = mesh.size("pipeline")
    if p <= 1:
        return 0.0, 0.0, 1, []
    dp = mesh.size("data") * mesh.size("fsdp") * mesh.size("expert")
    gb = (base.global_batch or 0.0) * tokens_factor
    per_rank = gb / dp if gb else 1.0
    m = int(max(1.0, min(per_rank, 4.0 * p)))  # micro-batches of >= 1 sequence per data rank [GPipe: M >= 4K]
    bubble = (p - 1) / m * compute_ms
    ici, dcn = mesh_arrays([mesh])
    net = axis_networks(chip, chips_per_slice, ici, dcn)
    d = base.d_model or 4096.0
    seq = base.seq_len or 2048.0
    sequences_mb = max(per_rank / m, 1.0)
    per_send = 2.0 * sequences_mb * seq * d / max(mesh.size("tensor"), 1)
    bw = float(p2p_bandwidth(chip, net, PIPELINE)[0])
    sends = 2.0 * (m + p - 1) * per_send / bw * 1e3
    notes = [
        f"pipeline={p}: {m} micro-batch(es) per step (at most one sequence per data rank each, GPipe's 4 x stages "
        f"otherwise) -> bubble (p-1)/m = {(p - 1) / m:.2f} of the compute [Narayanan et al. 2021, eq. 1]",
        f"pipeline sends: {2 * (m + p - 1)} activations of ~{per_send / 1e6:.0f} MB per step at "
        f"{bw / 1e9:.3g} GB/s, with d_model ~{d:.0f} inferred from the parameter count (d/L ~ {ASPECT:.0f})",
    ]
    return bubble, sends, m, notes


def predict_relative(
    base: ProfileBaseline,
    base_mesh: Mesh,
    mesh: Mesh,
    chip: Chip,
    num_chips: int,
    *,
    tokens_factor: float = 1.0,
    accum_factor: float = 1.0,
) -> RelativePrediction:
    """Step time of ``mesh`` (with a settings change raising tokens per step by ``tokens_factor``, of which
    ``accum_factor`` comes from more accumulation steps) relative to the measured ``base_mesh``."""
    chips_per_slice = num_chips // max(mesh.num_slices, 1)
    assumptions: list[str] = [
        "model unknown: prediction relative to the measured step (compute per chip is mesh-invariant for the "
        "same chips; each collective term scaled by how the change moves its volume and bandwidth)"
    ]
    u = U_BASE
    shape_ratio = _shape_ratio(base, base_mesh, mesh, tokens_factor, accum_factor)
    compute = base.compute_ms * tokens_factor * shape_ratio
    breakdown: dict[str, float] = {"compute": compute, "fixed": base.fixed_ms}
    if abs(shape_ratio - 1.0) > 0.01:
        u += min(U_SHAPE / 2, abs(shape_ratio - 1.0))  # as uncertain as the correction it makes (d inferred)
        assumptions.append(
            f"per-chip matmul shapes change: compute x{shape_ratio:.3f} (tokens per micro-batch per chip and d_ff / "
            f"tensor, with d_model ~{(base.d_model or 4096.0):.0f} inferred and d_ff ~4 x d_model; docs/cost-model.md)"
        )
    if tokens_factor != 1.0:
        assumptions.append(
            f"tokens per step x{tokens_factor:g}: compute scales with them; collectives once per step keep their volume"
        )
    measured: dict[str, float] = {}
    for c in base.collectives:
        measured[c.axis] = measured.get(c.axis, 0.0) + c.ms
    exposure_total = sum(measured.values())
    raw_total = 0.0
    for axis in measured:
        raw, _ = _modelled(axis, base, base_mesh, chip, num_chips // max(base_mesh.num_slices, 1), 1.0, 1.0)
        raw_total += raw
    exposure = min(1.0, exposure_total / raw_total) if raw_total > 0 else 0.75
    used_params = used_shape = False
    for axis in AXES:
        if axis == "pipeline":
            continue
        old = measured.get(axis, 0.0)
        raw_base, _ = _modelled(axis, base, base_mesh, chip, num_chips // max(base_mesh.num_slices, 1), 1.0, 1.0)
        raw_new, shape_dep = _modelled(axis, base, mesh, chip, chips_per_slice, tokens_factor, accum_factor)
        if raw_new <= 0 and old <= 0:
            continue
        if old > 0 and raw_base > 0:
            # measured x (modelled ratio): P, d and L cancel in the ratio; the measured overlap carries over
            new = old * raw_new / raw_base
        else:
            new = raw_new * 1e3 * exposure  # a new axis: absolute, from the inferred sizes
            used_params = True
            used_shape = used_shape or shape_dep
        if new > 0 or old > 0:
            breakdown[f"comm.{axis}"] = new
    bubble, sends, _m, notes = _pipeline_terms(base, mesh, chip, chips_per_slice, compute, tokens_factor)
    if mesh.size("pipeline") > 1:
        breakdown["pipeline_bubble"] = bubble
        breakdown["comm.pipeline"] = sends * exposure
        assumptions.extend(notes)
        used_shape = True
        assumptions.append(
            f"pipeline={mesh.size('pipeline')} needs the layer count to divide by it: not checked (model unknown)"
        )
    if base.unattributed_ms:
        breakdown["comm.other"] = base.unattributed_ms
    if used_params or used_shape or any(k.startswith("comm.") for k in breakdown):
        assumptions.append(base.params_source if base.params else "parameter count unknown: 1B assumed for new traffic")
    if used_params:
        u += U_INFERRED
    if used_shape:
        u += U_SHAPE
        assumptions.append(
            f"width/depth inferred: d_model ~{(base.d_model or 0):.0f}, layers ~{(base.layers or 0):.0f} (d/L ~ {ASPECT:.0f})"
        )
    assumptions.append(f"measured collectives exposed at {exposure:.0%} of their modelled ring time; new traffic exposed alike")
    if base.ambiguous_ms > 0 and exposure_total > 0:
        share = min(1.0, base.ambiguous_ms / exposure_total)
        u += U_AMBIGUOUS * share
        assumptions.append(
            f"{100 * share:.0f}% of the measured collective time could not be tied to one mesh axis (replica groups, "
            "frequency and payload did not decide); split over the plausible axes, band widened: "
            + "; ".join(base.attribution_notes)
        )
    u = min(u, U_MAX)
    step = sum(breakdown.values())
    return RelativePrediction(
        step_time_ms=step,
        step_time_low_ms=step * (1 - u),
        step_time_high_ms=step * (1 + u),
        uncertainty=u,
        breakdown_ms=breakdown,
        tokens_factor=tokens_factor,
        assumptions=assumptions,
    )
