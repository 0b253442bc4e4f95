"""Every valid mesh for a run, why a mesh is invalid, and fast scoring of many meshes.

Public interface (fixed): :func:`enumerate_meshes`, :func:`divisibility_problems`, :func:`score_meshes`.
Also :func:`placement_problems` (ICI/DCN placement advice) and the array fast paths
:func:`enumerate_mesh_arrays` / :func:`score_mesh_arrays` used by the benchmark and the search.

Rules (and why):
* ICI axes multiply to the chips in one slice, DCN axes to the number of slices.
* Only data, fsdp and pipeline go over DCN: their traffic is once per step (data), overlappable with
  compute (fsdp) or point-to-point (pipeline). Tensor, sequence and expert exchange activations inside
  every layer; at DCN's ~6 GB/s per chip (vs ~100-200 GB/s ICI) that is never sensible.
* On GPUs tensor parallelism stays inside the NVLink domain (tensor divides the domain size): its 4-6
  all-reduces per layer sit on the critical path, and the NIC is ~9x slower than NVLink (H100: 50 vs
  450 GB/s per GPU). Megatron-LM's own guidance: tensor-parallel size up to the GPUs per node.
* Model divisibility, where the model is known: tensor divides heads and d_ff; for grouped-query
  attention tensor must divide kv_heads or be a multiple of it (then each KV head is replicated on
  tensor/kv_heads chips, as Megatron-LM and MaxText do); data x fsdp x expert divides the global batch
  (at least one sequence per data-parallel rank); sequence divides seq_len; pipeline divides layers;
  expert divides the experts, and is 1 for dense models.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from bot.configs.mesh import AXES, Axis, Mesh
from bot.errors import AsapError
from bot.runs.record import RunRecord
from knowledge.cost_core import evaluate
from knowledge.cost_settings import TrainingSettings
from knowledge.cost_shapes import resolve_shape
from knowledge.costmodel import DEFAULT_HEADROOM, Calibration, _scales, _settings, mesh_arrays
from knowledge.hardware import Chip, fast_domain_chips, get_chip

DCN_AXES: tuple[Axis, ...] = ("data", "fsdp", "pipeline")
_IDX = {a: i for i, a in enumerate(AXES)}


@lru_cache(maxsize=256)
def _factorizations(n: int, k: int) -> tuple[tuple[int, ...], ...]:
    """All ordered k-tuples of positive integers whose product is n."""
    if k == 0:
        return ((),) if n == 1 else ()
    if k == 1:
        return ((n,),)
    out: list[tuple[int, ...]] = []
    for d in _divisors(n):
        out.extend((d, *rest) for rest in _factorizations(n // d, k - 1))
    return tuple(out)


def _divisors(n: int) -> list[int]:
    """Divisors of n in increasing order (trial division up to sqrt(n))."""
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i * i != n:
                large.append(n // i)
        i += 1
    return small + large[::-1]


@lru_cache(maxsize=256)
def _spread(n: int, axes: tuple[Axis, ...]) -> np.ndarray:
    """[R, 6] array of every assignment of n chips to ``axes`` (other axes 1). Memoized like the factorizations
    behind it (building the array from their tuples costs more than scoring it); read-only, so a caller that
    filters or repeats it gets a copy and the memo cannot change."""
    combos = np.array(_factorizations(n, len(axes)), dtype=np.int64).reshape(-1, len(axes))
    out = np.ones((combos.shape[0], 6), dtype=np.int64)
    for j, a in enumerate(axes):
        out[:, _IDX[a]] = combos[:, j]
    out.flags.writeable = False
    return out


def _model_ok(run: RunRecord, n: np.ndarray) -> np.ndarray:
    """Boolean mask of total axis sizes [M, 6] that divide what the model and batch give."""
    ok = np.ones(n.shape[0], dtype=bool)
    nd, nf, nt, ns, ne, npp = (n[:, i] for i in range(6))
    m, t = run.model, run.training
    if m is not None:
        if m.heads:
            ok &= m.heads % nt == 0
            kv = m.kv_heads or m.heads
            ok &= (kv % nt == 0) | (nt % kv == 0)
        if m.d_ff:
            ok &= m.d_ff % nt == 0
        if m.layers:
            ok &= m.layers % npp == 0
        mamba = m.mamba_dims()
        if mamba:  # Megatron-Core MambaMixer: every tensor rank holds whole heads and whole B/C groups
            ok &= (mamba["heads"] % nt == 0) & (mamba["groups"] % nt == 0)
        if m.is_moe:
            ok &= m.experts % ne == 0  # type: ignore[operator]
        elif m.experts is not None or m.layers is not None:
            ok &= ne == 1
    if t is not None:
        if t.global_batch:
            ok &= t.global_batch % (nd * nf * ne) == 0
        if t.seq_len:
            ok &= t.seq_len % ns == 0
    return ok


def enumerate_mesh_arrays(
    run: RunRecord, *, axes: tuple[Axis, ...] = AXES, chip: Chip | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Every valid mesh as ``(ici, dcn)`` int arrays [M, 6] (AXES order): the fast path for search."""
    bad = [a for a in axes if a not in _IDX]
    if bad:
        raise AsapError(f"unknown mesh axis {bad[0]!r}; axes are {', '.join(AXES)}", field="axes")
    chip = chip or get_chip(run.chip)
    ici = _spread(run.chips_per_slice, tuple(axes))
    dcn_axes = tuple(a for a in axes if a in DCN_AXES)
    if run.num_slices > 1 and not dcn_axes:
        return np.zeros((0, 6), np.int64), np.zeros((0, 6), np.int64)
    dcn = _spread(run.num_slices, dcn_axes) if run.num_slices > 1 else np.ones((1, 6), np.int64)
    if chip.family == "gpu":
        domain = fast_domain_chips(chip, run.chips_per_slice)
        ici = ici[domain % ici[:, _IDX["tensor"]] == 0]
    # Cartesian product of ICI and DCN assignments.
    ii = np.repeat(ici, dcn.shape[0], axis=0)
    dd = np.tile(dcn, (ici.shape[0], 1))
    keep = _model_ok(run, ii * dd)
    return ii[keep], dd[keep]


def arrays_to_meshes(ici: np.ndarray, dcn: np.ndarray) -> list[Mesh]:
    """Mesh objects (size-1 axes dropped) for rows of the arrays; skips re-validation (already valid)."""
    out: list[Mesh] = []
    for irow, drow in zip(ici.tolist(), dcn.tolist(), strict=True):
        out.append(
            Mesh.model_construct(
                ici={a: v for a, v in zip(AXES, irow, strict=True) if v != 1},
                dcn={a: v for a, v in zip(AXES, drow, strict=True) if v != 1},
            )
        )
    return out


def enumerate_meshes(run: RunRecord, *, axes: tuple[Axis, ...] = AXES) -> list[Mesh]:
    """Every valid assignment of the run's chips to ``axes`` (see the module docstring for the rules)."""
    ici, dcn = enumerate_mesh_arrays(run, axes=axes)
    return arrays_to_meshes(ici, dcn)


def divisibility_problems(run: RunRecord, mesh: Mesh) -> list[str]:
    """Sentences naming the arithmetic a mesh gets wrong; [] when it multiplies out and divides everything."""
    problems: list[str] = []
    for part in ("ici", "dcn"):
        for axis, v in getattr(mesh, part).items():
            if v < 1:
                problems.append(f"{part} {axis}={v} is not a positive axis size")
    if problems:
        return problems
    if mesh.num_devices != run.num_chips:
        problems.append(
            f"mesh {mesh.short()} multiplies to {mesh.num_devices} chips, but the run has {run.num_chips}"
        )
    else:
        ici_prod = math.prod(mesh.ici.values(), start=1)
        if mesh.num_slices != run.num_slices:
            problems.append(
                f"DCN axes multiply to {mesh.num_slices}, but the run has num_slices={run.num_slices} "
                f"(ICI axes multiply to {ici_prod}, each slice has {run.chips_per_slice} chips)"
            )
    s = mesh.sizes()
    m, t = run.model, run.training
    tensor, seq, pipe, expert = s["tensor"], s["sequence"], s["pipeline"], s["expert"]
    if m is not None:
        if m.heads and m.heads % tensor:
            problems.append(f"tensor={tensor} does not divide heads={m.heads}")
        kv = m.kv_heads
        if kv and kv % tensor and tensor % kv:
            problems.append(
                f"tensor={tensor} neither divides kv_heads={kv} nor is a multiple of it (KV heads cannot be "
                "split or replicated evenly)"
            )
        if m.d_ff and m.d_ff % tensor:
            problems.append(f"tensor={tensor} does not divide d_ff={m.d_ff}")
        if m.layers and m.layers % pipe:
            problems.append(f"pipeline={pipe} does not divide layers={m.layers}")
        mamba = m.mamba_dims()
        for what in ("heads", "groups"):
            if mamba and mamba[what] % tensor:
                problems.append(f"tensor={tensor} does not divide the Mamba-2 layers' {mamba[what]} {what} "
                                "(Megatron-Core MambaMixer gives each tensor rank whole heads and groups)")
        if m.is_moe and m.experts % expert:  # type: ignore[operator]
            problems.append(f"expert={expert} does not divide experts={m.experts}")
        if not m.is_moe and expert > 1 and (m.experts is not None or m.layers is not None):
            problems.append(f"expert={expert} but the model is dense (no experts to place)")
    if t is not None:
        dp = s["data"] * s["fsdp"] * expert
        if t.global_batch and t.global_batch % dp:
            per = t.global_batch / dp
            problems.append(
                f"data x fsdp x expert = {s['data']} x {s['fsdp']} x {expert} = {dp} does not divide "
                f"global_batch={t.global_batch} ({per:.3g} sequences per data-parallel rank"
                + (", less than one" if per < 1 else "")
                + ")"
            )
        if t.seq_len and t.seq_len % seq:
            problems.append(f"sequence={seq} does not divide seq_len={t.seq_len}")
    return problems


def placement_problems(run: RunRecord, mesh: Mesh, *, chip: Chip | None = None) -> list[str]:
    """Placement advice (not arithmetic): axes over DCN that should not be, tensor beyond NVLink."""
    chip = chip or get_chip(run.chip)
    out: list[str] = []
    for axis, v in mesh.dcn.items():
        if v > 1 and axis not in DCN_AXES:
            out.append(
                f"{axis}={v} runs over {chip.inter.name} between slices: its per-layer traffic at "
                f"{chip.inter.bandwidth_per_chip / 1e9:.3g} GB/s per chip would dominate the step; keep "
                f"{axis} on {chip.intra.name} and put data, fsdp or pipeline across slices"
            )
    if chip.family == "gpu":
        domain = fast_domain_chips(chip, run.chips_per_slice)
        t = mesh.ici.get("tensor", 1) * mesh.dcn.get("tensor", 1)
        if t > 1 and domain % t:
            out.append(
                f"tensor={t} does not fit the {domain}-GPU {chip.intra.name} domain: its all-reduces would cross "
                f"{chip.inter.name} at {chip.inter.bandwidth_per_chip / 1e9:.3g} GB/s instead of "
                f"{chip.intra.link_bandwidth / 1e9:.3g} GB/s"
            )
    return out


def score_mesh_arrays(
    run: RunRecord,
    ici: np.ndarray,
    dcn: np.ndarray,
    calibration: Calibration | None = None,
    *,
    chip: Chip | None = None,
    settings: TrainingSettings | None = None,
) -> np.ndarray:
    """Predicted step time (ms) for each row of the mesh arrays; same formulas as ``predict``."""
    return evaluate_mesh_arrays(run, ici, dcn, calibration, chip=chip, settings=settings).step_ms


@dataclass(frozen=True)
class MeshScores:
    """Vectorized step time and memory for many meshes (rows match the input meshes)."""

    step_ms: np.ndarray
    memory_per_chip_bytes: np.ndarray
    fits_memory: np.ndarray  # memory <= capacity x (1 - headroom)


def evaluate_mesh_arrays(
    run: RunRecord,
    ici: np.ndarray,
    dcn: np.ndarray,
    calibration: Calibration | None = None,
    *,
    chip: Chip | None = None,
    headroom: float = DEFAULT_HEADROOM,
    settings: TrainingSettings | None = None,
) -> MeshScores:
    """Step time (ms) and memory per chip for each row of the mesh arrays, in one vectorized pass."""
    shape = resolve_shape(run, _settings(settings, calibration))
    chip = chip or get_chip(run.chip)
    ici = np.asarray(ici, dtype=np.int64).reshape(-1, 6)
    dcn = np.asarray(dcn, dtype=np.int64).reshape(-1, 6)
    step = np.empty(ici.shape[0], dtype=np.float64)
    mem = np.empty(ici.shape[0], dtype=np.float64)
    cs, ks, fixed_s = _scales(calibration)
    slices = dcn.prod(axis=1)
    for ns in np.unique(slices):
        rows = slices == ns
        terms = evaluate(shape, chip, run.num_chips // int(ns), ici[rows], dcn[rows])
        step[rows] = terms.step_s(cs, ks, fixed_s) * 1e3
        act_scale = calibration.activation_scale if calibration is not None else 1.0
        mem[rows] = sum(v for k, v in terms.memory.items() if k != "activations") + act_scale * terms.memory["activations"]
    fits = mem <= chip.hbm_bytes * (1 - headroom)
    if calibration is not None and calibration.baseline_mesh is not None:
        # The measured baseline is proof that its own peak fits (same rule as ``predict``).
        bi, bd = mesh_arrays([calibration.baseline_mesh])
        is_base = (ici == bi).all(axis=1) & (dcn == bd).all(axis=1)
        fits |= is_base & (mem <= chip.hbm_bytes)
    return MeshScores(step, mem, fits)


def score_meshes(
    run: RunRecord, meshes: list[Mesh], calibration: Calibration | None, *, settings: TrainingSettings | None = None
) -> np.ndarray:
    """Vectorized predicted step time (ms) for many meshes at once: the fast path for search.

    Raises :class:`AsapError` when the model is unknown (as ``predict`` does).
    """
    ici, dcn = mesh_arrays(meshes)
    return score_mesh_arrays(run, ici, dcn, calibration, settings=settings)
